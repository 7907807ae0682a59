@testable import APNSMock
import APNSMockCore
import APNSMockTesting
import Foundation
import Testing

/// Replicas sharing one state on PostgreSQL (`APNS_MOCK_STATE_URL`, docs/replicas.md):
/// two or three `apns-mock serve` processes, each unprivileged and on its own ports, with the same
/// configuration and one database, pushed to with real clients (curl, h2load); what one replica
/// is told or records, every other one shows.
///
/// The suite starts one PostgreSQL cluster (scripts/postgres: Debian's server as an unprivileged
/// user on 127.0.0.1) and each test a database of its own in it, so tests see only their own
/// records and run side by side; the test that stops its database has a cluster of its own.
///
/// An admin change made through one replica reaches the others within milliseconds, not at once
/// (each applies the shared log as it hears of it): where a test then reads or pushes through
/// another replica, it polls that replica first, briefly and bounded.
@Suite("Shared state: replicas on one PostgreSQL", .timeLimit(.minutes(3)))
struct SharedStateTests {
    /// A state URL that is not PostgreSQL's stops start-up, naming the variable.
    @Test func aStateURLThatIsNotPostgresStopsStartUp() async throws {
        let environment = ["APNS_MOCK_STATE_URL": "mysql://apnsmock:secret@127.0.0.1:3306/apnsmock"]
        let started = ContinuousClock.now
        do {
            _ = try await ServerProcess.withRunning(yaml: SharedState.yaml, environment: environment) { _ in
                Issue.record("apns-mock started with a mysql:// state URL")
            }
        } catch let failure as ServerProcess.StartFailure {
            #expect(failure.description.contains("APNS_MOCK_STATE_URL"), "\(failure.description)")
        }
        #expect(ContinuousClock.now - started < .seconds(20))
    }

    /// A PostgreSQL URL nobody answers at (a port bound and never listening: connections are
    /// refused) stops start-up, naming the variable, in bounded time.
    @Test func anUnreachableDatabaseStopsStartUp() async throws {
        let refusing = try RefusingPort()
        let environment = ["APNS_MOCK_STATE_URL": "postgres://apnsmock:secret@127.0.0.1:\(refusing.port)/apnsmock"]
        let started = ContinuousClock.now
        do {
            _ = try await ServerProcess.withRunning(yaml: SharedState.yaml, environment: environment) { _ in
                Issue.record("apns-mock started with an unreachable state URL")
            }
        } catch let failure as ServerProcess.StartFailure {
            #expect(failure.description.contains("APNS_MOCK_STATE_URL") && failure.description.contains("unreachable"), "\(failure.description)")
        }
        let took = ContinuousClock.now - started
        #expect(took < .seconds(30), "start-up gave up after \(took)")
    }

    /// The tests that need PostgreSQL: skipped where its server is not installed and the suite is
    /// not root (scripts/setup installs it; CI runs as root, so there its absence fails them).
    /// One at a time: side by side their replicas and PostgreSQL loaded the 2-core CI machine
    /// enough to push other suites past their time limits.
    @Suite(
        "with PostgreSQL", .sharedPostgres, .serialized,
        .enabled(
            if: PostgresCluster.canRun,
            "PostgreSQL's server binaries are absent (/usr/lib/postgresql/*/bin): scripts/setup installs them (apt-get install postgresql)"))
    struct Replicas {
        /// A push through A is found through B (`GET /v1/notifications`) and is what a wait
        /// through C, started before the push, returns; the seq is the same everywhere.
        @Test func aPushThroughOneReplicaIsSeenThroughTheOthers() async throws {
            try await SharedState.withReplicas(3) { replicas in
                let (a, b, c) = (replicas[0], replicas[1], replicas[2])
                let token = String(repeating: "5a", count: 32)
                let cAdmin = try c.admin
                // Long: under the whole suite's load, starting curl and the push can take seconds.
                async let waited = cAdmin.wait(RecordQuery(token: token), count: 1, timeout: 60)
                // The wait must be registered before the push; a wait has no "subscribed" answer,
                // so give its request a moment to arrive.
                try await Task.sleep(for: .milliseconds(300))
                let pushed = try await SharedState.push(a, token: token)
                #expect(pushed.status == 200)
                let apnsID = pushed.headers["apns-id"]?.lowercased()

                let found = try await SharedState.poll({ try await b.admin.notifications(RecordQuery(token: token)) }, until: {
                    !$0.notifications.isEmpty
                })
                #expect(found.notifications.count == 1)
                #expect(found.notifications.first?.apnsId.lowercased() == apnsID)
                let (page, timedOut) = try await waited
                #expect(!timedOut && page.notifications.count == 1)
                #expect(page.notifications.first?.apnsId.lowercased() == apnsID)
                #expect(page.notifications.first?.seq == found.notifications.first?.seq)
                // A's own view: the same record under the same seq.
                let own = try await a.admin.notifications(RecordQuery(token: token))
                #expect(own.notifications.map(\.seq) == found.notifications.map(\.seq))
            }
        }

        /// A `times: 1` rule added through A fires exactly once while h2load pushes through all
        /// three replicas at once: one record with the rule's answer, the same one on every
        /// replica's view, and every other push accepted.
        @Test func aRuleWithTimesFiresExactlyOnceAcrossReplicas() async throws {
            try await SharedState.withReplicas(3) { replicas in
                let added = try await replicas[0].admin.addFaults(json: #"[{"respond":{"reason":"ServiceUnavailable"},"times":1}]"#)
                let ruleID = try #require(added.first?.id)
                // Every replica holds the rule before the load starts (it applies the log within ms).
                for replica in replicas.dropFirst() {
                    let admin = try replica.admin
                    let faults = try await SharedState.poll({ try await admin.faults().faults }, until: { $0.contains { $0.id == ruleID } })
                    #expect(faults.map(\.id) == [ruleID], "replica \(replica.name) lists \(faults)")
                }

                let perReplica = 600
                let runs = try await withThrowingTaskGroup(of: H2Load.Run.self) { group in
                    for replica in replicas {
                        let baseURL = try replica.server.baseURL
                        group.addTask {
                            try await H2Load.push(perReplica, to: baseURL, token: Pushes.token, clients: 2, streams: 50, timeout: 90)
                        }
                    }
                    return try await group.reduce(into: [H2Load.Run]()) { $0.append($1) }
                }
                let codes = runs.compactMap(SharedState.statusCodes)
                #expect(codes.count == 3, "\(runs.map(\.text))")
                #expect(codes.map(\.server).reduce(0, +) == 1, "5xx answers: \(codes)")
                #expect(codes.map(\.ok).reduce(0, +) == 3 * perReplica - 1, "2xx answers: \(codes)")

                for replica in replicas {
                    let records = try await SharedState.records(replica.admin, count: 3 * perReplica)
                    let fired = records.filter { $0.status == 503 }
                    #expect(records.count == 3 * perReplica, "replica \(replica.name) holds \(records.count)")
                    #expect(fired.count == 1 && fired.first?.reason == "ServiceUnavailable" && fired.first?.injected == true,
                            "replica \(replica.name): \(fired.map { "#\($0.seq) \($0.status ?? 0) \($0.reason ?? "")" })")
                    #expect(records.filter { $0.status == 200 }.count == 3 * perReplica - 1)
                    // Spent: no replica still offers it.
                    let admin = try replica.admin
                    let left = try await SharedState.poll({ try await admin.faults().faults }, until: { faults in
                        !faults.contains { $0.id == ruleID && ($0.remaining ?? 0) > 0 }
                    })
                    #expect(!left.contains { $0.id == ruleID && ($0.remaining ?? 0) > 0 }, "replica \(replica.name) lists \(left)")
                }
            }
        }

        /// The clock moved through A applies on B: B's `GET /v1/clock` shows the offset, a token
        /// B saw before the move is an hour old there (ExpiredProviderToken), a new one is fine.
        @Test func theClockMovedThroughOneReplicaAppliesOnTheOthers() async throws {
            try await SharedState.withReplicas(2) { replicas in
                let (a, b) = (replicas[0], replicas[1])
                let held = try Self.demoAuthorization()
                #expect(try await SharedState.push(b, authorization: held).status == 200)

                let moved = try await a.admin.advanceClock(seconds: 3601)
                #expect(moved.offsetSeconds == 3601)
                let bAdmin = try b.admin
                let clock = try await SharedState.poll({ try await bAdmin.clock() }, until: { $0.offsetSeconds == 3601 })
                #expect(clock.offsetSeconds == 3601, "B's clock: \(clock)")

                let refused = try await SharedState.push(b, authorization: held)
                #expect(refused.status == 403 && refused.reason == "ExpiredProviderToken", "\(refused.status) \(refused.reason ?? "")")
                #expect(try await SharedState.push(b, authorization: try Self.demoAuthorization()).status == 200)
                // A sees B's records, the refused one with the mock's time.
                let records = try await SharedState.records(a.admin, count: 3)
                #expect(records.map(\.status) == [200, 403, 200])
                #expect(records.dropFirst().first?.mockTime != nil)
            }
        }

        /// A device unregistered through A is answered 410 on B.
        @Test func aDeviceUnregisteredThroughOneReplicaIsGoneOnTheOthers() async throws {
            try await SharedState.withReplicas(2) { replicas in
                let (a, b) = (replicas[0], replicas[1])
                let gone = String(repeating: "0d", count: 32)
                #expect(try await SharedState.push(b, token: gone).status == 200)
                try await a.admin.unregisterDevice(token: gone)
                let bAdmin = try b.admin
                let devices = try await SharedState.poll({ try await bAdmin.devices().devices }, until: {
                    $0.contains { $0.token == gone && $0.unregisteredAt != nil }
                })
                #expect(devices.contains { $0.token == gone && $0.unregisteredAt != nil }, "B's devices: \(devices)")
                let refused = try await SharedState.push(b, token: gone)
                #expect(refused.status == 410 && refused.reason == "Unregistered", "\(refused.status) \(refused.reason ?? "")")
                #expect(try await SharedState.push(b, token: Pushes.otherToken).status == 200)
            }
        }

        /// A replica stopped and started again with the same state URL lists every record, those
        /// pushed while it was down included, under the same seqs; it records again.
        /// A database whose schema another version of apns-mock made: start-up stops, naming both
        /// versions (replicas of two versions must not share one state).
        @Test func aDatabaseOfAnotherSchemaVersionStopsStartUp() async throws {
            try await SharedState.withReplicas(1) { replicas in
                let replica = replicas[0]
                await replica.stop()
                let changed = try await ExternalTool.run(
                    "psql", [replica.stateURL, "-v", "ON_ERROR_STOP=1", "-c", "UPDATE apns_mock_schema SET version = 99"], timeout: 30)
                #expect(changed.exitCode == 0, "psql: \(changed.stderr)")
                do {
                    try await replica.start()
                    Issue.record("apns-mock started on a database of schema version 99")
                } catch let failure as ServerProcess.StartFailure {
                    #expect(failure.description.contains("APNS_MOCK_STATE_URL"), "\(failure.description)")
                    #expect(failure.description.contains("version 99") && failure.description.contains("version \(SharedSchema.version)"),
                            "\(failure.description)")
                }
            }
        }

        @Test func aRestartedReplicaStillListsTheRecords() async throws {
            try await SharedState.withReplicas(2) { replicas in
                let (a, b) = (replicas[0], replicas[1])
                for replica in [a, b, a, b] {
                    #expect(try await SharedState.push(replica).status == 200)
                }
                _ = try await SharedState.records(b.admin, count: 4)
                await b.stop()
                #expect(try await SharedState.push(a).status == 200)
                try await b.start()
                let before = try await SharedState.records(a.admin, count: 5)
                let after = try await SharedState.records(b.admin, count: 5)
                #expect(before.count == 5)
                #expect(after.map(\.seq) == before.map(\.seq) && after.map(\.apnsId) == before.map(\.apnsId))
                #expect(try await SharedState.push(b).status == 200)
                #expect(try await SharedState.records(a.admin, count: 6).count == 6)
            }
        }

        /// The database stopped and started again: the replicas keep answering pushes (200),
        /// say `degraded` with a reason, refuse admin changes (503); once it is back the records
        /// queued meanwhile arrive, nothing is dropped, health is `ok`, admin changes work. On a
        /// cluster of its own, so that the other tests run meanwhile.
        @Test func theDatabaseAwayAndBack() async throws {
            try await PostgresCluster.withStarted { cluster in
                try await SharedState.withReplicas(2, stateURL: cluster.url) { replicas in
                    try await Self.outage(of: cluster, replicas[0], replicas[1])
                }
            }
        }

        static func outage(of cluster: PostgresCluster, _ a: Replica, _ b: Replica) async throws {
            #expect(try await SharedState.push(a).status == 200)
            _ = try await SharedState.records(b.admin, count: 1)
            for replica in [a, b] {
                let (status, health, text) = try await SharedState.health(replica)
                #expect(status == 200 && health?.status == "ok", "\(replica.name): \(status) \(text)")
            }

            try await cluster.halt()
            var pushedMeanwhile = 0
            for replica in [a, b, a, b, a, b] {
                let answer = try await SharedState.push(replica)
                #expect(answer.status == 200, "push through \(replica.name) during the outage: \(answer.status) \(answer.reason ?? "")")
                pushedMeanwhile += 1
            }
            for replica in [a, b] {
                let (status, health, text) = try await SharedState.poll(within: .seconds(20), every: .milliseconds(100), {
                    try await SharedState.health(replica)
                }, until: { $0.health?.status == "degraded" })
                #expect(status == 200 && health?.status == "degraded", "\(replica.name) during the outage: \(status) \(text)")
                let reason = health?.reason ?? ""
                #expect(reason.contains("state"), "\(replica.name)'s health names no reason: \(text)")
            }
            // Admin changes are refused while the log cannot be written (both at once: a refusal
            // may wait for the database a few seconds; curl gives up after 10).
            async let clockRefused = SharedState.call(a, "POST", "/v1/clock", body: #"{"advanceSeconds":60}"#)
            async let faultRefused = SharedState.call(b, "POST", "/v1/faults", body: #"{"respond":{"reason":"BadDeviceToken"}}"#)
            let (clock, fault) = try await (clockRefused, faultRefused)
            #expect(clock.status == 503 && clock.text.contains("state"), "POST /v1/clock during the outage: \(clock.status) \(clock.text)")
            #expect(fault.status == 503 && fault.text.contains("state"), "POST /v1/faults during the outage: \(fault.status) \(fault.text)")
            // Pushes are still answered as before: no rule was added.
            #expect(try await SharedState.push(b).status == 200)
            pushedMeanwhile += 1

            try await cluster.resume()
            let total = 1 + pushedMeanwhile
            for replica in [a, b] {
                let (status, health, text) = try await SharedState.poll(within: .seconds(30), every: .milliseconds(100), {
                    try await SharedState.health(replica)
                }, until: { $0.health?.status == "ok" })
                #expect(status == 200 && health?.status == "ok", "\(replica.name) after the outage: \(status) \(text)")
                let records = try await SharedState.records(replica.admin, count: total, within: .seconds(30))
                let shared = try await SharedState.poll({ try await SharedState.shared(replica) }, until: { $0?.queued == 0 })
                #expect(records.count == total && records.allSatisfy { $0.status == 200 },
                        "\(replica.name) holds \(records.count) records of \(total) (seqs \(records.map(\.seq))); shared: \(String(describing: shared)); health: \(text)")
                #expect(Set(records.map(\.seq)).count == records.count)
                #expect(shared?.dropped == 0 && shared?.queued == 0, "\(replica.name)'s shared counts: \(String(describing: shared))")
            }
            let clockAfter = try await SharedState.call(a, "POST", "/v1/clock", body: #"{"advanceSeconds":60}"#)
            #expect(clockAfter.status == 200, "POST /v1/clock after the outage: \(clockAfter.status) \(clockAfter.text)")
            let bAdmin = try b.admin
            let bClock = try await SharedState.poll({ try await bAdmin.clock() }, until: { $0.offsetSeconds == 60 })
            #expect(bClock.offsetSeconds == 60)
        }

        /// Two teams added through A never see each other's records, faults or devices through
        /// B, while their pushes go through both replicas.
        @Test func teamsStaySeparateAcrossReplicas() async throws {
            try await SharedState.withReplicas(2) { replicas in
                let (a, b) = (replicas[0], replicas[1])
                let one = try TeamsTests.Worker("TEAMONE001", keyID: "KEYONE0001", app: "com.example.one")
                let two = try TeamsTests.Worker("TEAMTWO002", keyID: "KEYTWO0002", app: "com.example.two")
                _ = try await a.admin.addTeam(json: one.body)
                _ = try await a.admin.addTeam(json: two.body)
                let aOne = try a.admin.forTeam(one.teamID), aTwo = try a.admin.forTeam(two.teamID)
                let bOne = try b.admin.forTeam(one.teamID), bTwo = try b.admin.forTeam(two.teamID)
                // Team two's rule and team one's unregistered device, made through A.
                try await aTwo.addFault(json: #"{"respond":{"reason":"BadDeviceToken"}}"#).expect([201])
                let device = String(repeating: "e1", count: 32)
                try await aOne.unregisterDevice(token: device)
                // B holds both teams, the rule and the device before it is pushed to.
                let bWhole = try b.admin
                let teams = try await SharedState.poll({ try await bWhole.teams().map(\.teamId) }, until: {
                    $0.contains(one.teamID) && $0.contains(two.teamID)
                })
                #expect(teams.contains(one.teamID) && teams.contains(two.teamID), "B's teams: \(teams)")
                _ = try await SharedState.poll({ try await bTwo.faults().faults.count }, until: { $0 == 1 })
                _ = try await SharedState.poll({ try await bOne.devices().devices.count }, until: { $0 == 1 })

                func push(_ worker: TeamsTests.Worker, _ replica: Replica, token: String = Pushes.token) async throws -> CurlResponse {
                    try await SharedState.push(replica, token: token, topic: worker.app, authorization: try worker.authorization())
                }
                #expect(try await push(one, a).status == 200)
                #expect(try await push(one, b).status == 200)
                #expect(try await push(one, b, token: device).status == 410)
                #expect(try await push(two, a).reason == "BadDeviceToken")
                #expect(try await push(two, b).reason == "BadDeviceToken")
                // Team two's device of the same token is not unregistered: its rule answers, not 410.
                #expect(try await push(two, b, token: device).reason == "BadDeviceToken")

                let recordsOne = try await SharedState.records(bOne, count: 3)
                let recordsTwo = try await SharedState.records(bTwo, count: 3)
                #expect(recordsOne.count == 3 && recordsOne.allSatisfy { $0.auth.teamId == one.teamID && $0.topic == one.app })
                #expect(recordsOne.map(\.status) == [200, 200, 410])
                #expect(recordsTwo.count == 3 && recordsTwo.allSatisfy { $0.auth.teamId == two.teamID && $0.reason == "BadDeviceToken" })
                #expect(try await allRecords(bWhole).count == 6)
                #expect(try await bOne.faults().faults.isEmpty)
                #expect(try await bTwo.faults().faults.count == 1)
                #expect(try await bWhole.faults().faults.isEmpty)
                #expect(try await bTwo.devices().devices.isEmpty)
                #expect(try await bOne.devices().devices.map(\.token) == [device])
                let statsOne = try await bOne.stats(), statsTwo = try await bTwo.stats()
                #expect(statsOne.requests == 3 && statsTwo.requests == 3 && statsTwo.rejected == 3, "\(statsOne.requests) \(statsTwo.requests)")
            }
        }

        /// A replica killed with SIGKILL under load: every record its `/v1/stats` `shared.written`
        /// counted before the kill is in the shared records (seen through the other replica), with
        /// dense seqs.
        @Test func aKilledReplicaLosesNothingItReportedWritten() async throws {
            try await SharedState.withReplicas(2) { replicas in
                let (a, b) = (replicas[0], replicas[1])
                let baseURL = try a.server.baseURL
                let total = 200_000
                let load = Task {
                    try await H2Load.push(total, to: baseURL, token: Pushes.token, clients: 2, streams: 50, timeout: 120)
                }
                let shared = try await SharedState.poll(within: .seconds(60), every: .milliseconds(20), {
                    try await SharedState.shared(a)
                }, until: { ($0?.written ?? 0) >= 2000 })
                let written = try #require(shared?.written, "A's stats have no shared.written")
                #expect(written >= 2000, "A wrote \(written) records in 60 s")
                try await a.kill()
                // h2load saw its connections die: the kill came mid-load.
                let run = try await load.value
                #expect(!run.allSucceeded(total), "the load had ended before the kill: \(run.text)")

                let records = try await SharedState.records(b.admin, count: written, within: .seconds(30))
                #expect(records.count >= written, "B holds \(records.count) records; A had reported \(written) written")
                #expect(records.map(\.seq) == (0..<UInt64(records.count)).map { $0 + 1 }, "seqs are not 1…\(records.count)")
                // B still serves and records.
                #expect(try await SharedState.push(b).status == 200)
            }
        }

        /// `bearer <token>` of the demo team and key, signed now.
        static func demoAuthorization() throws -> String {
            let material = try Unprivileged.certificates()
            let key = try #require(material.tokenKeys.first)
            let pem = try String(contentsOfFile: material.tokenKeyPath(key), encoding: .utf8)
            return "bearer " + (try ProviderTokenSigner.token(
                keyPEM: pem, teamID: key.teamID, keyID: key.keyID, issuedAt: Int(Date().timeIntervalSince1970)))
        }
    }
}

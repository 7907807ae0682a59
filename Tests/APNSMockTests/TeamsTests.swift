@testable import APNSMock
import APNSMockCore
import APNSMockTesting
import Foundation
import Testing

/// Teams as namespaces (docs/teams.md): test workers sharing one mock each add a team with a key
/// of their own, push with real clients, and see, change and reset only their own state.
@Suite("Teams: namespaces on one mock", .timeLimit(.minutes(3)))
struct TeamsTests {
    /// A team a test adds: its ID, key ID, apps and private key.
    struct Worker {
        var teamID: String
        var keyID: String
        var app: String
        var keyPEM: String

        /// Makes a fresh P-256 key, as a worker would make one for its own team.
        init(_ teamID: String, keyID: String, app: String) throws {
            self.teamID = teamID
            self.keyID = keyID
            self.app = app
            let path = FileManager.default.temporaryDirectory.appendingPathComponent("team-key-\(UUID()).p8").path
            try TestCertificates.writeTokenKey(to: path)
            defer { try? FileManager.default.removeItem(atPath: path) }
            keyPEM = try String(contentsOfFile: path, encoding: .utf8)
        }

        var body: String {
            let pem = keyPEM.replacingOccurrences(of: "\n", with: "\\n")
            return #"{"teamId":"\#(teamID)","apps":["\#(app)"],"keys":[{"keyId":"\#(keyID)","pem":"\#(pem)"}]}"#
        }

        /// `bearer <token>` signed now (or `iat`) with the team's key.
        func authorization(iat: Int = Int(Date().timeIntervalSince1970)) throws -> String {
            "bearer " + (try ProviderTokenSigner.token(keyPEM: keyPEM, teamID: teamID, keyID: keyID, issuedAt: iat))
        }

        func push(_ mock: RunningMock, token: String, authorization: String? = nil) async throws -> CurlResponse {
            try await Curl.send(
                url: "\(mock.baseURL)/3/device/\(token)", caPath: mock.caPath, headers: ["apns-topic": app],
                authorization: try authorization ?? self.authorization())
        }
    }

    static let device = String(repeating: "ab", count: 32)

    static func add(_ worker: Worker, to mock: RunningMock) async throws -> TeamView {
        try await mock.admin.addTeam(json: worker.body)
    }

    /// Two workers push at once, with h2load, each through its own team's key, one of them under a
    /// fault rule of its own: each team's records, counts and `/metrics` series hold exactly its
    /// pushes, and the whole mock's are their sum.
    @Test func twoTeamsUnderLoadSeeOnlyTheirOwn() async throws {
        // h2load opens its 50 streams before it reads SETTINGS: let them in before the token is
        // accepted, as `server.streamsBeforeAuthentication` allows.
        try await MockHarness.withRunningMock(configure: { $0.http2.streamsBeforeAuthentication = 100 }) { mock in
            let one = try Worker("TEAMONE001", keyID: "KEYONE0001", app: "com.example.one")
            let two = try Worker("TEAMTWO002", keyID: "KEYTWO0002", app: "com.example.two")
            let added = try await Self.add(one, to: mock)
            #expect(added.teamId == one.teamID && added.source == "api" && added.keys.map(\.keyId) == [one.keyID])
            _ = try await Self.add(two, to: mock)
            let adminOne = mock.admin.forTeam(one.teamID), adminTwo = mock.admin.forTeam(two.teamID)
            // Team two's own rule: every push of it is answered BadDeviceToken; team one's are not.
            try await adminTwo.addFault(json: #"{"respond":{"reason":"BadDeviceToken"}}"#).expect([201])

            async let loadOne = H2Load.push(
                1500, to: mock.baseURL, token: Self.device, clients: 2, streams: 50,
                authorization: try one.authorization(), topic: one.app)
            async let loadTwo = H2Load.push(
                1000, to: mock.baseURL, token: Self.device, clients: 2, streams: 50,
                authorization: try two.authorization(), topic: two.app)
            let (runOne, runTwo) = try await (loadOne, loadTwo)
            #expect(runOne.all2xx(1500), "\(runOne.text)")
            #expect(runTwo.text.contains("1000 done") && runTwo.text.contains("0 errored"), "\(runTwo.text)")

            let statsOne = try await adminOne.stats(), statsTwo = try await adminTwo.stats()
            #expect(statsOne.team == one.teamID && statsOne.requests == 1500 && statsOne.accepted == 1500)
            #expect(statsTwo.requests == 1000 && statsTwo.rejected == 1000 && statsTwo.byReason == ["BadDeviceToken": 1000])
            #expect(statsOne.connections.total == 2 && statsTwo.connections.total == 2)
            #expect(statsOne.recording.records == 1500 && statsTwo.recording.records == 1000)

            let recordsOne = try await allRecords(adminOne), recordsTwo = try await allRecords(adminTwo)
            #expect(recordsOne.count == 1500 && recordsOne.allSatisfy { $0.status == 200 && $0.auth.teamId == one.teamID })
            #expect(recordsTwo.count == 1000 && recordsTwo.allSatisfy { $0.reason == "BadDeviceToken" && $0.auth.teamId == two.teamID })
            #expect(try await allRecords(mock.admin).count == 2500)
            let whole = try await mock.admin.stats()
            #expect(whole.requests == 2500 && whole.accepted == 1500 && whole.team == nil)
            // The rule is team two's: the whole mock's rules and team one's are empty.
            let wholeFaults = try await mock.admin.faults().faults, oneFaults = try await adminOne.faults().faults
            #expect(wholeFaults.isEmpty && oneFaults.isEmpty)

            let metrics = try await adminOne.metrics()
            #expect(metrics.contains(#"apns_team_requests_total{team="TEAMONE001",status="200",reason=""} 1500"#))
            #expect(!metrics.contains("TEAMTWO002"))
            let allMetrics = try await mock.admin.metrics()
            #expect(allMetrics.contains(#"apns_team_requests_total{team="TEAMTWO002",status="400",reason="BadDeviceToken"} 1000"#))
        }
    }

    /// A team's clock, devices and reset stay in the team: its tokens age, its device is
    /// unregistered and its records are cleared while the other team's are untouched.
    @Test func clockDevicesAndResetStayInTheTeam() async throws {
        try await MockHarness.withRunningMock { mock in
            let one = try Worker("TEAMONE001", keyID: "KEYONE0001", app: "com.example.one")
            let two = try Worker("TEAMTWO002", keyID: "KEYTWO0002", app: "com.example.two")
            _ = try await Self.add(one, to: mock)
            _ = try await Self.add(two, to: mock)
            let adminOne = mock.admin.forTeam(one.teamID), adminTwo = mock.admin.forTeam(two.teamID)
            let heldOne = try one.authorization(), heldTwo = try two.authorization()
            #expect(try await one.push(mock, token: Self.device, authorization: heldOne).status == 200)
            #expect(try await two.push(mock, token: Self.device, authorization: heldTwo).status == 200)

            // An hour passes for team one only.
            let moved = try await adminOne.advanceClock(seconds: 3601)
            #expect(moved.offsetSeconds == 3601 && moved.teamOffsetSeconds == 3601 && moved.team == one.teamID)
            #expect(try await mock.admin.clock().offsetSeconds == 0)
            #expect(try await one.push(mock, token: Self.device, authorization: heldOne).reason == "ExpiredProviderToken")
            #expect(try await two.push(mock, token: Self.device, authorization: heldTwo).status == 200)

            // The device is unregistered for team one only.
            _ = try await adminOne.unregisterDevice(token: Self.device)
            #expect(try await one.push(mock, token: Self.device).status == 410)
            #expect(try await two.push(mock, token: Self.device, authorization: heldTwo).status == 200)
            #expect(try await adminOne.devices().devices.map(\.token) == [Self.device])
            let wholeDevices = try await mock.admin.devices().devices, twoDevices = try await adminTwo.devices().devices
            #expect(wholeDevices.isEmpty && twoDevices.isEmpty)

            // A device the whole mock unregisters is unregistered for every team, beneath their own.
            _ = try await mock.admin.unregisterDevice(token: String(repeating: "cd", count: 32))
            #expect(try await two.push(mock, token: String(repeating: "cd", count: 32), authorization: heldTwo).status == 410)

            // Team one's reset: its records, counts, clock and device go; team two's stay.
            let clearsBefore = try await mock.admin.stats().clears
            try await mock.admin.request("POST", "/v1/reset", query: [("team", one.teamID)]).expect([204])
            // The team's counts started again; the whole mock's were not cleared (an inbox page of
            // the whole mock does not start again).
            #expect(try await adminOne.stats().clears == 1)
            #expect(try await mock.admin.stats().clears == clearsBefore)
            #expect(try await allRecords(adminOne).isEmpty)
            #expect(try await adminOne.stats().requests == 0)
            #expect(try await adminOne.clock().offsetSeconds == 0)
            #expect(try await adminOne.devices().devices.isEmpty)
            let twoRecords = try await allRecords(adminTwo)
            #expect(twoRecords.count == 4)
            // The whole mock's view lost team one's records and counts with it: they agree.
            let whole = try await allRecords(mock.admin)
            let wholeStats = try await mock.admin.stats()
            #expect(whole.count == 4 && wholeStats.requests == 4)
            #expect(try await one.push(mock, token: Self.device).status == 200)
        }
    }

    /// A deleted team's keys are revoked: a new token is InvalidProviderToken, even on a
    /// connection that was bound to it; its records and counts leave every view.
    @Test func deletingATeamRevokesItsKeysAndLeavesNothing() async throws {
        try await MockHarness.withRunningMock { mock in
            let one = try Worker("TEAMONE001", keyID: "KEYONE0001", app: "com.example.one")
            _ = try await Self.add(one, to: mock)
            #expect(try await one.push(mock, token: Self.device).status == 200)
            #expect(try await mock.admin.stats().requests == 1)
            try await mock.admin.removeTeam(one.teamID)
            #expect(try await mock.admin.teams().map(\.teamId) == ["DEMOTEAM01"])
            let refused = try await one.push(mock, token: Self.device)
            #expect(refused.status == 403 && refused.reason == "InvalidProviderToken")
            let whole = try await allRecords(mock.admin)
            #expect(whole.count == 1 && whole[0].reason == "InvalidProviderToken")
            let wholeStats = try await mock.admin.stats()
            #expect(wholeStats.requests == 1 && wholeStats.recording.records == 1)
            let gone = try await mock.admin.forTeam(one.teamID).request("GET", "/v1/stats")
            #expect(gone.status == 404 && gone.text.contains("TEAMONE001 is not a team of this mock"))
            // Its ID and key may be used again.
            _ = try await Self.add(one, to: mock)
            #expect(try await one.push(mock, token: Self.device).status == 200)
        }
    }

    /// An event stream of one team hears only that team's records.
    @Test func eventsOfOneTeam() async throws {
        try await MockHarness.withRunningMock { mock in
            let one = try Worker("TEAMONE001", keyID: "KEYONE0001", app: "com.example.one")
            _ = try await Self.add(one, to: mock)
            let stream = try await mock.admin.forTeam(one.teamID).events(RecordQuery(outcome: .all))
            // The demo team's push first, then team one's: the stream's first event is team one's.
            #expect(try await Curl.send(url: "\(mock.baseURL)/3/device/\(Self.device)", caPath: mock.caPath).status == 200)
            #expect(try await one.push(mock, token: Self.device).status == 200)
            var iterator = stream.makeAsyncIterator()
            let first = try #require(try await iterator.next())
            #expect(try first.record().auth.teamId == one.teamID)
            stream.close()
        }
    }

    /// A connection bound to a team's token: refused once the team is removed (as a revoked key
    /// is), and served again with the same token once the team is added back with the same key.
    @Test func aBoundConnectionFollowsItsTeamAway() throws {
        let worker = try Worker("TEAMONE001", keyID: "KEYONE0001", app: "com.example.one")
        let team = Configuration.Team(
            teamId: worker.teamID, apps: [worker.app], keys: [Configuration.Key(keyId: worker.keyID, pem: worker.keyPEM)])
        let registry = TeamRegistry(configured: [], keys: .empty, globalClock: MockClock(), faultSeed: nil)
        guard case .success = registry.add(team, devices: nil, keys: try TokenKeys.load([team])) else {
            Issue.record("not added")
            return
        }
        let authenticator = Authenticator(
            teams: registry, settings: ValidationSettings(), tokenUpdateInterval: 1200, fallbackTopics: .any,
            narrowsTopics: true)
        let token = try worker.authorization()
        var connection = ConnectionAuth()
        func push() -> Reason? {
            authenticator.authenticate(authorization: token, environment: .sandbox, state: &connection).failure?.reason
        }
        #expect(push() == nil)
        #expect(connection.space?.teamID == worker.teamID)
        guard case .success = registry.remove(worker.teamID) else {
            Issue.record("not removed")
            return
        }
        #expect(push() == .invalidProviderToken && connection.space == nil)
        // A new connection with the same token (the shared cache of verified tokens knew it).
        var other = ConnectionAuth()
        #expect(authenticator.authenticate(authorization: token, environment: .sandbox, state: &other).failure?.reason
            == .invalidProviderToken)
        guard case .success = registry.add(team, devices: nil, keys: try TokenKeys.load([team])) else {
            Issue.record("not added again")
            return
        }
        #expect(push() == nil)
        #expect(connection.space?.teamID == worker.teamID && connection.space?.isRetired == false)
    }

    /// Bodies and names the API refuses, each naming the field.
    @Test func badTeamsAreRefusedNamingTheField() async throws {
        try await MockHarness.withRunningMock { mock in
            let one = try Worker("TEAMONE001", keyID: "KEYONE0001", app: "com.example.one")
            func post(_ body: String) async throws -> AdminResponse {
                try await mock.admin.request("POST", "/v1/teams", body: Data(body.utf8))
            }
            let cases: [(String, Int, String)] = [
                (#"{"teamId":"TEAMONE001"}"#, 400, "apps"),
                (#"{"teamId":"short","apps":["com.example.one"]}"#, 400, "teamId"),
                (#"{"teamId":"TEAMONE001","apps":["com.example.one"],"keys":[{"keyId":"KEYONE0001","pem":"nope"}]}"#, 400, "keys[0].pem"),
                (#"{"teamId":"TEAMONE001","apps":["com.example.one"],"keys":[{"keyId":"KEYONE0001","path":"/etc/passwd"}]}"#, 400, "keys[0].path"),
                (#"{"teamId":"TEAMONE001","apps":["com.example.one"],"colour":"red"}"#, 400, "colour"),
                (#"{"teamId":"TEAMONE001","apps":["com.example.app"]}"#, 409, "com.example.app is an app of team DEMOTEAM01"),
                (#"{"teamId":"DEMOTEAM01","apps":["com.example.one"]}"#, 409, "team DEMOTEAM01 exists"),
                (#"{"teamId":"TEAMONE001","apps":["com.example.one"],"devices":{"tokens":[{"token":"zz"}]}}"#, 400, "devices.tokens[0].token"),
            ]
            for (body, status, naming) in cases {
                let response = try await post(body)
                #expect(response.status == status && response.text.contains(naming), "\(body): \(response.status) \(response.text)")
            }
            // A PEM that is no P-256 key.
            let garbled = one.body.replacingOccurrences(of: "MIG", with: "AAA")
            let refused = try await post(garbled)
            #expect(refused.status == 400 && refused.text.contains("keys[0].pem"), "\(refused.text)")

            _ = try await Self.add(one, to: mock)
            let other = try Worker("TEAMTWO002", keyID: "KEYONE0001", app: "com.example.two")
            let clash = try await post(other.body)
            #expect(clash.status == 409 && clash.text.contains("key KEYONE0001 is a key of team TEAMONE001"))
            let configured = try await mock.admin.request("DELETE", "/v1/teams/DEMOTEAM01")
            #expect(configured.status == 409)
            let unknown = try await mock.admin.request("DELETE", "/v1/teams/NOSUCHTEAM")
            #expect(unknown.status == 404)
            let malformed = try await mock.admin.request("GET", "/v1/faults", query: [("team", "lower")])
            #expect(malformed.status == 400 && malformed.text.contains("team"))
            let mismatch = try await mock.admin.forTeam("TEAMONE001").request("GET", "/v1/devices", query: [("team", "DEMOTEAM01")])
            #expect(mismatch.status == 400 && mismatch.text.contains("APNS-Mock-Team"))
            // A configured team is a namespace too.
            let demo = mock.admin.forTeam("DEMOTEAM01")
            #expect(try await Curl.send(url: "\(mock.baseURL)/3/device/\(Self.device)", caPath: mock.caPath).status == 200)
            let demoStats = try await demo.stats(), oneStats = try await mock.admin.forTeam(one.teamID).stats()
            #expect(demoStats.requests == 1 && oneStats.requests == 0)
        }
    }
}

extension AdminResponse {
    /// The body as text, for checking what a message names.
    var text: String { String(decoding: body, as: UTF8.self) }
}

/// Magic device tokens (`validation.magicDeviceTokens`): off unless configured; on, a token
/// `fa11<status>…` is answered that status where the push would have been accepted.
@Suite("Magic device tokens", .timeLimit(.minutes(2)))
struct MagicDeviceTokenTests {
    static func token(_ status: String) -> String {
        "fa11" + status + String(repeating: "0", count: 57)
    }

    @Test func theTokenNamesTheAnswer() async throws {
        #expect(MagicDeviceToken.reason(for: Self.token("410")) == .unregistered)
        #expect(MagicDeviceToken.reason(for: "FA11503" + String(repeating: "0", count: 57)) == .serviceUnavailable)
        #expect(MagicDeviceToken.reason(for: Self.token("418")) == nil)
        #expect(MagicDeviceToken.reason(for: "fa1") == nil)
        try await MockHarness.withRunningMock(configure: { $0.magicDeviceTokens = true }) { mock in
            let url = { (token: String) in "\(mock.baseURL)/3/device/\(token)" }
            for (status, reason) in MagicDeviceToken.answers where status != 403 {
                let response = try await Curl.send(url: url(Self.token(String(status))), caPath: mock.caPath)
                #expect(response.status == status && response.reason == reason.rawValue, "\(status): \(response.status)")
            }
            // A request with its own error keeps it: the magic answers only what would be accepted.
            let wrongTopic = try await Curl.send(
                url: url(Self.token("410")), caPath: mock.caPath, headers: ["apns-topic": "com.example.other"])
            #expect(wrongTopic.reason == "TopicDisallowed")
            // ExpiredProviderToken expires the token, as APNs' answer does: the client signs anew.
            let expired = try await Curl.send(url: url(Self.token("403")), caPath: mock.caPath)
            #expect(expired.status == 403 && expired.reason == "ExpiredProviderToken")
            let records = try await mock.admin.notifications(RecordQuery(outcome: .rejected)).notifications
            #expect(records.count == MagicDeviceToken.answers.count + 1)
            #expect(records.filter { $0.reason != "TopicDisallowed" }.allSatisfy { $0.injected })
            let stats = try await mock.admin.stats()
            #expect(stats.byReason["Unregistered"] == 1 && stats.byReason["ServiceUnavailable"] == 1)
        }
        // Off by default: the same token is an ordinary token.
        try await MockHarness.withRunningMock { mock in
            let response = try await Curl.send(url: "\(mock.baseURL)/3/device/\(Self.token("410"))", caPath: mock.caPath)
            #expect(response.status == 200)
        }
    }
}

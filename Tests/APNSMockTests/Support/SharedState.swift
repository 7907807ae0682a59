import APNSMock
import APNSMockTesting
import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A throwaway PostgreSQL cluster, started and stopped by scripts/postgres (Debian's server run by
/// an unprivileged user, password authentication, 127.0.0.1 on a free port), for the replicas of
/// the shared-state tests.
struct PostgresCluster: Sendable {
    /// `postgres://user:password@127.0.0.1:port/apnsmock`: the cluster's first database.
    let url: String

    static let script = ServerProcess.repository.appendingPathComponent("scripts/postgres").path

    /// Whether Debian's server binaries are installed (scripts/setup installs them).
    static var binariesPresent: Bool {
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? []
        return versions.contains { FileManager.default.isExecutableFile(atPath: "/usr/lib/postgresql/\($0)/bin/initdb") }
    }

    /// Whether the shared-state tests run: the binaries are there, or the suite is root (as in CI,
    /// where scripts/setup installed them: their absence is then a failure, not a skip).
    static var canRun: Bool { binariesPresent || Unprivileged.isRoot }

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    private static func run(_ arguments: [String], timeout: Double = 90) async throws -> String {
        let output = try await ExternalTool.run(script, arguments, timeout: timeout)
        guard output.exitCode == 0 else {
            throw Failure(description: "scripts/postgres \(arguments.first ?? "") exited \(output.exitCode): \(output.stderr)")
        }
        return output.text.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// `scripts/postgres start`, owned by this process: should it crash, the script stops the
    /// server.
    static func start() async throws -> PostgresCluster {
        PostgresCluster(url: try await run(["start", "--owner", String(ProcessInfo.processInfo.processIdentifier)]))
    }

    /// A new database of the cluster (`scripts/postgres createdb`): its URL.
    func createDatabase(_ name: String) async throws -> String {
        try await Self.run(["createdb", url, name])
    }

    /// Stops the server, keeping its data (`scripts/postgres halt`).
    func halt() async throws {
        _ = try await Self.run(["halt", url])
    }

    /// Starts it again on the same port (`scripts/postgres resume`).
    func resume() async throws {
        _ = try await Self.run(["resume", url])
    }

    /// Stops it and removes its directory (`scripts/postgres stop`).
    func stop() async {
        _ = try? await Self.run(["stop", url])
    }

    /// A cluster of its own for `body` (one a test stops and starts again), stopped afterwards.
    static func withStarted<T: Sendable>(_ body: (PostgresCluster) async throws -> T) async throws -> T {
        let cluster = try await start()
        do {
            let result = try await body(cluster)
            await cluster.stop()
            return result
        } catch {
            await cluster.stop()
            throw error
        }
    }
}

/// The suite's one PostgreSQL cluster: started (scripts/postgres) before the suite's first test,
/// stopped after its last; each test makes a database of its own in it.
struct SharedPostgres: SuiteTrait, TestScoping {
    @TaskLocal static var cluster: PostgresCluster?

    var isRecursive: Bool { false }

    func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        let cluster = try await PostgresCluster.start()
        do {
            try await Self.$cluster.withValue(cluster) { try await function() }
        } catch {
            await cluster.stop()
            throw error
        }
        await cluster.stop()
    }

    /// A new database of the suite's cluster, for one test.
    static func newDatabase() async throws -> String {
        guard let cluster else { throw PostgresCluster.Failure(description: "no PostgreSQL: the suite lacks .sharedPostgres") }
        return try await cluster.createDatabase("t_" + UUID().uuidString.prefix(8).lowercased())
    }
}

extension Trait where Self == SharedPostgres {
    /// Runs the suite with one PostgreSQL cluster (``SharedPostgres``).
    static var sharedPostgres: Self { SharedPostgres() }
}

/// One `apns-mock serve` replica of a shared state: a ``ServerProcess`` (its own unprivileged
/// process, its own free ports) with `APNS_MOCK_STATE_URL` set, that a test may stop, start again
/// with the same state and configuration, or kill.
final class Replica: Sendable {
    let name: String
    let stateURL: String
    let yaml: String

    private struct Running: Sendable {
        var server: ServerProcess
        var stop: AsyncStream<Void>.Continuation
        var task: Task<Void, Never>
    }

    private let running = Mutex<Running?>(nil)

    init(_ name: String, stateURL: String, yaml: String) {
        self.name = name
        self.stateURL = stateURL
        self.yaml = yaml
    }

    struct NotRunning: Error, CustomStringConvertible {
        var name: String
        var description: String { "replica \(name) is not running" }
    }

    /// The running process.
    var server: ServerProcess {
        get throws {
            guard let server = running.withLock({ $0?.server }) else { throw NotRunning(name: name) }
            return server
        }
    }

    var admin: AdminClient {
        get throws { try server.admin }
    }

    /// Starts the process and returns once it listens (its start-up has applied the shared admin
    /// log); throws ``ServerProcess/StartFailure`` with its log when it exits first.
    @discardableResult
    func start() async throws -> ServerProcess {
        let (started, announce) = AsyncThrowingStream<ServerProcess, any Error>.makeStream()
        let (stopSignal, stop) = AsyncStream<Void>.makeStream()
        let yaml = yaml, environment = ["APNS_MOCK_STATE_URL": stateURL]
        let task = Task {
            do {
                try await ServerProcess.withRunning(yaml: yaml, environment: environment) { server in
                    announce.yield(server)
                    for await _ in stopSignal {}
                }
                announce.finish()
            } catch {
                announce.finish(throwing: error)
            }
        }
        for try await server in started {
            running.withLock { $0 = Running(server: server, stop: stop, task: task) }
            return server
        }
        throw ServerProcess.StartFailure(description: "replica \(name) ended before listening")
    }

    /// Stops it with SIGTERM and waits for its exit.
    func stop() async {
        guard let current = running.withLock({ state -> Running? in
            defer { state = nil }
            return state
        }) else { return }
        current.stop.finish()
        await current.task.value
    }

    /// SIGKILL, then waits for its exit: no shutdown of any kind.
    func kill() async throws {
        let server = try server
        _ = Glibc.kill(server.pid, SIGKILL)
        await stop()
    }

    /// The last `lines` lines of its log, for a failure's message; nil when it is not running.
    func logTail(_ lines: Int = 30) -> String? {
        guard let log = try? server.log else { return nil }
        return log.split(separator: "\n", omittingEmptySubsequences: false).suffix(lines).joined(separator: "\n")
    }
}

/// What the shared-state tests ask the replicas, and how they push to them.
enum SharedState {
    /// The configuration every replica of a test has: the same for all (the design requires it).
    /// h2load opens its streams before it reads SETTINGS: let them in before the token is checked.
    static let yaml = "server: { streamsBeforeAuthentication: 100 }\n"

    /// Starts `count` replicas (named A, B, C…) of `stateURL` (default: a new database of the
    /// suite's cluster), all at once, runs `body`, then stops them. When `body` throws, their logs'
    /// ends go into the issue.
    static func withReplicas<T: Sendable>(
        _ count: Int, yaml: String = yaml, stateURL: String? = nil, _ body: ([Replica]) async throws -> T
    ) async throws -> T {
        let url: String
        if let stateURL { url = stateURL } else { url = try await SharedPostgres.newDatabase() }
        let replicas = (0..<count).map { Replica(String(UnicodeScalar(UInt8(65 + $0))), stateURL: url, yaml: yaml) }
        do {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for replica in replicas {
                    group.addTask { try await replica.start() }
                }
                try await group.waitForAll()
            }
            let result = try await body(replicas)
            for replica in replicas { await replica.stop() }
            return result
        } catch {
            for replica in replicas {
                if let log = replica.logTail() { Issue.record("replica \(replica.name)'s log, the end:\n\(log)") }
                await replica.stop()
            }
            throw error
        }
    }

    /// Probes every `interval` until `done` holds of what `probe` returned, or `timeout` passed;
    /// returns the last value either way (the caller's #expect then says what was seen).
    static func poll<T: Sendable>(
        within timeout: Duration = .seconds(10), every interval: Duration = .milliseconds(25),
        _ probe: () async throws -> T, until done: (T) -> Bool
    ) async throws -> T {
        let deadline = ContinuousClock.now + timeout
        while true {
            let value = try await probe()
            if done(value) || ContinuousClock.now >= deadline { return value }
            try await Task.sleep(for: interval)
        }
    }

    /// Polls a replica's records until there are `count` (bounded: what arrives through the
    /// shared state takes milliseconds, not no time), and returns them.
    static func records(
        _ admin: AdminClient, count: Int, within timeout: Duration = .seconds(20)
    ) async throws -> [NotificationRecord] {
        try await poll(within: timeout, every: .milliseconds(50), { try await allRecords(admin) }, until: { $0.count >= count })
    }

    /// One push to `/3/device/<token>` of replica `replica`, with curl (the demo app and token
    /// unless said otherwise).
    static func push(
        _ replica: Replica, token: String = Pushes.token, topic: String = "com.example.app",
        authorization: String? = Curl.demoAuthorization
    ) async throws -> CurlResponse {
        let server = try replica.server
        return try await Curl.send(
            url: "\(server.baseURL)/3/device/\(token)", caPath: server.caPath, headers: ["apns-topic": topic],
            authorization: authorization)
    }

    /// An admin request with curl, bounded by `maxTime` seconds (URLSession's requests wait up to
    /// 330 s): for what may not answer while the database is away. `status` is 0 when curl got no
    /// answer in time.
    static func call(
        _ replica: Replica, _ method: String, _ path: String, body: String? = nil, team: String? = nil, maxTime: Int = 10
    ) async throws -> (status: Int, text: String) {
        let server = try replica.server
        var arguments = ["-sS", "-X", method, "--max-time", String(maxTime), "-w", "\n%{http_code}"]
        if let team { arguments += ["-H", "APNS-Mock-Team: \(team)"] }
        if body != nil { arguments += ["-H", "Content-Type: application/json", "--data-binary", "@-"] }
        arguments.append("\(server.adminURL)\(path)")
        let output = try await ExternalTool.run("curl", arguments, stdin: body.map { Data($0.utf8) })
        var lines = output.text.split(separator: "\n", omittingEmptySubsequences: false)
        let status = Int(lines.popLast() ?? "") ?? 0
        return (status, lines.joined(separator: "\n") + (output.exitCode == 0 ? "" : output.stderr))
    }

    /// `GET /v1/health` in shared mode: `status` (`ok`, `degraded`…) and, when degraded, `reason`.
    struct Health: Decodable, Sendable {
        var status: String
        var reason: String?
    }

    static func health(_ replica: Replica) async throws -> (status: Int, health: Health?, text: String) {
        let (status, text) = try await call(replica, "GET", "/v1/health", maxTime: 5)
        return (status, try? JSONDecoder().decode(Health.self, from: Data(text.utf8)), text)
    }

    /// `/v1/stats`' `shared` object: this replica's ID and its writer's counts.
    struct Shared: Decodable, Sendable {
        var replica: String
        var written: Int
        var dropped: Int
        var queued: Int
        var lastError: String?
    }

    static func shared(_ replica: Replica) async throws -> Shared? {
        struct Stats: Decodable { var shared: Shared? }
        let (status, text) = try await call(replica, "GET", "/v1/stats", maxTime: 5)
        guard status == 200 else { return nil }
        return try JSONDecoder().decode(Stats.self, from: Data(text.utf8)).shared
    }

    /// h2load's `status codes: a 2xx, b 3xx, c 4xx, d 5xx` line.
    static func statusCodes(_ run: H2Load.Run) -> (ok: Int, client: Int, server: Int)? {
        guard let line = run.text.split(separator: "\n").first(where: { $0.contains("status codes:") }) else { return nil }
        let numbers = line.split(whereSeparator: { !$0.isNumber }).compactMap { Int($0) }
        // "2xx, 3xx, 4xx, 5xx" contribute their digits too: the counts are every other number.
        guard numbers.count == 8 else { return nil }
        return (numbers[0], numbers[4], numbers[6])
    }
}

/// Every record a query finds, page after page (`outcome=all` unless said otherwise); scoped when
/// the client is.
func allRecords(_ admin: AdminClient, outcome: RecordFilter.Outcome = .all) async throws -> [NotificationRecord] {
    var found: [NotificationRecord] = []
    var since: UInt64 = 0
    while true {
        let page = try await admin.notifications(RecordQuery(outcome: outcome, since: since, limit: RecordQuery.maximumLimit))
        found += page.notifications
        guard page.more else { return found }
        since = page.next
    }
}

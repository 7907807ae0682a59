import APNSMockCore
import Foundation
import Hummingbird
import Logging
import NIOCore
import PostgresNIO
import Synchronization

/// The state replicas share on one PostgreSQL database (`state.url`, docs/replicas.md).
///
/// Three flows, each its own task, none on the request path:
/// - **Admin changes** are a log (``SharedAdminLog``): the admin API appends every change, and
///   each replica applies every entry in the log's order through its own admin router, so the
///   devices, fault rules, clocks, teams and channels are the same everywhere.
/// - **Records** go out through a writer: the request path appends to ``MockState/recording`` as
///   in memory, and the writer ships what arrived in batches. A mirror reads every replica's
///   batches back, in the shared order, into ``MockState/records``, the ring the admin API reads,
///   and counts them there (``MockState/statistics``).
/// - **Fault claims**: a rule with `times` fires only once the database granted one firing.
///
/// While the database is away every replica keeps answering from what it has; `/v1/health` says
/// `degraded` with the reason, admin changes are refused, records wait in the queue up to its
/// bound and are counted as dropped past it, and everything catches up when it is back.
final class PostgresSharedState: SharedStateEngine {
    let client: PostgresClient
    private let listenConfiguration: PostgresConnection.Configuration
    /// Where the database is, for messages: `host:port/database` (no password).
    let location: String
    /// This process among the replicas: a random ID given at start.
    let replica: String
    let queueCapacity: Int
    let retention: Configuration.SharedState
    let logger: Logger

    /// Wakes the admin log's applier and the records' mirror (a notification arrived, or the
    /// listener came back).
    let adminArrived = WakeSignal()
    let recordsArrived = WakeSignal()

    private struct Status {
        /// Why the database is not usable now; `nil` while it is.
        var problem: String?
        var since: Date?
        var written: Int = 0
        var dropped: Int = 0
        var lastError: String?
    }

    private let status = Mutex(Status())
    private let attachment = Mutex<Attachment?>(nil)
    let records: SharedRecords
    let adminLog: SharedAdminLog
    private let tasks = Mutex<[Task<Void, Never>]>([])

    struct Attachment: Sendable {
        let state: MockState
    }

    struct StartError: Error, CustomStringConvertible {
        let description: String
    }

    init(url: String, settings: Configuration.SharedState, queueCapacity: Int, logger: Logger) throws {
        guard let components = URLComponents(string: url), let host = components.host, !host.isEmpty else {
            throw StartError(description: "state.url (APNS_MOCK_STATE_URL): not a PostgreSQL URL")
        }
        let port = components.port ?? 5432
        let user = components.percentEncodedUser.flatMap { $0.removingPercentEncoding } ?? "postgres"
        let password = components.percentEncodedPassword.flatMap { $0.removingPercentEncoding }
        var database = String(components.path.drop(while: { $0 == "/" }))
        if database.isEmpty { database = user }
        let sslMode = components.queryItems?.first { $0.name == "sslmode" }?.value ?? "disable"
        let tls: PostgresClient.Configuration.TLS
        let connectionTLS: PostgresConnection.Configuration.TLS
        switch sslMode {
        case "disable", "allow", "prefer":
            tls = .disable
            connectionTLS = .disable
        case "require":
            // libpq's `require`: encrypted, the server's certificate not verified.
            var configuration = TLSConfiguration.makeClientConfiguration()
            configuration.certificateVerification = .none
            tls = .require(configuration)
            connectionTLS = .require(try NIOSSLContext(configuration: configuration))
        default:
            throw StartError(description: "state.url (APNS_MOCK_STATE_URL): sslmode \(sslMode) is not one of disable, prefer, require")
        }
        var configuration = PostgresClient.Configuration(
            host: host, port: port, username: user, password: password, database: database, tls: tls)
        configuration.options.maximumConnections = 8
        configuration.options.connectionIdleTimeout = .seconds(60)
        client = PostgresClient(configuration: configuration, backgroundLogger: logger)
        listenConfiguration = PostgresConnection.Configuration(
            host: host, port: port, username: user, password: password, database: database, tls: connectionTLS)
        location = "\(host):\(port)/\(database)"
        replica = String(UUID().uuidString.prefix(8)).lowercased()
        retention = settings
        self.queueCapacity = queueCapacity
        var logger = logger
        logger[metadataKey: "replica"] = "\(replica)"
        self.logger = logger
        records = SharedRecords(logger: logger)
        adminLog = SharedAdminLog(logger: logger)
    }

    // MARK: Start and stop

    /// Connects and creates or checks the schema; throws what stops start-up, naming the setting.
    func connect() async throws {
        let client = client
        tasks.withLock { $0.append(Task { await client.run() }) }
        let logger = logger, listenConfiguration = listenConfiguration
        do {
            // One connection of its own first: the pool would retry a refused connection for a
            // minute, where start-up should say at once what is wrong.
            guard try await withDeadline(seconds: 10, {
                let connection = try await PostgresConnection.connect(configuration: listenConfiguration, id: 0, logger: logger)
                try? await connection.close()
                return true
            }) == true else {
                throw StartError(description: "state.url (APNS_MOCK_STATE_URL): PostgreSQL at \(location) did not answer within 10 s")
            }
            let done = try await withDeadline(seconds: 15) {
                try await SharedSchema.migrate(client, logger: logger)
                return true
            }
            guard done == true else {
                throw StartError(description: "state.url (APNS_MOCK_STATE_URL): PostgreSQL at \(location) did not answer within 15 s")
            }
        } catch let error as SharedSchema.VersionMismatch {
            stop()
            throw StartError(description: "state.url (APNS_MOCK_STATE_URL): PostgreSQL at \(location): \(error)")
        } catch let error as StartError {
            stop()
            throw error
        } catch {
            stop()
            throw StartError(description: "state.url (APNS_MOCK_STATE_URL): PostgreSQL at \(location) is unreachable: \(Self.describe(error))")
        }
        logger.info("shared state on PostgreSQL", metadata: ["database": "\(location)", "schema": "\(SharedSchema.version)"])
    }

    /// Takes the mock's state and its admin router, catches up with the log and the records, and
    /// starts the background tasks. Returns once this replica has applied every admin change and
    /// read the records there were: its listeners may serve.
    func attach(state: MockState, respond: @escaping SharedAdminLog.Responder) async throws {
        attachment.withLock { $0 = Attachment(state: state) }
        adminLog.attach(engine: self, state: state, respond: respond)
        records.attach(engine: self, state: state)
        guard try await withDeadline(seconds: 120, { [self] in
            try await adminLog.applyPending()
            try await records.start()
            return true
        }) == true else {
            throw StartError(description: "state.url (APNS_MOCK_STATE_URL): catching up with PostgreSQL at \(location) took more than 120 s")
        }
        let started: [Task<Void, Never>] = [
            Task { [self] in await listenLoop() },
            Task { [self] in await adminLog.run() },
            Task { [self] in await adminLog.runPublisher() },
            Task { [self] in await records.runMirror() },
            Task { [self] in await records.runWriter() },
            Task { [self] in await retentionLoop() },
            Task { [self] in await pollLoop() },
        ]
        tasks.withLock { $0 += started }
    }

    func stop() {
        for task in tasks.withLock({ tasks -> [Task<Void, Never>] in defer { tasks = [] }; return tasks }) {
            task.cancel()
        }
        adminArrived.signal()
        recordsArrived.signal()
        adminLog.stop()
    }

    /// The mock's time now, of `team` when it names one (an unregistration's default timestamp).
    func now(team: String?) -> Int64 {
        guard let state = attachment.withLock({ $0?.state }) else { return Int64(Date().timeIntervalSince1970 * 1000) }
        return team.flatMap { state.teams.space($0) }?.clock.nowMilliseconds() ?? state.clock.nowMilliseconds()
    }

    // MARK: Health

    /// Notes that the database answered.
    func reachable() {
        status.withLock { status in
            if status.problem != nil {
                logger.info("shared state reachable again", metadata: ["database": "\(location)"])
            }
            status.problem = nil
            status.since = nil
        }
    }

    /// Notes that the database did not answer `what`.
    func unreachable(_ what: String, _ error: (any Error)?) {
        let message = "\(what): \(error.map(Self.describe) ?? "no answer in time")"
        status.withLock { status in
            if status.problem == nil {
                logger.warning("shared state unreachable", metadata: ["database": "\(location)", "error": "\(message)"])
                status.since = Date()
            }
            status.problem = message
            status.lastError = message
        }
    }

    /// Why `/v1/health` says `degraded`; `nil` while the database answers.
    var degradedReason: String? {
        status.withLock { status in
            status.problem.map { problem in
                let since = status.since.map { " since \(Timestamp.rfc3339(milliseconds: Int64($0.timeIntervalSince1970 * 1000)))" } ?? ""
                return "state: PostgreSQL at \(location) is unreachable\(since) (\(problem)); pushes are answered from this replica's copy, admin changes are refused, records wait in its queue"
            }
        }
    }

    func noteWritten(_ count: Int) { status.withLock { $0.written += count } }
    func noteDropped(_ count: Int) { status.withLock { $0.dropped += count } }

    /// `/v1/stats`'s `shared`.
    func view(queued: Int) -> SharedStateView {
        status.withLock { status in
            SharedStateView(
                replica: replica, written: status.written, dropped: status.dropped, queued: queued,
                lastError: status.lastError, degraded: status.problem != nil)
        }
    }

    static func describe(_ error: any Error) -> String {
        if let error = error as? PSQLError {
            if let message = error.serverInfo?[.message] { return message }
            if let underlying = error.underlying { return "\(error.code): \(underlying)" }
            return "\(error.code)"
        }
        // postgres-nio's pool stops trying for a while after failed attempts to connect.
        if "\(error)".contains("CircuitBreaker") { return "no connection could be made (retrying with growing pauses)" }
        return "\(error)"
    }

    // MARK: Notifications

    /// Holds a connection of its own that LISTENs on `apns_mock` and wakes the applier and the
    /// mirror; after a lost connection it listens again and has them read everything since their
    /// position (notifications sent meanwhile are lost).
    private func listenLoop() async {
        var attempt = 0
        while !Task.isCancelled {
            do {
                let connection = try await PostgresConnection.connect(
                    configuration: listenConfiguration, id: 1, logger: logger)
                attempt = 0
                reachable()
                adminArrived.signal()
                recordsArrived.signal()
                do {
                    try await withTaskCancellationHandler {
                        try await connection.listen(on: "apns_mock") { notifications in
                            for try await notification in notifications {
                                if notification.payload == "admin" { adminArrived.signal() } else { recordsArrived.signal() }
                            }
                        }
                    } onCancel: {
                        connection.close().whenComplete { _ in }
                    }
                } catch {
                    // Closed before it is let go (postgres-nio requires it), whatever ended it.
                    try? await connection.close()
                    throw error
                }
                try? await connection.close()
            } catch {
                if Task.isCancelled { return }
                unreachable("listening for changes", error)
            }
            attempt += 1
            try? await Task.sleep(for: .milliseconds(min(2_000, 100 * attempt)))
        }
    }

    /// Wakes the applier and the mirror every second, in case a notification was lost.
    private func pollLoop() async {
        while !Task.isCancelled {
            try? await Task.sleep(for: .seconds(1))
            adminArrived.signal()
            recordsArrived.signal()
        }
    }

    /// Deletes shared records past `state.retention` every 30 seconds, and the marks below them.
    private func retentionLoop() async {
        while !Task.isCancelled {
            try? await Task.sleep(for: .seconds(30))
            if Task.isCancelled { return }
            let keep = retention.retentionRecords, seconds = retention.retentionSeconds
            let client = client, logger = logger
            _ = try? await withDeadline(seconds: 20) {
                try await client.query(
                    """
                    DELETE FROM apns_mock_records
                    WHERE seq <= (SELECT last FROM apns_mock_record_counter) - \(keep)
                       OR received_at < now() - make_interval(secs => \(seconds))
                    """, logger: logger
                ).drain()
                try await client.query(
                    """
                    DELETE FROM apns_mock_record_marks
                    WHERE after_seq < coalesce((SELECT min(seq) FROM apns_mock_records), (SELECT last FROM apns_mock_record_counter))
                      AND id < (SELECT max(id) FROM apns_mock_record_marks)
                    """, logger: logger
                ).drain()
                return true
            }
        }
    }

    /// Sends a notification: `admin` or `records`.
    func notify(_ payload: String) async throws {
        try await client.query("SELECT pg_notify('apns_mock', \(payload))", logger: logger).drain()
    }

    // MARK: SharedStateEngine

    func clearRecords(team: String?) {
        records.clear(team: team)
    }

    func tokenExpired(team: String, tokenId: String, offset: Int64) {
        adminLog.publish(SharedAdminLog.Entry(method: SharedAdminLog.tokenExpired, uri: tokenId, team: team, body: String(offset)))
    }

    func channelCreated(_ channel: BroadcastChannel) {
        adminLog.publish(SharedAdminLog.Entry(
            method: SharedAdminLog.channelCreated, uri: channel.id,
            body: "\(channel.bundleID)\n\(channel.environment.rawValue)\n\(channel.storagePolicy.rawValue)"))
    }

    func channelDeleted(_ channel: BroadcastChannel) {
        adminLog.publish(SharedAdminLog.Entry(method: SharedAdminLog.channelDeleted, uri: channel.id, body: ""))
    }

    func claimFault(key: String, times: Int, on loop: any EventLoop) -> EventLoopFuture<Bool?> {
        let client = client, logger = logger
        return loop.makeFutureWithTask { [self] in
            do {
                let granted = try await withDeadline(seconds: 2) {
                    var granted = false
                    for try await _ in try await client.query(
                        """
                        INSERT INTO apns_mock_fault_claims AS claims (key, remaining) VALUES (\(key), \(times - 1))
                        ON CONFLICT (key) DO UPDATE SET remaining = claims.remaining - 1 WHERE claims.remaining > 0
                        RETURNING remaining
                        """, logger: logger)
                    {
                        granted = true
                    }
                    return granted
                }
                if granted == nil { unreachable("claiming a fault rule's firing", nil) }
                return granted
            } catch {
                unreachable("claiming a fault rule's firing", error)
                return nil
            }
        }
    }
}

/// `/v1/stats`'s `shared` member: this replica's part in the shared state.
public struct SharedStateView: Codable, Sendable, Equatable {
    /// This replica's ID (random, given at start; the records it wrote carry it in the database).
    public var replica: String
    /// Records this replica wrote to the shared state since it started.
    public var written: Int
    /// Records this replica could not write: its queue was full (the database was away too long).
    public var dropped: Int
    /// Records waiting in its queue.
    public var queued: Int
    /// The last failure to reach the database, if any.
    public var lastError: String?
    /// Whether the database is unreachable now (`/v1/health` says `degraded`).
    public var degraded: Bool
}

import APNSMockCore
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import PostgresNIO
import Synchronization

/// The admin changes of every replica, as one log in the database that every replica applies in
/// the same order through its own admin router (state-machine replication). A change's answer is
/// what its application on the replica that received it answered; on the other replicas it is
/// applied moments later (a notification wakes them) and its answer is dropped.
///
/// Every change is deterministic given the state before it, so replicas that started from the
/// same configuration and applied the same log hold the same devices, fault rules (with the same
/// ids), clocks, teams and channels. The one choice the mock makes at random in a change, a new
/// channel's ID, is made by the receiving replica before the change is logged.
///
/// The log is bounded (``maximumEntries``): a team's removal deletes the team's earlier entries,
/// and a reset of the whole mock every earlier entry but the teams', since what they did is undone.
final class SharedAdminLog: Sendable {
    typealias Responder = @Sendable (Request) async throws -> Response

    private let logger: Logger
    private struct Links {
        var engine: PostgresSharedState?
        var state: MockState?
        var respond: Responder?
    }

    private let links = Mutex(Links())

    private struct Progress {
        var applied: Int64 = 0
        var waiters: [Int64: CheckedContinuation<Response?, Never>] = [:]
        /// Answers to this replica's own changes applied before their submitter waited for them
        /// (the notification can beat the insert's return); taken by ``submit``.
        var answers: [Int64: Response] = [:]
    }

    private let progress = Mutex(Progress())
    /// One applier at a time (the background loop, or a start-up catching up).
    private let applying = Mutex(false)

    static let maximumEntries = 100_000

    private static func takeWaiters(
        through id: Int64, from waiters: inout [Int64: CheckedContinuation<Response?, Never>]
    ) -> [CheckedContinuation<Response?, Never>] {
        let passed = waiters.keys.filter { $0 <= id }
        return passed.compactMap { waiters.removeValue(forKey: $0) }
    }

    /// Answers every waiting submitter (the mock is stopping): none waits forever.
    func stop() {
        let waiting = progress.withLock { progress in
            defer { progress.waiters = [:] }
            return Array(progress.waiters.values)
        }
        for waiter in waiting { waiter.resume(returning: nil) }
    }

    init(logger: Logger) {
        self.logger = logger
        (published, publications) = AsyncStream.makeStream(of: Entry.self, bufferingPolicy: .bufferingNewest(10_000))
    }

    func attach(engine: PostgresSharedState, state: MockState, respond: @escaping Responder) {
        links.withLock {
            $0.engine = engine
            $0.state = state
            $0.respond = respond
        }
    }

    // What the request path changed on one replica, logged for the others (their `method`; no
    // admin route has these names, so no admin request can log one).
    static let tokenExpired = "TOKEN-EXPIRED"
    static let channelCreated = "CHANNEL-CREATED"
    static let channelDeleted = "CHANNEL-DELETED"

    /// Logs a change the request path made here, in the background; the other replicas apply it.
    /// Lost if the database is away (that replica's change stays its own).
    func publish(_ entry: Entry) {
        publications.yield(entry)
    }

    /// What ``publish(_:)`` logs, one at a time in the order the request path made the changes (a
    /// channel created and at once deleted must reach the log in that order); bounded, the
    /// newest kept.
    private let publications: AsyncStream<Entry>.Continuation
    private let published: AsyncStream<Entry>

    /// Logs what the request path published, in order, until the mock stops.
    func runPublisher() async {
        for await entry in published {
            _ = await submit(entry, waitForApplication: false)
        }
    }

    /// Applies a change the request path made on another replica (a no-op on its own).
    private func applyRequestPathChange(_ entry: Entry, own: Bool, state: MockState) {
        guard !own else { return }
        switch entry.method {
        case Self.tokenExpired:
            if let team = entry.team, let space = state.teams.space(team) {
                space.tokens.expire(entry.uri, offset: Int64(entry.body) ?? 0)
            }
        case Self.channelCreated:
            let fields = entry.body.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            guard fields.count == 3, let environment = APNSEnvironment(rawValue: fields[1]),
                  let policy = Int(fields[2]).flatMap(MessageStoragePolicy.init(rawValue:)) else { return }
            _ = state.channels.create(bundleID: fields[0], environment: environment, policy: policy, id: entry.uri)
        case Self.channelDeleted:
            _ = state.channels.delete(id: entry.uri)
        default:
            break
        }
    }

    // MARK: Logging a change

    struct Entry: Sendable {
        var method: String
        var uri: String
        var team: String? = nil
        var scopeHeader: String? = nil
        var body: String
    }

    enum AppendError: Error {
        case unreachable(String)
        case full
    }

    /// Logs a change received by this replica and returns its answer once this replica applied it.
    func submit(_ entry: Entry, waitForApplication: Bool = true) async -> Result<Response, AppendError> {
        guard let engine = links.withLock({ $0.engine }) else { return .failure(.unreachable("not started")) }
        if let reason = engine.degradedReason {
            // Refused at once: the database was found away already.
            return .failure(.unreachable(reason))
        }
        let logger = logger
        let id: Int64?
        do {
            // Not cancelled past its deadline (``withDeadline(seconds:_:)``): a change logged after
            // its answer said 503 would still be applied everywhere.
            id = try await withDeadline(seconds: 10) {
                // The span of ids bounds the count from above (two index look-ups); only past the
                // bound are the entries counted.
                var count: Int64 = 0
                for try await value in try await engine.client.query(
                    "SELECT coalesce(max(id) - min(id) + 1, 0) FROM apns_mock_admin_log", logger: logger
                ).decode(Int64.self) {
                    count = value
                }
                if count >= Self.maximumEntries {
                    for try await value in try await engine.client.query("SELECT count(*) FROM apns_mock_admin_log", logger: logger)
                        .decode(Int64.self)
                    {
                        count = value
                    }
                    guard count < Self.maximumEntries else { return nil }
                }
                // One statement: its number comes from the counter row, whose lock orders the
                // changes' commits as their numbers.
                var id: Int64 = 0
                for try await value in try await engine.client.query(
                    """
                    WITH counter AS (UPDATE apns_mock_admin_counter SET last = last + 1 RETURNING last)
                    INSERT INTO apns_mock_admin_log (id, origin, method, uri, team, scope_header, body)
                    SELECT last, \(engine.replica), \(entry.method), \(entry.uri), \(entry.team), \(entry.scopeHeader), \(entry.body)
                    FROM counter RETURNING id
                    """, logger: logger
                ).decode(Int64.self) {
                    id = value
                }
                // Logged: a lost notification only delays the others (they look every second).
                try? await engine.notify("admin")
                return id
            } ?? -1
        } catch {
            engine.unreachable("logging an admin change", error)
            return .failure(.unreachable(PostgresSharedState.describe(error)))
        }
        guard let id else { return .failure(.full) }
        guard id > 0 else {
            engine.unreachable("logging an admin change", nil)
            return .failure(.unreachable("no answer within 10 s; the change may still be applied: look before repeating it"))
        }
        engine.reachable()
        guard waitForApplication else {
            engine.adminArrived.signal()
            return .success(Response(status: .noContent))
        }
        let waited = try? await withDeadline(seconds: 30) { [self] in
            await withCheckedContinuation { (continuation: CheckedContinuation<Response?, Never>) in
                let already = progress.withLock { progress -> Response?? in
                    if progress.applied >= id { return .some(progress.answers.removeValue(forKey: id)) }
                    progress.waiters[id] = continuation
                    return nil
                }
                if let already { continuation.resume(returning: already) }
                engine.adminArrived.signal()
            }
        }
        guard let response = waited else {
            return .success(AdminAPI.error(
                .serviceUnavailable, "state: this change was logged but not applied here within 30 s; it will be, on every replica"))
        }
        return .success(response ?? AdminAPI.error(
            .conflict, "state: this change was logged, then undone by a later reset or team removal before this replica applied it"))
    }

    // MARK: Applying the log

    /// Applies new entries as they come.
    func run() async {
        while !Task.isCancelled {
            guard let engine = links.withLock({ $0.engine }) else { return }
            await engine.adminArrived.wait()
            if Task.isCancelled { return }
            do {
                try await applyPending()
            } catch {
                engine.unreachable("reading admin changes", error)
            }
        }
    }

    /// Applies every entry after the last one applied.
    func applyPending() async throws {
        guard let (engine, state, respond) = links.withLock({ links in
            links.engine.flatMap { engine in links.state.flatMap { state in links.respond.map { (engine, state, $0) } } }
        }) else { return }
        guard applying.withLock({ busy in busy ? false : { busy = true; return true }() }) else { return }
        defer { applying.withLock { $0 = false } }
        while true {
            let from = progress.withLock { $0.applied }
            var entries: [(Int64, String, String, String, String?, String?, String)] = []
            for try await row in try await engine.client.query(
                """
                SELECT id, origin, method, uri, team, scope_header, body FROM apns_mock_admin_log
                WHERE id > \(from) ORDER BY id LIMIT 500
                """, logger: logger
            ).decode((Int64, String, String, String, String?, String?, String).self) {
                entries.append(row)
            }
            engine.reachable()
            for (id, origin, method, uri, team, scopeHeader, body) in entries {
                let own = origin == engine.replica
                let entry = Entry(method: method, uri: uri, team: team, scopeHeader: scopeHeader, body: body)
                let response: Response?
                if [Self.tokenExpired, Self.channelCreated, Self.channelDeleted].contains(method) {
                    applyRequestPathChange(entry, own: own, state: state)
                    response = nil
                } else {
                    response = await apply(entry, id: id, own: own, respond: respond)
                }
                let (waiter, passed) = progress.withLock { progress -> (CheckedContinuation<Response?, Never>?, [CheckedContinuation<Response?, Never>]) in
                    progress.applied = id
                    let waiter = progress.waiters.removeValue(forKey: id)
                    if waiter == nil, own, let response {
                        progress.answers[id] = response
                        // Bounded: a submitter that gave up leaves its answer behind.
                        if progress.answers.count > 1_000, let oldest = progress.answers.keys.min() {
                            progress.answers[oldest] = nil
                        }
                    }
                    // Waiters for entries this replica never read: another replica's reset or
                    // team removal compacted them away before this one got to them (what they did
                    // was undone by the entry that deleted them).
                    return (waiter, Self.takeWaiters(through: id, from: &progress.waiters))
                }
                waiter?.resume(returning: response)
                for passed in passed { passed.resume(returning: nil) }
                if own { await compact(after: entry, id: id, status: response?.status ?? .noContent, engine: engine) }
            }
            if entries.count < 500 { return }
        }
    }

    private func apply(_ entry: Entry, id: Int64, own: Bool, respond: Responder) async -> Response? {
        var fields = HTTPFields()
        fields[.contentType] = "application/json"
        if let scopeHeader = entry.scopeHeader { fields[AdminAPI.teamHeader] = scopeHeader }
        let head = HTTPRequest(
            method: HTTPRequest.Method(entry.method) ?? .post, scheme: "http", authority: "127.0.0.1", path: entry.uri,
            headerFields: fields)
        let request = Request(head: head, body: RequestBody(buffer: ByteBuffer(string: entry.body)))
        do {
            return try await SharedReplay.$applying.withValue(true) {
                try await SharedReplay.$fromAnotherReplica.withValue(!own) {
                    try await SharedReplay.$entry.withValue(id) {
                        try await respond(request)
                    }
                }
            }
        } catch {
            logger.warning("an admin change from the shared log failed here", metadata: ["entry": "\(id)", "error": "\(error)"])
            return nil
        }
    }

    /// Deletes what a team's removal, a reset of the whole mock or a channel's deletion undid. The
    /// undoing entry stays: a replica that applied what it undoes, and has yet to apply it, must
    /// find it.
    private func compact(after entry: Entry, id: Int64, status: HTTPResponse.Status, engine: PostgresSharedState) async {
        guard status.code < 300 else { return }
        let path = entry.uri.split(separator: "?", maxSplits: 1).first.map(String.init) ?? entry.uri
        let logger = logger
        if entry.method == Self.channelDeleted {
            // A channel's creation and deletion by the request path leave nothing behind.
            _ = try? await engine.client.query(
                """
                DELETE FROM apns_mock_admin_log
                WHERE id < \(id) AND uri = \(entry.uri) AND method IN (\(Self.channelCreated), \(Self.channelDeleted))
                """, logger: logger
            ).drain()
        } else if entry.method == "DELETE", path.hasPrefix("/v1/teams/"), let team = entry.team {
            _ = try? await engine.client.query(
                "DELETE FROM apns_mock_admin_log WHERE id < \(id) AND team = \(team)", logger: logger
            ).drain()
        } else if entry.method == "POST", path == "/v1/reset", entry.team == nil {
            _ = try? await engine.client.query(
                "DELETE FROM apns_mock_admin_log WHERE id < \(id) AND uri NOT LIKE '/v1/teams%'", logger: logger
            ).drain()
        }
    }
}

/// Puts the admin API's changes through the shared log (``SharedAdminLog``) when the mock has a
/// shared state: a change is logged, applied by every replica in the log's order, and answered
/// with what its application here answered. Reads pass, after this replica's queued records are
/// written (a query finds what this replica answered before it).
struct SharedAdminMiddleware<Context: RequestContext>: RouterMiddleware {
    let engine: PostgresSharedState?

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let engine, !SharedReplay.applying else { return try await next(request, context) }
        let path = request.uri.path
        switch request.method {
        case .get, .head, .options:
            if path.hasPrefix("/v1/notifications") || path == "/v1/stats" || path == "/metrics" {
                await engine.records.sync(seconds: 2)
            }
            return try await next(request, context)
        default:
            break
        }
        // Only the admin API's changes are logged: anything else (an unknown path, a method no
        // route takes) is answered here as it would be without a shared state.
        guard Self.isChange(method: request.method, path: path) else { return try await next(request, context) }
        let buffer = try await request.body.collect(upTo: AdminAPI.bodyLimit)
        var body = String(buffer: buffer)
        var team = Self.scopeTeam(request)
        if request.method == .post, path.hasPrefix("/v1/devices/"), path.hasSuffix("/unregister") {
            body = Self.withTimestamp(body, now: engine.now(team: team))
        }
        if request.method == .post, path == "/v1/channels" {
            body = Self.withChannelID(body)
        }
        if path.hasPrefix("/v1/teams") {
            if request.method == .post, let json = try? JSONValue.parse(Array(body.utf8)), case .string(let id)? = json["teamId"] {
                team = id
            } else if request.method == .delete {
                team = String(path.dropFirst("/v1/teams/".count).prefix { $0 != "/" })
            }
        }
        let entry = SharedAdminLog.Entry(
            method: request.method.rawValue, uri: request.uri.description, team: team,
            scopeHeader: request.headers[AdminAPI.teamHeader], body: body)
        switch await engine.adminLog.submit(entry) {
        case .success(let response):
            // A clearing of records it made is written and read back before the answer, so that
            // this replica's next query finds them gone.
            await engine.records.sync(seconds: 2)
            return response
        case .failure(.full):
            return AdminAPI.error(
                .serviceUnavailable,
                "state: the shared admin log holds \(SharedAdminLog.maximumEntries) changes, its limit; POST /v1/reset (which compacts it) or DELETE teams no longer used")
        case .failure(.unreachable(let reason)):
            return AdminAPI.error(
                .serviceUnavailable,
                "state: PostgreSQL at \(engine.location) is unreachable (\(reason)); admin changes are refused until it is back, pushes are still answered")
        }
    }

    /// The team a change is scoped to, from `?team=` or the header (checked by the handler).
    static func scopeTeam(_ request: Request) -> String? {
        if let team = request.uri.queryParameters["team"] { return String(team) }
        return request.headers[AdminAPI.teamHeader]
    }

    /// Whether the admin API changes something for this method and path (its routes that are not
    /// `GET`); the request path's own entries have methods no admin route takes.
    static func isChange(method: HTTPRequest.Method, path: String) -> Bool {
        let parts = path.split(separator: "/", omittingEmptySubsequences: true)
        guard parts.first == "v1", parts.count >= 2 else { return false }
        switch (method, parts.count, parts[1]) {
        case (.post, 2, "devices"), (.delete, 3, "devices"): return true
        case (.post, 4, "devices"): return parts[3] == "unregister"
        case (.post, 2, "faults"), (.delete, 2, "faults"), (.delete, 3, "faults"): return true
        case (.post, 2, "clock"), (.post, 2, "reset"): return true
        case (.post, 2, "teams"), (.delete, 3, "teams"): return true
        case (.post, 2, "channels"), (.delete, 3, "channels"): return true
        case (.delete, 2, "notifications"): return true
        default: return false
        }
    }

    /// An unregistration without a timestamp gets this replica's now, so that every replica
    /// records the same time (each would otherwise take its own when it applies the change).
    static func withTimestamp(_ body: String, now: Int64) -> String {
        if body.allSatisfy(\.isWhitespace) { return JSONValue.object([JSONValue.Member(key: "timestamp", value: .number(String(now)))]).jsonText() }
        guard case .object(var members)? = try? JSONValue.parse(Array(body.utf8)) else { return body }
        if let existing = members.firstIndex(where: { $0.key == "timestamp" }) {
            guard members[existing].value.isNull else { return body }
            members[existing].value = .number(String(now))
        } else {
            members.append(JSONValue.Member(key: "timestamp", value: .number(String(now))))
        }
        return JSONValue.object(members).jsonText()
    }

    /// A channel's creation without an `id` gets one here, so every replica creates the same.
    static func withChannelID(_ body: String) -> String {
        guard var json = try? JSONValue.parse(Array(body.utf8)), case .object(var members) = json else { return body }
        if members.contains(where: { $0.key == "channelId" }) { return body }
        var random = FastRandom()
        members.append(JSONValue.Member(
            key: "channelId", value: .string(ChannelStore.newID(count: UInt64(Date().timeIntervalSince1970 * 1000), random: &random))))
        json = .object(members)
        return json.jsonText()
    }
}

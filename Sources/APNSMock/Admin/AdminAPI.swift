import APNSMockCore
import Foundation
import Hummingbird
import Logging
import NIOCore

/// The admin and query API (interface.md, "Query and admin API"): plain HTTP/1.1 JSON on its own
/// listener. Every handler validates all of its input before changing anything, so a 400 leaves
/// the state as it was.
struct AdminAPI: Sendable {
    let state: MockState
    /// Renders records (a rejected record's lint is computed when it is read).
    let validator: Validator
    let token: String?
    /// Whether the APNs listener is up, for `/healthz`.
    let apnsIsUp: @Sendable () -> Bool

    typealias Context = BasicRequestContext

    /// The longest wait a `timeout` may ask for, so a forgotten waiter cannot pin a connection.
    static let maximumWaitSeconds = 300.0
    /// Records in one answer when the query gives no `limit`, and the most it may ask for: a page
    /// is rendered whole in memory, so its size is bounded; `next` continues from where it ended.
    static let defaultPageSize = 1000
    static let maximumPageSize = 10_000
    /// Admin request bodies are small JSON documents.
    static let bodyLimit = 1 << 20

    func router() -> Router<Context> {
        let router = Router(context: Context.self)
        let api = self
        router.add(middleware: BearerTokenMiddleware(token: token))
        router.get("/healthz") { _, _ in
            api.apnsIsUp() ? Self.json(.ok, ["status": "ok"]) : Self.json(.serviceUnavailable, ["status": "apns listener down"])
        }
        router.get("/v1/notifications") { request, _ in api.notifications(request) }
        router.get("/v1/notifications/wait") { request, _ in await api.wait(request) }
        router.delete("/v1/notifications") { _, _ in
            api.state.records.removeAll()
            return Response(status: .noContent)
        }
        router.get("/v1/stats") { _, _ in
            Self.json(.ok, api.state.statistics.snapshot(
                openConnections: api.state.connections.open, totalConnections: api.state.connections.total,
                records: api.state.records))
        }
        router.get("/metrics") { _, _ in
            let text = api.state.statistics.prometheusText(
                openConnections: api.state.connections.open, evictions: api.state.records.evictions)
            return Response(
                status: .ok, headers: [.contentType: "text/plain; version=0.0.4"],
                body: .init(byteBuffer: ByteBuffer(string: text)))
        }
        router.get("/v1/devices") { _, _ in api.listDevices() }
        router.post("/v1/devices") { request, _ in try await api.addDevice(request) }
        router.delete("/v1/devices/:token") { _, context in api.removeDevice(context.parameters.get("token") ?? "") }
        router.post("/v1/devices/:token/unregister") { request, context in
            try await api.unregister(request, token: context.parameters.get("token") ?? "")
        }
        router.get("/v1/faults") { _, _ in Self.json(.ok, FaultList(faults: api.state.faults.entries.map(FaultView.init))) }
        router.post("/v1/faults") { request, _ in try await api.addFault(request) }
        router.delete("/v1/faults") { _, _ in
            api.state.faults.removeAll()
            return Response(status: .noContent)
        }
        router.delete("/v1/faults/:id") { _, context in
            api.state.faults.remove(id: context.parameters.get("id") ?? "")
                ? Response(status: .noContent) : Self.error(.notFound, "id: no fault rule with this id")
        }
        router.post("/v1/reset") { _, _ in
            api.state.reset()
            return Response(status: .noContent)
        }
        return router
    }

    // MARK: Notifications

    struct NotificationList: Codable {
        var notifications: [NotificationRecord]
        var next: UInt64
        /// Whether records after `next` exist that this answer did not look at (the page was full).
        var more: Bool
    }

    private static let filterParameters: Set<String> = [
        "token", "topic", "pushType", "apnsId", "collapseId", "outcome", "reason", "since", "limit",
    ]

    /// Parsed query: the filter, the cursor and the limit; or the 400 naming the parameter.
    private func parseQuery(_ request: Request, extra: Set<String> = []) -> Result<(RecordFilter, since: UInt64, limit: Int, [String: String]), AdminError> {
        var values: [String: String] = [:]
        for (key, value) in request.uri.queryParameters {
            let name = String(key)
            guard Self.filterParameters.contains(name) || extra.contains(name) else {
                return .failure(AdminError("\(name): unknown query parameter"))
            }
            // Hummingbird has already removed the percent-encoding.
            values[name] = String(value)
        }
        var filter = RecordFilter(
            token: values["token"], topic: values["topic"], pushType: values["pushType"], apnsId: values["apnsId"],
            collapseId: values["collapseId"], reason: values["reason"])
        if let outcome = values["outcome"] {
            guard let parsed = RecordFilter.Outcome(rawValue: outcome) else {
                return .failure(AdminError("outcome: \"\(outcome)\" is not accepted, rejected or all"))
            }
            filter.outcome = parsed
        }
        if let reason = values["reason"], Reason(rawValue: reason) == nil, reason != EnvironmentKeyReasonSpelling.observed.rawValue {
            return .failure(AdminError("reason: \"\(reason)\" is not a reason APNs sends"))
        }
        if values["reason"] != nil, values["outcome"] == nil {
            // Asking for a reason implies rejected records.
            filter.outcome = .all
        }
        var since: UInt64 = 0
        if let text = values["since"] {
            guard let value = UInt64(text) else { return .failure(AdminError("since: expected a seq (a non-negative integer)")) }
            since = value
        }
        var limit = Self.defaultPageSize
        if let text = values["limit"] {
            guard let value = Int(text), (1...Self.maximumPageSize).contains(value) else {
                return .failure(AdminError("limit: expected an integer from 1 to \(Self.maximumPageSize)"))
            }
            limit = value
        }
        return .success((filter, since, limit, values))
    }

    func notifications(_ request: Request) -> Response {
        switch parseQuery(request) {
        case .failure(let error):
            return Self.error(.badRequest, error.message)
        case .success(let (filter, since, limit, _)):
            let (records, next) = state.records.query(since: since, filter: filter, limit: limit)
            return Self.json(.ok, page(records, next: next))
        }
    }

    func wait(_ request: Request) async -> Response {
        switch parseQuery(request, extra: ["count", "timeout"]) {
        case .failure(let error):
            return Self.error(.badRequest, error.message)
        case .success(let (filter, since, limit, values)):
            var count = 1
            if let text = values["count"] {
                guard let value = Int(text), (1...Self.maximumPageSize).contains(value) else {
                    return Self.error(.badRequest, "count: expected an integer from 1 to \(Self.maximumPageSize)")
                }
                count = value
            }
            var timeout = 5.0
            if let text = values["timeout"] {
                guard let value = Double(text), value >= 0, value <= Self.maximumWaitSeconds else {
                    return Self.error(.badRequest, "timeout: expected seconds between 0 and \(Int(Self.maximumWaitSeconds))")
                }
                timeout = value
            }
            let (records, next, complete) = await state.records.wait(
                since: since, filter: filter, count: values["limit"] == nil ? count : min(count, limit), timeout: .milliseconds(Int64(timeout * 1000)))
            return Self.json(complete ? .ok : .requestTimeout, page(records, next: next))
        }
    }

    private func page(_ records: [RawRecord], next: UInt64) -> NotificationList {
        NotificationList(
            notifications: records.map { $0.render(validator: validator) }, next: next,
            more: next < state.records.lastSeq)
    }

    // MARK: Devices

    struct DeviceView: Codable, Equatable {
        var token: String
        var topic: String?
        var environment: String?
        var unregisteredAt: String?
        var timestamp: Int64?
        var reason: String?

        init(_ entry: DeviceEntry) {
            token = entry.token
            topic = entry.topic
            environment = entry.environment?.rawValue
            unregisteredAt = entry.unregistration.map { Timestamp.rfc3339(milliseconds: $0.timestamp) }
            timestamp = entry.unregistration?.timestamp
            reason = entry.unregistration?.reason.rawValue
        }
    }

    struct DeviceList: Codable {
        var policy: String
        var devices: [DeviceView]
    }

    func listDevices() -> Response {
        let registry = state.devices.current
        return Self.json(.ok, DeviceList(
            policy: registry.policy.rawValue,
            devices: registry.entries.sorted { $0.token < $1.token }.map(DeviceView.init)))
    }

    func addDevice(_ request: Request) async throws -> Response {
        let body: JSONValue
        switch try await Self.jsonBody(request) {
        case .failure(let error): return Self.error(.badRequest, error.message)
        case .success(let value): body = value
        }
        let entry: DeviceEntry
        do {
            entry = try DeviceEntry.decode(json: body, strictTokens: validator.settings.strictDeviceTokens)
        } catch {
            return Self.error(.badRequest, error.description)
        }
        let replaced = state.devices.update { $0.register(entry) }
        return Self.json(replaced == nil ? .created : .ok, DeviceView(entry))
    }

    func removeDevice(_ token: String) -> Response {
        let removed = state.devices.update { $0.remove(token: token) }
        return removed == nil ? Self.error(.notFound, "token: no device with this token") : Response(status: .noContent)
    }

    func unregister(_ request: Request, token: String) async throws -> Response {
        guard DeviceToken.isWellFormed(token.utf8, strict: validator.settings.strictDeviceTokens) else {
            return Self.error(.badRequest, "token: \"\(token)\" is not a well-formed device token")
        }
        var timestamp = Clock.nowMilliseconds()
        var reason = UnregistrationReason.unregistered
        var collected = request
        let buffer = try await collected.collectBody(upTo: Self.bodyLimit)
        if buffer.readableBytes > 0 {
            let body: JSONValue
            do {
                body = try JSONValue.parse(Array(buffer.readableBytesView))
            } catch {
                return Self.error(.badRequest, "body: not JSON: \(error)")
            }
            guard let members = body.members else { return Self.error(.badRequest, "body: expected an object") }
            for member in members {
                switch member.key {
                case "timestamp":
                    if let milliseconds = member.value.integerValue, milliseconds >= 0 {
                        timestamp = milliseconds
                    } else if let text = member.value.stringValue, let milliseconds = Timestamp.milliseconds(rfc3339: text) {
                        timestamp = milliseconds
                    } else {
                        return Self.error(.badRequest, "timestamp: expected milliseconds since the epoch or an RFC 3339 time")
                    }
                case "reason":
                    guard let text = member.value.stringValue, let parsed = UnregistrationReason(rawValue: text) else {
                        return Self.error(.badRequest, "reason: expected \"Unregistered\" or \"ExpiredToken\"")
                    }
                    reason = parsed
                default:
                    return Self.error(.badRequest, "\(member.key): unknown field (expected timestamp, reason)")
                }
            }
        }
        let entry = state.devices.update { registry -> DeviceEntry? in
            registry.unregister(token: token, at: timestamp, reason: reason)
            return registry.entry(for: token)
        }
        guard let entry else { return Self.error(.notFound, "token: no device with this token") }
        return Self.json(.ok, DeviceView(entry))
    }

    // MARK: Faults

    struct FaultList: Codable {
        var faults: [FaultView]
    }

    /// A rule as listed: the rule's own fields (interface.md) plus `id`, `remaining` and `applied`.
    struct FaultView: Codable, Equatable {
        struct Match: Codable, Equatable {
            var token: String?
            var topic: String?
            var pushType: String?
        }

        struct Respond: Codable, Equatable {
            var status: Int
            var reason: String
            var timestamp: Int64?
        }

        var id: String
        var match: Match
        var respond: Respond?
        var action: String?
        var delayMs: Int
        var times: Int?
        var probability: Double
        var remaining: Int?
        var applied: Int

        init(_ entry: FaultStore.Entry) {
            let rule = entry.rule
            id = entry.id
            match = Match(token: rule.match.token, topic: rule.match.topic, pushType: rule.match.pushType?.rawValue)
            respond = rule.respond.map { Respond(status: $0.status, reason: $0.wireReason, timestamp: $0.timestamp) }
            action = rule.action?.rawValue
            delayMs = rule.delayMs
            times = rule.times
            probability = rule.probability
            remaining = entry.remaining
            applied = entry.applied
        }
    }

    func addFault(_ request: Request) async throws -> Response {
        let body: JSONValue
        switch try await Self.jsonBody(request) {
        case .failure(let error): return Self.error(.badRequest, error.message)
        case .success(let value): body = value
        }
        // A list adds several rules at once, all or none.
        let items: [JSONValue]
        if case .array(let list) = body { items = list } else { items = [body] }
        var rules: [FaultRule] = []
        for (index, item) in items.enumerated() {
            do {
                rules.append(try FaultRule.decode(json: item))
            } catch {
                let field = error.field
                let path = body.isArray
                    ? "[\(index)]" + (field.isEmpty ? "" : "." + field)
                    : (field.isEmpty ? "body" : field)
                return Self.error(.badRequest, "\(path): \(error.problem)")
            }
        }
        let added = rules.map { FaultView(state.faults.add($0)) }
        if case .array = body {
            return Self.json(.created, FaultList(faults: added))
        }
        return Self.json(.created, added[0])
    }

    // MARK: Helpers

    private static func jsonBody(_ request: Request) async throws -> Result<JSONValue, AdminError> {
        var collected = request
        let buffer = try await collected.collectBody(upTo: bodyLimit)
        do {
            return .success(try JSONValue.parse(Array(buffer.readableBytesView)))
        } catch {
            return .failure(AdminError("body: not JSON: \(error)"))
        }
    }

    private static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }()

    static func json(_ status: HTTPResponse.Status, _ value: some Encodable) -> Response {
        let data = (try? encoder.encode(value)) ?? Data(#"{"error":"response encoding failed"}"#.utf8)
        return Response(
            status: status, headers: [.contentType: "application/json"],
            body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }

    static func error(_ status: HTTPResponse.Status, _ message: String) -> Response {
        json(status, ["error": message])
    }
}

struct AdminError: Error {
    var message: String
    init(_ message: String) { self.message = message }
}

extension JSONValue {
    fileprivate var isArray: Bool {
        if case .array = self { return true }
        return false
    }
}

/// `Authorization: Bearer <token>` on every admin request when a token is configured.
struct BearerTokenMiddleware<Context: Hummingbird.RequestContext>: RouterMiddleware {
    let token: String?

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let token else { return try await next(request, context) }
        let expected = "Bearer " + token
        guard let sent = request.headers[.authorization], sent == expected else {
            return AdminAPI.json(.unauthorized, ["error": "authorization: a bearer token is required"])
        }
        return try await next(request, context)
    }
}

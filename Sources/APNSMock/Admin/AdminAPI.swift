import APNSMockCore
import Foundation
import Hummingbird
import Logging
import NIOCore

/// The admin and query API (docs/admin-api.md): plain HTTP/1.1 JSON on its own
/// listener. Every handler validates all of its input before changing anything, so a 400 leaves
/// the state as it was.
struct AdminAPI: Sendable {
    let state: MockState
    /// Renders records (a rejected record's lint is computed when it is read).
    let validator: Validator
    /// Whether a device or channel must name an app of a team (`validation.topicPolicy: teams`);
    /// ``knownApps(in:)`` says which.
    let checksApps: Bool
    /// The server's MAX_CONCURRENT_STREAMS: a `shrink-streams` rule may only go below it.
    let maxConcurrentStreams: Int
    let token: String?
    /// What `GET /v1/ca.pem` serves; `nil` when the mock has no CA of its own to offer.
    let caCertificatePEM: String?
    /// Whether every listener is up, for `/v1/health` and `/healthz`.
    let health: @Sendable () -> ListenerHealth
    /// Who may use the API from a browser (``AdminBrowserGuardMiddleware``).
    var access = AdminAccessPolicy()
    /// The open `/v1/events` streams (their number is bounded).
    let eventStreams = EventStreams()
    /// The shared state replicas share (`state.url`); `nil` in memory.
    var shared: PostgresSharedState?

    typealias Context = BasicRequestContext

    /// The longest wait a `timeout` may ask for, so a forgotten waiter cannot pin a connection.
    static let maximumWaitSeconds = 300.0
    /// Admin request bodies are small JSON documents.
    static let bodyLimit = 1 << 20

    func router() -> Router<Context> {
        let router = Router(context: Context.self)
        let api = self
        // Outermost, so that its CORS headers are also on the answers the error middleware makes.
        router.add(middleware: AdminBrowserGuardMiddleware(policy: access))
        router.add(middleware: AdminErrorMiddleware())
        router.add(middleware: BearerTokenMiddleware(token: token))
        // Changes go through the shared log, applied by every replica (docs/replicas.md).
        router.add(middleware: SharedAdminMiddleware<Context>(engine: shared))
        router.get("/healthz") { _, _ in
            if case .ok = api.health() { return Self.json(.ok, ["status": "ok"]) }
            return Self.json(.serviceUnavailable, ["status": "apns listener down"])
        }
        router.get("/v1/health") { _, _ in api.healthDocument() }
        router.get("/v1/openapi.json") { _, _ in
            Response(
                status: .ok, headers: [.contentType: "application/json"],
                body: .init(byteBuffer: ByteBuffer(bytes: OpenAPIDocument.bytes)))
        }
        router.get("/v1/ca.pem") { _, _ in
            guard let pem = api.caCertificatePEM else {
                return Self.error(.notFound, "ca: this mock serves a certificate it did not issue (tls.certificate), so it has no CA to offer")
            }
            return Response(
                status: .ok, headers: [.contentType: "application/x-pem-file"],
                body: .init(byteBuffer: ByteBuffer(string: pem)))
        }
        router.get("/v1/notifications") { request, _ in api.notifications(request) }
        router.get("/v1/notifications/wait") { request, _ in await api.wait(request) }
        router.get("/v1/notifications/{seq}.apns") { request, context in
            await api.scoped(request) { scope in api.exportAPNS(context.parameters.get("seq") ?? "", scope: scope) }
        }
        router.get("/v1/events") { request, _ in api.events(request) }
        router.get("/v1/reasons") { _, _ in api.reasons() }
        router.get("/") { _, _ in InboxPage.response(status: .ok) }
        router.delete("/v1/notifications") { request, _ in
            await api.scoped(request) { scope in
                // The counts /v1/stats and the inbox show summarise the records: they start again too.
                if let space = scope.space { api.state.removeRecords(team: space) } else { api.state.removeRecords() }
                return Response(status: .noContent)
            }
        }
        router.get("/v1/stats") { request, _ in
            await api.scoped(request) { scope in
                var statistics = if let space = scope.space {
                    api.statistics(of: space)
                } else {
                    api.state.statistics.snapshot(
                        openConnections: api.state.connections.open, totalConnections: api.state.connections.total,
                        records: api.state.records)
                }
                statistics.shared = api.shared.map { $0.view(queued: $0.records.queued) }
                return Self.json(.ok, statistics)
            }
        }
        router.get("/metrics") { request, _ in
            await api.scoped(request) { scope in
                let text: String
                if let space = scope.space {
                    text = Self.teamMetrics([space])
                } else {
                    text = api.state.statistics.prometheusText(
                        openConnections: api.state.connections.open, evictions: api.state.records.evictions)
                        + Self.teamMetrics(api.state.teams.all)
                }
                return Response(
                    status: .ok, headers: [.contentType: "text/plain; version=0.0.4"],
                    body: .init(byteBuffer: ByteBuffer(string: text)))
            }
        }
        router.get("/v1/devices") { request, _ in await api.scoped(request) { api.listDevices(scope: $0) } }
        router.post("/v1/devices") { request, _ in try await api.scoped(request) { try await api.addDevice(request, scope: $0) } }
        router.delete("/v1/devices/:token") { request, context in
            await api.scoped(request) { api.removeDevice(context.parameters.get("token") ?? "", scope: $0) }
        }
        router.post("/v1/devices/:token/unregister") { request, context in
            try await api.scoped(request) { scope in
                try await api.unregister(request, token: context.parameters.get("token") ?? "", scope: scope)
            }
        }
        router.get("/v1/faults") { request, _ in
            await api.scoped(request) { scope in
                Self.json(.ok, FaultList(faults: api.faults(in: scope).entries.map(FaultView.init)))
            }
        }
        router.post("/v1/faults") { request, _ in try await api.scoped(request) { try await api.addFault(request, scope: $0) } }
        router.delete("/v1/faults") { request, _ in
            await api.scoped(request) { scope in
                api.faults(in: scope).removeAll()
                return Response(status: .noContent)
            }
        }
        router.delete("/v1/faults/:id") { request, context in
            await api.scoped(request) { scope in
                api.faults(in: scope).remove(id: context.parameters.get("id") ?? "")
                    ? Response(status: .noContent) : Self.error(.notFound, "id: no fault rule with this id")
            }
        }
        addChannelRoutes(to: router)
        addTeamRoutes(to: router)
        router.get("/v1/clock") { request, _ in await api.scoped(request) { Self.json(.ok, api.clockView(scope: $0)) } }
        router.post("/v1/clock") { request, _ in try await api.scoped(request) { try await api.advanceClock(request, scope: $0) } }
        router.post("/v1/reset") { request, _ in
            await api.scoped(request) { scope in
                if let space = scope.space { api.state.reset(team: space) } else { api.state.reset() }
                return Response(status: .noContent)
            }
        }
        return router
    }

    /// Every route the router serves, as `METHOD /path` with Hummingbird's `:name` parameters
    /// (AdminAPIContractTests holds them against the OpenAPI document).
    func routeDescriptions() -> [String] {
        router().routes.map { "\($0.method) \($0.path)" }
    }

    // MARK: Health

    /// `{"status":"ok","ports":{…}}` with 200 once every listener is bound; 503 with `starting` or
    /// `stopping` (and the ports bound so far) otherwise.
    func healthDocument() -> Response {
        struct Document: Encodable {
            var status: String
            var ports: ListenerPorts?
            /// Why the status is `degraded`.
            var reason: String?
        }
        switch health() {
        case .ok(let ports):
            // A replica whose shared state is away still answers pushes: degraded, not down, so
            // that an orchestrator keeps it in service (docs/replicas.md).
            if let reason = shared?.degradedReason {
                return Self.json(.ok, Document(status: "degraded", ports: ports, reason: reason))
            }
            return Self.json(.ok, Document(status: "ok", ports: ports))
        case .starting(let ports): return Self.json(.serviceUnavailable, Document(status: "starting", ports: ports))
        case .stopping(let ports): return Self.json(.serviceUnavailable, Document(status: "stopping", ports: ports))
        }
    }

    // MARK: Notifications

    /// The query of a request, or the 400 naming the parameter.
    /// The query of a request (its team from `?team=` or the header), or the refusal naming the
    /// parameter.
    private func parseQuery(_ request: Request, extra: Set<String> = []) -> Result<(RecordQuery, [String: String]), AdminRefusal> {
        var values: [String: String] = [:]
        for (key, value) in request.uri.queryParameters {
            // Hummingbird has already removed the percent-encoding.
            values[String(key)] = String(value)
        }
        var query: RecordQuery
        do {
            query = try RecordQuery(parameters: values, extra: extra)
        } catch {
            return .failure(AdminRefusal(.badRequest, error.message))
        }
        switch scope(request, queryTeam: query.filter.team) {
        case .failure(let refusal): return .failure(refusal)
        case .success(let scope): query.filter.team = scope.space?.teamID
        }
        return .success((query, values))
    }

    func notifications(_ request: Request) -> Response {
        switch parseQuery(request) {
        case .failure(let refusal):
            return refusal.response
        case .success(let (query, _)):
            let (records, next) = state.records.query(
                since: query.since ?? 0, filter: query.filter, limit: query.limit ?? RecordQuery.defaultLimit)
            return Self.json(.ok, page(records, next: next))
        }
    }

    func wait(_ request: Request) async -> Response {
        switch parseQuery(request, extra: ["count", "timeout"]) {
        case .failure(let refusal):
            return refusal.response
        case .success(let (query, values)):
            var count = 1
            if let text = values["count"] {
                guard let value = Int(text), (1...RecordQuery.maximumLimit).contains(value) else {
                    return Self.error(.badRequest, "count: expected an integer from 1 to \(RecordQuery.maximumLimit)")
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
                since: query.since ?? 0, filter: query.filter, count: min(count, query.limit ?? count),
                timeout: .milliseconds(Int64(timeout * 1000)))
            return Self.json(complete ? .ok : .requestTimeout, page(records, next: next))
        }
    }

    private func page(_ records: [RawRecord], next: UInt64) -> NotificationPage {
        NotificationPage(
            notifications: records.map { $0.render(validator: validator) }, next: next,
            more: next < state.records.lastSeq)
    }

    // MARK: Devices

    /// The device entries `scope` changes: the mock's, or a team's own.
    func devices(in scope: Scope) -> any VersionedBackend<DeviceRegistry> {
        scope.space?.devices ?? state.devices
    }

    func faults(in scope: Scope) -> any FaultBackend {
        scope.space?.faults ?? state.faults
    }

    /// A team's list shows its own entries, and the policy its pushes get (its own, else the mock's).
    func listDevices(scope: Scope) -> Response {
        let registry = devices(in: scope).current
        let policy = scope.space.map { $0.devicePolicy ?? state.devices.current.policy } ?? registry.policy
        return Self.json(.ok, DeviceList(
            policy: policy.rawValue,
            devices: registry.entries.sorted { $0.token < $1.token }.map(DeviceView.init)))
    }

    func addDevice(_ request: Request, scope: Scope) async throws -> Response {
        let body: JSONValue
        switch try await Self.jsonBody(request) {
        case .failure(let error): return Self.error(.badRequest, error.message)
        case .success(let value): body = value
        }
        let entry: DeviceEntry
        do {
            entry = try DeviceEntry.decode(
                json: body, strictTokens: validator.settings.strictDeviceTokens, knownApps: scope.space?.apps,
                appsOwner: scope.space.map { "team \($0.teamID)" })
        } catch {
            return Self.error(.badRequest, error.description)
        }
        let replaced = devices(in: scope).update { $0.register(entry) }
        return Self.json(replaced == nil ? .created : .ok, DeviceView(entry))
    }

    func removeDevice(_ token: String, scope: Scope) -> Response {
        let removed = devices(in: scope).update { $0.remove(token: token) }
        return removed == nil ? Self.error(.notFound, "token: no device with this token") : Response(status: .noContent)
    }

    func unregister(_ request: Request, token: String, scope: Scope) async throws -> Response {
        guard DeviceToken.isWellFormed(token.utf8, strict: validator.settings.strictDeviceTokens) else {
            return Self.error(.badRequest, "token: \"\(token)\" is not a well-formed device token")
        }
        var timestamp = scope.space?.clock.nowMilliseconds() ?? state.clock.nowMilliseconds()
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
            // As everywhere in admin bodies, a null field is an absent one; an unknown field is
            // refused even when null (the schema allows no other properties).
            for member in members {
                switch member.key {
                case "timestamp" where member.value.isNull, "reason" where member.value.isNull:
                    continue
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
                    return Self.error(
                        .badRequest, "\(member.key.isEmpty ? "\"\"" : member.key): unknown field (expected timestamp, reason)")
                }
            }
        }
        let entry = devices(in: scope).update { registry -> DeviceEntry? in
            registry.unregister(token: token, at: timestamp, reason: reason)
            return registry.entry(for: token)
        }
        guard let entry else { return Self.error(.notFound, "token: no device with this token") }
        return Self.json(.ok, DeviceView(entry))
    }

    // MARK: Clock

    func clockView(scope: Scope) -> ClockView {
        let wall = MockClock.wallMilliseconds()
        let offset = scope.space?.clock.offsetSeconds ?? state.clock.offsetSeconds
        return ClockView(
            offsetSeconds: offset, now: Timestamp.rfc3339(milliseconds: wall + offset * 1000),
            wallClock: Timestamp.rfc3339(milliseconds: wall), team: scope.space?.teamID,
            teamOffsetSeconds: scope.space?.clock.teamOffsetSeconds)
    }

    /// `POST /v1/clock {"advanceSeconds": N}`: moves the mock's time forward (never back; `/v1/reset`
    /// sets it back to the wall clock), at most ten years ahead in all.
    func advanceClock(_ request: Request, scope: Scope) async throws -> Response {
        let body: JSONValue
        switch try await Self.jsonBody(request) {
        case .failure(let error): return Self.error(.badRequest, error.message)
        case .success(let value): body = value
        }
        guard let members = body.members else { return Self.error(.badRequest, "body: expected an object") }
        var seconds: Int64?
        for member in members {
            guard member.key == "advanceSeconds" else {
                return Self.error(.badRequest, "\(member.key): unknown field (expected advanceSeconds)")
            }
            guard let value = member.value.integerValue, value >= 0, value <= MockClock.maximumOffsetSeconds else {
                return Self.error(
                    .badRequest,
                    "advanceSeconds: expected a whole number of seconds from 0 to \(MockClock.maximumOffsetSeconds) (ten years)")
            }
            seconds = value
        }
        guard let seconds else { return Self.error(.badRequest, "advanceSeconds: required") }
        let clock: any ClockBackend = scope.space?.clock ?? state.clock
        guard clock.advance(seconds: seconds) != nil else {
            return Self.error(
                .badRequest,
                "advanceSeconds: the clock may run at most \(MockClock.maximumOffsetSeconds) s (ten years) ahead; it is \(clock.offsetSeconds) s ahead (POST /v1/reset sets it back)")
        }
        return Self.json(.ok, clockView(scope: scope))
    }

    // MARK: Faults

    func addFault(_ request: Request, scope: Scope) async throws -> Response {
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
                rules.append(try FaultRule.decode(json: item, maxConcurrentStreams: maxConcurrentStreams))
            } catch {
                let field = error.field
                let path = body.isArray
                    ? "[\(index)]" + (field.isEmpty ? "" : "." + field)
                    : (field.isEmpty ? "body" : field)
                return Self.error(.badRequest, "\(path): \(error.problem)")
            }
        }
        let faults = faults(in: scope)
        guard let entries = faults.add(rules) else {
            return Self.error(
                .conflict, "faults: at most \(faults.maxRules) rules at once (\(faults.count) exist); DELETE /v1/faults removes them")
        }
        let added = entries.map(FaultView.init)
        if case .array = body {
            return Self.json(.created, FaultList(faults: added))
        }
        return Self.json(.created, added[0])
    }

    // MARK: Helpers

    static func jsonBody(_ request: Request) async throws -> Result<JSONValue, AdminError> {
        var collected = request
        let buffer = try await collected.collectBody(upTo: bodyLimit)
        do {
            return .success(try JSONValue.parse(Array(buffer.readableBytesView)))
        } catch {
            return .failure(AdminError("body: not JSON: \(error)"))
        }
    }

    static let encoder: JSONEncoder = {
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

    /// Paths answered without the token.
    static var open: Set<String> { ["/v1/health", "/healthz", "/v1/openapi.json"] }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        // A change from the shared log was checked where it was received.
        if SharedReplay.applying { return try await next(request, context) }
        // Health probes (a container's HEALTHCHECK, `apns-mock healthcheck`, an orchestrator)
        // carry no credentials; the answer holds nothing but listener ports. The OpenAPI document
        // holds no data either, and API tooling reads it before it knows about tokens.
        guard let token, !Self.open.contains(request.uri.path) else { return try await next(request, context) }
        guard let sent = request.headers[.authorization], Self.carries(token: token, credentials: sent) else {
            // The inbox page holds no data: it is sent with the 401, so that a browser (which
            // cannot send the header when a URL is opened) shows it and it asks for the token.
            if request.method == .get, request.uri.path == "/" {
                return InboxPage.response(status: .unauthorized)
            }
            return AdminAPI.json(.unauthorized, ["error": "authorization: a bearer token is required"])
        }
        return try await next(request, context)
    }

    /// Whether `credentials` (an `Authorization` value) is `Bearer <token>`: the scheme in any case
    /// (RFC 9110 §11.1), one or more spaces, then the token exactly, compared in constant time.
    static func carries(token: String, credentials: String) -> Bool {
        let bytes = Array(credentials.utf8)
        let scheme = Array("bearer".utf8)
        guard bytes.count > scheme.count,
              zip(bytes, scheme).allSatisfy({ ($0 | 0x20) == $1 }),
              bytes[scheme.count] == UInt8(ascii: " ")
        else { return false }
        let sent = bytes[scheme.count...].drop { $0 == UInt8(ascii: " ") }
        let expected = Array(token.utf8)
        guard sent.count == expected.count else { return false }
        return zip(sent, expected).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0
    }
}

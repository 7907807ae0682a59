import APNSMock
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A small typed client of the mock's query and admin API, for tests: "send pushes with the code
/// under test, then ask the mock what it got".
///
/// ```swift
/// let page = try await mock.admin.wait(RecordQuery(token: token), count: 1)
/// #expect(page.notifications.first?.payload?["aps"]?["alert"] == .string("hi"))
/// ```
public struct AdminClient: Sendable {
    public let baseURL: String
    /// Sent as `Authorization: Bearer …` when the mock was configured with `admin.token`.
    public var token: String?
    /// The team every call acts on (sent as `APNS-Mock-Team`); `nil`: the whole mock
    /// (docs/teams.md).
    public var team: String?

    public init(baseURL: String, token: String? = nil, team: String? = nil) {
        self.baseURL = baseURL
        self.token = token
        self.team = team
    }

    /// The same client, acting on one team's namespace: its records, counts, devices, faults,
    /// channels and clock.
    public func forTeam(_ teamID: String) -> AdminClient {
        AdminClient(baseURL: baseURL, token: token, team: teamID)
    }

    /// `GET /v1/teams`.
    public func teams() async throws -> [TeamView] {
        let response = try await request("GET", "/v1/teams")
        return try response.decode(TeamList.self, expecting: [200]).teams
    }

    /// `POST /v1/teams` with a team body (docs/teams.md): `teamId`, `apps`, `keys` (PEM inline),
    /// `devices`.
    public func addTeam(json: String) async throws -> TeamView {
        let response = try await request("POST", "/v1/teams", body: Data(json.utf8))
        return try response.decode(TeamView.self, expecting: [201])
    }

    /// `DELETE /v1/teams/{teamId}`.
    public func removeTeam(_ teamID: String) async throws {
        try await request("DELETE", "/v1/teams/\(Self.segment(teamID))").expect([204])
    }

    /// `GET /v1/notifications`.
    public func notifications(_ query: RecordQuery = RecordQuery()) async throws -> NotificationPage {
        let response = try await request("GET", "/v1/notifications", query: query.parameters)
        return try response.decode(NotificationPage.self, expecting: [200])
    }

    /// `GET /v1/health`: whether every listener is bound, and their ports.
    public func health() async throws -> Health {
        let response = try await request("GET", "/v1/health")
        return try response.decode(Health.self, expecting: [200, 503])
    }

    /// `GET /v1/ca.pem`: the CA certificate(s) a client must trust for the mock's TLS listeners.
    public func caCertificate() async throws -> String {
        let response = try await request("GET", "/v1/ca.pem")
        try response.expect([200])
        return String(decoding: response.body, as: UTF8.self)
    }

    /// `GET /v1/stats`.
    public func stats() async throws -> Statistics {
        try await request("GET", "/v1/stats").decode(Statistics.self)
    }

    /// `GET /v1/devices`.
    public func devices() async throws -> DeviceList {
        try await request("GET", "/v1/devices").decode(DeviceList.self)
    }

    /// `GET /v1/faults`.
    public func faults() async throws -> FaultList {
        try await request("GET", "/v1/faults").decode(FaultList.self)
    }

    /// `GET /v1/notifications/wait`. `timedOut` is true when the mock answered 408 (the page then
    /// holds what matched so far).
    public func wait(
        _ query: RecordQuery = RecordQuery(), count: Int = 1, timeout: Double = 5
    ) async throws -> (page: NotificationPage, timedOut: Bool) {
        let items = query.parameters + [("count", String(count)), ("timeout", String(timeout))]
        let response = try await request("GET", "/v1/notifications/wait", query: items)
        let page = try response.decode(NotificationPage.self, expecting: [200, 408])
        return (page, response.status == 408)
    }

    /// `DELETE /v1/notifications`.
    public func deleteNotifications() async throws {
        try await request("DELETE", "/v1/notifications").expect([204])
    }

    /// `POST /v1/faults` with a rule written as JSON (the fault rule shape of docs/admin-api.md).
    @discardableResult
    public func addFault(json: String) async throws -> AdminResponse {
        try await request("POST", "/v1/faults", body: Data(json.utf8))
    }

    /// `POST /v1/reset`.
    public func reset() async throws {
        try await request("POST", "/v1/reset").expect([204])
    }

    // MARK: The same operations as the Python, Node and Go clients (clients/)

    /// `GET /v1/notifications/wait`: the `count` matching records, or ``WaitTimeout`` (with what
    /// did match) when `timeout` seconds pass first.
    public func waitFor(_ query: RecordQuery = RecordQuery(), count: Int = 1, timeout: Double = 5) async throws -> [NotificationRecord] {
        let (page, timedOut) = try await wait(query, count: count, timeout: timeout)
        if timedOut { throw WaitTimeout(expected: count, records: page.notifications, timeout: timeout) }
        return page.notifications
    }

    /// `GET /v1/events`: the records (and `skipped`, `refused-streams` notices) as they are stored.
    /// Returns once the mock has subscribed the stream, so what is pushed afterwards arrives on it;
    /// ending the iteration (or dropping the stream) closes the connection.
    public func events(_ query: RecordQuery = RecordQuery(), maxRate: Int? = nil, lastEventID: UInt64? = nil) async throws -> AdminEventStream {
        var items = query.parameters
        if let maxRate { items.append(("maxRate", String(maxRate))) }
        var request = try urlRequest("GET", "/v1/events", query: items, body: nil)
        if let lastEventID { request.setValue(String(lastEventID), forHTTPHeaderField: "Last-Event-ID") }
        return try await AdminEventStream.open(request)
    }

    /// `POST /v1/faults` with a list of rules (JSON array): all are added, or none.
    public func addFaults(json: String) async throws -> [FaultView] {
        try await request("POST", "/v1/faults", body: Data(json.utf8)).decode(FaultList.self, expecting: [201]).faults
    }

    /// `DELETE /v1/faults/{id}`.
    public func removeFault(id: String) async throws {
        try await request("DELETE", "/v1/faults/" + Self.segment(id)).expect([204])
    }

    /// `DELETE /v1/faults`.
    public func clearFaults() async throws {
        try await request("DELETE", "/v1/faults").expect([204])
    }

    /// `POST /v1/devices`: registers (or replaces) a device.
    @discardableResult
    public func registerDevice(token: String, topic: String? = nil, environment: String? = nil) async throws -> DeviceView {
        var body: [String: String] = ["token": token]
        body["topic"] = topic
        body["environment"] = environment
        return try await request("POST", "/v1/devices", body: JSONEncoder().encode(body)).decode(DeviceView.self, expecting: [200, 201])
    }

    /// `POST /v1/devices/{token}/unregister`: from now on the token gets 410 with `reason`
    /// (`Unregistered` by default, or `ExpiredToken`) and `timestamp` (milliseconds; default now).
    @discardableResult
    public func unregisterDevice(token: String, reason: String? = nil, timestamp: Int64? = nil) async throws -> DeviceView {
        struct Body: Encodable {
            var reason: String?
            var timestamp: Int64?
        }
        let body = try JSONEncoder().encode(Body(reason: reason, timestamp: timestamp))
        return try await request("POST", "/v1/devices/\(Self.segment(token))/unregister", body: body).decode(DeviceView.self)
    }

    /// `DELETE /v1/devices/{token}`.
    public func removeDevice(token: String) async throws {
        try await request("DELETE", "/v1/devices/" + Self.segment(token)).expect([204])
    }

    /// `GET /v1/channels`.
    public func channels(bundleId: String? = nil, environment: String? = nil) async throws -> [ChannelView] {
        var items: [(String, String)] = []
        if let bundleId { items.append(("bundleId", bundleId)) }
        if let environment { items.append(("environment", environment)) }
        return try await request("GET", "/v1/channels", query: items).decode(ChannelList.self).channels
    }

    /// `POST /v1/channels`: a broadcast channel (its ID generated unless given).
    @discardableResult
    public func createChannel(
        bundleId: String, environment: String? = nil, channelId: String? = nil, messageStoragePolicy: Int? = nil
    ) async throws -> ChannelView {
        struct Body: Encodable {
            var bundleId: String
            var environment: String?
            var channelId: String?
            var messageStoragePolicy: Int?
        }
        let body = try JSONEncoder().encode(
            Body(bundleId: bundleId, environment: environment, channelId: channelId, messageStoragePolicy: messageStoragePolicy))
        return try await request("POST", "/v1/channels", body: body).decode(ChannelView.self, expecting: [201])
    }

    /// `DELETE /v1/channels/{channelId}` (percent-encoded here).
    public func deleteChannel(id: String) async throws {
        try await request("DELETE", "/v1/channels/" + Self.segment(id)).expect([204])
    }

    /// `GET /v1/clock`.
    public func clock() async throws -> ClockView {
        try await request("GET", "/v1/clock").decode(ClockView.self)
    }

    /// `POST /v1/clock {"advanceSeconds": N}`: moves the mock's time forward.
    @discardableResult
    public func advanceClock(seconds: Int64) async throws -> ClockView {
        try await request("POST", "/v1/clock", body: Data(#"{"advanceSeconds":\#(seconds)}"#.utf8)).decode(ClockView.self)
    }

    /// `GET /v1/reasons`.
    public func reasons() async throws -> [ReasonView] {
        try await request("GET", "/v1/reasons").decode(ReasonList.self).reasons
    }

    /// `GET /metrics`: Prometheus text.
    public func metrics() async throws -> String {
        let response = try await request("GET", "/metrics")
        try response.expect([200])
        return String(decoding: response.body, as: UTF8.self)
    }

    /// `GET /v1/openapi.json`: the admin API's OpenAPI 3.1 document.
    public func openAPIDocument() async throws -> Data {
        let response = try await request("GET", "/v1/openapi.json")
        try response.expect([200])
        return response.body
    }

    static func segment(_ value: String) -> String {
        var allowed = CharacterSet.urlPathAllowed
        allowed.remove(charactersIn: "/+")
        return value.addingPercentEncoding(withAllowedCharacters: allowed) ?? value
    }

    /// Any admin request, for what has no typed helper.
    public func request(
        _ method: String, _ path: String, query: [(String, String)] = [], body: Data? = nil
    ) async throws -> AdminResponse {
        let request = try urlRequest(method, path, query: query, body: body)
        let (data, response): (Data, URLResponse) = try await withCheckedThrowingContinuation { continuation in
            URLSession.shared.dataTask(with: request) { data, response, error in
                if let error {
                    continuation.resume(throwing: error)
                } else if let response {
                    continuation.resume(returning: (data ?? Data(), response))
                } else {
                    continuation.resume(throwing: AdminClientError("no response"))
                }
            }.resume()
        }
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        return AdminResponse(status: status, body: data)
    }

    func urlRequest(_ method: String, _ path: String, query: [(String, String)], body: Data?) throws -> URLRequest {
        guard var components = URLComponents(string: baseURL + path) else { throw AdminClientError("bad URL \(baseURL)\(path)") }
        if !query.isEmpty {
            components.queryItems = query.map { URLQueryItem(name: $0.0, value: $0.1) }
        }
        guard let url = components.url else { throw AdminClientError("bad URL \(baseURL)\(path)") }
        var request = URLRequest(url: url)
        request.httpMethod = method
        request.timeoutInterval = 330
        if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        if let team { request.setValue(team, forHTTPHeaderField: "APNS-Mock-Team") }
        if let body {
            request.httpBody = body
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        return request
    }
}

/// ``AdminClient/waitFor(_:count:timeout:)`` timed out: `matched` of `expected` records arrived.
public struct WaitTimeout: Error, CustomStringConvertible {
    public var expected: Int
    public var records: [NotificationRecord]
    public var timeout: Double
    public var matched: Int { records.count }

    public var description: String {
        let shown = records.suffix(5).map { record in
            let outcome = record.status.map(String.init) ?? record.action ?? "no answer"
            return "#\(record.seq) \(outcome)\(record.reason.map { " " + $0 } ?? "") token=\(record.token?.prefix(12) ?? "-")… topic=\(record.topic ?? "-")"
        }
        return "waited \(timeout) s for \(expected) notification(s): \(matched) arrived (last seen: \(shown.isEmpty ? "none" : shown.joined(separator: "; ")))"
    }
}

/// The body of `GET /v1/health`.
public struct Health: Codable, Sendable, Equatable {
    /// `ok` (every listener bound), `degraded` (every listener bound, a shared state's database
    /// unreachable: docs/replicas.md), `starting` or `stopping`.
    public var status: String
    public var ports: ListenerPorts?
    /// Why the status is `degraded`; `nil` otherwise.
    public var reason: String?

    public init(status: String, ports: ListenerPorts?, reason: String? = nil) {
        self.status = status
        self.ports = ports
        self.reason = reason
    }
}

/// An admin API answer: status and raw body.
public struct AdminResponse: Sendable {
    public var status: Int
    public var body: Data

    /// The `error` of a `{"error":"…"}` body.
    public var error: String? {
        (try? JSONDecoder().decode([String: String].self, from: body))?["error"]
    }

    public func decode<T: Decodable>(_ type: T.Type, expecting statuses: Set<Int> = [200]) throws -> T {
        try expect(statuses)
        return try JSONDecoder().decode(type, from: body)
    }

    public func expect(_ statuses: Set<Int>) throws {
        guard statuses.contains(status) else {
            throw AdminClientError(status: status, message: error ?? String(decoding: body, as: UTF8.self))
        }
    }
}

/// An admin answer outside the expected statuses (`status`, and the server's `message` intact:
/// `"advanceSeconds: expected …"`), or a failure to reach the API (`status` nil).
public struct AdminClientError: Error, CustomStringConvertible {
    public var status: Int?
    public var message: String
    public var description: String {
        status.map { "admin API answered \($0): \(message)" } ?? message
    }

    init(_ message: String) {
        self.message = message
    }

    init(status: Int, message: String) {
        self.status = status
        self.message = message
    }
}

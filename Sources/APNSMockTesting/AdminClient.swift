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

    public init(baseURL: String, token: String? = nil) {
        self.baseURL = baseURL
        self.token = token
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

    /// Any admin request, for what has no typed helper.
    public func request(
        _ method: String, _ path: String, query: [(String, String)] = [], body: Data? = nil
    ) async throws -> AdminResponse {
        guard var components = URLComponents(string: baseURL + path) else { throw AdminClientError("bad URL \(baseURL)\(path)") }
        if !query.isEmpty {
            components.queryItems = query.map { URLQueryItem(name: $0.0, value: $0.1) }
        }
        guard let url = components.url else { throw AdminClientError("bad URL \(baseURL)\(path)") }
        var request = URLRequest(url: url)
        request.httpMethod = method
        request.timeoutInterval = 330
        if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        if let body {
            request.httpBody = body
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
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
}

/// The body of `GET /v1/health`.
public struct Health: Codable, Sendable, Equatable {
    /// `ok` (every listener bound), `starting` or `stopping`.
    public var status: String
    public var ports: ListenerPorts?

    public init(status: String, ports: ListenerPorts?) {
        self.status = status
        self.ports = ports
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
            throw AdminClientError("admin API answered \(status): \(String(decoding: body, as: UTF8.self))")
        }
    }
}

public struct AdminClientError: Error, CustomStringConvertible {
    public var description: String
    init(_ description: String) { self.description = description }
}

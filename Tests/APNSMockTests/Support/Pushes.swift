import APNSMockTesting
import Foundation

/// Device tokens, a payload and a curl push that suites sending ordinary pushes share.
enum Pushes {
    /// The device token a test pushes to unless it needs another.
    static let token = String(repeating: "ab", count: 32)

    /// A second device token, distinct from ``token``.
    static let otherToken = String(repeating: "cd", count: 32)

    /// A small alert payload, as bytes for hand-made HTTP/2 requests.
    static let body = Array(#"{"aps":{"alert":"hello"}}"#.utf8)

    /// One push to `/3/device/<token>` with curl over TLS and HTTP/2, with curl's default payload
    /// and authorization.
    static func push(_ mock: RunningMock, token: String = token, headers: [String: String] = ["apns-topic": "com.example.app"])
        async throws -> CurlResponse
    {
        try await Curl.send(url: "\(mock.baseURL)/3/device/\(token)", caPath: mock.caPath, headers: headers)
    }
}

import APNSMockTesting
import Foundation

/// Subscribers to the admin listener's `GET /v1/events`, and reading what they receive.
enum EventSubscribers {
    /// A subscriber on a raw connection: the request is sent, the stream's opening comment read.
    static func subscribe(_ mock: RunningMock, _ query: String, headers: [String] = []) async throws -> RawClient {
        try await subscribe(adminPort: mock.adminPort, query, headers: headers)
    }

    /// Opens an event stream. A mock with a short `admin.idleTimeout` may close a new connection
    /// before a loaded machine gets to send the request, or before the server reads the request
    /// that was sent (the timeout doing its job; the stream then never opens): tried again, up to
    /// three times.
    static func subscribe(adminPort: Int, _ query: String, headers: [String] = []) async throws -> RawClient {
        let extra = headers.map { $0 + "\r\n" }.joined()
        let request = Array("GET /v1/events?\(query) HTTP/1.1\r\nHost: 127.0.0.1\r\n\(extra)\r\n".utf8)
        var attempt = 0
        while true {
            attempt += 1
            let client = try await RawClient.connect(port: adminPort, security: .plaintext)
            do {
                try await client.send(request)
            } catch where attempt < 3 {
                await client.close()
                continue
            }
            let opening = await client.waitUntil(timeout: .seconds(30)) { String(decoding: $0, as: UTF8.self).contains("apns-mock events") }
            if attempt < 3, !String(decoding: opening, as: UTF8.self).contains("apns-mock events") {
                await client.close()
                continue
            }
            return client
        }
    }

    /// The number of records a `skipped` event reports, or nil if its data is not a skip report.
    static func skippedCount(_ event: SSEEvent) -> Int? {
        struct Skip: Decodable { var skipped: Int; var firstSeq: UInt64; var lastSeq: UInt64 }
        return (try? JSONDecoder().decode(Skip.self, from: Data(event.data.utf8)))?.skipped
    }
}

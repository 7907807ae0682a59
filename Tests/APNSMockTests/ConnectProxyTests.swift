import APNSMock
import APNSMockCore
import APNSMockTesting
import Foundation
import Testing

/// The CONNECT proxy listener: clients that dial Apple's host names reach the mock through their
/// own proxy support, unmodified and with no hosts-file entry; nothing else gets a tunnel.
@Suite("CONNECT proxy listener", .timeLimit(.minutes(3)))
struct ConnectProxyTests {
    static let device = String(repeating: "f1", count: 32)

    static func proxyPort(_ mock: ServerProcess) throws -> Int {
        try #require(Int(mock.ports["proxy"] ?? ""), "the listening line names the proxy: \(mock.ports)")
    }

    /// pyapns-client and kalyke (httpx, httpx2) read HTTPS_PROXY: through the proxy they reach
    /// their own Apple host, whose name picks the environment as on a direct connection.
    @Test("Python clients through their proxy support", arguments: [RealClient.pyapnsClient, .kalyke])
    func pythonClientsThroughTheProxy(_ client: RealClient) async throws {
        try await ServerProcess.withRunning(arguments: ["--proxy-port", "0"]) { mock in
            let proxy = try Self.proxyPort(mock)
            let report = try await ClientDriver(
                client: client, scenario: "proxy", auth: .token, devices: [Self.device], proxyPort: proxy
            ).run(against: mock)
            #expect(report.results.map(\.sent) == [true], "\(report.results)")
            #expect(report.dialed.isEmpty, "no name was resolved to the mock: \(report.dialed)")
            let record = try #require(try await mock.admin.wait(RecordQuery(token: Self.device), count: 1).page.notifications.first)
            #expect(record.status == 200)
            let host = client == .kalyke ? "api.sandbox.push.apple.com" : "api.development.push.apple.com"
            #expect(record.headers[":authority"] == host)
            #expect(record.environment == "sandbox")
            let health = try await mock.admin.health()
            #expect(health.ports?.proxy == proxy)
        }
    }

    /// curl through the proxy to the production host and to both channel-management hosts.
    @Test func curlReachesEveryListenerThroughTheProxy() async throws {
        try await ServerProcess.withRunning(arguments: ["--proxy-port", "0"]) { mock in
            let proxy = try Self.proxyPort(mock)
            let push = try await Curl.send(
                url: "https://api.push.apple.com/3/device/\(Self.device)", caPath: mock.caPath,
                extra: ["--proxy", "http://127.0.0.1:\(proxy)", "--suppress-connect-headers"])
            #expect(push.status == 200)
            for (host, port) in [("api-manage-broadcast.sandbox.push.apple.com", 2195), ("api-manage-broadcast.push.apple.com", 2196)] {
                let created = try await Curl.send(
                    url: "https://\(host):\(port)/1/apps/com.example.app/channels", caPath: mock.caPath,
                    body: Data(#"{"message-storage-policy":1,"push-type":"LiveActivity"}"#.utf8),
                    extra: ["--proxy", "http://127.0.0.1:\(proxy)", "--suppress-connect-headers"])
                #expect(created.status == 201, "\(host)")
            }
            let records = try await mock.admin.wait(RecordQuery(outcome: .all), count: 3).page.notifications
            #expect(records.map(\.environment) == ["production", "sandbox", "production"])
        }
    }

    /// Malformed requests, other hosts and ports: refused with 400, 403, 405 or 431, and no tunnel
    /// opens (the mock's TLS listeners see no connection).
    @Test func nothingElseGetsATunnel() async throws {
        try await ServerProcess.withRunning(arguments: ["--proxy-port", "0"]) { mock in
            let proxy = try Self.proxyPort(mock)
            let cases: [(String, String)] = [
                ("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n", "HTTP/1.1 403"),
                ("CONNECT api.push.apple.com:22 HTTP/1.1\r\n\r\n", "HTTP/1.1 403"),
                ("CONNECT 127.0.0.1:\(mock.adminPort) HTTP/1.1\r\n\r\n", "HTTP/1.1 403"),
                ("CONNECT api.push.apple.com HTTP/1.1\r\n\r\n", "HTTP/1.1 400"),
                ("GET http://api.push.apple.com/3/device/x HTTP/1.1\r\nHost: api.push.apple.com\r\n\r\n", "HTTP/1.1 405"),
                ("CONNECT api.push.apple.com:443 HTTP/1.1\r\nX-Filler: " + String(repeating: "x", count: 9000), "HTTP/1.1 431"),
            ]
            for (request, status) in cases {
                let client = try await RawClient.connect(port: proxy, security: .plaintext)
                try await client.send(Array(request.utf8))
                let (received, closed, _) = await client.waitForClose(timeout: .seconds(10))
                let text = String(decoding: received, as: UTF8.self)
                #expect(text.hasPrefix(status), "\(request.prefix(60)): \(text.prefix(200))")
                #expect(closed)
            }
            let stats = try await mock.admin.stats()
            #expect(stats.connections.total == 0, "no tunnel reached a TLS listener")
            #expect(mock.log.contains("refused a proxy request"))
        }
    }
}

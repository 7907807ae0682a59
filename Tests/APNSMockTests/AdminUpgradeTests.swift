import APNSMockTesting
import Foundation
import Testing

/// HTTP clients that ask the admin listener to upgrade to h2c (Java's `HttpClient`, HTTP_2 by
/// default, and `curl --http2`) on a new connection: the listener answers over HTTP/1.1 (RFC 9110
/// §7.8 lets a server ignore `Upgrade`) and the connection goes on serving requests.
@Suite("Admin API and clients that ask to upgrade to h2c", .timeLimit(.minutes(3)))
struct AdminUpgradeTests {
    static let javaDriver = ServerProcess.repository.appendingPathComponent("scripts/clients/java/AdminHttpClientDriver.java").path

    /// Three calls on one Java client: the first asks to upgrade, the others reuse its connection.
    @Test func javaHttpClientMakesSeveralCallsOnOneClient() async throws {
        try await MockHarness.withRunningMock { mock in
            let output = try await ExternalTool.run("java", [Self.javaDriver, mock.adminURL], timeout: 120)
            #expect(output.exitCode == 0, "\(output.text)\(output.stderr)")
            let lines = output.text.split(separator: "\n").map(String.init)
            #expect(lines == [
                "GET /v1/health 200 HTTP_1_1", "GET /v1/stats 200 HTTP_1_1", "POST /v1/faults 201 HTTP_1_1",
            ], "\(output.stderr)")
            #expect(try await mock.admin.faults().faults.map(\.match.topic) == ["com.example.java"])
        }
    }

    /// curl --http2 on http:// asks to upgrade on its first request; the second request of the same
    /// invocation reuses the connection and is answered.
    @Test func curlHTTP2MakesTwoRequestsOnOneConnection() async throws {
        try await MockHarness.withRunningMock { mock in
            let format = "%{http_code} %{num_connects} %{http_version}\\n"
            let output = try await ExternalTool.run("curl", [
                "-sS", "--http2", "--max-time", "20", "-v",
                "-o", "/dev/null", "-w", format, "\(mock.adminURL)/v1/health",
                "-o", "/dev/null", "-w", format, "\(mock.adminURL)/v1/stats",
            ])
            #expect(output.exitCode == 0, "\(output.stderr)")
            #expect(output.stderr.lowercased().contains("upgrade: h2c"), "curl did not ask to upgrade: \(output.stderr)")
            // Both answered over HTTP/1.1; the second on the first one's connection.
            #expect(output.text.split(separator: "\n") == ["200 1 1.1", "200 0 1.1"], "\(output.stderr)")
        }
    }

    /// A client that pipelines a request behind its upgrade request (bytes the stopped decoder
    /// kept) gets both answered, in order, and the connection still serves a third.
    @Test func aRequestPipelinedBehindAnUpgradeRequestIsAnswered() async throws {
        try await MockHarness.withRunningMock { mock in
            let client = try await RawClient.connect(port: mock.adminPort, security: .plaintext)
            let upgrade = "GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade, HTTP2-Settings\r\n"
                + "Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n"
            let next = "GET /v1/reasons HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
            try await client.send(Array((upgrade + next).utf8))
            let two = await client.waitUntil { String(decoding: $0, as: UTF8.self).components(separatedBy: "HTTP/1.1 200").count == 3 }
            let text = String(decoding: two, as: UTF8.self)
            #expect(!text.contains("101"), "\(text)")
            #expect(text.contains("\"status\":\"ok\""))
            #expect(text.contains("BadDeviceToken"))
            try await client.send(Array("GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".utf8))
            let outcome = await client.waitForClose()
            #expect(String(decoding: outcome.received, as: UTF8.self).contains("HTTP/1.1 200"))
        }
    }

    /// While the answer to an upgrade request is pending, the connection is still read (a client
    /// that leaves is seen), and one that sends more than a client waiting would is closed rather
    /// than buffered without bound.
    @Test func bytesPilingUpBehindAnUpgradeRequestAreBounded() async throws {
        try await MockHarness.withRunningMock { mock in
            let client = try await RawClient.connect(port: mock.adminPort, security: .plaintext)
            try await client.send(Array(("GET /v1/notifications/wait?timeout=60 HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                + "Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n").utf8))
            try await Task.sleep(for: .milliseconds(200))
            for _ in 0..<8 {
                try? await client.send([UInt8](repeating: UInt8(ascii: "a"), count: 16 * 1024))
            }
            let outcome = await client.waitForClose(timeout: .seconds(10))
            #expect(outcome.closed, "the connection was kept with 128 KiB behind a pending answer")
        }
    }
}

import APNSMock
import APNSMockCore
import APNSMockTesting
import Foundation
import NIOCore
import Testing

/// Clients that misbehave, one way per test. After each, the same server must still answer a
/// normal request with 200.
@Suite("Hostile and unusual clients", .timeLimit(.minutes(2)))
struct HostileClientTests {
    @Test func clientWithoutALPNIsServedAsH2() async throws {
        try await MockHarness.withRunningMock { mock in
            let client = try await RawClient.connect(port: mock.apnsPort, security: .tls(caPath: mock.caPath, alpn: []))
            try await client.send(H2.preface + H2.settings() + H2.request(stream: 1, token: Pushes.token, body: Pushes.body))
            let received = await client.waitUntil { Hostile.hasResponse(H2.parse($0), stream: 1) }
            let response = try #require(H2.parse(received).first { $0.type == H2.FrameType.headers.rawValue && $0.stream == 1 })
            // HPACK static table index 8 is ":status: 200".
            #expect(response.payload.first == 0x88)
            await client.close()
            try await Hostile.expectStillServing(mock)
        }
    }

    @Test func clientOfferingOnlyHTTP11IsRefused() async throws {
        try await MockHarness.withRunningMock { mock in
            let output = try await ExternalTool.run("curl", [
                "-sS", "--http1.1", "--cacert", mock.caPath, "-d", "{}", "\(mock.baseURL)/3/device/\(Pushes.token)",
            ])
            // 35: TLS handshake failed; the server sent the no_application_protocol alert.
            #expect(output.exitCode == 35)
            #expect(output.stderr.contains("no application protocol"))

            let client = try await RawClient.connect(port: mock.apnsPort, security: .tls(caPath: mock.caPath, alpn: ["http/1.1"]))
            let outcome = await client.waitForClose()
            #expect(outcome.closed)
            #expect(outcome.error?.contains("NO_APPLICATION_PROTOCOL") == true || outcome.error?.lowercased().contains("alert") == true)
            try await Hostile.expectStillServing(mock)
        }
    }

    @Test func garbageInsteadOfAHandshakeIsClosed() async throws {
        try await MockHarness.withRunningMock { mock in
            let client = try await RawClient.connect(port: mock.apnsPort, security: .plaintext)
            var generator = SystemRandomNumberGenerator()
            try await client.send((0..<4096).map { _ in UInt8.random(in: 0...255, using: &generator) })
            let outcome = await client.waitForClose()
            #expect(outcome.closed)
            try await Hostile.expectStillServing(mock)
        }
    }

    @Test func plaintextHTTP11RequestIsClosed() async throws {
        try await MockHarness.withRunningMock { mock in
            let client = try await RawClient.connect(port: mock.apnsPort, security: .plaintext)
            try await client.send(Array("POST /3/device/\(Pushes.token) HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2\r\n\r\n{}".utf8))
            let outcome = await client.waitForClose()
            #expect(outcome.closed)
            // Whatever came back is a TLS alert record (content type 21), never an HTTP answer.
            #expect(outcome.received.first == nil || outcome.received.first == 21)
            try await Hostile.expectStillServing(mock)
        }
    }

    @Test func clientDisconnectingMidStream() async throws {
        try await MockHarness.withRunningMock { mock in
            for _ in 0..<3 {
                let client = try await RawClient.connect(port: mock.apnsPort, security: .tls(caPath: mock.caPath, alpn: ["h2"]))
                let headers = H2.headers(stream: 1, [
                    (":method", "POST"), (":scheme", "https"), (":path", "/3/device/\(Pushes.token)"), (":authority", "localhost"), ("apns-topic", "com.example.app"),
                ], endStream: false)
                try await client.send(H2.preface + H2.settings() + headers + H2.data(stream: 1, Array(Pushes.body.prefix(5)), endStream: false))
                await client.close()
            }
            try await Hostile.expectStillServing(mock)
            try await Self.expectConnectionsClosed(mock)
        }
    }

    @Test func disconnectDuringHandshake() async throws {
        try await MockHarness.withRunningMock { mock in
            let client = try await RawClient.connect(port: mock.apnsPort, security: .plaintext)
            // The first bytes of a TLS 1.2 ClientHello record, then nothing.
            try await client.send([0x16, 0x03, 0x01, 0x02, 0x00, 0x01])
            await client.close()
            try await Hostile.expectStillServing(mock)
            try await Self.expectConnectionsClosed(mock)
        }
    }

    /// Every connection the clients left is counted closed within five seconds: a connection the
    /// mock kept counting would hold a place of `server.maxConnections` for good.
    static func expectConnectionsClosed(_ mock: RunningMock, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let deadline = ContinuousClock.now + .seconds(5)
        while mock.listener.openConnections > 0, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(mock.listener.openConnections == 0, "open connections: \(mock.listener.openConnections)", sourceLocation: sourceLocation)
    }

    @Test func oversizedHeaderListIsAnswered431() async throws {
        // Two streams before the first response: allowed more than APNs' one pre-auth stream.
        try await MockHarness.withRunningMock(configure: { $0.http2.streamsBeforeAuthentication = 10 }) { mock in
            let client = try await RawClient.connect(port: mock.apnsPort, security: .tls(caPath: mock.caPath, alpn: ["h2"]))
            let huge = H2.request(stream: 1, token: Pushes.token, extra: [("x-filler", String(repeating: "x", count: 9000))], body: Pushes.body)
            let normal = H2.request(stream: 3, token: Pushes.token, body: Pushes.body)
            try await client.send(H2.preface + H2.settings() + huge + normal)
            let received = await client.waitUntil { Hostile.hasResponse(H2.parse($0), stream: 3) }
            let frames = H2.parse(received)
            #expect(!frames.contains { $0.type == H2.FrameType.rstStream.rawValue && $0.stream == 1 })
            #expect(Hostile.hasResponse(frames, stream: 1))
            #expect(Hostile.hasResponse(frames, stream: 3))
            // curl reads it as HTTP's own "too large".
            let curl = try await ExternalTool.run("curl", [
                "-sS", "--http2", "--cacert", mock.caPath, "--max-time", "20", "-o", "/dev/null", "-w", "%{http_code}",
                "-H", "x-filler: \(String(repeating: "x", count: 9000))", "-d", "{}", "\(mock.baseURL)/3/device/\(Pushes.token)",
            ])
            #expect(curl.text == "431", "\(curl.text) \(curl.stderr)")
            await client.close()
            try await Hostile.expectStillServing(mock)
        }
    }

    @Test func protocolViolationGetsGoAwayAndClose() async throws {
        try await MockHarness.withRunningMock { mock in
            let client = try await RawClient.connect(port: mock.apnsPort, security: .tls(caPath: mock.caPath, alpn: ["h2"]))
            // DATA on stream 0 is a connection error (PROTOCOL_ERROR).
            try await client.send(H2.preface + H2.settings() + H2.frame(.data, stream: 0, payload: [1, 2, 3]))
            let outcome = await client.waitForClose()
            #expect(outcome.closed)
            let goaway = H2.parse(outcome.received).compactMap(\.goaway).first
            #expect(goaway?.errorCode == 1)
            try await Hostile.expectStillServing(mock)
        }
    }

    @Test func badClientPrefaceIsClosed() async throws {
        try await MockHarness.withRunningMock { mock in
            let client = try await RawClient.connect(port: mock.apnsPort, security: .tls(caPath: mock.caPath, alpn: ["h2"]))
            try await client.send(Array("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n".utf8))
            let outcome = await client.waitForClose()
            #expect(outcome.closed)
            try await Hostile.expectStillServing(mock)
        }
    }

    @Test func errorsDoNotEndTheConnection() async throws {
        // Two streams before the first response: allowed more than APNs' one pre-auth stream.
        try await MockHarness.withRunningMock(configure: { $0.http2.streamsBeforeAuthentication = 10 }) { mock in
            let client = try await RawClient.connect(port: mock.apnsPort, security: .tls(caPath: mock.caPath, alpn: ["h2"]))
            let bad = H2.request(stream: 1, token: "zz", body: Pushes.body)
            let good = H2.request(stream: 3, token: Pushes.token, body: Pushes.body)
            try await client.send(H2.preface + H2.settings() + bad + good)
            let received = await client.waitUntil { Hostile.hasResponse(H2.parse($0), stream: 3) }
            let frames = H2.parse(received)
            #expect(Hostile.hasResponse(frames, stream: 1))
            #expect(Hostile.hasResponse(frames, stream: 3))
            #expect(!frames.contains { $0.type == H2.FrameType.goaway.rawValue })
            await client.close()
        }
    }

    @Test func clientThatStopsReadingIsNotBufferedWithoutBound() async throws {
        try await MockHarness.withRunningMock { mock in
            let client = try await RawClient.connect(port: mock.apnsPort, security: .tls(caPath: mock.caPath, alpn: ["h2"]))
            try await client.send(H2.preface + H2.settings())
            _ = await client.waitUntil { H2.parse($0).contains { $0.type == H2.FrameType.settings.rawValue } }
            try await client.stopReading()
            // Requests keep coming, responses are never read. Once the client's socket and the
            // server's output are full, the server must stop reading, so the client's writes back up.
            var sent = 0
            var stream: UInt32 = 1
            let limit = 256 * 1024 * 1024
            var stalled = false
            while sent < limit, !stalled {
                if client.isWritable {
                    var batch: [UInt8] = []
                    for _ in 0..<100 {
                        batch += H2.request(stream: stream, token: Pushes.token, body: Pushes.body)
                        stream += 2
                    }
                    sent += batch.count
                    client.enqueue(batch)
                    await Task.yield()
                } else {
                    // Backed up: a server that still reads drains this within moments.
                    stalled = await !client.waitUntilWritable(timeout: .seconds(2))
                }
            }
            // Loopback socket buffers hold several MiB each way; without back-pressure this reaches `limit`.
            #expect(sent < 64 * 1024 * 1024, "sent \(sent) bytes before the stall")
            #expect(stalled, "the server kept reading \(sent) bytes from a client that reads nothing")
            await client.close()
            try await Hostile.expectStillServing(mock)
        }
    }
}

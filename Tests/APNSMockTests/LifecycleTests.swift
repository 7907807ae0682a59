import APNSMock
import APNSMockCore
import APNSMockTesting
import Foundation
import NIOCore
import Testing

@Suite("Connection lifecycle: idle timeout, graceful shutdown", .timeLimit(.minutes(2)))
struct LifecycleTests {
    static let token = String(repeating: "ab", count: 32)
    static let body = Array(#"{"aps":{"alert":"hello"}}"#.utf8)

    @Test func idleConnectionGetsGoAwayIdleTimeout() async throws {
        try await MockHarness.withRunningMock(configure: { $0.idleTimeout = .milliseconds(500) }) { mock in
            let client = try await RawClient.connect(port: mock.apnsPort, security: .tls(caPath: mock.caPath, alpn: ["h2"]))
            // On a loaded machine the server may already have given up before this is sent; the
            // GOAWAY below is what matters.
            try? await client.send(H2.preface + H2.settings())
            let outcome = await client.waitForClose()
            #expect(outcome.closed)
            let goaway = try #require(H2.parse(outcome.received).compactMap(\.goaway).first)
            #expect(goaway.errorCode == 0)
            #expect(goaway.debug == #"{"reason":"IdleTimeout"}"#)
        }
    }

    @Test func shutdownSendsGoAwayAndFinishesInFlightRequests() async throws {
        try await MockHarness.withRunningMock { mock in
            let client = try await RawClient.connect(port: mock.apnsPort, security: .tls(caPath: mock.caPath, alpn: ["h2"]))
            let headers = H2.headers(stream: 1, [
                (":method", "POST"), (":scheme", "https"), (":path", "/3/device/\(Self.token)"), (":authority", "localhost"),
                ("apns-topic", "com.example.app"), ("authorization", Curl.demoAuthorization ?? ""),
            ], endStream: false)
            try await client.send(H2.preface + H2.settings() + headers)
            // The server acknowledges the client's SETTINGS after processing the bytes that came
            // with them, HEADERS included: then it has the stream.
            _ = await client.waitUntil { H2.parse($0).contains { $0.type == H2.FrameType.settings.rawValue && $0.flags & H2.ack != 0 } }

            async let stopped: Void = mock.listener.shutdown()
            let beforeFinish = await client.waitUntil { bytes in H2.parse(bytes).contains { $0.goaway != nil } }
            let goaway = try #require(H2.parse(beforeFinish).compactMap(\.goaway).first)
            #expect(goaway.errorCode == 0)
            #expect(goaway.debug == #"{"reason":"Shutdown"}"#)
            #expect(goaway.lastStream == 1)

            // The in-flight request still gets its answer after GOAWAY.
            try await client.send(H2.data(stream: 1, Self.body, endStream: true))
            let outcome = await client.waitForClose()
            #expect(outcome.closed)
            let response = H2.parse(outcome.received).first { $0.type == H2.FrameType.headers.rawValue && $0.stream == 1 }
            #expect(response?.payload.first == 0x88)
            await stopped
            #expect(mock.listener.openConnections == 0)
        }
    }

    /// Every TLS listener hears about the shutdown, not only the first one bound: a connection on
    /// each channel-management listener gets GOAWAY Shutdown too, and is closed within the grace
    /// period rather than cut off when the event loops stop.
    @Test func shutdownReachesEveryListener() async throws {
        // A long grace period: a connection nobody told to go away keeps the shutdown waiting for
        // all of it, where told ones close at once (well under a second idle; a few on a loaded CI).
        try await MockHarness.withRunningMock(configure: { $0.shutdownGracePeriod = .seconds(40) }) { mock in
            var clients: [RawClient] = []
            for port in [mock.apnsPort, mock.channelManagementPort(.sandbox), mock.channelManagementPort(.production)] {
                let client = try await RawClient.connect(port: port, security: .tls(caPath: mock.caPath, alpn: ["h2"]))
                try await client.send(H2.preface + H2.settings())
                _ = await client.waitUntil { H2.parse($0).contains { $0.type == H2.FrameType.settings.rawValue } }
                clients.append(client)
            }
            let started = ContinuousClock.now
            await mock.listener.shutdown()
            #expect(ContinuousClock.now - started < .seconds(20), "the shutdown waited out its grace period")
            for (index, client) in clients.enumerated() {
                let outcome = await client.waitForClose(timeout: .seconds(5))
                #expect(outcome.closed)
                let goaway = H2.parse(outcome.received).compactMap(\.goaway).first
                #expect(goaway?.debug == #"{"reason":"Shutdown"}"#, "listener \(index) sent no GOAWAY Shutdown")
            }
        }
    }

    @Test func handshakeThatNeverCompletesIsClosed() async throws {
        try await MockHarness.withRunningMock(configure: { $0.handshakeTimeout = .milliseconds(300) }) { mock in
            let client = try await RawClient.connect(port: mock.apnsPort, security: .plaintext)
            let outcome = await client.waitForClose(timeout: .seconds(5))
            #expect(outcome.closed)
        }
    }
}

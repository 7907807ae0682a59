@testable import APNSMock
import APNSMockCore
import APNSMockTesting
import Foundation
import NIOCore
import Testing

/// Clients that hold a connection open without finishing anything: a request whose
/// body never comes, a response the client never takes, a preface never sent. Every hostile case
/// of the suite ends as ``Hostile/expectHealthy(_:residentBefore:allowanceMiB:sourceLocation:)``
/// says: a normal request on a new connection gets 200 and resident memory is back within bounds.
@Suite("Clients that hold a connection", .timeLimit(.minutes(2)))
struct HostileTimeoutTests {
    /// Short stream timeouts for the stuck-stream cases.
    static let shortTimeouts = "server: { requestTimeout: 1, responseTimeout: 1 }\n"

    // MARK: Stuck streams

    /// A request that declares a body and never sends it: the connection gets GOAWAY IdleTimeout
    /// and is closed after requestTimeout, whatever idleTimeout says.
    @Test func declaredBodyThatNeverArrivesEndsTheConnection() async throws {
        try await ServerProcess.withRunning(yaml: Self.shortTimeouts) { mock in
            let before = mock.residentKiB
            let client = try await Hostile.tlsClient(mock)
            try await client.send(
                H2.preface + H2.settings() + H2.headers(stream: 1, Hostile.postHeaders + [("content-length", "100")], endStream: false)
                    + H2.data(stream: 1, Array(repeating: 0x20, count: 10), endStream: false))
            let outcome = await client.waitForClose(timeout: .seconds(8))
            #expect(outcome.closed)
            let goaway = H2.parse(outcome.received).compactMap(\.goaway).first
            #expect(goaway?.debug == #"{"reason":"IdleTimeout"}"#)
            try await Hostile.expectHealthy(mock, residentBefore: before)
        }
    }

    /// A response stuck behind a zero flow-control window (SETTINGS_INITIAL_WINDOW_SIZE 0; an
    /// error answer has a body): GOAWAY IdleTimeout and close after responseTimeout.
    @Test func responseStuckBehindAZeroWindowEndsTheConnection() async throws {
        try await ServerProcess.withRunning(yaml: Self.shortTimeouts) { mock in
            let before = mock.residentKiB
            let client = try await Hostile.tlsClient(mock)
            // BadDeviceToken: 400 with a JSON body, which the window holds back.
            try await client.send(
                H2.preface + H2.settings([(0x4, 0)]) + H2.request(stream: 1, token: "zz", body: Pushes.body))
            let outcome = await client.waitForClose(timeout: .seconds(8))
            #expect(outcome.closed)
            let frames = H2.parse(outcome.received)
            #expect(Hostile.hasResponse(frames, stream: 1))
            #expect(!frames.contains { $0.type == H2.FrameType.data.rawValue && $0.stream == 1 })
            #expect(frames.compactMap(\.goaway).first?.debug == #"{"reason":"IdleTimeout"}"#)
            try await Hostile.expectHealthy(mock, residentBefore: before)
        }
    }

    /// TLS completes but the HTTP/2 preface never comes: closed after handshakeTimeout.
    @Test func connectionThatNeverSendsThePrefaceIsClosed() async throws {
        try await ServerProcess.withRunning(yaml: "server: { handshakeTimeout: 1 }\n") { mock in
            let before = mock.residentKiB
            let client = try await Hostile.tlsClient(mock)
            let outcome = await client.waitForClose(timeout: .seconds(8))
            #expect(outcome.closed)
            try await Hostile.expectHealthy(mock, residentBefore: before)
        }
    }

    /// An answer held back on purpose (a fault's delay) is exempt: the stream outlives both the
    /// response timeout and the idle timeout and gets its answer.
    @Test func deliberatelyDelayedAnswerIsNotAStuckStream() async throws {
        try await MockHarness.withRunningMock(configure: {
            // The delay is three times every timeout; the timeouts leave a test process that
            // stalls under the whole suite time to send its request.
            $0.requestTimeout = .seconds(2)
            $0.responseTimeout = .seconds(2)
            $0.idleTimeout = .seconds(2)
        }) { mock in
            let added = try await mock.admin.addFault(json: #"{"match":{"topic":"com.example.app"},"delayMs":6000,"times":1}"#)
            #expect(added.status == 201)
            let client = try await Hostile.tlsClient(mock)
            try await client.send(H2.preface + H2.settings() + H2.request(stream: 1, token: Pushes.token, body: Pushes.body))
            let received = await client.waitUntil(timeout: .seconds(15)) { Hostile.hasResponse(H2.parse($0), stream: 1) }
            let frames = H2.parse(received)
            let response = frames.first { $0.type == H2.FrameType.headers.rawValue && $0.stream == 1 }
            #expect(response?.payload.first == 0x88)
            // No GOAWAY came before the answer.
            let answeredAt = frames.firstIndex { $0.type == H2.FrameType.headers.rawValue && $0.stream == 1 } ?? frames.count
            #expect(!frames.prefix(answeredAt).contains { $0.goaway != nil })
            await client.close()
        }
    }

    /// Connections with a stuck response past their idle timeout are ended, not polled: the old
    /// idle check re-armed a 10 ms timer on every one of them (a stream still open kept it from
    /// closing) and 300 of them cost a core. In a process of their own.
    @Test func stuckConnectionsDoNotSpinTimers() async throws {
        let yaml = "server: { idleTimeout: 1, responseTimeout: 600, requestTimeout: 600 }\n"
        try await ServerProcess.withRunning(yaml: yaml) { server in
            var clients: [RawClient] = []
            for _ in 0..<300 {
                let client = try await RawClient.connect(
                    port: server.apnsPort, security: .tls(caPath: server.certificates.caPath, alpn: ["h2"]))
                // On a loaded machine the server may have ended it already (idle timeout 1 s).
                try? await client.send(H2.preface + H2.settings([(0x4, 0)]) + H2.request(stream: 1, token: "zz", body: Pushes.body))
                clients.append(client)
            }
            // Past the idle timeout; each connection's response is still stuck.
            try await Task.sleep(for: .seconds(2))
            let cpu = try await server.cpuUse(over: .seconds(3))
            #expect(cpu < 0.3, "the process used \(cpu) s of CPU in 3 s with 300 stuck connections")
            for client in clients { await client.close() }
            #expect(server.isAlive)
            let response = try await Curl.send(url: "\(server.baseURL)/3/device/\(Pushes.token)", caPath: server.certificates.caPath)
            #expect(response.status == 200)
        }
    }
}

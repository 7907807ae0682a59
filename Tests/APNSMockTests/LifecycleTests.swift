import APNSMock
import APNSMockCore
import APNSMockTesting
import Foundation
import Logging
import NIOCore
import ServiceLifecycle
import Testing

@Suite("Connection lifecycle: idle timeout, graceful shutdown", .timeLimit(.minutes(2)))
struct LifecycleTests {

    /// The listeners start as peers: one that cannot bind ends the start with its error, naming
    /// the setting, and the listeners that did bind are closed again.
    @Test func aListenerThatCannotBindStopsTheOthers() async throws {
        let taken = try RefusingPort()
        // A port for the APNs listener that no other test's listener can be given meanwhile.
        let reserved = try RefusingPort(sharable: true)
        let apnsPort = reserved.port
        do {
            _ = try await MockHarness.withRunningMock(configure: {
                $0.port = apnsPort
                $0.broadcast.sandboxPort = taken.port
                // The proxy waits for the TLS listeners, and must not end the group early.
                $0.proxy.port = 0
            }) { _ in Issue.record("started with broadcast.sandboxPort taken") }
        } catch let error as ListenerBindError {
            #expect(error.setting == "broadcast.sandboxPort" && error.port == taken.port, "\(error)")
        }
        await #expect(throws: (any Error).self, "the APNs listener still accepts") {
            _ = try await RawClient.connect(port: apnsPort, security: .plaintext)
        }
        withExtendedLifetime((taken, reserved)) {}
    }

    /// `serve`'s way: the mock's services in the caller's service group, stopped by its graceful
    /// shutdown (as SIGTERM does), with every listener named in the listening callback.
    @Test func theServicesRunInTheCallersServiceGroup() async throws {
        var configuration = try MockHarness.configuration()
        configuration.proxy.port = 0
        configuration.threads = 1
        let (announcements, announce) = AsyncStream.makeStream(of: ListenerPorts.self)
        let server = APNSMockServer(
            configuration: configuration, logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }),
            onListening: { announce.yield($0) })
        let group = ServiceGroup(configuration: .init(services: try await server.services(), logger: Logger(label: "test")))
        let running = Task { try await group.run() }
        var iterator = announcements.makeAsyncIterator()
        let ports = try #require(await iterator.next())
        #expect(ports.apns != 0 && ports.broadcastSandbox != 0 && ports.broadcastProduction != 0)
        let adminPort = try #require(ports.admin)
        #expect(ports.proxy != nil)
        let health = try await AdminClient(baseURL: "http://127.0.0.1:\(adminPort)").health()
        #expect(health.status == "ok")
        await group.triggerGracefulShutdown()
        try await running.value
        for port in [ports.apns, ports.broadcastSandbox, adminPort, ports.proxy ?? 0] {
            await #expect(throws: (any Error).self, "port \(port) still accepts") {
                _ = try await RawClient.connect(port: port, security: .plaintext)
            }
        }
    }

    @Test func idleConnectionGetsGoAwayIdleTimeout() async throws {
        // Long enough for the TLS handshake to finish first on a machine loaded by the whole suite
        // (the test takes 12-19 s there): a connection idle during its handshake is closed before
        // HTTP/2 is up, without a GOAWAY (500 ms failed once that way).
        try await MockHarness.withRunningMock(configure: { $0.idleTimeout = .milliseconds(1500) }) { mock in
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
                (":method", "POST"), (":scheme", "https"), (":path", "/3/device/\(Pushes.token)"), (":authority", "localhost"),
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
            try await client.send(H2.data(stream: 1, Pushes.body, endStream: true))
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
    /// Every TLS listener stops accepting and sends GOAWAY at once, although the service group
    /// stops them one after the other: a stream held on the listener stopped first (channel
    /// management, production) does not keep the APNs listener open while it drains.
    @Test func listenersDrainTogether() async throws {
        try await MockHarness.withRunningMock(configure: { $0.shutdownGracePeriod = .seconds(40) }) { mock in
            let rule = try await mock.admin.addFault(json: #"{"match":{"kind":"channel"},"delayMs":10000}"#)
            #expect(rule.status == 201)
            let held = Task {
                try? await BroadcastTests.manage(mock, "GET", path: "/1/apps/\(BroadcastTests.app)/all-channels", environment: .production)
            }
            let deadline = ContinuousClock.now + .seconds(10)
            while try await mock.admin.stats().requests == 0, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(20))
            }
            let apns = try await RawClient.connect(port: mock.apnsPort, security: .tls(caPath: mock.caPath, alpn: ["h2"]))
            try await apns.send(H2.preface + H2.settings())
            _ = await apns.waitUntil { H2.parse($0).contains { $0.type == H2.FrameType.settings.rawValue } }
            async let stopped: Void = mock.listener.shutdown()
            // Well before the held answer (10 s) would let the production listener finish draining.
            let outcome = await apns.waitForClose(timeout: .seconds(7))
            #expect(H2.parse(outcome.received).compactMap(\.goaway).first?.debug == #"{"reason":"Shutdown"}"#,
                    "the APNs listener waited for another listener's drain")
            await stopped
            _ = await held.value
        }
    }

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

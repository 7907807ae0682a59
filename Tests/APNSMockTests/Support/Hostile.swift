import APNSMockTesting
import Foundation
import Testing

/// What the hostile-client suites (HostileClientTests, HostileHTTP2Tests, HostileListenerTests,
/// HostileTimeoutTests) and the connection-fault suites share: a device token and payload, the
/// check that a mock still serves, the end of every hostile case (``expectHealthy(_:residentBefore:allowanceMiB:sourceLocation:)``),
/// and raw TLS clients.
enum Hostile {

    /// The server still serves a well-behaved client.
    static func expectStillServing(
        _ mock: RunningMock, token: String = Pushes.token, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let response = try await Curl.send(url: "\(mock.baseURL)/3/device/\(token)", caPath: mock.caPath)
        #expect(response.status == 200, sourceLocation: sourceLocation)
    }

    /// Whether `frames` hold a HEADERS frame answering `stream`.
    static func hasResponse(_ frames: [H2.Frame], stream: UInt32) -> Bool {
        frames.contains { $0.type == H2.FrameType.headers.rawValue && $0.stream == stream }
    }

    /// Resident memory of the mock's process may end this much above where it was before an
    /// attack (MiB): room for what a first use allocates, far below what an unbounded flood or a
    /// burst's retained heap leaves.
    static let residentAllowanceMiB = 48

    /// The end of every hostile case, on a mock in a process of its own (``ServerProcess``), so
    /// that its memory is its own and its death would show: the process is alive, a normal request
    /// on a new connection gets 200, and its resident memory returns within `allowanceMiB` of
    /// `residentBefore` (KiB) within ten seconds.
    static func expectHealthy(
        _ server: ServerProcess, residentBefore: Int, allowanceMiB: Int = residentAllowanceMiB,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        #expect(server.isAlive, "the mock's process died", sourceLocation: sourceLocation)
        let response = try await Curl.send(url: "\(server.baseURL)/3/device/\(Pushes.token)", caPath: server.caPath)
        #expect(response.status == 200, sourceLocation: sourceLocation)
        var resident = server.residentKiB
        let deadline = ContinuousClock.now + .seconds(10)
        while resident > residentBefore + allowanceMiB * 1024, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(200))
            resident = server.residentKiB
        }
        #expect(
            resident <= residentBefore + allowanceMiB * 1024,
            "resident memory \(resident / 1024) MiB, was \(residentBefore / 1024) MiB before the attack",
            sourceLocation: sourceLocation)
    }

    static func tlsClient(_ mock: RunningMock) async throws -> RawClient {
        try await RawClient.connect(port: mock.apnsPort, security: .tls(caPath: mock.caPath, alpn: ["h2"]))
    }

    static func tlsClient(_ server: ServerProcess) async throws -> RawClient {
        try await RawClient.connect(port: server.apnsPort, security: .tls(caPath: server.caPath, alpn: ["h2"]))
    }

    static let postHeaders: [(String, String)] = [
        (":method", "POST"), (":scheme", "https"), (":path", "/3/device/\(Pushes.token)"), (":authority", "localhost"),
        ("apns-topic", "com.example.app"), ("authorization", Curl.demoAuthorization ?? ""),
    ]
}

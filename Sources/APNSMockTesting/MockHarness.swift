import APNSMock
import APNSMockCore
import Foundation
import Logging

/// Runs apns-mock in-process for a test: real TLS and HTTP/2 on a free port of 127.0.0.1, with
/// test certificates generated once per process.
///
/// ```swift
/// try await MockHarness.withRunningMock { mock in
///     // point the client under test at 127.0.0.1:\(mock.apnsPort), trusting mock.caPath
/// }
/// ```
public enum MockHarness {
    /// Certificates shared by every mock a test process starts: generating a CA and keys once
    /// keeps tests fast, and every mock trusts the same CA.
    public static func sharedCertificates() throws -> TestCertificates {
        try certificates.get()
    }

    private static let certificates: Result<TestCertificates, any Error> = Result {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("apns-mock-tests-\(ProcessInfo.processInfo.processIdentifier)").path
        let material = TestCertificates(
            directory: directory,
            apps: [.init(bundleID: "com.example.app", teamID: "DEMOTEAM01")],
            tokenKeys: [.init(keyID: "DEMOKEY001", teamID: "DEMOTEAM01", path: "AuthKey_DEMOKEY001.p8")])
        try material.ensure()
        return material
    }

    /// The team every harness mock knows: the demo team with its key file in the shared material.
    public static func demoTeam() throws -> Configuration.Team {
        let material = try sharedCertificates()
        var team = Configuration.Team.demo
        team.keys = [Configuration.Key(keyId: "DEMOKEY001", path: material.tokenKeyPath(material.tokenKeys[0]))]
        return team
    }

    /// A provider token of the demo team and key, signed once per test process (so that
    /// connections reuse one token, as providers do). Valid for the hour after the process starts.
    public static func demoToken() throws -> String {
        try token.get()
    }

    private static let token: Result<String, any Error> = Result {
        let material = try sharedCertificates()
        let pem = try String(contentsOfFile: material.tokenKeyPath(material.tokenKeys[0]), encoding: .utf8)
        return try ProviderTokenSigner.token(
            keyPEM: pem, teamID: "DEMOTEAM01", keyID: "DEMOKEY001", issuedAt: Int(Date().timeIntervalSince1970))
    }

    /// The settings ``withRunningMock(configure:logger:_:)`` starts from: every listener on a free
    /// port of 127.0.0.1, two event-loop threads, the shared test certificates, the demo team with
    /// its generated key, and a 5-second grace period. For a test that runs the mock's services
    /// itself (``APNSMockServer/services()``).
    public static func configuration() throws -> ServerConfiguration {
        let material = try sharedCertificates()
        var configuration = ServerConfiguration()
        configuration.port = 0
        configuration.admin.port = 0
        configuration.broadcast.sandboxPort = 0
        configuration.broadcast.productionPort = 0
        configuration.threads = 2
        configuration.certificatePath = material.serverCertificatePath
        configuration.privateKeyPath = material.serverKeyPath
        configuration.clientCAPath = material.caPath
        configuration.shutdownGracePeriod = .seconds(5)
        configuration.teams = [try demoTeam()]
        return configuration
    }

    /// Starts a mock on port 0, runs `body`, then shuts the mock down gracefully (also when
    /// `body` throws).
    public static func withRunningMock<T>(
        configure: (inout ServerConfiguration) -> Void = { _ in },
        logger: Logger = Logger(label: "apns-mock-test", factory: { _ in SwiftLogNoOpLogHandler() }),
        _ body: (RunningMock) async throws -> T
    ) async throws -> T {
        let material = try sharedCertificates()
        var configuration = try Self.configuration()
        configure(&configuration)
        let listener = try await APNSMockServer(configuration: configuration, logger: logger).start()
        let mock = RunningMock(listener: listener, certificates: material)
        do {
            let result = try await body(mock)
            await listener.shutdown()
            return result
        } catch {
            await listener.shutdown()
            throw error
        }
    }
}

/// A mock started by ``MockHarness``.
public struct RunningMock: Sendable {
    public let listener: RunningAPNSMock
    public let certificates: TestCertificates

    /// The APNs listener's port on 127.0.0.1.
    public var apnsPort: Int { listener.port }
    /// The channel-management listener's port of `environment` on 127.0.0.1.
    public func channelManagementPort(_ environment: APNSEnvironment) -> Int {
        environment == .sandbox ? listener.broadcastSandboxPort : listener.broadcastProductionPort
    }
    /// The CA a client must trust to talk to this mock.
    public var caPath: String { certificates.caPath }
    /// `https://localhost:<port>` — `localhost` is among the server certificate's names.
    public var baseURL: String { "https://localhost:\(apnsPort)" }
    /// The admin and query listener's port on 127.0.0.1 (plain HTTP/1.1).
    public var adminPort: Int { listener.adminPort }
    /// `http://127.0.0.1:<adminPort>`.
    public var adminURL: String { "http://127.0.0.1:\(adminPort)" }
    /// A typed client of this mock's query and admin API.
    public var admin: AdminClient { AdminClient(baseURL: adminURL) }
}

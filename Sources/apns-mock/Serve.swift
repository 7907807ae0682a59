import APNSMock
import APNSMockCore
import ArgumentParser
import Foundation
import Logging
import NIOCore
import ServiceLifecycle

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the mock: the APNs listener (TLS, HTTP/2) and the admin listener.")

    @Option(help: "Configuration file (YAML).")
    var config: String?

    @Option(help: "APNs listener address (default 127.0.0.1).")
    var host: String?

    @Option(help: "APNs listener port; 0 picks a free one (default 2197).")
    var port: Int?

    @Option(help: "Admin listener address (default 127.0.0.1).")
    var adminHost: String?

    @Option(help: "Admin listener port; 0 picks a free one (default 2198).")
    var adminPort: Int?

    @Option(help: "Directory of certificates and keys; missing ones are created (default ./certs).")
    var certs: String?

    @Option(help: "Environment of requests whose host names none: sandbox or production.")
    var environment: APNSEnvironment?

    @Option(help: "Event-loop threads serving APNs connections (default: the number of cores).")
    var threads: Int?

    @OptionGroup var logging: LoggingOptions

    func validate() throws {
        if let port, !(0...65535).contains(port) { throw ValidationError("--port must be between 0 and 65535") }
        if let adminPort, !(0...65535).contains(adminPort) { throw ValidationError("--admin-port must be between 0 and 65535") }
        if let threads, threads < 1 { throw ValidationError("--threads must be at least 1") }
    }

    func run() async throws {
        let logger = logging.bootstrap()
        let certsDirectory = certs ?? "certs"
        var server = ServerConfiguration()
        if let host { server.host = host }
        if let port { server.port = port }
        if let threads { server.threads = threads }
        if let environment { server.environment = environment }
        server.certificatePath = certsDirectory + "/server.pem"
        server.privateKeyPath = certsDirectory + "/server-key.pem"
        server.clientCAPath = certsDirectory + "/ca.pem"

        let demo = DemoIdentity.default
        let material = TestCertificates(
            directory: certsDirectory,
            apps: [.init(bundleID: demo.bundleID, teamID: demo.teamID)],
            tokenKeys: [.init(keyID: demo.keyID, teamID: demo.teamID, path: "AuthKey_\(demo.keyID).p8")])
        try material.ensure(logger: logger)

        let environmentName = server.environment
        let apns = APNSMockServer(configuration: server, logger: logger) { listener in
            Console.line("apns-mock listening apns=\(listener.port) admin=\(adminPort ?? 2198)")
            Banner.print(material: material, demo: demo, port: listener.port, environment: environmentName)
        }
        let group = ServiceGroup(
            configuration: .init(
                services: [.init(service: apns)],
                gracefulShutdownSignals: [.sigterm, .sigint],
                logger: logger))
        try await group.run()
    }
}

/// The demo team, key and app every fresh checkout gets, so the first `curl` works.
struct DemoIdentity {
    var teamID: String
    var keyID: String
    var bundleID: String

    static let `default` = DemoIdentity(teamID: "DEMOTEAM01", keyID: "DEMOKEY001", bundleID: "com.example.app")
}

/// What `serve` tells a newcomer on start: where the material is, and a request that works.
enum Banner {
    static func print(material: TestCertificates, demo: DemoIdentity, port: Int, environment: APNSEnvironment) {
        let keyPath = material.tokenKeyPath(.init(keyID: demo.keyID, teamID: demo.teamID, path: "AuthKey_\(demo.keyID).p8"))
        let token = (try? String(contentsOfFile: keyPath, encoding: .utf8)).flatMap {
            try? ProviderTokenSigner.token(
                keyPEM: $0, teamID: demo.teamID, keyID: demo.keyID, issuedAt: Int(Date().timeIntervalSince1970))
        }
        let token64 = String(repeating: "ab", count: 32)
        var lines = [
            "CA certificate:   \(material.caPath)   (trust it in your client)",
            "demo token key:   \(keyPath)   team \(demo.teamID), key ID \(demo.keyID)",
            "client cert auth: \(material.clientCertificatePaths(for: demo.bundleID).certificate)",
            "default environment: \(environment.rawValue)",
            "try it:",
        ]
        var curl = "  curl --http2 --cacert \(material.caPath) -i"
        if let token {
            curl += " -H 'authorization: bearer \(token)'"
        }
        curl += " -H 'apns-topic: \(demo.bundleID)' -H 'apns-push-type: alert'"
        curl += #" -d '{"aps":{"alert":"hello"}}'"#
        curl += " https://localhost:\(port)/3/device/\(token64)"
        lines.append(curl)
        for line in lines {
            Console.line(line)
        }
    }
}

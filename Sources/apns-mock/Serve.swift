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

    @Option(help: "Channel-management listeners' address (default 127.0.0.1).")
    var broadcastHost: String?

    @Option(help: "Channel-management listener port, sandbox; 0 picks a free one (default 2195).")
    var broadcastSandboxPort: Int?

    @Option(help: "Channel-management listener port, production; 0 picks a free one (default 2196).")
    var broadcastProductionPort: Int?

    @Option(help: "Directory of certificates and keys; missing ones are created (default ./certs).")
    var certs: String?

    @Option(help: "Environment of requests whose host names none: sandbox or production.")
    var environment: APNSEnvironment?

    @Option(help: "Serve a TLS trust scenario instead of the normal certificate: expired, wrong-host or new-root.")
    var tlsScenario: Configuration.TLSScenario?

    @Option(help: "Event-loop threads serving APNs connections (default: the number of cores).")
    var threads: Int?

    @Option(help: "Records kept for the query API; 0 turns recording off (default 100000).")
    var recordingCapacity: Int?

    @Option(help: "Seed for fault rules' probability, for reproducible runs.")
    var faultSeed: UInt64?

    @OptionGroup var logging: LoggingOptions

    func validate() throws {
        if let port, !(0...65535).contains(port) { throw ValidationError("--port must be between 0 and 65535") }
        if let adminPort, !(0...65535).contains(adminPort) { throw ValidationError("--admin-port must be between 0 and 65535") }
        for (name, port) in [("--broadcast-sandbox-port", broadcastSandboxPort), ("--broadcast-production-port", broadcastProductionPort)] {
            if let port, !(0...65535).contains(port) { throw ValidationError("\(name) must be between 0 and 65535") }
        }
        if let threads, threads < 1 { throw ValidationError("--threads must be at least 1") }
        if let recordingCapacity, !(0...Configuration.Recording.maxCapacity).contains(recordingCapacity) {
            throw ValidationError("--recording-capacity must be 0 to \(Configuration.Recording.maxCapacity)")
        }
    }

    func run() async throws {
        let logger = logging.bootstrap()
        var file = try ConfigurationFile.load(config, logger: logger)
        // Command-line options override the file.
        if let host { file.server.host = host }
        if let port { file.server.port = port }
        if let adminHost { file.admin.host = adminHost }
        if let adminPort { file.admin.port = adminPort }
        if let broadcastHost { file.broadcast.host = broadcastHost }
        if let broadcastSandboxPort { file.broadcast.sandboxPort = broadcastSandboxPort }
        if let broadcastProductionPort { file.broadcast.productionPort = broadcastProductionPort }
        if let environment { file.environment = environment }
        if let certs {
            file.tls.certificate = certs + "/server.pem"
            file.tls.privateKey = certs + "/server-key.pem"
            file.tls.clientCA = certs + "/ca.pem"
        }
        var server = ServerConfiguration(file)
        if let threads { server.threads = threads }
        if let recordingCapacity { server.recordingCapacity = recordingCapacity }
        if let faultSeed { server.faultSeed = faultSeed }
        do {
            // The APNs listener's threads plus the admin listener's (one per core).
            try DescriptorBudget.apply(
                to: &server, file: file, threads: server.threads + System.coreCount, source: config ?? "configuration",
                logger: logger)
        } catch {
            logger.error("\(error)")
            throw ExitCode(2)
        }

        let material = ConfigurationFile.material(for: file, directory: certs)
        do {
            try material.ensure(logger: logger, tokenKeys: .atDefaultPaths)
        } catch {
            logger.error("cannot create the certificate material in \(material.directory): \(error)")
            throw ExitCode(1)
        }
        if let tlsScenario { file.tls.scenario = tlsScenario }
        if file.tls.scenario != .standard {
            // A trust scenario replaces the server certificate on every listener (docs/configuration.md).
            let paths = material.serverPaths(for: file.tls.scenario)
            server.certificatePath = paths.certificate
            server.privateKeyPath = paths.key
            logger.warning(
                "serving the \(file.tls.scenario.rawValue) TLS trust scenario",
                metadata: ["certificate": "\(paths.certificate)"])
        }

        // Key files as `certs init` placed them (relative paths land in the certificate directory).
        server.teams = file.teams.map { team in
            var team = team
            team.keys = team.keys.map { key in
                var key = key
                key.path = material.tokenKeyPath(.init(keyID: key.keyId, teamID: team.teamId, path: key.path))
                return key
            }
            return team
        }
        do {
            _ = try TokenKeys.load(server.teams)
        } catch {
            logger.error("\(config ?? "configuration"): \(error)")
            throw ExitCode(2)
        }

        let demo = file.teams.first.flatMap { team in
            team.keys.first.map { key in
                DemoIdentity(teamID: team.teamId, keyID: key.keyId, bundleID: team.apps.first ?? "com.example.app", keyPath: material.tokenKeyPath(.init(keyID: key.keyId, teamID: team.teamId, path: key.path)))
            }
        }
        let environmentName = server.environment
        let apns = APNSMockServer(configuration: server, logger: logger) { listener in
            Console.line(
                "apns-mock listening apns=\(listener.port) admin=\(listener.adminPort)"
                    + " broadcast-sandbox=\(listener.broadcastSandboxPort) broadcast-production=\(listener.broadcastProductionPort)")
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

/// The team, key and app the banner's example request uses: the configuration's first team and
/// key (on the defaults, DEMOTEAM01 / DEMOKEY001 / com.example.app).
struct DemoIdentity {
    var teamID: String
    var keyID: String
    var bundleID: String
    var keyPath: String

    static let `default` = DemoIdentity(
        teamID: "DEMOTEAM01", keyID: "DEMOKEY001", bundleID: "com.example.app", keyPath: "certs/AuthKey_DEMOKEY001.p8")
}

/// What `serve` tells a newcomer on start: where the material is, and a request that works.
enum Banner {
    static func print(material: TestCertificates, demo: DemoIdentity?, port: Int, environment: APNSEnvironment) {
        var lines = ["CA certificate:   \(material.caPath)   (trust it in your client)"]
        var curl = "  curl --http2 --cacert \(material.caPath) -i"
        if let demo {
            lines.append("token key:        \(demo.keyPath)   team \(demo.teamID), key ID \(demo.keyID)")
            lines.append("client cert auth: \(material.clientCertificatePaths(for: demo.bundleID).certificate)")
            let token = (try? String(contentsOfFile: demo.keyPath, encoding: .utf8)).flatMap {
                try? ProviderTokenSigner.token(
                    keyPEM: $0, teamID: demo.teamID, keyID: demo.keyID, issuedAt: Int(Date().timeIntervalSince1970))
            }
            if let token {
                curl += " -H 'authorization: bearer \(token)'"
            }
        }
        lines.append("default environment: \(environment.rawValue)")
        lines.append("try it:")
        curl += " -H 'apns-topic: \(demo?.bundleID ?? "com.example.app")' -H 'apns-push-type: alert'"
        curl += #" -d '{"aps":{"alert":"hello"}}'"#
        curl += " https://localhost:\(port)/3/device/\(String(repeating: "ab", count: 32))"
        lines.append(curl)
        for line in lines {
            Console.line(line)
        }
    }
}

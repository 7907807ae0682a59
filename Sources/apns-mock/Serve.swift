import APNSMock
import APNSMockCommandLine
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

    @Option(name: .customLong("additional-port"),
            help: "Another port the APNs listener serves, e.g. Apple's 443 (repeatable; replaces server.additionalPorts).")
    var additionalPorts: [Int] = []

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

    @Option(help: "Port of the HTTP CONNECT proxy listener, which tunnels to Apple's push hosts only, into this mock (off by default; 0 picks a free one).")
    var proxyPort: Int?

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

    /// Checks each option against the range the configuration model gives its field.
    func validate() throws {
        func check(_ value: Int?, _ range: ClosedRange<Int>, _ option: String) throws {
            if let value, !range.contains(value) {
                throw ValidationError("\(option) must be \(range.lowerBound) to \(range.upperBound)")
            }
        }
        try check(port, Configuration.portRange, "--port")
        for port in additionalPorts { try check(port, Configuration.portRange, "--additional-port") }
        try check(adminPort, Configuration.portRange, "--admin-port")
        try check(proxyPort, Configuration.portRange, "--proxy-port")
        try check(broadcastSandboxPort, Configuration.portRange, "--broadcast-sandbox-port")
        try check(broadcastProductionPort, Configuration.portRange, "--broadcast-production-port")
        try check(threads, Configuration.threadRange, "--threads")
        try check(recordingCapacity, Configuration.Recording.capacityRange, "--recording-capacity")
    }

    func run() async throws {
        // The environment is read before logging starts, as it may set the log level; its
        // problems are reported once logging runs.
        let variables = try? EnvironmentVariables(ProcessInfo.processInfo.environment)
        let logger = logging.bootstrap(environment: variables)
        let environment = try ConfigurationFile.environment(logger: logger)
        let source = config ?? environment["APNS_MOCK_CONFIG"]
            ?? (environment["APNS_MOCK_CONFIG_YAML"] != nil ? "APNS_MOCK_CONFIG_YAML" : "configuration")
        var file = try ConfigurationFile.load(config, environment: environment, logger: logger)
        // Command-line options override the file and the environment: every source merges into
        // the one configuration model here, and the runtime settings are derived from it below.
        if let host { file.server.host = host }
        if let port { file.server.port = port }
        if !additionalPorts.isEmpty { file.server.additionalPorts = additionalPorts }
        if let threads { file.server.threads = threads }
        if let adminHost { file.admin.host = adminHost }
        if let adminPort { file.admin.port = adminPort }
        if let broadcastHost { file.broadcast.host = broadcastHost }
        if let broadcastSandboxPort { file.broadcast.sandboxPort = broadcastSandboxPort }
        if let broadcastProductionPort { file.broadcast.productionPort = broadcastProductionPort }
        if let proxyPort { file.proxy.port = proxyPort }
        if let environment = self.environment { file.environment = environment }
        if let recordingCapacity { file.recording.capacity = recordingCapacity }
        if let faultSeed { file.faultSeed = faultSeed }
        if let tlsScenario { file.tls.scenario = tlsScenario }
        do {
            try file.checkListenerPorts()
        } catch {
            logger.error("\(error) (after the file, the APNS_MOCK_* variables and the command line)")
            throw ExitCode(2)
        }
        let certs = self.certs ?? environment["APNS_MOCK_CERTS"]
        if let certs {
            file.tls.certificate = certs + "/server.pem"
            file.tls.privateKey = certs + "/server-key.pem"
            file.tls.clientCA = certs + "/ca.pem"
        }
        var server = ServerConfiguration(file)
        do {
            // The APNs listener's threads plus the admin listener's (one per core).
            try DescriptorBudget.apply(
                to: &server, file: file, threads: server.threads + System.coreCount, source: source,
                logger: logger)
        } catch {
            logger.error("\(error)")
            throw ExitCode(2)
        }

        let material = ConfigurationFile.material(for: file, directory: certs, extraHosts: file.tls.hosts)
        server.caCertificatePaths = [material.caPath]
        do {
            try material.ensure(logger: logger, tokenKeys: .atDefaultPaths)
        } catch {
            logger.error("cannot create the certificate material in \(material.directory): \(error)")
            throw ExitCode(1)
        }
        if file.tls.scenario != .standard {
            // A trust scenario replaces the server certificate on every listener (docs/configuration.md).
            let paths = material.serverPaths(for: file.tls.scenario)
            server.certificatePath = paths.certificate
            server.privateKeyPath = paths.key
            if file.tls.scenario == .newRoot {
                server.caCertificatePaths = [material.nextCAPath, material.caPath]
            }
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
            if environment["APNS_MOCK_KEY_PEM"] != nil, error.field == "teams[0].keys[0].pem" {
                logger.error("APNS_MOCK_KEY_PEM: \(error.problem)")
            } else {
                logger.error("\(source): \(error)")
            }
            throw ExitCode(2)
        }

        let demo = server.teams.first.flatMap { team in
            team.keys.first.map { key in
                DemoIdentity(
                    teamID: team.teamId, keyID: key.keyId, bundleID: team.apps.first ?? "com.example.app",
                    keyPath: key.pem == nil ? key.path : nil, keyPEM: key.pem ?? (try? String(contentsOfFile: key.path, encoding: .utf8)))
            }
        }
        let environmentName = server.environment
        let adminHost = server.admin.host
        server.droppedLogLines = { LogSink.standardError.droppedLines }
        let apns = APNSMockServer(configuration: server, logger: logger) { ports in
            Console.line(ListeningLine.text(ports))
            Banner.print(
                material: material, demo: demo, port: ports.apns, environment: environmentName,
                adminURL: ports.admin.map { "http://\(Banner.dialHost(adminHost)):\($0)" })
        }
        do {
            // Every listener and the admin listener are peers in this group (docs/architecture.md,
            // "Lifecycle"); a signal stops them in reverse order.
            let group = ServiceGroup(
                configuration: .init(
                    services: try await apns.services(),
                    gracefulShutdownSignals: [.sigterm, .sigint],
                    logger: logger))
            try await group.run()
        } catch {
            // A listener that cannot bind, most often: said once, with what to do about it.
            logger.error("\(error)")
            throw ExitCode(1)
        }
    }
}

/// The team, key and app the banner's example request uses: the configuration's first team and
/// key (on the defaults, DEMOTEAM01 / DEMOKEY001 / com.example.app).
struct DemoIdentity {
    var teamID: String
    var keyID: String
    var bundleID: String
    /// The key's file; `nil` for an inline key (`pem`, `APNS_MOCK_KEY_PEM`).
    var keyPath: String?
    /// The key's text, when it could be read: the banner signs a token with it if it is private.
    var keyPEM: String?
}

/// The line scripts wait for: every listener's bound port by key (match by key: keys are only
/// ever added).
enum ListeningLine {
    static func text(_ ports: ListenerPorts) -> String {
        "apns-mock listening " + fields(ports, admin: String(ports.admin ?? 0))
    }

    /// `apns=… admin=… broadcast-sandbox=… broadcast-production=…[ apns-additional=…][ proxy=…]`,
    /// with `admin` as the caller spells it (the health summary writes `-` for one not bound).
    static func fields(_ ports: ListenerPorts, admin: String) -> String {
        var line = "apns=\(ports.apns) admin=\(admin)"
            + " broadcast-sandbox=\(ports.broadcastSandbox) broadcast-production=\(ports.broadcastProduction)"
        if !ports.apnsAdditional.isEmpty {
            line += " apns-additional=" + ports.apnsAdditional.map(String.init).joined(separator: ",")
        }
        if let proxy = ports.proxy {
            line += " proxy=\(proxy)"
        }
        return line
    }
}

/// What `serve` tells a newcomer on start: where the material is, and a request that works.
enum Banner {
    static func print(
        material: TestCertificates, demo: DemoIdentity?, port: Int, environment: APNSEnvironment, adminURL: String? = nil
    ) {
        var lines = ["CA certificate:   \(material.caPath)   (trust it in your client)"]
        if let adminURL {
            // In a container the path above is the container's; the CA is served over HTTP too.
            lines.append("CA over HTTP:     \(adminURL)/v1/ca.pem   (admin API and inbox page: \(adminURL)/)")
        }
        var curl = "  curl --http2 --cacert \(material.caPath) -i"
        if let demo {
            lines.append("token key:        \(demo.keyPath ?? "inline PEM")   team \(demo.teamID), key ID \(demo.keyID)")
            lines.append("client cert auth: \(material.clientCertificatePaths(for: demo.bundleID).certificate)")
            let token = demo.keyPEM.flatMap {
                try? ProviderTokenSigner.token(
                    keyPEM: $0, teamID: demo.teamID, keyID: demo.keyID, issuedAt: Int(Date().timeIntervalSince1970))
            }
            if let token {
                curl += " -H 'authorization: bearer \(token)'"
            }
        }
        lines.append("default environment: \(environment.rawValue)")
        let command = commandName()
        let hint = command == "apns-mock" ? "" : "   (scripts/install puts apns-mock on your PATH)"
        lines.append("commands:         \(command) token | \(command) send --device <hex> | \(command) certs init\(hint)")
        lines.append("try it:")
        curl += " -H 'apns-topic: \(demo?.bundleID ?? "com.example.app")' -H 'apns-push-type: alert'"
        curl += #" -d '{"aps":{"alert":"hello"}}'"#
        curl += " https://localhost:\(port)/3/device/\(String(repeating: "ab", count: 32))"
        lines.append(curl)
        for line in lines {
            Console.line(line)
        }
    }

    /// How to run this binary's other commands: `apns-mock` when that name on the PATH is this
    /// very binary, else the binary's own path (`.build/release/apns-mock` from `scripts/run`).
    static func commandName() -> String {
        let running = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().path
        let paths = (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":")
        for directory in paths {
            let candidate = URL(fileURLWithPath: String(directory)).appendingPathComponent("apns-mock")
            if FileManager.default.isExecutableFile(atPath: candidate.path) {
                // The first on the PATH is the one a shell runs.
                return candidate.resolvingSymlinksInPath().path == running ? "apns-mock" : running
            }
        }
        return running
    }

    /// A host a client can dial for a listener bound to `host` (a wildcard means this machine).
    static func dialHost(_ host: String) -> String {
        switch host {
        case "0.0.0.0", "::", "": return "127.0.0.1"
        default: return host.contains(":") ? "[\(host)]" : host
        }
    }
}

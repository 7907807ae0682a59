import APNSMock
import APNSMockCommandLine
import ArgumentParser
import Foundation

struct Certs: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Manage the mock's test certificates.",
        subcommands: [Init.self])

    struct Init: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create the test CA, the server certificate, the demo token key and client certificates (missing files only).")

        @Option(help: "Directory to write to (default ./certs).")
        var dir: String?

        @Option(name: .customLong("host"), help: "Extra host name or IP address for the server certificate (repeatable).")
        var hosts: [String] = []

        @Option(help: "Configuration file: client certificates for its apps, .p8 files for its keys.")
        var config: String?

        @OptionGroup var logging: LoggingOptions

        func run() async throws {
            let logger = logging.bootstrap()
            let configuration = try ConfigurationFile.load(config, logger: logger)
            let material = ConfigurationFile.material(for: configuration, directory: dir, extraHosts: configuration.tls.hosts + hosts)
            let written = try material.ensure(logger: logger)
            if written.isEmpty {
                Console.line("everything in \(material.directory) already exists; nothing written")
            } else {
                written.forEach { Console.line("wrote \($0)") }
            }
        }
    }
}

struct Keys: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Manage token-auth signing keys.",
        subcommands: [New.self])

    struct New: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Write a new P-256 key as AuthKey_<KEYID>.p8.")

        @Option(help: "Team ID the key belongs to (10 characters).")
        var team: String

        @Option(help: "Key ID (10 characters); random when omitted.")
        var keyId: String?

        @Option(help: "Directory to write to.")
        var dir: String = "certs"

        func validate() throws {
            if team.count != 10 { throw ValidationError("--team must be 10 characters, as Apple's team IDs are") }
            if let keyId, keyId.count != 10 { throw ValidationError("--key-id must be 10 characters, as Apple's key IDs are") }
        }

        func run() async throws {
            let keyID = keyId ?? KeyIDs.random()
            let path = (dir as NSString).appendingPathComponent("AuthKey_\(keyID).p8")
            if FileManager.default.fileExists(atPath: path) {
                throw ValidationError("\(path) already exists; choose another --key-id")
            }
            try TestCertificates.writeTokenKey(to: path)
            Console.line("wrote \(path) (team \(team), key ID \(keyID))")
        }
    }
}

struct Token: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print a provider token (JWT, ES256) signed with a .p8 key.",
        discussion: """
            Without --key it signs with the key serve uses: the configuration's first team and key \
            (--config, APNS_MOCK_* variables, the defaults), the key inline (APNS_MOCK_KEY_PEM) or its \
            file in the certificate directory (--certs, APNS_MOCK_CERTS, ./certs) — in a container, \
            `apns-mock token` prints a token the running mock accepts.
            """)

    @Option(help: "The private key file (AuthKey_<KEYID>.p8); default: the configuration's first key.")
    var key: String?

    @Option(help: "Team ID (the token's iss); default with --key: none (required); without: the key's team.")
    var team: String?

    @Option(help: "Key ID (the token's kid); taken from the file name AuthKey_<KEYID>.p8 or the configuration when omitted.")
    var keyId: String?

    @Option(help: "Issued-at time in UNIX seconds (default: now).")
    var iat: Int?

    @Option(help: "Configuration file, to find the key when --key is not given.")
    var config: String?

    @Option(help: "Certificate directory, to find the key when --key is not given (default ./certs).")
    var certs: String?

    func run() async throws {
        let signer = try key.map(fromFile) ?? fromConfiguration()
        let token = try ProviderTokenSigner.token(
            keyPEM: signer.pem, teamID: signer.team, keyID: signer.keyID, issuedAt: iat ?? Int(Date().timeIntervalSince1970))
        Console.line(token)
    }

    private func fromFile(_ key: String) throws -> (pem: String, team: String, keyID: String) {
        guard let team else { throw ValidationError("--team is needed with --key") }
        guard let keyID = keyId ?? KeyIDs.fromFileName(key) else {
            throw ValidationError("--key-id is needed: \(key) is not named AuthKey_<KEYID>.p8")
        }
        do {
            return (try String(contentsOfFile: key, encoding: .utf8), team, keyID)
        } catch {
            throw ValidationError("cannot read --key \(key): \(error.localizedDescription)")
        }
    }

    /// The first team's first key, as `serve` would load it.
    private func fromConfiguration() throws -> (pem: String, team: String, keyID: String) {
        let logger = LoggingOptions.bootstrap(level: .error, format: .text)
        let environment = try ConfigurationFile.environment(logger: logger)
        let configuration = try ConfigurationFile.load(config, environment: environment, logger: logger)
        guard let first = configuration.teams.first, let key = first.keys.first else {
            throw ValidationError("the configuration has no token key: give --key and --team")
        }
        if let pem = key.pem {
            return (pem, team ?? first.teamId, keyId ?? key.keyId)
        }
        let material = ConfigurationFile.material(for: configuration, directory: certs ?? environment["APNS_MOCK_CERTS"])
        let path = material.tokenKeyPath(.init(keyID: key.keyId, teamID: first.teamId, path: key.path))
        guard let pem = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw ValidationError("no key at \(path) (serve creates it on its first start; or give --key)")
        }
        return (pem, team ?? first.teamId, keyId ?? key.keyId)
    }
}

import APNSMock
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
            let material = ConfigurationFile.material(for: configuration, directory: dir, extraHosts: hosts)
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
    static let configuration = CommandConfiguration(abstract: "Print a provider token (JWT, ES256) signed with a .p8 key.")

    @Option(help: "The private key file (AuthKey_<KEYID>.p8).")
    var key: String

    @Option(help: "Team ID (the token's iss).")
    var team: String

    @Option(help: "Key ID (the token's kid); taken from the file name AuthKey_<KEYID>.p8 when omitted.")
    var keyId: String?

    @Option(help: "Issued-at time in UNIX seconds (default: now).")
    var iat: Int?

    func run() async throws {
        guard let keyID = keyId ?? KeyIDs.fromFileName(key) else {
            throw ValidationError("--key-id is needed: \(key) is not named AuthKey_<KEYID>.p8")
        }
        let pem: String
        do {
            pem = try String(contentsOfFile: key, encoding: .utf8)
        } catch {
            throw ValidationError("cannot read --key \(key): \(error.localizedDescription)")
        }
        let token = try ProviderTokenSigner.token(
            keyPEM: pem, teamID: team, keyID: keyID, issuedAt: iat ?? Int(Date().timeIntervalSince1970))
        Console.line(token)
    }
}

enum KeyIDs {
    static func random() -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
        return String((0..<10).map { _ in alphabet.randomElement()! })
    }

    static func fromFileName(_ path: String) -> String? {
        let name = (path as NSString).lastPathComponent
        guard name.hasPrefix("AuthKey_"), name.hasSuffix(".p8") else { return nil }
        let id = name.dropFirst("AuthKey_".count).dropLast(".p8".count)
        return id.isEmpty ? nil : String(id)
    }
}

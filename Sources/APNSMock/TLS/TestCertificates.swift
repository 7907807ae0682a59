import APNSMockCore
import Foundation
import Logging

/// The certificate material apns-mock generates for itself (`certs/`), as docs/configuration.md lists it:
/// a test CA, a server certificate naming Apple's hosts, a demo token key and client certificates
/// for certificate auth. Existing files are kept, so clients that already trust the CA keep
/// working; only what is missing is created.
public struct TestCertificates: Sendable {
    public struct App: Sendable {
        public var bundleID: String
        public var teamID: String

        public init(bundleID: String, teamID: String) {
            self.bundleID = bundleID
            self.teamID = teamID
        }
    }

    public struct TokenKey: Sendable {
        public var keyID: String
        public var teamID: String
        /// Where the `.p8` goes; relative paths are taken inside ``TestCertificates/directory``
        /// unless they already start with it.
        public var path: String

        public init(keyID: String, teamID: String, path: String) {
            self.keyID = keyID
            self.teamID = teamID
            self.path = path
        }
    }

    /// The names the server certificate carries besides `extraHosts`.
    public static let defaultDNSNames = [
        "localhost", "apns-mock", "api.push.apple.com", "api.sandbox.push.apple.com",
        "api.development.push.apple.com", "api-manage-broadcast.push.apple.com",
        "api-manage-broadcast.sandbox.push.apple.com", "api-broadcast.sandbox.push.apple.com",
        "api-broadcast.push.apple.com",
    ]
    public static let defaultIPAddresses = ["127.0.0.1", "::1"]

    public var directory: String
    public var extraHosts: [String]
    public var apps: [App]
    public var tokenKeys: [TokenKey]

    public init(directory: String, extraHosts: [String] = [], apps: [App], tokenKeys: [TokenKey]) {
        self.directory = directory
        self.extraHosts = extraHosts
        self.apps = apps
        self.tokenKeys = tokenKeys
    }

    public var caPath: String { path("ca.pem") }
    public var caKeyPath: String { path("ca-key.pem") }
    public var serverCertificatePath: String { path("server.pem") }
    public var serverKeyPath: String { path("server-key.pem") }
    /// The second root CA of the `new-root` trust scenario, and its intermediate.
    public var nextCAPath: String { path("ca-next.pem") }
    public var nextCAKeyPath: String { path("ca-next-key.pem") }
    public var nextIntermediatePath: String { path("ca-next-intermediate.pem") }
    public var nextIntermediateKeyPath: String { path("ca-next-intermediate-key.pem") }

    /// The server certificate (with its chain) and key a trust scenario serves.
    public func serverPaths(for scenario: Configuration.TLSScenario) -> (certificate: String, key: String) {
        switch scenario {
        case .standard: (serverCertificatePath, serverKeyPath)
        case .expired: (path("server-expired.pem"), path("server-expired-key.pem"))
        case .wrongHost: (path("server-wrong-host.pem"), path("server-wrong-host-key.pem"))
        case .newRoot: (path("server-next.pem"), path("server-next-key.pem"))
        }
    }

    /// Client certificate files for `app`: `client-<bundle>[-<variant>].pem` and `…-key.pem`.
    /// The plain name is a universal certificate (development and production markers); the
    /// `development` and `production` variants carry one marker each.
    public func clientCertificatePaths(for bundleID: String, variant: String? = nil) -> (certificate: String, key: String) {
        let stem = "client-" + bundleID + (variant.map { "-" + $0 } ?? "")
        return (path(stem + ".pem"), path(stem + "-key.pem"))
    }

    public func tokenKeyPath(_ key: TokenKey) -> String {
        if key.path.hasPrefix("/") || key.path.hasPrefix(directory + "/") {
            return key.path
        }
        return path((key.path as NSString).lastPathComponent)
    }

    /// Which missing token keys ``ensure(logger:tokenKeys:)`` creates.
    public enum TokenKeyCreation: Sendable {
        /// Every configured key (`certs init`).
        case all
        /// Only keys at their default place, `certs/AuthKey_<keyId>.p8` (`serve`): those are the
        /// mock's own, like the CA. A key whose configuration names another file is the user's,
        /// and its absence stops start-up (docs/authentication.md).
        case atDefaultPaths
    }

    /// Creates every missing file (token keys as `tokenKeys` says); returns the paths it wrote.
    @discardableResult
    public func ensure(logger: Logger? = nil, tokenKeys creation: TokenKeyCreation = .all) throws -> [String] {
        let files = FileManager.default
        try files.createDirectory(atPath: directory, withIntermediateDirectories: true)
        var written: [String] = []

        let ca: (certificate: Certificate, key: ECKey)
        if files.fileExists(atPath: caPath), files.fileExists(atPath: caKeyPath) {
            ca = (try Certificate.read(pem: String(contentsOfFile: caPath, encoding: .utf8)),
                  try ECKey.privateKey(pem: String(contentsOfFile: caKeyPath, encoding: .utf8)))
        } else {
            let key = try ECKey.generateP256()
            let certificate = try CertificateIssuer.issue(
                CertificateRequest(
                    subject: [("O", "apns-mock"), ("CN", "apns-mock test CA")],
                    kind: .certificateAuthority(), validDays: 3650),
                key: key, issuer: nil)
            try write(certificate.pem(), to: caPath, secret: false)
            try write(key.privateKeyPEM(), to: caKeyPath, secret: true)
            written += [caPath, caKeyPath]
            ca = (certificate, key)
        }

        written += try issueServer(.standard, kind: serverKind, issuer: ca, logger: logger)
        written += try ensureTrustScenarios(ca: ca)

        for app in apps {
            for (variant, development, production) in [(nil, true, true), ("development", true, false), ("production", false, true)] {
                let paths = clientCertificatePaths(for: app.bundleID, variant: variant)
                if files.fileExists(atPath: paths.certificate), files.fileExists(atPath: paths.key) { continue }
                let key = try ECKey.generateP256()
                let environmentName = variant.map { " (\($0))" } ?? ""
                let certificate = try CertificateIssuer.issue(
                    CertificateRequest(
                        subject: [
                            ("UID", app.bundleID), ("CN", "Apple Push Services: \(app.bundleID)\(environmentName)"),
                            ("OU", app.teamID), ("O", "apns-mock"), ("C", "US"),
                        ],
                        kind: .apnsClient(topics: .app(app.bundleID), development: development, production: production),
                        validDays: 365),
                    key: key, issuer: ca)
                try write(certificate.pem(), to: paths.certificate, secret: false)
                try write(key.privateKeyPEM(), to: paths.key, secret: true)
                written += [paths.certificate, paths.key]
            }
        }

        for tokenKey in tokenKeys {
            let keyPath = tokenKeyPath(tokenKey)
            if files.fileExists(atPath: keyPath) { continue }
            if creation == .atDefaultPaths, tokenKey.path != Configuration.Key.defaultPath(keyId: tokenKey.keyID) { continue }
            try write(ECKey.generateP256().privateKeyPEM(), to: keyPath, secret: true)
            written.append(keyPath)
        }
        for file in written {
            logger?.info("created \(file)")
        }
        return written
    }

    /// The server certificates of the trust scenarios (docs/configuration.md, `tls.scenario`):
    /// expired, naming another host, and under a second root through an intermediate.
    /// A server certificate naming Apple's hosts, localhost, 127.0.0.1 and the extra hosts.
    private var serverKind: CertificateRequest.Kind {
        .server(
            dnsNames: Array(Set(Self.defaultDNSNames + extraHosts.filter { !Self.isIPAddress($0) })).sorted(),
            ipAddresses: Array(Set(Self.defaultIPAddresses + extraHosts.filter(Self.isIPAddress))).sorted())
    }

    /// Issues the server certificate (and key) of `scenario` unless both files exist; returns the
    /// paths written. `chain` follows the certificate in its file.
    private func issueServer(
        _ scenario: Configuration.TLSScenario, kind: CertificateRequest.Kind, validFromDays: Int = 0, validDays: Int = 825,
        issuer: (certificate: Certificate, key: ECKey), chain: [Certificate] = [], logger: Logger? = nil
    ) throws -> [String] {
        let paths = serverPaths(for: scenario)
        let files = FileManager.default
        if files.fileExists(atPath: paths.certificate), files.fileExists(atPath: paths.key) {
            // The mock's own server certificate is issued again when it lacks a name it should
            // carry now (`tls.hosts`, a default name added since); one it did not issue is the
            // user's and never touched.
            guard scenario == .standard, case .server(let names, let addresses) = kind,
                  let existing = try? Certificate.read(pem: String(contentsOfFile: paths.certificate, encoding: .utf8)),
                  existing.isIssued(by: issuer.certificate)
            else { return [] }
            let missing = existing.missingNames(names + addresses)
            guard !missing.isEmpty else { return [] }
            logger?.info(
                "issuing \(paths.certificate) again: the mock's own server certificate lacks \(missing.joined(separator: ", "))")
        }
        let key = try ECKey.generateP256()
        let commonName = scenario == .standard ? "apns-mock" : "apns-mock \(scenario.rawValue)"
        let certificate = try CertificateIssuer.issue(
            CertificateRequest(
                subject: [("O", "apns-mock"), ("CN", commonName)], kind: kind,
                validDays: validDays, validFromDays: validFromDays),
            key: key, issuer: issuer)
        try write(try ([certificate] + chain).map { try $0.pem() }.joined(), to: paths.certificate, secret: false)
        try write(key.privateKeyPEM(), to: paths.key, secret: true)
        return [paths.certificate, paths.key]
    }

    private func ensureTrustScenarios(ca: (certificate: Certificate, key: ECKey)) throws -> [String] {
        let files = FileManager.default
        var written: [String] = []
        // Valid from 30 days ago until yesterday.
        written += try issueServer(.expired, kind: serverKind, validFromDays: -30, validDays: 29, issuer: ca)
        written += try issueServer(.wrongHost, kind: .server(dnsNames: ["wrong-host.invalid"], ipAddresses: []), issuer: ca)

        let nextIntermediate: (certificate: Certificate, key: ECKey)
        if files.fileExists(atPath: nextIntermediatePath), files.fileExists(atPath: nextIntermediateKeyPath) {
            nextIntermediate = (try Certificate.read(pem: String(contentsOfFile: nextIntermediatePath, encoding: .utf8)),
                                try ECKey.privateKey(pem: String(contentsOfFile: nextIntermediateKeyPath, encoding: .utf8)))
        } else {
            let rootKey = try ECKey.generateP256()
            let root = try CertificateIssuer.issue(
                CertificateRequest(
                    subject: [("O", "apns-mock"), ("CN", "apns-mock next root CA")],
                    kind: .certificateAuthority(pathLength: 1), validDays: 3650),
                key: rootKey, issuer: nil)
            let intermediateKey = try ECKey.generateP256()
            let intermediate = try CertificateIssuer.issue(
                CertificateRequest(
                    subject: [("O", "apns-mock"), ("CN", "apns-mock next intermediate CA")],
                    kind: .certificateAuthority(pathLength: 0), validDays: 3650),
                key: intermediateKey, issuer: (root, rootKey))
            try write(root.pem(), to: nextCAPath, secret: false)
            try write(rootKey.privateKeyPEM(), to: nextCAKeyPath, secret: true)
            try write(intermediate.pem(), to: nextIntermediatePath, secret: false)
            try write(intermediateKey.privateKeyPEM(), to: nextIntermediateKeyPath, secret: true)
            written += [nextCAPath, nextCAKeyPath, nextIntermediatePath, nextIntermediateKeyPath]
            nextIntermediate = (intermediate, intermediateKey)
        }
        written += try issueServer(.newRoot, kind: serverKind, issuer: nextIntermediate, chain: [nextIntermediate.certificate])
        return written
    }

    /// Writes a new P-256 private key as PKCS#8 PEM (the format of Apple's `AuthKey_<KEYID>.p8`)
    /// to `path`, readable only by its owner. Used by `apns-mock keys new`, which must not create
    /// the rest of the material.
    public static func writeTokenKey(to path: String) throws {
        try TestCertificates(directory: ".", apps: [], tokenKeys: [])
            .write(ECKey.generateP256().privateKeyPEM(), to: path, secret: true)
    }

    private func path(_ name: String) -> String {
        (directory as NSString).appendingPathComponent(name)
    }

    private func write(_ text: String, to path: String, secret: Bool) throws {
        let url = URL(fileURLWithPath: path)
        try FileManager.default.createDirectory(
            at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data(text.utf8).write(to: url, options: .atomic)
        try FileManager.default.setAttributes(
            [.posixPermissions: secret ? 0o600 : 0o644], ofItemAtPath: path)
    }

    private static func isIPAddress(_ host: String) -> Bool {
        host.contains(":") || host.allSatisfy { $0.isNumber || $0 == "." }
    }
}

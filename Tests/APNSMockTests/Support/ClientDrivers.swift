import APNSMockCore
import APNSMockTesting
import Foundation
import Testing

/// The real APNs clients of the client matrix: each is used unmodified, pointed at the
/// mock only through its own options or, for clients that know nothing but Apple's hosts, a
/// process-local hosts-file alias (scripts/clients/driver_common.py). The drivers live in
/// scripts/clients/; scripts/setup installs the clients (pinned in scripts/clients/requirements*.txt).
enum RealClient: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case aioapns
    case apns2Up = "apns2-up"
    case pyapnsClient = "pyapns-client"
    case kalyke
    case aapns
    case go = "go-apns2"
    case node = "node-apn-http2"
    /// Java's own HTTP/2 client with a provider token signed as pushy signs it (DER signature).
    case javaPushyToken = "java-pushy-token"
    case curl
    case nghttp

    var testDescription: String { rawValue }

    var supportsToken: Bool { self != .aapns }
    var supportsCertificate: Bool { self != .pyapnsClient && self != .javaPushyToken }
    /// How the driver authenticates when the scenario is not about authentication.
    var primaryAuth: ClientAuth { supportsToken ? .token : .certificate }

    /// Whether the client hands the HTTP status of a refused push to its caller (the others only
    /// name the reason, as an exception class).
    var surfacesStatus: Bool {
        switch self {
        case .aioapns, .pyapnsClient, .go, .node, .javaPushyToken, .curl, .nghttp: true
        case .apns2Up, .kalyke, .aapns: false
        }
    }

    /// Whether the caller sees the 200 of an accepted push (pyapns-client's push() returns
    /// nothing).
    var surfacesStatusOnSuccess: Bool { surfacesStatus && self != .pyapnsClient }

    /// How the client writes its provider token's `iat`; `nil` for a client without token auth.
    var issuedAtForm: ProviderToken.IssuedAtForm? {
        switch self {
        case .apns2Up, .pyapnsClient: .decimal
        case .kalyke: .string
        case .aioapns, .go, .node, .javaPushyToken, .curl, .nghttp: .integer
        case .aapns: nil
        }
    }

    /// Whether the caller learns the apns-id of an accepted push.
    var surfacesApnsIdOnSuccess: Bool {
        switch self {
        case .aioapns, .kalyke, .aapns, .go, .node, .javaPushyToken, .curl, .nghttp: true
        case .apns2Up, .pyapnsClient: false
        }
    }

    /// How the client encodes its provider token's signature; `nil` without token auth.
    var signatureForm: ProviderToken.SignatureForm? {
        switch self {
        case .javaPushyToken: .der
        case .aapns: nil
        default: .jose
        }
    }

    /// Whether the caller learns the apns-id of a refused push.
    var surfacesApnsIdOnError: Bool {
        switch self {
        case .aioapns, .pyapnsClient, .aapns, .go, .node, .javaPushyToken, .curl, .nghttp: true
        case .apns2Up, .kalyke: false
        }
    }

    /// Whether the caller learns the 410's timestamp (aapns drops the body's other members).
    var surfacesTimestamp: Bool { self != .aapns }

    /// The names the client resolved, for the clients that dial Apple's hosts through the
    /// redirect; `nil` for those pointed at the mock by address.
    var expectedDialed: [String]? {
        switch self {
        case .apns2Up, .pyapnsClient: ["api.development.push.apple.com:443"]
        case .kalyke: ["api.sandbox.push.apple.com:443"]
        default: nil
        }
    }

    /// The environment the mock picks from the host the client dials: curl is sent to
    /// api.push.apple.com (production); every other client reaches a sandbox host or an address.
    var environment: String { self == .curl ? "production" : "sandbox" }

    /// The alert text the driver sends (`{"aps":{"alert":…}}`, or `{"body":…}` inside it).
    var alertText: String { "hello from \(rawValue)" }

    /// The topic and push type of a certificate-authenticated push: kalyke's only certificate
    /// client sends VoIP pushes.
    func certificatePush(bundleID: String) -> (topic: String, pushType: String) {
        self == .kalyke ? (bundleID + ".voip", "voip") : (bundleID, "alert")
    }

    /// PyPI clients: the distribution and the requirements file that pins it.
    var pinnedDistribution: (name: String, requirements: String)? {
        switch self {
        case .aioapns: ("aioapns", "requirements.txt")
        case .apns2Up: ("apns2-up", "requirements.txt")
        case .pyapnsClient: ("pyapns-client", "requirements.txt")
        case .kalyke: ("kalyke-apns", "requirements.txt")
        case .aapns: ("aapns", "requirements-aapns.txt")
        case .go, .node, .javaPushyToken, .curl, .nghttp: nil
        }
    }
}

enum ClientAuth: String, Sendable, CaseIterable {
    case token
    case certificate
}

/// What a driver printed: the client's own view of each push.
struct DriverReport: Decodable, Sendable {
    struct Result: Decodable, Sendable {
        var device: String
        /// The client's verdict: it reported the push as sent.
        var sent: Bool
        var status: Int?
        var reason: String?
        var apnsId: String?
        var timestamp: Int64?
        /// An exception or error that is not an APNs answer (connection, refused stream…).
        var error: String?
        /// The HTTP/2 RST_STREAM code of a stream the server reset (Node only).
        var rstCode: Int?
    }

    var client: String
    var version: String
    var scenario: String
    var dialed: [String]
    var results: [Result]
    /// Provider tokens the client signed (Go and Node drivers).
    var tokensSigned: Int?
}

/// Runs one client against a running mock.
struct ClientDriver {
    static let repository = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let clients = repository.appendingPathComponent("scripts/clients")
    static let teamID = "DEMOTEAM01"
    static let keyID = "DEMOKEY001"
    static let bundleID = "com.example.app"

    var client: RealClient
    var scenario: String
    var auth: ClientAuth
    var devices: [String]
    /// The mock's CONNECT proxy port: clients that dial Apple's hosts go through it with their own
    /// proxy support instead of the driver's redirect.
    var proxyPort: Int? = nil

    func run(against mock: some MockEndpoints) async throws -> DriverReport {
        let certificate = mock.certificates.clientCertificatePaths(for: Self.bundleID)
        switch client {
        case .curl:
            return try await runCurl(mock: mock, certificate: certificate)
        case .nghttp:
            return try await runNghttp(mock: mock, certificate: certificate)
        default:
            break
        }
        var arguments = ["--port", "\(mock.apnsPort)", "--ca", mock.caPath, "--scenario", scenario, "--topic", Self.bundleID,
                         "--timeout", "30"] + Self.credentialArguments(auth, mock: mock)
        arguments += devices.flatMap { ["--device", $0] }
        if let proxyPort { arguments += ["--proxy", "http://127.0.0.1:\(proxyPort)"] }
        let (program, prefix) = try await Self.command(for: client)
        let output = try await ExternalTool.run(program, prefix + arguments)
        guard output.exitCode == 0 else {
            throw DriverFailure("\(client.rawValue) driver exited \(output.exitCode): \(output.stderr)")
        }
        do {
            return try JSONDecoder().decode(DriverReport.self, from: output.stdout)
        } catch {
            throw DriverFailure("\(client.rawValue) driver printed no report (\(error)): \(output.text)\n\(output.stderr)")
        }
    }

    /// The drivers' credential options: `--auth`, and the demo team's key or the app's client
    /// certificate.
    static func credentialArguments(_ auth: ClientAuth, mock: some MockEndpoints) -> [String] {
        let material = mock.certificates
        switch auth {
        case .token:
            return ["--auth", "token", "--key", material.tokenKeyPath(material.tokenKeys[0]), "--team", teamID, "--key-id", keyID]
        case .certificate:
            let certificate = material.clientCertificatePaths(for: bundleID)
            return ["--auth", "certificate", "--cert", certificate.certificate, "--cert-key", certificate.key]
        }
    }

    /// The interpreter (or binary) and leading arguments of a client's driver. A missing client
    /// is an error, never a skip: scripts/setup installs them all.
    static func command(for client: RealClient) async throws -> (String, [String]) {
        func python(_ venv: String, _ script: String) throws -> (String, [String]) {
            let interpreter = repository.appendingPathComponent(venv + "/bin/python").path
            guard FileManager.default.isExecutableFile(atPath: interpreter) else {
                throw DriverFailure("no \(venv) for \(client.rawValue): run scripts/setup")
            }
            return (interpreter, [clients.appendingPathComponent(script).path])
        }
        switch client {
        case .aioapns: return try python(".venv", "aioapns_driver.py")
        case .apns2Up: return try python(".venv", "apns2_up_driver.py")
        case .pyapnsClient: return try python(".venv", "pyapns_client_driver.py")
        case .kalyke: return try python(".venv", "kalyke_driver.py")
        case .aapns: return try python(".venv-aapns", "aapns_driver.py")
        case .go: return (try await goBinary.value, [])
        case .node: return ("node", [clients.appendingPathComponent("node-apn-http2.js").path])
        case .javaPushyToken: return ("java", [clients.appendingPathComponent("java/PushyTokenDriver.java").path])
        case .curl, .nghttp: return (client.rawValue, [])
        }
    }

    /// scripts/clients/go-apns2, built once per test process into .build-clients/ as scripts/setup
    /// builds it (offline, from Debian's Go packages; Go's build cache makes it take a second).
    static let goBinary = Task<String, any Error> {
        let output = repository.appendingPathComponent(".build-clients/go-apns2").path
        let build = try await ExternalTool.run(clients.appendingPathComponent("build-go").path, [output], timeout: 300)
        guard build.exitCode == 0 else {
            throw DriverFailure("building scripts/clients/go-apns2 failed (run scripts/setup): \(build.stderr)")
        }
        return output
    }

    /// The pinned version of a PyPI client, from its requirements file.
    static func pinnedVersion(of client: RealClient) throws -> String? {
        guard let (name, file) = client.pinnedDistribution else { return nil }
        let text = try String(contentsOf: clients.appendingPathComponent(file), encoding: .utf8)
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: "#")[0].trimmingCharacters(in: .whitespaces).components(separatedBy: "==")
            if parts.count == 2, parts[0].lowercased() == name { return parts[1] }
        }
        throw DriverFailure("\(file) pins no \(name)")
    }

    // MARK: curl and nghttp: the command line is the client

    /// curl is sent to https://api.push.apple.com (production), its own --connect-to mapping that
    /// host's port 443 to the mock, and --cacert; one curl process per push.
    private func runCurl(mock: some MockEndpoints, certificate: (certificate: String, key: String)) async throws -> DriverReport {
        var results: [DriverReport.Result] = []
        for device in devices {
            var extra = ["--connect-to", "api.push.apple.com:443:127.0.0.1:\(mock.apnsPort)"]
            var authorization: String?
            switch auth {
            case .token: authorization = "bearer " + (try MockHarness.demoToken())
            case .certificate: extra += ["--cert", certificate.certificate, "--key", certificate.key]
            }
            let body = Data(#"{"aps":{"alert":"\#(client.alertText)"}}"#.utf8)
            let response = try await Curl.send(
                url: "https://api.push.apple.com/3/device/\(device)", caPath: mock.caPath,
                headers: ["apns-topic": Self.bundleID, "apns-push-type": "alert"], authorization: authorization,
                body: body, extra: extra)
            results.append(DriverReport.Result(
                device: device, sent: response.status == 200, status: response.status, reason: response.reason,
                apnsId: response.headers["apns-id"], timestamp: response.error?.timestamp))
        }
        return DriverReport(client: "curl", version: "Debian package", scenario: scenario, dialed: [], results: results)
    }

    /// nghttp posts to https://127.0.0.1:<port> (it does not check IP addresses against the
    /// certificate, and only warns about what it cannot verify); the status and apns-id come from
    /// its HAR file, the body from stdout.
    private func runNghttp(mock: some MockEndpoints, certificate: (certificate: String, key: String)) async throws -> DriverReport {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("apns-mock-nghttp-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let bodyPath = directory.appendingPathComponent("body.json").path
        try Data(#"{"aps":{"alert":"\#(client.alertText)"}}"#.utf8).write(to: URL(fileURLWithPath: bodyPath))
        var results: [DriverReport.Result] = []
        for (index, device) in devices.enumerated() {
            let har = directory.appendingPathComponent("\(index).har").path
            var arguments = ["--har=\(har)", "-H", ":method: POST", "-H", "apns-topic: \(Self.bundleID)",
                             "-H", "apns-push-type: alert", "-d", bodyPath, "-t", "20"]
            switch auth {
            case .token: arguments += ["-H", "authorization: bearer " + (try MockHarness.demoToken())]
            case .certificate: arguments += ["--cert=\(certificate.certificate)", "--key=\(certificate.key)"]
            }
            arguments.append("https://127.0.0.1:\(mock.apnsPort)/3/device/\(device)")
            let output = try await ExternalTool.run("nghttp", arguments)
            guard output.exitCode == 0 else { throw DriverFailure("nghttp exited \(output.exitCode): \(output.stderr)") }
            let headers = try Self.harResponseHeaders(har)
            let error = try? JSONDecoder().decode(CurlResponse.ErrorBody.self, from: output.stdout)
            let status = headers[":status"].flatMap { Int($0) }
            results.append(DriverReport.Result(
                device: device, sent: status == 200, status: status, reason: error?.reason, apnsId: headers["apns-id"],
                timestamp: error?.timestamp))
        }
        return DriverReport(client: "nghttp", version: "Debian package", scenario: scenario, dialed: [], results: results)
    }

    private struct HAR: Decodable {
        struct Log: Decodable { var entries: [Entry] }
        struct Entry: Decodable { var response: Response }
        struct Response: Decodable { var headers: [Header] }
        struct Header: Decodable { var name: String; var value: String }
        var log: Log
    }

    private static func harResponseHeaders(_ path: String) throws -> [String: String] {
        let har = try JSONDecoder().decode(HAR.self, from: Data(contentsOf: URL(fileURLWithPath: path)))
        guard let entry = har.log.entries.first else { throw DriverFailure("nghttp's HAR has no entry") }
        return Dictionary(entry.response.headers.map { ($0.name.lowercased(), $0.value) }, uniquingKeysWith: { $1 })
    }
}

struct DriverFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

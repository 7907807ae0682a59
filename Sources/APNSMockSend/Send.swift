import APNSMockCommandLine
import APNSMockCore
import ArgumentParser
import Foundation
import Logging
import NIOCore
import NIOSSL

/// `apns-mock send`: a provider. Sends pushes over HTTP/2 to apns-mock (by default the one on
/// 127.0.0.1:2197, trusting certs/ca.pem, with the demo token key) or to Apple.
public struct Send: AsyncParsableCommand {
    public init() {}

    public static let configuration = CommandConfiguration(
        abstract: "Send pushes as a provider: to apns-mock (default 127.0.0.1:2197) or to Apple.",
        discussion: """
            The payload is FILE (JSON, or an .apns file as `xcrun simctl push` takes it, whose \
            "Simulator Target Bundle" names the topic), --payload, or built from the payload flags; \
            without any, {"aps":{"alert":"hello"}}. The flags add to a file's payload.

            Without --sandbox/--production the push goes to apns-mock at 127.0.0.1:2197, trusting \
            certs/ca.pem, signed with the demo key certs/AuthKey_DEMOKEY001.p8 (team DEMOTEAM01), \
            topic com.example.app: what `apns-mock serve` creates on its defaults.

            Exit status: 0 every push accepted; 1 a push was rejected (status and reason printed); \
            2 bad input; 3 a push got no answer (cannot connect, TLS failure, connection lost, \
            --timeout); 64 a usage error.
            """)

    @Argument(help: ArgumentHelp("Payload file: JSON, or an .apns file (xcrun simctl push format); - reads standard input.", valueName: "FILE"))
    var file: String?

    @OptionGroup(title: "Push") var push: PushOptions
    @OptionGroup(title: "Payload") var payload: PayloadFlags
    @OptionGroup(title: "Credentials (default: the demo token key of apns-mock serve)") var credentials: CredentialOptions
    @OptionGroup(title: "Server (default: apns-mock on 127.0.0.1:2197)") var server: ServerOptions
    @OptionGroup(title: "Load") var load: LoadOptions
    @OptionGroup var logging: LoggingOptions

    public func run() async throws {
        let logger = logging.bootstrap()
        let plan: SendPlan
        do {
            plan = try makePlan()
        } catch {
            SendOutput.error(error.description)
            throw ExitCode(2)
        }
        let result: SendResult
        do {
            result = try await SendRunner.run(plan.job, logger: logger)
        } catch let failure as ConnectFailure {
            SendOutput.error(failure.description)
            throw ExitCode(3)
        }
        let code = plan.summary ? SendOutput.summary(result, plan: plan) : SendOutput.details(result, plan: plan)
        if code != 0 { throw ExitCode(code) }
    }

    func makePlan() throws(SendInputError) -> SendPlan {
        let devices = push.devices
        guard !devices.isEmpty else {
            throw SendInputError("--device is needed: the device token (hex) to push to")
        }
        for device in devices where !DeviceToken.isWellFormed(Array(device.utf8), strict: false) {
            let shown = device.count > 72 ? String(device.prefix(72)) + "…" : device
            throw SendInputError("--device \"\(shown)\" is not a device token (hex digits, an even number of them, at most \(DeviceToken.maximumLength))")
        }

        let built = try SendPayload.build(payload.options(file: file))
        let apple = server.apple
        let target = try server.target()
        let tls = try TLSSetup.context(server: server, credentials: credentials, apple: apple)
        let token = try credentials.tokenSource(apple: apple)

        var topic = push.topic ?? built.bundle
        if topic == nil, built.isSimulatorFile {
            throw SendInputError("\(file ?? "the payload"): no \"\(SendPayload.simulatorTargetBundle)\" key and no --topic")
        }
        if topic == nil {
            if apple == nil {
                topic = "com.example.app"
            } else if token != nil {
                throw SendInputError("--topic is needed: the app's bundle ID (a token may push to any app of its team)")
            }
        }
        let pushType = push.pushType ?? SendPayload.inferredPushType(topic: topic, aps: built.aps)
        let priority = push.priority.map(String.init) ?? (pushType == PushType.background.rawValue ? "5" : nil)

        var headers: [(String, String)] = [("apns-push-type", pushType)]
        if let topic { headers.append(("apns-topic", topic)) }
        if let priority { headers.append(("apns-priority", priority)) }
        if let expiration = push.expiration { headers.append(("apns-expiration", String(expiration))) }
        if let collapseID = push.collapseId { headers.append(("apns-collapse-id", collapseID)) }
        if let apnsID = push.apnsId { headers.append(("apns-id", apnsID)) }

        let summary = (load.count ?? 1) > 1
        let count = load.count ?? devices.count
        guard count >= 1 else { throw SendInputError("--count must be at least 1") }
        if let concurrency = load.concurrency, concurrency < 1 { throw SendInputError("--concurrency must be at least 1") }
        if let connections = load.connections, connections < 1 { throw SendInputError("--connections must be at least 1") }
        guard load.timeout > 0, load.timeout <= 86_400 else { throw SendInputError("--timeout must be between 0 and 86400 seconds") }
        let concurrency = min(load.concurrency ?? (summary ? LoadOptions.defaultConcurrency : 1), count)
        let connections = min(load.connections ?? LoadOptions.defaultConnections(concurrency: concurrency), concurrency)

        var body = ByteBuffer()
        body.writeBytes(built.bytes)
        let factory = PushFactory(
            paths: devices.map { "/3/device/\($0)" }, authority: target.authority, token: token, headers: headers, body: body)
        let job = SendJob(
            target: target, tls: tls, factory: factory, count: count, concurrency: concurrency, connections: connections,
            timeout: .nanoseconds(Int64(load.timeout * 1e9)), keepDetails: !summary,
            progress: summary && load.progress && Progress.isTerminal)
        return SendPlan(job: job, devices: devices, summary: summary)
    }
}

struct SendPlan {
    var job: SendJob
    var devices: [String]
    /// `--count` above 1: print the summary instead of each answer.
    var summary: Bool
}

struct PushOptions: ParsableArguments {
    @Option(name: .customLong("device"), help: ArgumentHelp("Device token (hex); repeat it to push to several devices in turn.", valueName: "TOKEN"))
    var devices: [String] = []

    @Option(help: "apns-topic (default: the .apns file's bundle, else com.example.app for apns-mock).")
    var topic: String?

    @Option(help: "apns-push-type (default: from the topic's suffix, background for a content-available-only payload, else alert).")
    var pushType: String?

    @Option(help: "apns-priority: 10, 5 or 1 (default: none, which APNs takes as 10; 5 for background).")
    var priority: Int?

    @Option(help: "apns-expiration, UNIX seconds (0: deliver once).")
    var expiration: Int64?

    @Option(help: "apns-collapse-id.")
    var collapseId: String?

    @Option(help: "apns-id, a UUID (default: the server generates one).")
    var apnsId: String?
}

struct PayloadFlags: ParsableArguments {
    @Option(help: ArgumentHelp("The whole payload as JSON text.", valueName: "JSON"))
    var payload: String?

    @Option(help: "aps.alert as a string.")
    var alert: String?

    @Option(help: "aps.alert.title.")
    var title: String?

    @Option(help: "aps.alert.subtitle.")
    var subtitle: String?

    @Option(help: "aps.alert.body.")
    var body: String?

    @Option(help: "aps.badge.")
    var badge: Int?

    @Option(help: "aps.sound, e.g. default.")
    var sound: String?

    @Option(help: "aps.category.")
    var category: String?

    @Option(help: "aps.thread-id.")
    var threadId: String?

    @Flag(help: "aps.content-available = 1 (a background push when nothing else is shown).")
    var contentAvailable = false

    @Flag(help: "aps.mutable-content = 1.")
    var mutableContent = false

    @Option(help: ArgumentHelp("A JSON object whose keys go to the top level of the payload (custom data); repeatable.", valueName: "JSON"))
    var data: [String] = []

    func options(file: String?) -> PayloadOptions {
        PayloadOptions(
            file: file, inline: payload, alert: alert, title: title, subtitle: subtitle, body: body, badge: badge,
            sound: sound, category: category, threadID: threadId, contentAvailable: contentAvailable,
            mutableContent: mutableContent, data: data)
    }
}

struct CredentialOptions: ParsableArguments {
    static let demoKey = "certs/AuthKey_DEMOKEY001.p8"
    static let demoTeam = "DEMOTEAM01"

    @Option(help: ArgumentHelp("Token auth: the signing key, AuthKey_<KEYID>.p8 (default \(demoKey) for apns-mock).", valueName: "FILE"))
    var key: String?

    @Option(help: ArgumentHelp("Token auth: the team ID (default \(demoTeam) for apns-mock).", valueName: "TEAMID"))
    var team: String?

    @Option(help: ArgumentHelp("Token auth: the key ID (default: from the file name AuthKey_<KEYID>.p8).", valueName: "KEYID"))
    var keyId: String?

    @Option(help: ArgumentHelp("Certificate auth: the client certificate (PEM) instead of a token.", valueName: "FILE"))
    var cert: String?

    @Option(help: ArgumentHelp("Certificate auth: its private key (PEM; default: the --cert file).", valueName: "FILE"))
    var certKey: String?

    /// The token signer for token auth; `nil` with `--cert`.
    func tokenSource(apple: AppleEnvironment?) throws(SendInputError) -> ProviderTokenSource? {
        if cert != nil {
            if key != nil { throw SendInputError("give --key (token auth) or --cert (certificate auth), not both") }
            if team != nil || keyId != nil { throw SendInputError("--team and --key-id are for token auth (--key), not --cert") }
            return nil
        }
        if certKey != nil { throw SendInputError("--cert-key goes with --cert") }
        guard let path = key ?? (apple == nil ? Self.demoKey : nil) else {
            throw SendInputError("--key and --team (token auth) or --cert (certificate auth) are needed to send to Apple")
        }
        guard let teamID = team ?? (apple == nil ? Self.demoTeam : nil) else {
            throw SendInputError("--team is needed with --key: the team ID the key belongs to")
        }
        guard let keyID = keyId ?? KeyIDs.fromFileName(path) else {
            throw SendInputError("--key-id is needed: \(path) is not named AuthKey_<KEYID>.p8")
        }
        if key == nil, !FileManager.default.fileExists(atPath: path) {
            throw SendInputError("token key \(path) does not exist (run apns-mock serve or certs init here once, or pass --key)")
        }
        let pem = try InputFiles.readText(path, what: "token key")
        do {
            return try ProviderTokenSource(pem: pem, teamID: teamID, keyID: keyID)
        } catch {
            throw SendInputError("token key \(path) is not a PEM private key (an AuthKey_<KEYID>.p8 expected)")
        }
    }
}

/// `--sandbox` / `--production`: Apple's hosts.
enum AppleEnvironment: String, EnumerableFlag {
    case sandbox
    case production

    var host: String {
        switch self {
        case .sandbox: "api.sandbox.push.apple.com"
        case .production: "api.push.apple.com"
        }
    }

    static func help(for value: AppleEnvironment) -> ArgumentHelp? {
        switch value {
        case .sandbox: "Send to Apple's development server, api.sandbox.push.apple.com:443 (system trust store)."
        case .production: "Send to Apple's production server, api.push.apple.com:443 (system trust store)."
        }
    }
}

struct ServerOptions: ParsableArguments {
    static let defaultCA = "certs/ca.pem"

    @Option(help: "Host to send to (default 127.0.0.1; with --sandbox/--production Apple's).")
    var host: String?

    @Option(help: "Port (default 2197; 443 for Apple).")
    var port: Int?

    @Option(help: ArgumentHelp("CA certificate(s) to trust (PEM; default \(defaultCA) for apns-mock, the system's for Apple).", valueName: "FILE"))
    var ca: String?

    @Flag(exclusivity: .exclusive)
    var apple: AppleEnvironment?

    @Option(help: ArgumentHelp("Connect to HOST:PORT instead, still naming --host in TLS and :authority (as curl's --connect-to).", valueName: "HOST:PORT"))
    var connectTo: String?

    func target() throws(SendInputError) -> SendTarget {
        let host = self.host ?? apple?.host ?? "127.0.0.1"
        let port = self.port ?? (apple == nil ? 2197 : 443)
        guard (1...65535).contains(port) else { throw SendInputError("--port must be between 1 and 65535") }
        guard !host.isEmpty else { throw SendInputError("--host must not be empty") }
        var target = SendTarget(host: host, port: port, dialHost: host, dialPort: port, isApple: apple != nil)
        if let connectTo {
            guard let colon = connectTo.lastIndex(of: ":"), let dialPort = Int(connectTo[connectTo.index(after: colon)...]),
                  (1...65535).contains(dialPort), colon > connectTo.startIndex
            else { throw SendInputError("--connect-to \(connectTo) is not HOST:PORT") }
            var dialHost = String(connectTo[..<colon])
            if dialHost.hasPrefix("["), dialHost.hasSuffix("]") { dialHost = String(dialHost.dropFirst().dropLast()) }
            target.dialHost = dialHost
            target.dialPort = dialPort
        }
        return target
    }
}

struct LoadOptions: ParsableArguments {
    static let defaultConcurrency = 10

    /// One connection per core of this machine (each is served by one event loop here and,
    /// usually, one thread of the server), at most one per stream.
    static func defaultConnections(concurrency: Int) -> Int {
        min(concurrency, max(1, ProcessInfo.processInfo.activeProcessorCount))
    }

    @Option(help: "Send this many pushes (devices in turn) and print a summary: req/s, answers, latency.")
    var count: Int?

    @Option(help: "Pushes in flight at once, as HTTP/2 streams spread over the connections (default \(defaultConcurrency) with --count).")
    var concurrency: Int?

    @Option(help: "HTTP/2 connections (default: one per core, at most --concurrency).")
    var connections: Int?

    @Option(help: "Seconds to wait for a connection, or for any answer while pushes are in flight.")
    var timeout: Double = 30

    @Flag(inversion: .prefixedNo, help: "Progress bar on standard error when it is a terminal (with --count).")
    var progress = true
}

enum TLSSetup {
    /// The client's TLS: ALPN h2, trusting `--ca` (default certs/ca.pem for apns-mock) or the
    /// system's roots, with the client certificate of certificate auth.
    static func context(server: ServerOptions, credentials: CredentialOptions, apple: AppleEnvironment?) throws(SendInputError) -> NIOSSLContext {
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.applicationProtocols = ["h2"]
        if let path = server.ca ?? (apple == nil ? ServerOptions.defaultCA : nil) {
            if server.ca == nil, !FileManager.default.fileExists(atPath: path) {
                throw SendInputError("CA file \(path) does not exist (run apns-mock serve or certs init here once, or pass --ca)")
            }
            let roots = try certificates(path, what: "CA file")
            configuration.trustRoots = .certificates(roots)
        }
        if let cert = credentials.cert {
            let chain = try certificates(cert, what: "--cert")
            configuration.certificateChain = chain.map { .certificate($0) }
            let keyPath = credentials.certKey ?? cert
            let keyText = try InputFiles.read(keyPath, what: credentials.certKey == nil ? "--cert" : "--cert-key")
            do {
                configuration.privateKey = .privateKey(try NIOSSLPrivateKey(bytes: Array(keyText), format: .pem))
            } catch {
                if credentials.certKey == nil {
                    throw SendInputError("--cert-key is needed: \(cert) holds no private key")
                }
                throw SendInputError("--cert-key \(keyPath) is not a PEM private key")
            }
        }
        do {
            return try NIOSSLContext(configuration: configuration)
        } catch {
            throw SendInputError("cannot set up TLS: \(ProviderConnection.oneLine("\(error)"))")
        }
    }

    private static func certificates(_ path: String, what: String) throws(SendInputError) -> [NIOSSLCertificate] {
        let data = try InputFiles.read(path, what: what)
        guard let certificates = try? NIOSSLCertificate.fromPEMBytes(Array(data)), !certificates.isEmpty else {
            throw SendInputError("\(what) \(path) holds no PEM certificate")
        }
        return certificates
    }
}

/// What `send` prints: answers and the summary on standard output, problems on standard error.
enum SendOutput {
    static func error(_ message: String) {
        FileHandle.standardError.write(Data("error: \(message)\n".utf8))
    }

    /// Each push's answer (status, apns-id, apns-unique-id, reason, timestamp); the exit code.
    static func details(_ result: SendResult, plan: SendPlan) -> Int32 {
        var code: Int32 = 0
        var unanswered: [PushFailure] = []
        let details = result.tally.details.sorted { $0.0 < $1.0 }
        for (position, (index, outcome)) in details.enumerated() {
            var lines: [String] = []
            if plan.devices.count > 1 {
                if position > 0 { lines.append("") }
                lines.append("device: \(plan.devices[index % plan.devices.count])")
            }
            switch outcome {
            case .response(let response):
                lines.append("status: \(response.status)")
                if let apnsID = response.apnsID { lines.append("apns-id: \(apnsID)") }
                if let uniqueID = response.uniqueID { lines.append("apns-unique-id: \(uniqueID)") }
                if let reason = response.reason { lines.append("reason: \(reason)") }
                if let timestamp = response.timestamp { lines.append("timestamp: \(timestamp) (\(iso8601(milliseconds: timestamp)))") }
                if response.reason == nil, !response.body.isEmpty { lines.append("body: \(ProviderConnection.oneLine(response.body))") }
                if response.status != 200, code == 0 { code = 1 }
            case .failed(let failure):
                if plan.devices.count > 1 { lines.append("no answer: \(failure.description)") }
                unanswered.append(failure)
                code = 3
            }
            lines.forEach(Console.line)
        }
        if unanswered.count == 1, details.count == 1 {
            error("no answer: \(unanswered[0].description)")
        } else if !unanswered.isEmpty {
            error("\(unanswered.count) of \(details.count) pushes got no answer")
        }
        if result.unsent > 0 {
            error("\(result.unsent) pushes not sent: \(result.timedOut ? "timed out" : "every connection failed")")
            code = 3
        }
        return code
    }

    /// The summary of a `--count` run; the exit code.
    static func summary(_ result: SendResult, plan: SendPlan) -> Int32 {
        let tally = result.tally
        let job = plan.job
        let devices = plan.devices.count == 1 ? "1 device" : "\(plan.devices.count) devices"
        let connections = job.connections == 1 ? "1 connection" : "\(job.connections) connections"
        var lines = [
            "pushes:    \(job.count) to \(devices) over \(connections), concurrency \(job.concurrency)",
            "answered:  \(tally.answered) in \(String(format: "%.3f", result.seconds)) s",
            "rate:      \(String(format: "%.1f", result.seconds > 0 ? Double(tally.answered) / result.seconds : 0)) req/s",
        ]
        if tally.answered > 0 {
            let latency = tally.latency
            func ms(_ microseconds: UInt64) -> String { String(format: "%.3f ms", Double(microseconds) / 1000) }
            lines.append("latency:   p50 \(ms(latency.valueAtPercentile(50)))  p90 \(ms(latency.valueAtPercentile(90)))  p99 \(ms(latency.valueAtPercentile(99)))  max \(ms(latency.max))")
        }
        lines.append("responses:")
        let keys = tally.outcomes.keys.sorted { a, b in
            let (aStatus, bStatus) = (Int(a.prefix(3)) ?? 1000, Int(b.prefix(3)) ?? 1000)
            return aStatus != bStatus ? aStatus < bStatus : a < b
        }
        let width = max(24, keys.map(\.count).max() ?? 0)
        for key in keys {
            let count = tally.outcomes[key] ?? 0
            lines.append("  \(key.padding(toLength: width, withPad: " ", startingAt: 0)) \(count)")
        }
        if result.unsent > 0 {
            lines.append("not sent:  \(result.unsent) (\(result.timedOut ? "timed out" : "every connection failed"))")
        }
        lines.forEach(Console.line)
        if tally.failed > 0 || result.unsent > 0 { return 3 }
        return tally.rejected > 0 ? 1 : 0
    }

    static func iso8601(milliseconds: Int64) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: Date(timeIntervalSince1970: Double(milliseconds) / 1000))
    }
}

import APNSMock
import APNSMockCore
import APNSMockTesting
import Foundation

/// One call a broadcast driver makes, as its client's caller would: node-apn's
/// `provider.manageChannels`/`provider.broadcast` (scripts/clients/node-apn-http2.js), pushy's
/// `createChannel`/`getChannelConfiguration`/`getChannelIds`/`deleteChannel` and a broadcast
/// notification (scripts/clients/go-apns2/broadcast.go). Absent members are not set on the
/// client's request object.
struct BroadcastStep: Encodable, Sendable {
    enum Operation: String, Encodable, Sendable {
        case create, read, readAll, delete, broadcast
    }

    var op: Operation
    /// Create: the message storage policy.
    var policy: Int?
    /// Create, node-apn only: the notification's whole payload instead of the policy.
    var payload: [String: String]?
    /// Read, delete, broadcast: the channel; absent, the one the last create returned.
    var channel: String?
    /// Broadcast: the expiration (node-apn's `note.expiry`, pushy's invalidation time).
    var expiry: Int64?
    /// Broadcast: the priority (node-apn sends 10 unless told).
    var priority: Int?
    var requestId: String?

    static func create(policy: Int, requestId: String? = nil) -> Self {
        Self(op: .create, policy: policy, requestId: requestId)
    }

    static func create(payload: [String: String], requestId: String? = nil) -> Self {
        Self(op: .create, payload: payload, requestId: requestId)
    }

    static func read(_ channel: String? = nil) -> Self { Self(op: .read, channel: channel) }
    static let readAll = Self(op: .readAll)
    static func delete(_ channel: String? = nil) -> Self { Self(op: .delete, channel: channel) }

    static func broadcast(_ channel: String? = nil, expiry: Int64? = nil, priority: Int? = nil) -> Self {
        Self(op: .broadcast, channel: channel, expiry: expiry, priority: priority)
    }
}

/// What a broadcast driver printed: per step, what the client's result object exposes (`nil`
/// where it exposes nothing: node-apn's results carry no status on success, pushy's no body).
struct BroadcastReport: Decodable, Sendable {
    struct Step: Decodable, Sendable {
        var op: String
        /// node-apn: the result was in `sent`; pushy: the status was the operation's success.
        var ok: Bool
        var status: Int?
        var reason: String?
        /// A failure that is not an APNs answer (or node-apn's `error` for ExpiredProviderToken).
        var error: String?
        var requestId: String?
        var channelId: String?
        var uniqueId: String?
        var apnsId: String?
        var policy: Int?
        var pushType: String?
        var channels: [String]?
    }

    var client: String
    var version: String
    var dialed: [String]
    var tokensSigned: Int
    var steps: [Step]
}

/// Runs node-apn's or pushy's broadcast requests against a running mock.
struct BroadcastDriver {
    /// How node-apn is pointed at the mock: `address` sets `address` and `manageChannelsAddress`
    /// to 127.0.0.1; `apple` keeps node-apn's own host names for the environment and resolves them
    /// to 127.0.0.1 through the `lookup` option node-apn passes on to Node's sockets.
    enum Hosts: String {
        case address, apple
    }

    var client: RealClient
    var scenario: String
    var auth: ClientAuth = .token
    var environment: APNSEnvironment = .sandbox
    /// node-apn only.
    var hosts: Hosts = .address
    /// pushy only: `first-stream` sends `authorization` on a management connection's first
    /// request only, as the branch's ApnsChannelManagementHandler does.
    var managementToken: String?
    var steps: [BroadcastStep]

    func run(against mock: some MockEndpoints) async throws -> BroadcastReport {
        precondition(client == .node || client == .go, "broadcast drivers exist for node-apn and pushy shapes only")
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let steps = String(decoding: try encoder.encode(steps), as: UTF8.self)
        var arguments = ["--port", "\(mock.apnsPort)", "--manage-port", "\(mock.channelManagementPort(environment))",
                         "--ca", mock.caPath, "--scenario", scenario, "--bundle", ClientDriver.bundleID, "--timeout", "30",
                         "--steps", steps] + ClientDriver.credentialArguments(auth, mock: mock)
        if client == .node {
            arguments += ["--hosts", hosts.rawValue, "--environment", environment.rawValue]
        }
        if let managementToken {
            arguments += ["--management-token", managementToken]
        }
        let (program, prefix) = try await ClientDriver.command(for: client)
        let output = try await ExternalTool.run(program, prefix + arguments)
        guard output.exitCode == 0 else {
            throw DriverFailure("\(client.rawValue) broadcast driver exited \(output.exitCode): \(output.stderr)")
        }
        let report: BroadcastReport
        do {
            report = try JSONDecoder().decode(BroadcastReport.self, from: output.stdout)
        } catch {
            throw DriverFailure("\(client.rawValue) driver printed no report (\(error)): \(output.text)\n\(output.stderr)")
        }
        guard report.steps.map(\.op) == self.steps.map(\.op.rawValue) else {
            throw DriverFailure("\(client.rawValue) ran \(report.steps.map(\.op)) for \(self.steps.map(\.op.rawValue))")
        }
        return report
    }
}

/// One request and its response as `nghttp -v` printed them.
struct NghttpExchange: Sendable {
    var status: Int?
    /// Response headers, lower-case names.
    var headers: [String: String]
    /// The response body nghttp wrote between its frame lines.
    var body: Data
    /// The flags of the request's HEADERS frame.
    var requestHeadersFlags: UInt8?
    var requestEndsWithHeaders: Bool { (requestHeadersFlags ?? 0) & 0x01 != 0 }

    struct ErrorBody: Decodable { var reason: String }
    var reason: String? { (try? JSONDecoder().decode(ErrorBody.self, from: body))?.reason }

    /// Reads `nghttp -v`'s standard output: frame lines start with `[  0.123]`, their details are
    /// indented, and a response body is printed as it arrives, just before the line of the DATA
    /// frame that carried it (on that line when the body has no final newline). Other text
    /// (`The negotiated protocol: h2`) is not body.
    init(verbose text: String) {
        status = nil
        headers = [:]
        body = Data()
        var pending = Data()
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            guard let start = Self.frameMarker(in: line) else {
                if !line.hasPrefix(" ") {
                    pending.append(contentsOf: Array(line.utf8) + [UInt8(ascii: "\n")])
                }
                continue
            }
            pending.append(contentsOf: Array(line[..<start].utf8))
            let frame = line[start...]
            if frame.contains("] recv DATA frame <") {
                body.append(pending)
            }
            pending.removeAll()
            if let received = frame.range(of: "] recv (stream_id=") {
                // "] recv (stream_id=13[, sensitive]) name: value"
                let rest = frame[received.upperBound...]
                guard let close = rest.firstIndex(of: ")") else { continue }
                let field = rest[rest.index(after: close)...].drop(while: { $0 == " " })
                guard let separator = field.range(of: ": ", range: field.index(after: field.startIndex)..<field.endIndex)
                else { continue }
                let name = field[..<separator.lowerBound].lowercased()
                let value = String(field[separator.upperBound...])
                if name == ":status" { status = Int(value) } else { headers[name] = value }
            } else if frame.contains("] send HEADERS frame <"), let flags = frame.range(of: "flags=0x") {
                requestHeadersFlags = UInt8(frame[flags.upperBound...].prefix(2), radix: 16)
            }
        }
    }

    /// Where a frame line (`[  0.295] …`) starts in `line`, if it has one.
    private static func frameMarker(in line: Substring) -> Substring.Index? {
        var search = line.startIndex
        while let open = line[search...].firstIndex(of: "[") {
            var index = line.index(after: open)
            while index < line.endIndex, line[index] == " " { index = line.index(after: index) }
            let digits = line[index...].prefix(while: { $0.isNumber || $0 == "." })
            let after = digits.endIndex
            if digits.contains("."), after < line.endIndex, line[after] == "]" { return open }
            search = line.index(after: open)
        }
        return nil
    }
}

enum Nghttp {
    /// Sends one request with `nghttp -v` (a new connection per call), headers given with `-H`,
    /// and the body from a file with `-d` when there is one.
    static func send(
        url: String, method: String, headers: [String: String], body: Data? = nil, extra: [String] = []
    ) async throws -> NghttpExchange {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("apns-mock-nghttp-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        var arguments = ["-v", "-t", "20", "-H", ":method: \(method)"]
        for (name, value) in headers.sorted(by: { $0.key < $1.key }) {
            arguments += ["-H", "\(name): \(value)"]
        }
        if let body {
            let path = directory.appendingPathComponent("body").path
            try body.write(to: URL(fileURLWithPath: path))
            arguments += ["-d", path]
        }
        arguments += extra + [url]
        let output = try await ExternalTool.run("nghttp", arguments)
        guard output.exitCode == 0 else { throw DriverFailure("nghttp exited \(output.exitCode): \(output.stderr)") }
        return NghttpExchange(verbose: output.text)
    }
}

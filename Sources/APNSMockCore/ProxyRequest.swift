/// The proxy listener's one request: HTTP/1.1 `CONNECT host:port` to one of Apple's push hosts
/// (docs/configuration.md, "proxy"), for clients that cannot change the host they dial but can
/// take an HTTP proxy (pyapns-client and kalyke through `HTTPS_PROXY`, node-apn's `proxy`,
/// aioapns' `proxy_host`, gorush's `--proxy`). Pure: it reads the request head, names the listener
/// the tunnel leads to, or says why not. Never an open proxy: any other target is refused.
public enum ProxyRequest {
    /// Where an accepted tunnel leads.
    public enum Target: Sendable, Equatable {
        /// The APNs listener (device pushes and broadcasts).
        case apns
        /// The channel-management listener of an environment.
        case channelManagement(APNSEnvironment)
    }

    /// A refused request: the status to answer and why, said in the body.
    public struct Refusal: Error, Sendable, Equatable {
        public var status: Int
        public var message: String

        public init(status: Int, message: String) {
            self.status = status
            self.message = message
        }
    }

    /// The longest request head read; a longer one is refused (431).
    public static let headLimit = 8192

    /// Apple's hosts a tunnel may reach, with the ports Apple serves them on.
    public static let hosts: [(host: String, ports: Set<Int>, target: Target)] = [
        ("api.push.apple.com", [443, 2197], .apns),
        ("api.sandbox.push.apple.com", [443, 2197], .apns),
        ("api.development.push.apple.com", [443, 2197], .apns),
        ("api-broadcast.sandbox.push.apple.com", [443, 2197], .apns),
        ("api-broadcast.push.apple.com", [443, 2197], .apns),
        ("api-manage-broadcast.sandbox.push.apple.com", [2195], .channelManagement(.sandbox)),
        ("api-manage-broadcast.push.apple.com", [2196], .channelManagement(.production)),
    ]

    /// The end of a request head in `bytes`: the index just past its blank line, or `nil` when it
    /// has not all arrived.
    public static func headEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for index in 3..<bytes.count where bytes[index] == 0x0A {
            if bytes[index - 1] == 0x0D, bytes[index - 2] == 0x0A, bytes[index - 3] == 0x0D { return index + 1 }
        }
        return nil
    }

    /// Judges a complete request head (its request line and header fields, through the blank line).
    public static func target(head: [UInt8]) -> Result<(target: Target, host: String, port: Int), Refusal> {
        // The request line, up to its CR or LF (as bytes: Swift reads "\r\n" as one Character).
        let lineBytes = head.prefix { $0 != 0x0D && $0 != 0x0A }
        guard let line = String(validating: lineBytes, as: UTF8.self) else {
            return .failure(Refusal(status: 400, message: "the request line is not text"))
        }
        let parts = line.split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[2] == "HTTP/1.1" || parts[2] == "HTTP/1.0" else {
            return .failure(Refusal(status: 400, message: "expected a request line: CONNECT host:port HTTP/1.1"))
        }
        guard parts[0] == "CONNECT" else {
            return .failure(Refusal(
                status: 405, message: "only CONNECT host:port is served here (a tunnel to Apple's push hosts), not \(parts[0])"))
        }
        let authority = parts[1]
        guard let colon = authority.lastIndex(of: ":"), !authority.hasPrefix("["),
              let port = Int(authority[authority.index(after: colon)...]), (1...65535).contains(port)
        else {
            return .failure(Refusal(status: 400, message: "the target must be host:port, e.g. api.push.apple.com:443; got \(authority.prefix(200))"))
        }
        let host = authority[..<colon].lowercased()
        guard !host.isEmpty, host.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "." || $0 == "-" }) else {
            return .failure(Refusal(status: 400, message: "the target host is not a host name: \(authority[..<colon].prefix(200))"))
        }
        guard let known = hosts.first(where: { $0.host == host }) else {
            return .failure(Refusal(
                status: 403,
                message: "this proxy tunnels only to Apple's push hosts (\(hosts.map(\.host).joined(separator: ", "))), not \(host)"))
        }
        guard known.ports.contains(port) else {
            return .failure(Refusal(
                status: 403,
                message: "\(host) is served on port \(known.ports.sorted().map(String.init).joined(separator: " or ")), not \(port)"))
        }
        return .success((known.target, host, port))
    }
}

/// A web origin as a browser sends it in `Origin` (RFC 6454): scheme, host and port, compared
/// case-insensitively, with the scheme's default port left out (`http://a:80` is `http://a`).
/// The admin API's browser checks (docs/admin-api.md, "Browsers and the admin API") and
/// `admin.allowedOrigins` use it.
public struct WebOrigin: Sendable, Hashable, CustomStringConvertible {
    /// Lowercased.
    public let scheme: String
    /// Lowercased; an IPv6 address without its brackets.
    public let host: String
    /// `nil` for the scheme's default port.
    public let port: Int?

    /// Parses `scheme://host[:port]` and nothing else (no user, path, query or fragment); `nil`
    /// otherwise. `Origin: null` (opaque origins: sandboxed frames, `file:` pages) is not an origin.
    public init?(_ text: String) {
        let lowered = text.lowercased()
        guard let separator = lowered.range(of: "://") else { return nil }
        let scheme = String(lowered[..<separator.lowerBound])
        guard let first = scheme.utf8.first, (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(first),
              scheme.utf8.allSatisfy({ Self.isSchemeByte($0) })
        else { return nil }
        guard let authority = HostAndPort(String(lowered[separator.upperBound...])) else { return nil }
        self.scheme = scheme
        self.host = authority.host
        self.port = authority.port == Self.defaultPort(of: scheme) ? nil : authority.port
    }

    /// The origin of a page served by `authority` (a `Host` header) over `scheme`.
    public init(scheme: String, authority: HostAndPort) {
        self.scheme = scheme.lowercased()
        self.host = authority.host
        self.port = authority.port == Self.defaultPort(of: self.scheme) ? nil : authority.port
    }

    /// `http://host[:port]`, IPv6 in brackets: the form browsers send.
    public var description: String {
        let host = self.host.contains(":") ? "[\(self.host)]" : self.host
        return port.map { "\(scheme)://\(host):\($0)" } ?? "\(scheme)://\(host)"
    }

    public static func defaultPort(of scheme: String) -> Int? {
        switch scheme {
        case "http", "ws": 80
        case "https", "wss": 443
        default: nil
        }
    }

    private static func isSchemeByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
             UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."):
            true
        default:
            false
        }
    }
}

/// A `Host` header's value (or an origin's authority): `host[:port]`, `[v6]:port`. The host is
/// lowercased, a trailing dot and an IPv6 address's brackets removed.
public struct HostAndPort: Sendable, Hashable {
    public let host: String
    /// `nil` when the authority names none.
    public let port: Int?

    public init?(_ text: String) {
        var host: Substring
        var portText: Substring?
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return nil }
            host = text[text.index(after: text.startIndex)..<close]
            let rest = text[text.index(after: close)...]
            if !rest.isEmpty {
                guard rest.hasPrefix(":") else { return nil }
                portText = rest.dropFirst()
            }
            guard !host.isEmpty, host.contains(":"), host.utf8.allSatisfy(Self.isIPv6Byte) else { return nil }
        } else {
            let parts = text.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
            host = parts[0]
            if parts.count == 2 { portText = parts[1] }
            if host.hasSuffix(".") { host = host.dropLast() }
            guard !host.isEmpty, host.utf8.allSatisfy(Self.isNameByte) else { return nil }
        }
        if let portText {
            guard !portText.isEmpty, portText.count <= 5, portText.utf8.allSatisfy({ (48...57).contains($0) }),
                  let port = Int(portText), (1...65_535).contains(port)
            else { return nil }
            self.port = port
        } else {
            self.port = nil
        }
        self.host = host.lowercased()
    }

    /// Letters, digits, `-`, `.` and `_` (a registered name or an IPv4 address).
    static func isNameByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
             UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"):
            true
        default:
            false
        }
    }

    static func isIPv6Byte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "f"), UInt8(ascii: "A")...UInt8(ascii: "F"),
             UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: ":"), UInt8(ascii: "."):
            true
        default:
            false
        }
    }
}

extension Configuration {
    /// `admin.allowedOrigins` (and `APNS_MOCK_ADMIN_ALLOWED_ORIGINS`): origins, each
    /// `scheme://host[:port]`, none twice; kept in the form browsers send.
    static func allowedOrigins<N>(_ field: Field<N>) throws(ConfigurationError) -> [String] {
        var origins: [String] = []
        for (text, element) in try field.stringList() {
            guard let origin = WebOrigin(text) else {
                throw element.error(
                    .invalidValue,
                    "\"\(text)\" is not an origin: expected scheme://host[:port] with no path, e.g. http://dashboard.internal:8080")
            }
            guard !origins.contains(origin.description) else {
                throw element.error(.duplicate, "origin \(origin) is listed twice")
            }
            origins.append(origin.description)
        }
        return origins
    }

    /// `admin.allowedHosts` (and `APNS_MOCK_ADMIN_ALLOWED_HOSTS`): host names or addresses
    /// without a port, or `*` for any; lowercased, none twice.
    static func allowedHosts<N>(_ field: Field<N>) throws(ConfigurationError) -> [String] {
        var hosts: [String] = []
        for (text, element) in try field.stringList() {
            let host: String
            if text == "*" {
                host = text
            } else if let parsed = HostAndPort(text.filter { $0 == ":" }.count > 1 && !text.hasPrefix("[") ? "[\(text)]" : text),
                      parsed.port == nil {
                host = parsed.host
            } else {
                throw element.error(
                    .invalidValue,
                    "\"\(text)\" is not a host name: expected a name or address without scheme or port, e.g. apns-mock.ci.svc.cluster.local, or * for any")
            }
            guard !hosts.contains(host) else { throw element.error(.duplicate, "host \(host) is listed twice") }
            hosts.append(host)
        }
        return hosts
    }

    /// `admin.token` (and `APNS_MOCK_ADMIN_TOKEN`): visible ASCII only. A token with a space, a
    /// line break, another control character or a character outside ASCII could never be sent in
    /// an `Authorization` header, so every request would get 401.
    static func adminToken<N>(_ field: Field<N>) throws(ConfigurationError) -> String {
        let token = try field.nonEmptyString()
        for (offset, scalar) in token.unicodeScalars.enumerated() where !(0x21...0x7E).contains(scalar.value) {
            let what: String
            if scalar.properties.isWhitespace {
                what = "whitespace"
            } else if scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) {
                what = "a control character"
            } else {
                what = "a character outside ASCII"
            }
            let code = String(scalar.value, radix: 16, uppercase: true)
            throw field.error(
                .invalidValue,
                "contains \(what) (U+\(String(repeating: "0", count: max(0, 4 - code.count)) + code) at character \(offset + 1)):"
                    + " an Authorization header cannot carry it, so no client could send this token; use letters, digits and punctuation")
        }
        return token
    }
}

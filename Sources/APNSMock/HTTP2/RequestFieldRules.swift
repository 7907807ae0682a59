internal import CNGHTTP2
import APNSMockCore

/// The request rules of RFC 9113 §8.1–8.3 that nghttp2's HTTP messaging layer would enforce, run
/// by ``HTTP2Session`` instead (it switches that layer off).
///
/// nghttp2 checks every byte of every field of every request, including the never-indexed
/// provider token that arrives again on each request. The session runs the same checks (the
/// byte-level ones through nghttp2's own exported `nghttp2_check_*` functions) only for values it
/// has not already validated on the connection: a value byte-equal to the last one accepted for
/// its field is known to be valid. A request that breaks a rule gets RST_STREAM(PROTOCOL_ERROR),
/// as nghttp2 answers it; HTTPMessagingTests holds both to the same cases.
enum RequestFieldRules {
    /// What a field name means to the rules (beyond the fields APNs interprets, ``KnownHeader``).
    enum Role: Equatable {
        /// Any other well-formed name.
        case plain
        case contentLength
        case host
        case te
        /// `connection`, `keep-alive`, `proxy-connection`, `transfer-encoding`, `upgrade`: never
        /// allowed in HTTP/2 (§8.2.2).
        case connectionSpecific
        /// A name that is not a lowercase token, or an unknown pseudo-header.
        case malformed
    }

    /// Pseudo-headers and `host` a stream has seen, and whether a regular field came yet.
    struct Seen: OptionSet {
        var rawValue: UInt16
        static let method = Seen(rawValue: 1 << 0)
        static let scheme = Seen(rawValue: 1 << 1)
        static let path = Seen(rawValue: 1 << 2)
        static let authority = Seen(rawValue: 1 << 3)
        static let host = Seen(rawValue: 1 << 4)
        /// A regular field arrived: no pseudo-header may follow (§8.3).
        static let regular = Seen(rawValue: 1 << 5)
        /// What some values say, for the checks of the whole block (``isComplete(_:)``).
        static let connect = Seen(rawValue: 1 << 6)
        static let options = Seen(rawValue: 1 << 7)
        static let httpScheme = Seen(rawValue: 1 << 8)
        static let pathFromRoot = Seen(rawValue: 1 << 9)
        static let pathAsterisk = Seen(rawValue: 1 << 10)

        init(rawValue: UInt16) { self.rawValue = rawValue }

        /// What a valid value of `header` tells the block checks: CONNECT and OPTIONS methods, an
        /// http(s) scheme, a path from the root or `*`.
        init(_ header: KnownHeader, value: String) {
            switch header {
            case .method: self = value == "CONNECT" ? .connect : value == "OPTIONS" ? .options : []
            case .scheme: self = value == "https" || value == "http" ? .httpScheme : []
            case .path: self = value.utf8.first == UInt8(ascii: "/") ? .pathFromRoot : value == "*" ? .pathAsterisk : []
            default: self = []
            }
        }

        init(_ header: KnownHeader) {
            switch header {
            case .method: self = .method
            case .scheme: self = .scheme
            case .path: self = .path
            case .authority: self = .authority
            default: self = []
            }
        }
    }

    /// The role of a regular (non-pseudo) field name that is not a ``KnownHeader``.
    static func role(ofName name: UnsafeBufferPointer<UInt8>) -> Role {
        guard nghttp2_check_header_name(name.baseAddress, name.count) != 0, name.first != UInt8(ascii: ":") else {
            return .malformed
        }
        switch String(decoding: name, as: UTF8.self) {
        case "content-length": return .contentLength
        case "host": return .host
        case "te": return .te
        case "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade": return .connectionSpecific
        default: return .plain
        }
    }

    /// Whether `value` is valid for the field: per pseudo-header syntax, `host` as an authority,
    /// anything else as RFC 9113 field content (no NUL, CR, LF; no leading or trailing space/tab).
    static func isValid(_ value: UnsafeBufferPointer<UInt8>, for header: KnownHeader) -> Bool {
        switch header {
        case .method: return value.count > 0 && nghttp2_check_method(value.baseAddress, value.count) != 0
        case .path: return value.count > 0 && nghttp2_check_path(value.baseAddress, value.count) != 0
        case .authority: return isValidAuthority(value)
        case .scheme: return isValidScheme(value)
        default: return isValidFieldValue(value)
        }
    }

    static func isValid(_ value: UnsafeBufferPointer<UInt8>, for role: Role) -> Bool {
        switch role {
        case .host: return isValidAuthority(value)
        case .te:
            // Only "trailers" (any case) is allowed (§8.2.2).
            return value.count == 8 && String(decoding: value, as: UTF8.self).lowercased() == "trailers"
        case .contentLength: return contentLength(value) != nil
        case .plain: return isValidFieldValue(value)
        case .connectionSpecific, .malformed: return false
        }
    }

    static func isValidFieldValue(_ value: UnsafeBufferPointer<UInt8>) -> Bool {
        nghttp2_check_header_value_rfc9113(value.baseAddress, value.count) != 0
    }

    static func isValidAuthority(_ value: UnsafeBufferPointer<UInt8>) -> Bool {
        value.count > 0 && nghttp2_check_authority(value.baseAddress, value.count) != 0
    }

    /// `scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." )` (RFC 3986 §3.1).
    static func isValidScheme(_ value: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let first = value.first, isAlpha(first) else { return false }
        return value.dropFirst().allSatisfy { byte in
            isAlpha(byte) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
                || byte == UInt8(ascii: "+") || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".")
        }
    }

    private static func isAlpha(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte | 0x20)
    }

    /// A content-length value: one or more digits, within Int64.
    static func contentLength(_ value: UnsafeBufferPointer<UInt8>) -> Int? {
        guard !value.isEmpty else { return nil }
        var length = 0
        for byte in value {
            guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
            let (times10, overflow1) = length.multipliedReportingOverflow(by: 10)
            let (sum, overflow2) = times10.addingReportingOverflow(Int(byte - UInt8(ascii: "0")))
            if overflow1 || overflow2 { return nil }
            length = sum
        }
        return length
    }

    /// Whether a request's header block has what §8.3.1 requires: `:method`, `:scheme` and `:path`
    /// (CONNECT: `:authority` and neither of the other two), and `:authority` or `host`; with an
    /// http or https scheme, a `:path` from the root, or `*` for OPTIONS.
    static func isComplete(_ seen: Seen) -> Bool {
        if seen.contains(.connect) {
            return seen.contains(.authority) && seen.isDisjoint(with: [.scheme, .path])
        }
        guard seen.isSuperset(of: [.method, .scheme, .path]), !seen.isDisjoint(with: [.authority, .host]) else {
            return false
        }
        return !seen.contains(.httpScheme) || seen.contains(.pathFromRoot)
            || seen.isSuperset(of: [.pathAsterisk, .options])
    }
}

extension KnownHeader {
    /// `:method`, `:scheme`, `:path`, `:authority`.
    var isPseudoHeader: Bool {
        switch self {
        case .method, .scheme, .path, .authority: return true
        default: return false
        }
    }
}

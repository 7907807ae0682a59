/// Byte-level readers for the values of APNs request headers.
///
/// Validation runs for every request at hundreds of thousands of requests per second, so each
/// reader walks the value's UTF-8 bytes once, without regular expressions, without allocating and
/// without going through `Character` (whose grapheme breaking is far slower than byte comparison).
public enum HeaderSyntax {
    /// Whether `value` is a canonical UUID as `apns-id` needs: 36 characters, hex digits in groups
    /// of 8-4-4-4-12 separated by hyphens, either case. Braces, URNs and missing hyphens, which some
    /// UUID parsers tolerate, are BadMessageId for APNs.
    public static func isCanonicalUUID(_ value: String) -> Bool {
        value.withUTF8Bytes { bytes in
            guard bytes.count == 36 else { return false }
            for (offset, byte) in bytes.enumerated() {
                switch offset {
                case 8, 13, 18, 23:
                    guard byte == UInt8(ascii: "-") else { return false }
                default:
                    guard byte.isHexDigit else { return false }
                }
            }
            return true
        }
    }

    /// The `apns-priority` value, if it is exactly one of Apple's three (`10`, `5`, `1`). Anything
    /// else (`05`, ` 10`, `+5`, `3`) is BadPriority.
    public static func priority(_ value: String) -> Int? {
        switch value {
        case "10": return 10
        case "5": return 5
        case "1": return 1
        default: return nil
        }
    }

    /// The `apns-expiration` value as UNIX seconds, if it is a non-empty run of decimal digits that
    /// fits in 64 bits. Signs, spaces, fractions and dates in other notations are BadExpirationDate.
    public static func expiration(_ value: String) -> Int64? {
        value.withUTF8Bytes(expiration(bytes:))
    }

    private static func expiration(bytes: UnsafeBufferPointer<UInt8>) -> Int64? {
        var result: Int64 = 0
        var sawDigit = false
        for byte in bytes {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
            let (shifted, overflow1) = result.multipliedReportingOverflow(by: 10)
            let (next, overflow2) = shifted.addingReportingOverflow(Int64(byte - UInt8(ascii: "0")))
            guard !overflow1, !overflow2 else { return nil }
            result = next
            sawDigit = true
        }
        return sawDigit ? result : nil
    }

    /// Where `:path` points: the device token of `/3/device/<token>`, or what is wrong with it.
    public enum DevicePath: Sendable, Equatable {
        /// The token as a slice of the path (no copy).
        case token(Substring)
        /// `/3/device/` with nothing after it.
        case missingToken
        /// Any other path, including a token followed by another segment.
        case badPath
    }

    /// Reads `:path` in one pass over its bytes.
    public static func devicePath(_ path: String) -> DevicePath {
        let prefixLength = devicePathPrefix.utf8CodeUnitCount
        let shape: DevicePath? = path.withUTF8Bytes { bytes in
            guard bytes.hasPrefix(devicePathPrefix) else { return .badPath }
            let token = bytes.dropping(prefixLength)
            if token.isEmpty { return .missingToken }
            if token.contains(UInt8(ascii: "/")) { return .badPath }
            return nil
        }
        if let shape { return shape }
        // The prefix is ASCII, so its end is a valid index into the path's UTF-8.
        let start = path.utf8.index(path.utf8.startIndex, offsetBy: prefixLength)
        return .token(path[start...])
    }

    private static let devicePathPrefix: StaticString = "/3/device/"

    /// Longest `apns-topic` the mock accepts as well formed.
    public static let maximumTopicLength = 255

    /// Whether `topic` is well formed; a malformed topic is 400 BadTopic.
    ///
    /// Mock's choice, after Apple's rule for bundle IDs (letters, digits, hyphens and periods): a
    /// topic is 1–255 bytes of ASCII letters, digits, `-`, `.` and `_` (underscore tolerated because
    /// older bundle IDs and MDM topics carry it), made of non-empty dot-separated labels (no leading
    /// or trailing dot, no `..`). Whitespace, control characters and non-ASCII bytes are malformed.
    public static func isWellFormedTopic(_ topic: String) -> Bool {
        topic.withUTF8Bytes(isWellFormedTopic(bytes:))
    }

    private static func isWellFormedTopic(bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard bytes.count <= maximumTopicLength else { return false }
        var previousWasDot = true  // a leading dot is an empty first label
        for byte in bytes {
            if byte == UInt8(ascii: ".") {
                if previousWasDot { return false }
                previousWasDot = true
                continue
            }
            previousWasDot = false
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"):
                continue
            default:
                return false
            }
        }
        return !bytes.isEmpty && !previousWasDot
    }

    /// Longest `apns-collapse-id` in bytes; one more is BadCollapseId.
    public static let maximumCollapseIDLength = 64
}

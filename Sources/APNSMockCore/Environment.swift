/// The APNs environment a request is addressed to.
public enum APNSEnvironment: String, Sendable, Codable, CaseIterable {
    case sandbox
    case production

    /// The environment named by the host a client dialled (TLS SNI or `:authority`), or `nil` when
    /// the host is not one of Apple's, in which case the server's default applies.
    ///
    /// A port suffix (`api.push.apple.com:443`) and letter case are ignored.
    public init?(host: some StringProtocol) {
        var name = Substring(host).utf8[...]
        if let colon = name.lastIndex(of: UInt8(ascii: ":")), name.last != UInt8(ascii: "]") {
            name = name[..<colon]
        }
        // Compared without lowercasing into a new String: this runs for every request.
        if Self.equalIgnoringCase(name, "api.push.apple.com") {
            self = .production
        } else if Self.equalIgnoringCase(name, "api.sandbox.push.apple.com")
            || Self.equalIgnoringCase(name, "api.development.push.apple.com") {
            self = .sandbox
        } else if Self.equalIgnoringCase(name, "api-broadcast.sandbox.push.apple.com")
            || Self.equalIgnoringCase(name, "api-manage-broadcast.sandbox.push.apple.com") {
            // Broadcast hosts: Apple's broadcast examples dial api-broadcast.sandbox.push.apple.com.
            self = .sandbox
        } else if Self.equalIgnoringCase(name, "api-broadcast.push.apple.com")
            || Self.equalIgnoringCase(name, "api-manage-broadcast.push.apple.com") {
            self = .production
        } else {
            return nil
        }
    }

    private static func equalIgnoringCase(_ bytes: Substring.UTF8View.SubSequence, _ lowercase: StaticString) -> Bool {
        guard bytes.count == lowercase.utf8CodeUnitCount else { return false }
        var index = 0
        for byte in bytes {
            let folded = (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) ? byte | 0x20 : byte
            if folded != lowercase.utf8Start[index] { return false }
            index += 1
        }
        return true
    }
}

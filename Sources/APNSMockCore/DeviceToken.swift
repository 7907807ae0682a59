/// Device-token format rules (docs/apns.md, "Device tokens").
public enum DeviceToken {
    /// Longest token accepted by default. Apple makes no promise about length; 64 hex digits is
    /// common and 160 is seen from simulators.
    public static let maximumLength = 200
    /// The only length accepted in strict mode.
    public static let strictLength = 64

    /// Non-empty, even-length hex (either case) up to ``maximumLength``; exactly
    /// ``strictLength`` digits in strict mode.
    public static func isWellFormed(_ token: some Collection<UInt8>, strict: Bool) -> Bool {
        let count = token.count
        if strict {
            guard count == strictLength else { return false }
        } else {
            guard count > 0, count <= maximumLength, count % 2 == 0 else { return false }
        }
        return token.allSatisfy { $0.isHexDigit }
    }

    /// The token's canonical spelling: lowercase hex.
    ///
    /// APNs treats `AB12…` and `ab12…` as the same device, so the registry, the rate limiter and the
    /// record key tokens by this spelling. Tokens already lowercase (the usual case) come back
    /// unchanged, without allocating.
    public static func canonical(_ token: String) -> String {
        token.utf8.contains(where: \.isUppercaseHexLetter) ? token.lowercased() : token
    }
}

/// Magic device tokens (`validation.magicDeviceTokens`, off unless configured; docs/teams.md): a
/// device token that starts with ``prefix`` and one of ``answers``' statuses
/// (`fa11410…`, `fa11503…`) is answered that status and reason when the mock would otherwise have
/// accepted the push, so a test can reach an error path with no admin call at all. The record says
/// `injected: true`, as for a fault rule's answer.
public enum MagicDeviceToken {
    /// `fa11` ("fail"), in any case.
    public static let prefix = "fa11"

    /// The statuses a magic token may name, and the reason each is answered with.
    public static let answers: [(status: Int, reason: Reason)] = [
        (400, .badDeviceToken), (403, .expiredProviderToken), (410, .unregistered), (429, .tooManyRequests),
        (500, .internalServerError), (503, .serviceUnavailable),
    ]

    /// The reason `token` asks for, or `nil` when it is no magic token.
    public static func reason(for token: String) -> Reason? {
        var bytes = token.utf8.makeIterator()
        for expected in prefix.utf8 {
            guard let byte = bytes.next(), byte | 0x20 == expected else { return nil }
        }
        var status = 0
        for _ in 0..<3 {
            guard let byte = bytes.next(), (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
            status = status * 10 + Int(byte - UInt8(ascii: "0"))
        }
        return answers.first { $0.status == status }?.reason
    }
}

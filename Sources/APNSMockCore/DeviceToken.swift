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

/// An APNs provider token (JWT) taken apart, before its signature is checked.
///
/// Parsing is pure and strict (docs/authentication.md): the `authorization` value must be
/// `bearer <JWT>` (scheme matched case-insensitively, one space), the JWT three base64url parts
/// without padding, the header a JSON object with `"alg"` and `"kid"` strings, the claims a JSON
/// object with an `"iss"` string and an integer `"iat"`. Any other shape is InvalidProviderToken.
/// Other members (`"typ":"JWT"`, which several libraries add) are tolerated, a repeated member is
/// not. Verifying the ES256 signature is the server's job (it needs OpenSSL); it signs
/// ``signingInput`` and ``signature`` is the raw `r ‖ s`.
public struct ProviderToken: Sendable, Equatable {
    /// The header's `alg`; APNs accepts only `ES256`, checked by ``parse(authorization:)``.
    public var algorithm: String
    /// The header's `kid`: the key ID.
    public var keyID: String
    /// The claim `iss`: the team ID.
    public var issuer: String
    /// The claim `iat`, UNIX seconds.
    public var issuedAt: Int64
    /// The bytes the signature covers: `<header>.<claims>` as sent.
    public var signingInput: [UInt8]
    /// The decoded third part.
    public var signature: [UInt8]

    /// How long a token stays usable after its `iat` (Apple: one hour).
    public static let lifetime: Int64 = 3600
    /// How far in the future an `iat` may lie before the token is invalid (mock's choice: clock
    /// skew of a minute is tolerated, more is a broken clock or a forged token).
    public static let allowedClockSkew: Int64 = 60

    public init(
        algorithm: String, keyID: String, issuer: String, issuedAt: Int64, signingInput: [UInt8], signature: [UInt8]
    ) {
        self.algorithm = algorithm
        self.keyID = keyID
        self.issuer = issuer
        self.issuedAt = issuedAt
        self.signingInput = signingInput
        self.signature = signature
    }

    /// Whether the `authorization` value uses the `bearer` scheme (any case) followed by a space.
    public static func hasBearerScheme(_ authorization: String) -> Bool {
        let scheme = Array("bearer ".utf8)
        var index = 0
        for byte in authorization.utf8 {
            if index == scheme.count { return true }
            let lower = (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) ? byte | 0x20 : byte
            guard lower == scheme[index] else { return false }
            index += 1
        }
        return index == scheme.count
    }

    /// Parses an `authorization` header value. `nil` means InvalidProviderToken: the value is not
    /// a well-formed ES256 provider token.
    public static func parse(authorization: String) -> ProviderToken? {
        guard hasBearerScheme(authorization) else { return nil }
        let jwt = Array(authorization.utf8.dropFirst(7))
        let parts = jwt.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 3,
              let headerBytes = Base64URLDecoding.decode(parts[0]),
              let claimBytes = Base64URLDecoding.decode(parts[1]),
              let signature = Base64URLDecoding.decode(parts[2]),
              let header = try? JSONValue.parse(headerBytes),
              let claims = try? JSONValue.parse(claimBytes),
              let headerMembers = uniqueMembers(header),
              let claimMembers = uniqueMembers(claims),
              let algorithm = headerMembers["alg"]?.stringValue, algorithm == "ES256",
              let keyID = headerMembers["kid"]?.stringValue, !keyID.isEmpty,
              let issuer = claimMembers["iss"]?.stringValue, !issuer.isEmpty,
              case .number(let literal) = claimMembers["iat"], let issuedAt = Int64(literal)
        else { return nil }
        return ProviderToken(
            algorithm: algorithm, keyID: keyID, issuer: issuer, issuedAt: issuedAt,
            signingInput: Array(jwt[..<parts[1].endIndex]), signature: signature)
    }

    /// The time check that applies on every request, not only when the token is first seen:
    /// `nil` while the token is usable at `now` (UNIX seconds), else its reason.
    public func timeProblem(now: Int64) -> Reason? {
        if issuedAt > now + Self.allowedClockSkew { return .invalidProviderToken }
        if now - issuedAt > Self.lifetime { return .expiredProviderToken }
        return nil
    }

    private static func uniqueMembers(_ value: JSONValue) -> [String: JSONValue]? {
        guard let members = value.members else { return nil }
        var result: [String: JSONValue] = [:]
        for member in members {
            guard result.updateValue(member.value, forKey: member.key) == nil else { return nil }
        }
        return result
    }
}

/// base64url (RFC 4648 section 5) without padding, as JWT requires.
public enum Base64URLDecoding {
    /// The decoded bytes, or `nil` for a character outside the alphabet, padding, or a length
    /// no encoder produces.
    public static func decode(_ text: some Collection<UInt8>) -> [UInt8]? {
        guard text.count % 4 != 1 else { return nil }
        var output: [UInt8] = []
        output.reserveCapacity(text.count * 3 / 4)
        var buffer: UInt32 = 0
        var bits = 0
        for byte in text {
            let value: UInt8
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): value = byte - UInt8(ascii: "A")
            case UInt8(ascii: "a")...UInt8(ascii: "z"): value = byte - UInt8(ascii: "a") + 26
            case UInt8(ascii: "0")...UInt8(ascii: "9"): value = byte - UInt8(ascii: "0") + 52
            case UInt8(ascii: "-"): value = 62
            case UInt8(ascii: "_"): value = 63
            default: return nil
            }
            buffer = buffer << 6 | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                output.append(UInt8(truncatingIfNeeded: buffer >> UInt32(bits)))
            }
        }
        // Leftover bits must be zero, as every encoder leaves them.
        guard buffer & ((1 << UInt32(bits)) - 1) == 0 else { return nil }
        return output
    }
}

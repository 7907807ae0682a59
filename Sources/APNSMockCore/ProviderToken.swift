/// An APNs provider token (JWT) taken apart, before its signature is checked.
///
/// Parsing is pure (docs/authentication.md): the `authorization` value must be `bearer <JWT>`
/// (scheme matched case-insensitively, one space), the JWT three base64url parts without padding,
/// the header a JSON object with `"alg"` and `"kid"` strings, the claims a JSON object with an
/// `"iss"` string and an `"iat"` in one of the forms real clients sign (``IssuedAtForm``). Any
/// other shape is InvalidProviderToken. Other members (`"typ":"JWT"`, which several libraries
/// add) are tolerated, a repeated member is not. The signature may be JOSE's raw `r ‖ s` (64 bytes,
/// RFC 7518) or X9.62 DER (a SEQUENCE of two INTEGERs, 8–72 bytes), which Java's
/// `SHA256withECDSA` produces and Apple accepts (pushy signs so); ``signatureForm`` says which, and
/// ``signature`` is always the raw `r ‖ s`. Verifying it is the server's job (it needs OpenSSL).
public struct ProviderToken: Sendable, Equatable {
    /// The header's `alg`; APNs accepts only `ES256`, checked by ``parse(authorization:)``.
    public var algorithm: String
    /// The header's `kid`: the key ID.
    public var keyID: String
    /// The claim `iss`: the team ID.
    public var issuer: String
    /// The claim `iat`, UNIX seconds (truncated when the client signed a fraction).
    public var issuedAt: Int64
    /// How the client wrote `iat`.
    public var issuedAtForm: IssuedAtForm
    /// The bytes the signature covers: `<header>.<claims>` as sent.
    public var signingInput: [UInt8]
    /// The signature as raw `r ‖ s` (64 bytes), whatever form the client sent it in.
    public var signature: [UInt8]
    /// How the client encoded the signature.
    public var signatureForm: SignatureForm

    /// How long a token stays usable after its `iat` (Apple: one hour).
    public static let lifetime: Int64 = 3600
    /// How far in the future an `iat` may lie before the token is invalid. Apple: the value "must
    /// be no more than one hour from the current time", which bounds both directions; a client
    /// whose clock runs minutes ahead of Apple's still works, so it works here too.
    public static let allowedClockSkew: Int64 = 3600

    /// The encodings of an ES256 signature that clients working against Apple send.
    public enum SignatureForm: String, Sendable, Codable, CaseIterable {
        /// JOSE (RFC 7518 §3.4): `r ‖ s`, 32 bytes each.
        case jose
        /// X9.62 DER: `SEQUENCE { INTEGER r, INTEGER s }`, minimally encoded (Java's
        /// `SHA256withECDSA`, as pushy signs).
        case der
    }

    /// The spellings of `iat` that clients working against Apple send. RFC 7519's NumericDate is
    /// any JSON number, fractions included; Apple's own sample token carries a string.
    public enum IssuedAtForm: String, Sendable, Codable, CaseIterable {
        /// `1795433772`: what Apple documents.
        case integer
        /// `1795433772.0045` (Python's `time.time()`: apns2/apns2-up, pyapns-client, gobiko) or
        /// a number in exponent notation (`1.795433772E9`, Java's `Double.toString`); truncated
        /// to whole seconds.
        case decimal
        /// `"1795433772"`: a string of decimal digits (kalyke; APNSwift before 2026).
        case string
    }

    public init(
        algorithm: String, keyID: String, issuer: String, issuedAt: Int64, issuedAtForm: IssuedAtForm = .integer,
        signingInput: [UInt8], signature: [UInt8], signatureForm: SignatureForm = .jose
    ) {
        self.algorithm = algorithm
        self.keyID = keyID
        self.issuer = issuer
        self.issuedAt = issuedAt
        self.issuedAtForm = issuedAtForm
        self.signingInput = signingInput
        self.signature = signature
        self.signatureForm = signatureForm
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
              let encoded = Base64URLDecoding.decode(parts[2]),
              let (signature, signatureForm) = ECDSASignature.raw(encoded),
              let header = try? JSONValue.parse(headerBytes),
              let claims = try? JSONValue.parse(claimBytes),
              let headerMembers = uniqueMembers(header),
              let claimMembers = uniqueMembers(claims),
              let algorithm = headerMembers["alg"]?.stringValue, algorithm == "ES256",
              let keyID = headerMembers["kid"]?.stringValue, !keyID.isEmpty,
              let issuer = claimMembers["iss"]?.stringValue, !issuer.isEmpty,
              let (issuedAt, form) = claimMembers["iat"].flatMap(issuedAt(_:))
        else { return nil }
        return ProviderToken(
            algorithm: algorithm, keyID: keyID, issuer: issuer, issuedAt: issuedAt, issuedAtForm: form,
            signingInput: Array(jwt[..<parts[1].endIndex]), signature: signature, signatureForm: signatureForm)
    }

    /// `iat` as whole UNIX seconds and the form it was written in, or `nil` when it is none of
    /// ``IssuedAtForm``'s forms: negative, out of 64-bit range, a string that is not only ASCII
    /// digits (`"1e3"`, `""`, `" 5"`), or any other JSON type.
    static func issuedAt(_ value: JSONValue) -> (Int64, IssuedAtForm)? {
        switch value {
        case .number(let literal):
            return NumericDate.wholeSeconds(literal).map { ($0.seconds, $0.isInteger ? .integer : .decimal) }
        case .string(let text):
            guard !text.isEmpty, text.utf8.count <= 19, text.utf8.allSatisfy({ (0x30...0x39).contains($0) }),
                  let seconds = Int64(text)
            else { return nil }
            return (seconds, .string)
        default:
            return nil
        }
    }

    /// The time check that applies on every request, not only when the token is first seen:
    /// `nil` while the token is usable at `now` (UNIX seconds), else its reason.
    public static func timeProblem(issuedAt: Int64, now: Int64) -> Reason? {
        if issuedAt > now + allowedClockSkew { return .invalidProviderToken }
        if now - issuedAt > lifetime { return .expiredProviderToken }
        return nil
    }

    /// The time check that applies on every request, not only when the token is first seen:
    /// `nil` while the token is usable at `now` (UNIX seconds), else its reason.
    public func timeProblem(now: Int64) -> Reason? {
        Self.timeProblem(issuedAt: issuedAt, now: now)
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

/// An ES256 signature in either form clients send it, as the raw `r ‖ s` OpenSSL is given.
enum ECDSASignature {
    /// Bytes of `r` and of `s` in the raw form.
    static let scalarLength = 32

    /// `r ‖ s` and the form it came in: 64 bytes are JOSE's raw form (a DER signature is never 64
    /// bytes but by a chance of about 2⁻⁴⁸, when both integers are three bytes short); anything
    /// else must be strict DER. `nil` when it is neither.
    static func raw(_ bytes: [UInt8]) -> ([UInt8], ProviderToken.SignatureForm)? {
        if bytes.count == 2 * scalarLength { return (bytes, .jose) }
        return fromDER(bytes).map { ($0, .der) }
    }

    /// The raw form of a DER `ECDSA-Sig-Value`: a SEQUENCE (short-form length, no trailing bytes)
    /// of exactly two INTEGERs, each positive, non-zero, minimally encoded (a leading 0x00 only
    /// before a byte with its high bit set) and at most 32 bytes of value. `nil` otherwise.
    static func fromDER(_ der: [UInt8]) -> [UInt8]? {
        guard der.count >= 8, der.count <= 2 + 2 * (2 + scalarLength + 1), der[0] == 0x30,
              der[1] < 0x80, Int(der[1]) == der.count - 2
        else { return nil }
        var index = 2
        var raw: [UInt8] = []
        raw.reserveCapacity(2 * scalarLength)
        for _ in 0..<2 {
            guard index + 2 <= der.count, der[index] == 0x02 else { return nil }
            let length = Int(der[index + 1])
            let start = index + 2
            guard length >= 1, length <= scalarLength + 1, start + length <= der.count else { return nil }
            let first = der[start]
            if first & 0x80 != 0 { return nil }  // negative
            if length > 1, first == 0, der[start + 1] & 0x80 == 0 { return nil }  // not minimal
            let value = der[start..<(start + length)].drop(while: { $0 == 0 })
            guard !value.isEmpty, value.count <= scalarLength else { return nil }  // zero, or too large
            raw += repeatElement(0, count: scalarLength - value.count)
            raw += value
            index = start + length
        }
        return index == der.count ? raw : nil
    }
}

/// A JSON number literal read as a NumericDate (RFC 7519): whole seconds, truncated toward zero,
/// computed from the literal's digits so that no floating-point rounding moves a second.
enum NumericDate {
    /// `nil` for a negative number or one past `Int64.max`. The literal is a valid JSON number
    /// (the JSON reader checked it): `-?int(.frac)?([eE][+-]?exp)?`.
    static func wholeSeconds(_ literal: String) -> (seconds: Int64, isInteger: Bool)? {
        var bytes = Substring(literal).utf8[...]
        guard let first = bytes.first, first != UInt8(ascii: "-") else { return nil }
        // Significant digits of int and fraction as values 0-9, at most `kept`: the whole part
        // that fits 64 bits has at most 19 digits, so later digits only count for their place.
        let kept = 40
        var digits: [UInt8] = []
        var droppedIntegerDigits = 0
        var fractionDigits = 0
        var inFraction = false
        var isInteger = true
        while let byte = bytes.first, byte != UInt8(ascii: "e"), byte != UInt8(ascii: "E") {
            bytes = bytes.dropFirst()
            if byte == UInt8(ascii: ".") {
                inFraction = true
                isInteger = false
                continue
            }
            if digits.isEmpty, byte == UInt8(ascii: "0") {
                if inFraction { fractionDigits += 1 }
                continue  // leading zeros carry no value
            }
            if digits.count == kept {
                if !inFraction { droppedIntegerDigits += 1 }
                continue
            }
            digits.append(byte - UInt8(ascii: "0"))
            if inFraction { fractionDigits += 1 }
        }
        var exponent = 0
        if !bytes.isEmpty {
            isInteger = false
            bytes = bytes.dropFirst()
            var negative = false
            if let sign = bytes.first, sign == UInt8(ascii: "+") || sign == UInt8(ascii: "-") {
                negative = sign == UInt8(ascii: "-")
                bytes = bytes.dropFirst()
            }
            for byte in bytes {
                // Saturates: an exponent this large makes the value 0 or out of range either way.
                exponent = min(exponent * 10 + Int(byte - UInt8(ascii: "0")), 100_000)
            }
            if negative { exponent = -exponent }
        }
        // value = digits × 10^(exponent − fractionDigits); keep the whole part.
        let shift = exponent - fractionDigits + droppedIntegerDigits
        let wholeDigitCount = digits.count + shift
        guard wholeDigitCount > 0 else { return (0, isInteger) }
        guard wholeDigitCount <= 19 else { return nil }
        var seconds: Int64 = 0
        for position in 0..<wholeDigitCount {
            let digit = position < digits.count ? Int64(digits[position]) : 0
            let (scaled, overflow1) = seconds.multipliedReportingOverflow(by: 10)
            let (sum, overflow2) = scaled.addingReportingOverflow(digit)
            guard !overflow1, !overflow2 else { return nil }
            seconds = sum
        }
        return (seconds, isInteger)
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

import Foundation
import Testing
@testable import APNSMockCore

@Suite("Provider token parsing and the certificate topic extension")
struct ProviderTokenTests {
    static func b64(_ text: String) -> String {
        Data(text.utf8).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    static let signature = String(repeating: "A", count: 86)
    static func jwt(header: String = #"{"alg":"ES256","kid":"DEMOKEY001"}"#, claims: String = #"{"iss":"DEMOTEAM01","iat":1700000000}"#) -> String {
        b64(header) + "." + b64(claims) + "." + signature
    }

    @Test func parsesAWellFormedToken() throws {
        let text = Self.jwt()
        let token = try #require(ProviderToken.parse(authorization: "bearer " + text))
        #expect(token.algorithm == "ES256")
        #expect(token.keyID == "DEMOKEY001")
        #expect(token.issuer == "DEMOTEAM01")
        #expect(token.issuedAt == 1_700_000_000)
        #expect(token.signature == [UInt8](repeating: 0, count: 64))
        #expect(token.signingInput == Array(text.split(separator: ".").prefix(2).joined(separator: ".").utf8))
    }

    // MARK: DER signatures

    static func b64(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// A DER `SEQUENCE { INTEGER r, INTEGER s }` from the two INTEGERs' content bytes.
    static func der(_ r: [UInt8], _ s: [UInt8]) -> [UInt8] {
        let body = [0x02, UInt8(r.count)] + r + [0x02, UInt8(s.count)] + s
        return [0x30, UInt8(body.count)] + body
    }

    /// 32 bytes with the high bit set (DER needs a leading zero), and 32 without.
    static let high = [UInt8](repeating: 0x81, count: 32)
    static let low = [UInt8](repeating: 0x11, count: 32)

    struct DERCase: Sendable, CustomTestStringConvertible {
        var name: String
        var der: [UInt8]
        var raw: [UInt8]?
        var testDescription: String { name }
    }

    static let derCases: [DERCase] = [
        DERCase(name: "both 33 bytes (72 in all)", der: der([0] + high, [0] + high), raw: high + high),
        DERCase(name: "both 32 bytes (70)", der: der(low, low), raw: low + low),
        DERCase(name: "a short r is left-padded", der: der([0x01, 0x02], low), raw: [UInt8](repeating: 0, count: 30) + [1, 2] + low),
        DERCase(name: "r negative", der: der(high, low), raw: nil),
        DERCase(name: "r with a needless leading zero", der: der([0] + low, low), raw: nil),
        DERCase(name: "r zero", der: der([0], low), raw: nil),
        DERCase(name: "r of 33 value bytes", der: der([0x01] + low, low), raw: nil),
        DERCase(name: "an empty INTEGER", der: der([], low), raw: nil),
        DERCase(name: "trailing bytes", der: der(low, low) + [0], raw: nil),
        DERCase(name: "a third INTEGER", der: { var bytes = der(low, low); bytes += [0x02, 0x01, 0x01]; bytes[1] += 3; return bytes }(), raw: nil),
        DERCase(name: "not a SEQUENCE", der: [0x31] + der(low, low).dropFirst(), raw: nil),
        DERCase(name: "a length past the end", der: { var bytes = der(low, low); bytes[1] += 1; return bytes }(), raw: nil),
        DERCase(name: "a long-form length", der: [0x30, 0x81, 0x44] + der(low, low).dropFirst(2), raw: nil),
        DERCase(name: "an INTEGER tagged otherwise", der: { var bytes = der(low, low); bytes[2] = 0x04; return bytes }(), raw: nil),
    ]

    @Test("DER signatures: strict DER only, read as r || s", arguments: derCases)
    func derSignatures(_ test: DERCase) throws {
        #expect(ECDSASignature.fromDER(test.der) == test.raw)
        let authorization = "bearer " + Self.b64(#"{"alg":"ES256","kid":"K"}"#) + "." + Self.b64(#"{"iss":"T","iat":1}"#) + "." + Self.b64(test.der)
        let token = ProviderToken.parse(authorization: authorization)
        if let raw = test.raw {
            #expect(token?.signature == raw)
            #expect(token?.signatureForm == .der)
        } else {
            #expect(token == nil, "a malformed DER signature is InvalidProviderToken")
        }
    }

    @Test func sixtyFourBytesAreJOSE() throws {
        let token = try #require(ProviderToken.parse(authorization: "bearer " + Self.jwt()))
        #expect(token.signatureForm == .jose)
        // Neither 64 bytes nor DER.
        let odd = "bearer " + Self.b64(#"{"alg":"ES256","kid":"K"}"#) + "." + Self.b64(#"{"iss":"T","iat":1}"#) + "." + Self.b64([UInt8](repeating: 1, count: 63))
        #expect(ProviderToken.parse(authorization: odd) == nil)
    }

    @Test(arguments: ["bearer ", "Bearer ", "BEARER "])
    func schemeIsCaseInsensitive(_ scheme: String) {
        #expect(ProviderToken.parse(authorization: scheme + Self.jwt()) != nil)
    }

    @Test func toleratesTyp() {
        #expect(ProviderToken.parse(authorization: "bearer " + Self.jwt(header: #"{"alg":"ES256","typ":"JWT","kid":"K"}"#)) != nil)
    }

    static let malformed: [String] = [
        jwt(),  // no scheme
        "bearer",
        "bearer  " + jwt(),
        "basic " + jwt(),
        "bearer " + jwt() + ".x",
        "bearer " + b64(#"{"alg":"ES256","kid":"K"}"#) + "." + b64(#"{"iss":"T","iat":1}"#),
        "bearer " + jwt(header: #"{"alg":"HS256","kid":"DEMOKEY001"}"#),
        "bearer " + jwt(header: #"{"alg":"none","kid":"DEMOKEY001"}"#),
        "bearer " + jwt(header: #"{"kid":"DEMOKEY001"}"#),
        "bearer " + jwt(header: #"{"alg":"ES256"}"#),
        "bearer " + jwt(header: #"{"alg":"ES256","kid":"A","kid":"B"}"#),
        "bearer " + jwt(header: #"["ES256"]"#),
        "bearer " + jwt(claims: #"{"iat":1700000000}"#),
        "bearer " + jwt(claims: #"{"iss":"DEMOTEAM01"}"#),
        "bearer " + jwt(claims: #"{"iss":42,"iat":1}"#),
        "bearer " + jwt(claims: "not json"),
        "bearer " + jwt() + "=",
        "bearer " + jwt().replacingOccurrences(of: "A", with: "+"),
    ]

    @Test(arguments: malformed)
    func rejectsMalformedTokens(_ authorization: String) {
        #expect(ProviderToken.parse(authorization: authorization) == nil)
    }

    static func token(iat literal: String) -> ProviderToken? {
        ProviderToken.parse(authorization: "bearer " + jwt(claims: #"{"iss":"DEMOTEAM01","iat":"# + literal + "}"))
    }

    /// `iat` as clients sign it: Apple's integer, Python's `time.time()` decimal, Java's exponent
    /// notation, a string of digits (kalyke, APNSwift before 2026, Apple's sample token).
    @Test(arguments: [
        ("1700000000", Int64(1_700_000_000), ProviderToken.IssuedAtForm.integer),
        ("1795433772.0045", 1_795_433_772, .decimal),
        ("1795433772.9999999999", 1_795_433_772, .decimal),
        ("1700000000.0", 1_700_000_000, .decimal),
        ("1.795433772E9", 1_795_433_772, .decimal),
        ("1.7954337725e+9", 1_795_433_772, .decimal),
        ("17954337720000e-4", 1_795_433_772, .decimal),
        ("0.5", 0, .decimal),
        ("5e-400", 0, .decimal),
        ("0", 0, .integer),
        (#""1795433772""#, 1_795_433_772, .string),
        (#""0001700000000""#, 1_700_000_000, .string),
        (#""9223372036854775807""#, Int64.max, .string),
        ("9223372036854775807", Int64.max, .integer),
        ("1" + String(repeating: "0", count: 60) + "e-51", 1_000_000_000, .decimal),
        ("1700000000." + String(repeating: "9", count: 500), 1_700_000_000, .decimal),
    ])
    func issuedAtForms(_ literal: String, _ seconds: Int64, _ form: ProviderToken.IssuedAtForm) throws {
        let token = try #require(Self.token(iat: literal))
        #expect(token.issuedAt == seconds)
        #expect(token.issuedAtForm == form)
    }

    /// Everything else stays InvalidProviderToken, and nothing here traps.
    @Test(arguments: [
        #""1e3""#, "-5", "-0.5", "NaN", "Infinity", #""""#, #"" 1700000000""#, #""1700000000 ""#,
        #""+1700000000""#, #""-1700000000""#, #""1700000000.5""#, "1e400", "9223372036854775808",
        #""9223372036854775808""#, #""١٧٠٠٠٠٠٠٠٠""#, #""１７００""#,
        #"""# + String(repeating: "7", count: 500) + #"""#, String(repeating: "7", count: 500),
        #"{"seconds":1700000000}"#, "[1700000000]", "true", "null",
        "1" + String(repeating: "0", count: 100_000),
    ])
    func rejectsOtherIssuedAtForms(_ literal: String) {
        #expect(Self.token(iat: literal) == nil)
    }

    @Test func timeChecks() throws {
        let token = try #require(ProviderToken.parse(authorization: "bearer " + Self.jwt()))
        let iat: Int64 = 1_700_000_000
        #expect(token.timeProblem(now: iat) == nil)
        #expect(token.timeProblem(now: iat + 3600) == nil)
        #expect(token.timeProblem(now: iat + 3601) == .expiredProviderToken)
        // Apple: "no more than one hour from the current time", in either direction.
        #expect(token.timeProblem(now: iat - 3600) == nil)
        #expect(token.timeProblem(now: iat - 3601) == .invalidProviderToken)
        #expect(ProviderToken.timeProblem(issuedAt: .max, now: iat) == .invalidProviderToken)
        #expect(ProviderToken.timeProblem(issuedAt: 0, now: iat) == .expiredProviderToken)
    }

    @Test func base64URLRoundTrip() {
        for length in 0..<8 {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 * 37 + 200) }
            let text = Data(bytes).base64EncodedString()
                .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "")
            #expect(Base64URLDecoding.decode(Array(text.utf8)) == bytes)
        }
        #expect(Base64URLDecoding.decode(Array("A".utf8)) == nil)
        #expect(Base64URLDecoding.decode(Array("AB".utf8)) == nil)  // leftover bits set
    }

    @Test func topicExtension() {
        func tlv(_ tag: UInt8, _ content: [UInt8]) -> [UInt8] { [tag, UInt8(content.count)] + content }
        let der = tlv(0x30, tlv(0x0C, Array("com.x".utf8)) + tlv(0x30, tlv(0x0C, Array("app".utf8)))
            + tlv(0x0C, Array("com.x.voip".utf8)) + tlv(0x30, tlv(0x0C, Array("voip".utf8))))
        #expect(AppleTopicExtension.topics(der: der) == ["com.x", "com.x.voip"])
        #expect(AppleTopicExtension.topics(der: Array(der.dropLast())) == nil)
        #expect(AppleTopicExtension.topics(der: tlv(0x30, tlv(0x0C, Array("com.x".utf8)))) == nil)
        #expect(AppleTopicExtension.topics(der: [0x05, 0x00]) == nil)
    }

    @Test func certificateIdentity() {
        let single = ClientCertificateIdentity(uid: "com.x", teamID: "T", topics: ["com.x"], development: true, production: false)
        #expect(single.defaultTopic == "com.x")
        #expect(single.allows(.sandbox))
        #expect(!single.allows(.production))
        let multi = ClientCertificateIdentity(uid: "com.x", teamID: "T", topics: ["com.x", "com.x.voip"], development: true, production: true)
        #expect(multi.defaultTopic == nil)
        #expect(multi.allows(.sandbox) && multi.allows(.production))
        #expect(multi.allowedTopics == .topics(["com.x", "com.x.voip"]))
    }
}

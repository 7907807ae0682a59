import Foundation
import Testing
@testable import APNSMockCore

/// ``AuthSummary`` keeps its fields in a shared immutable object: it must still behave as the plain
/// value it was (setting a field changes only that copy; equality is by fields) and encode as the
/// synthesized Codable did (each field under its name, absent when nil).
@Suite("Auth summary")
struct AuthSummaryTests {
    static let token = AuthSummary(
        method: .token, teamId: "DEMOTEAM01", keyId: "DEMOKEY001", iatForm: .decimal, iat: 1_700_000_000,
        tokenId: "0123456789ab", signatureForm: .der)

    @Test func settingAFieldChangesOnlyThatCopy() {
        let original = Self.token
        var changed = original
        changed.keyId = "OTHERKEY01"
        changed.iat = nil
        #expect(original.keyId == "DEMOKEY001")
        #expect(original.iat == 1_700_000_000)
        #expect(changed.keyId == "OTHERKEY01")
        #expect(changed.iat == nil)
        #expect(changed.teamId == "DEMOTEAM01")
        #expect(changed.signatureForm == .der)
        #expect(changed != original)
    }

    @Test func equalityIsByFieldsNotByObject() {
        let rebuilt = AuthSummary(
            method: .token, teamId: "DEMOTEAM01", keyId: "DEMOKEY001", iatForm: .decimal, iat: 1_700_000_000,
            tokenId: "0123456789ab", signatureForm: .der)
        #expect(rebuilt == Self.token)
        #expect(AuthSummary() == AuthSummary.none)
        #expect(AuthSummary(method: .certificate, teamId: "DEMOTEAM01") != AuthSummary(method: .token, teamId: "DEMOTEAM01"))
        var cleared = Self.token
        cleared.tokenId = nil
        #expect(cleared != Self.token)
    }

    @Test func encodesEachFieldByNameAndLeavesNilOut() throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let json = String(decoding: try encoder.encode(Self.token), as: UTF8.self)
        #expect(json == #"{"iat":1700000000,"iatForm":"decimal","keyId":"DEMOKEY001","method":"token","signatureForm":"der","teamId":"DEMOTEAM01","tokenId":"0123456789ab"}"#)
        let certificate = String(
            decoding: try encoder.encode(AuthSummary(method: .certificate, teamId: "DEMOTEAM01")), as: UTF8.self)
        #expect(certificate == #"{"method":"certificate","teamId":"DEMOTEAM01"}"#)
        #expect(String(decoding: try encoder.encode(AuthSummary.none), as: UTF8.self) == "{}")
        #expect(try JSONDecoder().decode(AuthSummary.self, from: Data(json.utf8)) == Self.token)
        #expect(try JSONDecoder().decode(AuthSummary.self, from: Data("{}".utf8)) == .none)
    }

    /// A record nests the same keys and spells a nil field `null` (every key is always there).
    @Test func encodesIntoARecordWithNullsSpelledOut() throws {
        struct Nested: Encodable {
            var auth: AuthSummary
            enum Keys: String, CodingKey { case auth }
            func encode(to encoder: any Encoder) throws {
                var c = encoder.container(keyedBy: Keys.self)
                var fields = c.nestedContainer(keyedBy: AuthSummary.CodingKeys.self, forKey: .auth)
                try auth.encode(into: &fields, nilAsNull: true)
            }
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let json = String(
            decoding: try encoder.encode(Nested(auth: AuthSummary(method: .certificate, teamId: "DEMOTEAM01"))), as: UTF8.self)
        #expect(json == #"{"auth":{"iat":null,"iatForm":null,"keyId":null,"method":"certificate","signatureForm":null,"teamId":"DEMOTEAM01","tokenId":null}}"#)
        let full = String(decoding: try encoder.encode(Nested(auth: Self.token)), as: UTF8.self)
        #expect(full == #"{"auth":"# + String(decoding: try encoder.encode(Self.token), as: UTF8.self) + "}")
    }
}

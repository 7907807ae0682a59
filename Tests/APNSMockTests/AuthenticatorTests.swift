import APNSMockCore
import APNSMockTesting
import Foundation
import Testing
@testable import APNSMock

/// The authenticator's per-connection state without a network: time is a parameter here.
@Suite("Authenticator state")
struct AuthenticatorTests {
    /// An authenticator with a clock and token registry of its own (a mock's, shared by its
    /// connections); `settings` default.
    static func authenticator(
        settings: ValidationSettings = ValidationSettings(), clock: MockClock = MockClock()
    ) throws -> Authenticator {
        let team = try MockHarness.demoTeam()
        return Authenticator(
            teams: TeamRegistry(configured: [team], keys: try TokenKeys.load([team]), globalClock: clock, faultSeed: nil),
            settings: settings, tokenUpdateInterval: 1200,
            fallbackTopics: .bundleIDs(["com.example.app"]), narrowsTopics: true)
    }

    @Test func expiryIsCheckedOnEveryRequestOfTheBoundToken() throws {
        let authenticator = try Self.authenticator()
        let iat: Int64 = 1_800_000_000
        let material = try MockHarness.sharedCertificates()
        let pem = try String(contentsOfFile: material.tokenKeyPath(material.tokenKeys[0]), encoding: .utf8)
        let authorization = "bearer " + (try ProviderTokenSigner.token(keyPEM: pem, teamID: "DEMOTEAM01", keyID: "DEMOKEY001", issuedAt: Int(iat)))
        var state = ConnectionAuth()
        let first = authenticator.authenticate(authorization: authorization, environment: .sandbox, now: iat + 10, state: &state)
        #expect(first.failure == nil)
        #expect(first.summary == AuthSummary(
            method: .token, teamId: "DEMOTEAM01", keyId: "DEMOKEY001", iatForm: .integer, iat: iat,
            tokenId: ES256.fingerprint(authorization.utf8.dropFirst(7)), signatureForm: .jose))
        #expect(first.summary.tokenId?.count == 12)
        #expect(first.allowedTopics == .bundleIDs(["com.example.app"]))
        #expect(first.acceptedFirstToken)
        #expect(state.binding?.token == authorization)
        // Later requests use the binding: no verification, but the clock still applies.
        let later = authenticator.authenticate(authorization: authorization, environment: .sandbox, now: iat + 3600, state: &state)
        #expect(later.failure == nil)
        #expect(!later.acceptedFirstToken, "only the first accepted token lifts the stream limit")
        let expired = authenticator.authenticate(authorization: authorization, environment: .sandbox, now: iat + 3601, state: &state)
        #expect(expired.failure?.reason == .expiredProviderToken)
    }

    /// A token verified on one connection is known to the next (a client that connects per push
    /// costs one ES256 per token, not per connection); a token that fails verification is not kept.
    @Test func aVerifiedTokenIsKnownToTheNextConnection() throws {
        let authenticator = try Self.authenticator()
        let iat: Int64 = 1_800_000_000
        let authorization = try Self.sign(iat: String(iat))
        var first = ConnectionAuth()
        #expect(authenticator.authenticate(authorization: authorization, environment: .sandbox, now: iat + 10, state: &first).failure == nil)
        #expect(authenticator.verified.verdict(for: authorization) != nil)
        var second = ConnectionAuth()
        let next = authenticator.authenticate(authorization: authorization, environment: .sandbox, now: iat + 20, state: &second)
        #expect(next.failure == nil)
        #expect(next.acceptedFirstToken, "each connection still binds the token itself")
        #expect(next.summary == authenticator.authenticate(
            authorization: authorization, environment: .sandbox, now: iat + 20, state: &first).summary)
        let forged = String(authorization.dropLast(4)) + (authorization.hasSuffix("AAAA") ? "BBBB" : "AAAA")
        var third = ConnectionAuth()
        let refused = authenticator.authenticate(authorization: forged, environment: .sandbox, now: iat + 20, state: &third)
        #expect(refused.failure?.reason == .invalidProviderToken)
        #expect(authenticator.verified.verdict(for: forged) == nil)
    }

    static func sign(iat literal: String, signatureForm: ProviderToken.SignatureForm = .jose) throws -> String {
        let material = try MockHarness.sharedCertificates()
        let pem = try String(contentsOfFile: material.tokenKeyPath(material.tokenKeys[0]), encoding: .utf8)
        return "bearer " + (try ProviderTokenSigner.token(
            keyPEM: pem, teamID: "DEMOTEAM01", keyID: "DEMOKEY001", iatLiteral: literal, signatureForm: signatureForm))
    }

    /// A new token sooner than the update interval is TooManyProviderTokenUpdates, unless the
    /// current one has expired or the connection was answered ExpiredProviderToken: clients sign a
    /// new token at once then, on the same connection.
    @Test func tokenUpdateIsAllowedOnceTheCurrentTokenExpiredOrWasSaidToBe() throws {
        let authenticator = try Self.authenticator()
        let iat: Int64 = 1_800_000_000
        let first = try Self.sign(iat: String(iat)), second = try Self.sign(iat: String(iat + 60))
        let third = try Self.sign(iat: String(iat + 3700))

        var state = ConnectionAuth()
        #expect(authenticator.authenticate(authorization: first, environment: .sandbox, now: iat, state: &state).failure == nil)
        let tooSoon = authenticator.authenticate(authorization: second, environment: .sandbox, now: iat + 60, state: &state)
        #expect(tooSoon.failure?.reason == .tooManyProviderTokenUpdates)
        #expect(state.binding?.token == first)

        // Answered ExpiredProviderToken (here as a fault would): the next token is welcome, and the
        // old one is expired from now on.
        state.tokenExpired()
        let stale = authenticator.authenticate(authorization: first, environment: .sandbox, now: iat + 61, state: &state)
        #expect(stale.failure?.reason == .expiredProviderToken)
        let refreshed = authenticator.authenticate(authorization: second, environment: .sandbox, now: iat + 61, state: &state)
        #expect(refreshed.failure == nil)
        #expect(state.binding?.token == second)

        // The current token's own age: past its hour it may be replaced at once.
        let expired = authenticator.authenticate(authorization: second, environment: .sandbox, now: iat + 3700, state: &state)
        #expect(expired.failure?.reason == .expiredProviderToken)
        let replaced = authenticator.authenticate(authorization: third, environment: .sandbox, now: iat + 3700, state: &state)
        #expect(replaced.failure == nil)
        #expect(state.binding?.token == third)
    }

    @Test(arguments: [
        ("1800000000.25", ProviderToken.IssuedAtForm.decimal),
        (#""1800000000""#, .string),
        ("1800000000", .integer),
    ])
    func issuedAtFormsAreAcceptedUnlessStrict(_ literal: String, _ form: ProviderToken.IssuedAtForm) throws {
        let authorization = try Self.sign(iat: literal)
        var state = ConnectionAuth()
        let result = try Self.authenticator().authenticate(
            authorization: authorization, environment: .sandbox, now: 1_800_000_010, state: &state)
        #expect(result.failure == nil)
        #expect(result.summary.iatForm == form)

        let strict = try Self.authenticator(settings: ValidationSettings(strictProviderTokens: true))
        var strictState = ConnectionAuth()
        let strictResult = strict.authenticate(
            authorization: authorization, environment: .sandbox, now: 1_800_000_010, state: &strictState)
        #expect(strictResult.failure?.reason == (form == .integer ? nil : .invalidProviderToken))
    }

    /// Java's `SHA256withECDSA` (pushy) signs DER: accepted, and the record says so; strict
    /// provider-token checking refuses it.
    @Test func derSignaturesAreAcceptedUnlessStrict() throws {
        let authorization = try Self.sign(iat: "1800000000", signatureForm: .der)
        let encoded = try #require(authorization.split(separator: ".").last)
        // DER of a P-256 signature: 6 bytes of framing around r and s, each 32 bytes plus a zero
        // byte when its top bit is set, or shorter when it starts with zero bytes (1 in 256 each).
        let length = Base64URLDecoding.decode(Array(encoded.utf8))?.count ?? 0
        #expect((66...72).contains(length), "a DER signature (r || s would be 64 bytes)")
        var state = ConnectionAuth()
        let result = try Self.authenticator().authenticate(
            authorization: authorization, environment: .sandbox, now: 1_800_000_010, state: &state)
        #expect(result.failure == nil)
        #expect(result.summary.signatureForm == .der)
        #expect(LintFinding.providerToken(result.summary).map(\.code) == [.signatureDER])
        var strictState = ConnectionAuth()
        let strict = try Self.authenticator(settings: ValidationSettings(strictProviderTokens: true)).authenticate(
            authorization: authorization, environment: .sandbox, now: 1_800_000_010, state: &strictState)
        #expect(strict.failure?.reason == .invalidProviderToken)
    }

    /// Expiry belongs to the token: answered ExpiredProviderToken on one connection, it is expired
    /// on every connection, and each connection bound to it takes the replacement at once. A
    /// connection bound to another token still may not switch before the update interval.
    @Test func expiryOfASharedTokenReachesEveryConnection() throws {
        let authenticator = try Self.authenticator()
        let iat: Int64 = 1_800_000_000
        let shared = try Self.sign(iat: String(iat)), replacement = try Self.sign(iat: String(iat + 1))
        let other = try Self.sign(iat: String(iat + 2))
        var push = ConnectionAuth(), management = ConnectionAuth(), unrelated = ConnectionAuth()
        #expect(authenticator.authenticate(authorization: shared, environment: .sandbox, now: iat + 5, state: &push).failure == nil)
        #expect(authenticator.authenticate(authorization: shared, environment: .sandbox, now: iat + 5, state: &management).failure == nil)
        #expect(authenticator.authenticate(authorization: other, environment: .sandbox, now: iat + 5, state: &unrelated).failure == nil)

        // A fault answers ExpiredProviderToken on the push connection.
        push.tokenExpired()
        // The management connection is told the same for the same token...
        let stale = authenticator.authenticate(authorization: shared, environment: .sandbox, now: iat + 6, state: &management)
        #expect(stale.failure?.reason == .expiredProviderToken)
        // ...and both take the replacement, in either order, without TooManyProviderTokenUpdates.
        #expect(authenticator.authenticate(authorization: replacement, environment: .sandbox, now: iat + 7, state: &management).failure == nil)
        #expect(authenticator.authenticate(authorization: replacement, environment: .sandbox, now: iat + 7, state: &push).failure == nil)
        // A new connection presenting the expired token is told so too.
        var fresh = ConnectionAuth()
        #expect(authenticator.authenticate(authorization: shared, environment: .sandbox, now: iat + 8, state: &fresh).failure?.reason
            == .expiredProviderToken)
        // The update rule still holds for a token that did not expire.
        let tooSoon = authenticator.authenticate(authorization: replacement, environment: .sandbox, now: iat + 8, state: &unrelated)
        #expect(tooSoon.failure?.reason == .tooManyProviderTokenUpdates)
    }

    /// Moving the mock's clock ages the tokens it has seen: an hour ahead, the token a client holds
    /// is expired; the one it signs then (with its own clock's `iat`) is fresh.
    @Test func movingTheClockAgesTokensSeenBefore() throws {
        let clock = MockClock()
        let authenticator = try Self.authenticator(clock: clock)
        let iat = Int64(Date().timeIntervalSince1970)
        let held = try Self.sign(iat: String(iat)), signedLater = try Self.sign(iat: String(iat + 1))
        var state = ConnectionAuth()
        #expect(authenticator.authenticate(authorization: held, environment: .sandbox, now: clock.nowSeconds(), state: &state).failure == nil)
        #expect(clock.advance(seconds: 3601) == 3601)
        let expired = authenticator.authenticate(authorization: held, environment: .sandbox, now: clock.nowSeconds(), state: &state)
        #expect(expired.failure?.reason == .expiredProviderToken)
        let renewed = authenticator.authenticate(authorization: signedLater, environment: .sandbox, now: clock.nowSeconds(), state: &state)
        #expect(renewed.failure == nil)
        #expect(renewed.summary.iat == iat + 1, "the record shows the iat the client wrote")
        // Twenty minutes on the mock's clock later, another token is allowed again.
        let third = try Self.sign(iat: String(iat + 2))
        #expect(authenticator.authenticate(authorization: third, environment: .sandbox, now: clock.nowSeconds(), state: &state).failure?.reason
            == .tooManyProviderTokenUpdates)
        #expect(clock.advance(seconds: 1200) != nil)
        #expect(authenticator.authenticate(authorization: third, environment: .sandbox, now: clock.nowSeconds(), state: &state).failure == nil)
        #expect(clock.advance(seconds: MockClock.maximumOffsetSeconds) == nil, "ten years at most")
    }

    @Test func refusedTokenIsVerifiedOnceAndRemembered() throws {
        let authenticator = try Self.authenticator()
        var state = ConnectionAuth()
        let result = authenticator.authenticate(authorization: "bearer a.b.c", environment: .sandbox, now: 0, state: &state)
        #expect(result.failure?.reason == .invalidProviderToken)
        #expect(state.lastToken == "bearer a.b.c")
        #expect(state.binding == nil)
        #expect(!result.acceptedFirstToken)
    }

    @Test func certificateConnectionIgnoresAuthorization() throws {
        let authenticator = try Self.authenticator()
        var state = ConnectionAuth()
        state.certificate = ClientCertificateIdentity(
            uid: "com.example.app", teamID: "DEMOTEAM01", topics: ["com.example.app"], development: true, production: false)
        let sandbox = authenticator.authenticate(authorization: "bearer junk", environment: .sandbox, now: 0, state: &state)
        #expect(sandbox.failure == nil)
        #expect(sandbox.certificateTopic == "com.example.app")
        #expect(sandbox.summary == AuthSummary(method: .certificate, teamId: "DEMOTEAM01"))
        let production = authenticator.authenticate(authorization: nil, environment: .production, now: 0, state: &state)
        #expect(production.failure?.reason == .badCertificateEnvironment)
    }

    @Test func unreadableKeyFileNamesFieldAndFile() throws {
        var team = Configuration.Team.demo
        team.keys = [Configuration.Key(keyId: "DEMOKEY001", path: "/nonexistent/AuthKey_DEMOKEY001.p8")]
        let error = #expect(throws: TokenKeyError.self) { _ = try TokenKeys.load([team]) }
        #expect(error?.field == "teams[0].keys[0].path")
        #expect(error?.file == "/nonexistent/AuthKey_DEMOKEY001.p8")
        let garbage = FileManager.default.temporaryDirectory.appendingPathComponent("garbage-\(UUID()).p8")
        try "not a key".write(to: garbage, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: garbage) }
        team.keys = [Configuration.Key(keyId: "DEMOKEY001", path: garbage.path)]
        #expect(throws: TokenKeyError.self) { _ = try TokenKeys.load([team]) }
    }

    @Test func publicKeyFileVerifiesTokens() throws {
        let material = try MockHarness.sharedCertificates()
        let pem = try String(contentsOfFile: material.tokenKeyPath(material.tokenKeys[0]), encoding: .utf8)
        let publicPEM = try ECKey.privateKey(pem: pem).publicKeyPEM()
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("public-\(UUID()).pem")
        try publicPEM.write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        var team = Configuration.Team.demo
        team.keys = [Configuration.Key(keyId: "DEMOKEY001", path: file.path)]
        let authenticator = Authenticator(
            teams: TeamRegistry(configured: [team], keys: try TokenKeys.load([team]), globalClock: MockClock(), faultSeed: nil),
            settings: ValidationSettings(), tokenUpdateInterval: 1200, fallbackTopics: .any, narrowsTopics: true)
        let now = Int64(Date().timeIntervalSince1970)
        let token = try ProviderTokenSigner.token(keyPEM: pem, teamID: "DEMOTEAM01", keyID: "DEMOKEY001", issuedAt: Int(now))
        var state = ConnectionAuth()
        #expect(authenticator.authenticate(authorization: "bearer " + token, environment: .sandbox, now: now, state: &state).failure == nil)
    }
}

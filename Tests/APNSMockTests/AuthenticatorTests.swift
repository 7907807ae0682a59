import APNSMockCore
import APNSMockTesting
import Foundation
import Testing
@testable import APNSMock

/// The authenticator's per-connection state without a network: time is a parameter here.
@Suite("Authenticator state")
struct AuthenticatorTests {
    static func authenticator() throws -> Authenticator {
        Authenticator(
            keys: try TokenKeys.load([MockHarness.demoTeam()]), settings: ValidationSettings(), tokenUpdateInterval: 1200,
            fallbackTopics: .bundleIDs(["com.example.app"]), narrowsTopics: true)
    }

    @Test func expiryIsCheckedOnEveryRequestOfTheBoundToken() throws {
        let authenticator = try Self.authenticator()
        let iat: Int64 = 1_800_000_000
        let material = try MockHarness.sharedCertificates()
        let pem = try String(contentsOfFile: material.tokenKeyPath(material.tokenKeys[0]), encoding: .utf8)
        let authorization = "bearer " + (try ProviderTokenSigner.token(keyPEM: pem, teamID: "DEMOTEAM01", keyID: "DEMOKEY001", issuedAt: Int(iat)))
        var state = AuthState()
        let first = authenticator.authenticate(authorization: authorization, environment: .sandbox, now: iat + 10, state: &state)
        #expect(first.failure == nil)
        #expect(first.summary == AuthSummary(method: .token, teamId: "DEMOTEAM01", keyId: "DEMOKEY001", iatForm: .integer))
        #expect(first.allowedTopics == .bundleIDs(["com.example.app"]))
        #expect(state.streamLimitRaisePending)
        #expect(state.binding?.token == authorization)
        // Later requests use the binding: no verification, but the clock still applies.
        let later = authenticator.authenticate(authorization: authorization, environment: .sandbox, now: iat + 3600, state: &state)
        #expect(later.failure == nil)
        let expired = authenticator.authenticate(authorization: authorization, environment: .sandbox, now: iat + 3601, state: &state)
        #expect(expired.failure?.reason == .expiredProviderToken)
    }

    static func sign(iat literal: String) throws -> String {
        let material = try MockHarness.sharedCertificates()
        let pem = try String(contentsOfFile: material.tokenKeyPath(material.tokenKeys[0]), encoding: .utf8)
        return "bearer " + (try ProviderTokenSigner.token(keyPEM: pem, teamID: "DEMOTEAM01", keyID: "DEMOKEY001", iatLiteral: literal))
    }

    /// A new token sooner than the update interval is TooManyProviderTokenUpdates, unless the
    /// current one has expired or the connection was answered ExpiredProviderToken: clients sign a
    /// new token at once then, on the same connection.
    @Test func tokenUpdateIsAllowedOnceTheCurrentTokenExpiredOrWasSaidToBe() throws {
        let authenticator = try Self.authenticator()
        let iat: Int64 = 1_800_000_000
        let first = try Self.sign(iat: String(iat)), second = try Self.sign(iat: String(iat + 60))
        let third = try Self.sign(iat: String(iat + 3700))

        var state = AuthState()
        #expect(authenticator.authenticate(authorization: first, environment: .sandbox, now: iat, state: &state).failure == nil)
        let tooSoon = authenticator.authenticate(authorization: second, environment: .sandbox, now: iat + 60, state: &state)
        #expect(tooSoon.failure?.reason == .tooManyProviderTokenUpdates)
        #expect(state.binding?.token == first)

        // Answered ExpiredProviderToken (here as a fault would): the next token is welcome.
        state.noteAnswered(.expiredProviderToken)
        let refreshed = authenticator.authenticate(authorization: second, environment: .sandbox, now: iat + 61, state: &state)
        #expect(refreshed.failure == nil)
        #expect(state.binding?.token == second)
        #expect(!state.refreshInvited)

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
        var state = AuthState()
        let result = try Self.authenticator().authenticate(
            authorization: authorization, environment: .sandbox, now: 1_800_000_010, state: &state)
        #expect(result.failure == nil)
        #expect(result.summary.iatForm == form)

        let strict = Authenticator(
            keys: try TokenKeys.load([MockHarness.demoTeam()]), settings: ValidationSettings(strictProviderTokens: true),
            tokenUpdateInterval: 1200, fallbackTopics: .bundleIDs(["com.example.app"]), narrowsTopics: true)
        var strictState = AuthState()
        let strictResult = strict.authenticate(
            authorization: authorization, environment: .sandbox, now: 1_800_000_010, state: &strictState)
        #expect(strictResult.failure?.reason == (form == .integer ? nil : .invalidProviderToken))
    }

    @Test func refusedTokenIsVerifiedOnceAndRemembered() throws {
        let authenticator = try Self.authenticator()
        var state = AuthState()
        let result = authenticator.authenticate(authorization: "bearer a.b.c", environment: .sandbox, now: 0, state: &state)
        #expect(result.failure?.reason == .invalidProviderToken)
        #expect(state.lastToken == "bearer a.b.c")
        #expect(state.binding == nil)
        #expect(!state.streamLimitRaisePending)
    }

    @Test func certificateConnectionIgnoresAuthorization() throws {
        let authenticator = try Self.authenticator()
        var state = AuthState()
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
            keys: try TokenKeys.load([team]), settings: ValidationSettings(), tokenUpdateInterval: 1200,
            fallbackTopics: .any, narrowsTopics: true)
        let now = Int64(Date().timeIntervalSince1970)
        let token = try ProviderTokenSigner.token(keyPEM: pem, teamID: "DEMOTEAM01", keyID: "DEMOKEY001", issuedAt: Int(now))
        var state = AuthState()
        #expect(authenticator.authenticate(authorization: "bearer " + token, environment: .sandbox, now: now, state: &state).failure == nil)
    }
}

import APNSMock
import APNSMockCore
import APNSMockTesting
import Foundation
import Testing

/// Token and certificate authentication end to end (docs/authentication.md): real TLS, curl as the
/// client, every reason decoded from the response.
@Suite("Provider authentication", .timeLimit(.minutes(3)))
struct AuthenticationTests {
    static let deviceToken = String(repeating: "ab", count: 32)

    /// Extra keys besides the harness's DEMOKEY001, generated once per process.
    struct Keys: Sendable {
        var material: TestCertificates
        func path(_ keyID: String) -> String { material.tokenKeyPath(material.tokenKeys.first { $0.keyID == keyID }!) }
        func pem(_ keyID: String) throws -> String { try String(contentsOfFile: path(keyID), encoding: .utf8) }
    }

    static let keys: Result<Keys, any Error> = Result {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("apns-mock-auth-tests-\(ProcessInfo.processInfo.processIdentifier)").path
        let material = TestCertificates(directory: directory, apps: [], tokenKeys: [
            .init(keyID: "PRODONLY01", teamID: "DEMOTEAM01", path: "AuthKey_PRODONLY01.p8"),
            .init(keyID: "SECONDAPP1", teamID: "DEMOTEAM01", path: "AuthKey_SECONDAPP1.p8"),
            .init(keyID: "OTHERKEY01", teamID: "OTHERTEAM1", path: "AuthKey_OTHERKEY01.p8"),
        ])
        try material.ensure()
        return Keys(material: material)
    }

    /// DEMOTEAM01 (apps com.example.app, com.example.second; keys DEMOKEY001 for both apps,
    /// PRODONLY01 production only, SECONDAPP1 only com.example.second) and OTHERTEAM1
    /// (com.other.app, OTHERKEY01).
    static func configure(_ configuration: inout ServerConfiguration) {
        guard let keys = try? Self.keys.get(), var demo = try? MockHarness.demoTeam() else { return }
        demo.apps = ["com.example.app", "com.example.second"]
        demo.keys += [
            Configuration.Key(keyId: "PRODONLY01", path: keys.path("PRODONLY01"), environment: .production),
            Configuration.Key(keyId: "SECONDAPP1", path: keys.path("SECONDAPP1"), topics: ["com.example.second"]),
        ]
        let other = Configuration.Team(
            teamId: "OTHERTEAM1", apps: ["com.other.app"],
            keys: [Configuration.Key(keyId: "OTHERKEY01", path: keys.path("OTHERKEY01"))])
        configuration.teams = [demo, other]
        configuration.allowedTopics = .bundleIDs(["com.example.app", "com.example.second", "com.other.app"])
    }

    static var now: Int { Int(Date().timeIntervalSince1970) }

    static func demoPEM() throws -> String {
        let material = try MockHarness.sharedCertificates()
        return try String(contentsOfFile: material.tokenKeyPath(material.tokenKeys[0]), encoding: .utf8)
    }

    /// A token signed with `keyFile` (default: the demo key) claiming `keyID` and `team`.
    static func token(keyID: String = "DEMOKEY001", team: String = "DEMOTEAM01", signedWith keyFile: String? = nil, iat: Int = now) throws -> String {
        let pem = try keyFile.map { try keys.get().pem($0) } ?? demoPEM()
        return try ProviderTokenSigner.token(keyPEM: pem, teamID: team, keyID: keyID, issuedAt: iat)
    }

    /// A demo-key token whose `iat` is written as `literal` (as some clients sign it).
    static func token(iatLiteral literal: String) throws -> String {
        try ProviderTokenSigner.token(keyPEM: demoPEM(), teamID: "DEMOTEAM01", keyID: "DEMOKEY001", iatLiteral: literal)
    }

    static func base64URL(_ text: String) -> String {
        Data(text.utf8).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    struct TokenCase: Sendable, CustomTestStringConvertible {
        var name: String
        var authorization: @Sendable () throws -> String?
        var topic = "com.example.app"
        var status: Int
        var reason: String?
        var testDescription: String { "\(name) → \(status) \(reason ?? "")" }
    }

    static let tokenCases: [TokenCase] = [
        TokenCase(name: "valid token", authorization: { "bearer " + (try token()) }, status: 200),
        TokenCase(name: "Bearer in another case", authorization: { "BeArEr " + (try token()) }, status: 200),
        TokenCase(name: "no authorization", authorization: { nil }, status: 403, reason: "MissingProviderToken"),
        TokenCase(name: "not a JWT", authorization: { "bearer not.a.jwt" }, status: 403, reason: "InvalidProviderToken"),
        TokenCase(name: "no bearer scheme", authorization: { try token() }, status: 403, reason: "InvalidProviderToken"),
        TokenCase(name: "unknown kid", authorization: { "bearer " + (try token(keyID: "UNKNOWNKEY")) }, status: 403, reason: "InvalidProviderToken"),
        TokenCase(name: "iss not the key's team", authorization: { "bearer " + (try token(team: "OTHERTEAM1")) }, status: 403, reason: "InvalidProviderToken"),
        TokenCase(name: "signed with another key", authorization: { "bearer " + (try token(signedWith: "OTHERKEY01")) }, status: 403, reason: "InvalidProviderToken"),
        TokenCase(name: "alg HS256", authorization: {
            let valid = try token().split(separator: ".")
            return "bearer " + base64URL(#"{"alg":"HS256","kid":"DEMOKEY001"}"#) + "." + valid[1] + "." + valid[2]
        }, status: 403, reason: "InvalidProviderToken"),
        TokenCase(name: "iat an hour and more ago", authorization: { "bearer " + (try token(iat: now - 3700)) }, status: 403, reason: "ExpiredProviderToken"),
        TokenCase(name: "iat five minutes ahead (clock skew)", authorization: { "bearer " + (try token(iat: now + 300)) }, status: 200),
        TokenCase(name: "iat more than an hour ahead", authorization: { "bearer " + (try token(iat: now + 3700)) }, status: 403, reason: "InvalidProviderToken"),
        TokenCase(name: "iat a decimal (apns2, pyapns-client)", authorization: { "bearer " + (try token(iatLiteral: "\(now).0045")) }, status: 200),
        TokenCase(name: "iat a string of digits (kalyke)", authorization: { "bearer " + (try token(iatLiteral: "\"\(now)\"")) }, status: 200),
        TokenCase(name: "iat a string in exponent form", authorization: { "bearer " + (try token(iatLiteral: #""1e3""#)) }, status: 403, reason: "InvalidProviderToken"),
        TokenCase(name: "iat negative", authorization: { "bearer " + (try token(iatLiteral: "-5")) }, status: 403, reason: "InvalidProviderToken"),
        TokenCase(name: "iat out of range", authorization: { "bearer " + (try token(iatLiteral: "1e400")) }, status: 403, reason: "InvalidProviderToken"),
        TokenCase(name: "iat an object", authorization: { "bearer " + (try token(iatLiteral: #"{"s":1}"#)) }, status: 403, reason: "InvalidProviderToken"),
        TokenCase(name: "production-only key in sandbox", authorization: { "bearer " + (try token(keyID: "PRODONLY01", signedWith: "PRODONLY01")) }, status: 403, reason: "BadEnvironmentKeyIdInToken"),
        TokenCase(name: "key limited to another app", authorization: { "bearer " + (try token(keyID: "SECONDAPP1", signedWith: "SECONDAPP1")) }, status: 400, reason: "TopicDisallowed"),
        TokenCase(name: "key limited to this app", authorization: { "bearer " + (try token(keyID: "SECONDAPP1", signedWith: "SECONDAPP1")) }, topic: "com.example.second", status: 200),
        TokenCase(name: "another team's app", authorization: { "bearer " + (try token(keyID: "OTHERKEY01", team: "OTHERTEAM1", signedWith: "OTHERKEY01")) }, status: 400, reason: "TopicDisallowed"),
        TokenCase(name: "another team's key, its own app", authorization: { "bearer " + (try token(keyID: "OTHERKEY01", team: "OTHERTEAM1", signedWith: "OTHERKEY01")) }, topic: "com.other.app", status: 200),
    ]

    @Test(arguments: tokenCases)
    func tokenAuthentication(_ tokenCase: TokenCase) async throws {
        try await MockHarness.withRunningMock(configure: Self.configure) { mock in
            let response = try await Curl.send(
                url: "\(mock.baseURL)/3/device/\(Self.deviceToken)", caPath: mock.caPath,
                headers: ["apns-topic": tokenCase.topic], authorization: try tokenCase.authorization())
            #expect(response.status == tokenCase.status)
            #expect(response.reason == tokenCase.reason)
        }
    }

    @Test func productionOnlyKeyWorksOnTheProductionHost() async throws {
        try await MockHarness.withRunningMock(configure: Self.configure) { mock in
            let response = try await Curl.send(
                url: "https://api.push.apple.com:\(mock.apnsPort)/3/device/\(Self.deviceToken)", caPath: mock.caPath,
                authorization: "bearer " + (try Self.token(keyID: "PRODONLY01", signedWith: "PRODONLY01")),
                extra: ["--resolve", "api.push.apple.com:\(mock.apnsPort):127.0.0.1"])
            #expect(response.status == 200)
        }
    }

    @Test func observedSpellingOfBadEnvironmentKey() async throws {
        try await MockHarness.withRunningMock(configure: {
            Self.configure(&$0)
            $0.validation.environmentKeyReasonSpelling = .observed
        }) { mock in
            let response = try await Curl.send(
                url: "\(mock.baseURL)/3/device/\(Self.deviceToken)", caPath: mock.caPath,
                authorization: "bearer " + (try Self.token(keyID: "PRODONLY01", signedWith: "PRODONLY01")))
            #expect(response.status == 403)
            #expect(response.reason == "BadEnvironmentKeyInToken")
        }
    }

    @Test func newTokenSoonerThanTwentyMinutesIsTooManyUpdates() async throws {
        try await MockHarness.withRunningMock(configure: Self.configure) { mock in
            let first = "bearer " + (try Self.token(iat: Self.now - 20))
            let second = "bearer " + (try Self.token(iat: Self.now - 10))
            let topic = "com.example.app"
            let exchanges = try await Curl.sequence(
                url: "\(mock.baseURL)/3/device/\(Self.deviceToken)", caPath: mock.caPath, requests: [
                    ["authorization": first, "apns-topic": topic],
                    ["authorization": second, "apns-topic": topic],
                    ["authorization": first, "apns-topic": topic],
                ])
            #expect(exchanges.map(\.status) == [200, 429, 200])
            #expect(exchanges.map(\.reason) == [nil, "TooManyProviderTokenUpdates", nil])
            #expect(exchanges.map(\.newConnection) == [true, false, false])
        }
    }

    /// A client told ExpiredProviderToken signs a new token and retries on the same connection at
    /// once (aioapns, node-apn, sideshow/apns2 do): that is not TooManyProviderTokenUpdates.
    @Test func newTokenAfterExpiredProviderTokenIsAccepted() async throws {
        try await MockHarness.withRunningMock(configure: Self.configure) { mock in
            try await mock.admin.addFault(json: #"{"respond":{"reason":"ExpiredProviderToken"},"times":1}"#).expect([201])
            let first = "bearer " + (try Self.token(iat: Self.now - 20))
            let second = "bearer " + (try Self.token(iat: Self.now - 10))
            let exchanges = try await Curl.sequence(
                url: "\(mock.baseURL)/3/device/\(Self.deviceToken)", caPath: mock.caPath, requests: [
                    ["authorization": first, "apns-topic": "com.example.app"],
                    ["authorization": second, "apns-topic": "com.example.app"],
                ])
            #expect(exchanges.map(\.status) == [403, 200])
            #expect(exchanges.map(\.reason) == ["ExpiredProviderToken", nil])
            #expect(exchanges.map(\.newConnection) == [true, false])
        }
    }

    /// Accepted non-integer `iat` forms show on the record: `auth.iatForm` and a finding.
    @Test func decimalIssuedAtIsAcceptedAndNotedOnTheRecord() async throws {
        try await MockHarness.withRunningMock(configure: Self.configure) { mock in
            let issued = Self.now
            let response = try await Curl.send(
                url: "\(mock.baseURL)/3/device/\(Self.deviceToken)", caPath: mock.caPath,
                authorization: "bearer " + (try Self.token(iatLiteral: "\(issued).25")))
            #expect(response.status == 200)
            let record = try #require(try await mock.admin.notifications().notifications.first)
            #expect(record.auth == AuthSummary(
                method: .token, teamId: "DEMOTEAM01", keyId: "DEMOKEY001", iatForm: .decimal, iat: Int64(issued),
                tokenId: record.auth.tokenId, signatureForm: .jose))
            #expect(record.auth.tokenId?.count == 12)
            #expect(record.lint.map(\.code) == ["iat-not-integer"])
        }
    }

    @Test func strictProviderTokensRefuseNonIntegerIssuedAt() async throws {
        try await MockHarness.withRunningMock(configure: {
            Self.configure(&$0)
            $0.validation.strictProviderTokens = true
        }) { mock in
            for literal in ["\(Self.now).25", "\"\(Self.now)\""] {
                let response = try await Curl.send(
                    url: "\(mock.baseURL)/3/device/\(Self.deviceToken)", caPath: mock.caPath,
                    authorization: "bearer " + (try Self.token(iatLiteral: literal)))
                #expect(response.status == 403)
                #expect(response.reason == "InvalidProviderToken")
            }
            let integer = try await Curl.send(
                url: "\(mock.baseURL)/3/device/\(Self.deviceToken)", caPath: mock.caPath,
                authorization: "bearer " + (try Self.token()))
            #expect(integer.status == 200)
        }
    }

    @Test func newTokenAfterTheIntervalIsAccepted() async throws {
        try await MockHarness.withRunningMock(configure: {
            Self.configure(&$0)
            $0.tokenUpdateInterval = 0
        }) { mock in
            let exchanges = try await Curl.sequence(
                url: "\(mock.baseURL)/3/device/\(Self.deviceToken)", caPath: mock.caPath, requests: [
                    ["authorization": "bearer " + (try Self.token(iat: Self.now - 20)), "apns-topic": "com.example.app"],
                    ["authorization": "bearer " + (try Self.token(iat: Self.now - 10)), "apns-topic": "com.example.app"],
                ])
            #expect(exchanges.map(\.status) == [200, 200])
            #expect(exchanges.map(\.newConnection) == [true, false])
        }
    }

    @Test func keyOfAnotherTeamOnABoundConnectionIsUnrelated() async throws {
        try await MockHarness.withRunningMock(configure: Self.configure) { mock in
            let exchanges = try await Curl.sequence(
                url: "\(mock.baseURL)/3/device/\(Self.deviceToken)", caPath: mock.caPath, requests: [
                    ["authorization": "bearer " + (try Self.token()), "apns-topic": "com.example.app"],
                    ["authorization": "bearer " + (try Self.token(keyID: "OTHERKEY01", team: "OTHERTEAM1", signedWith: "OTHERKEY01")),
                     "apns-topic": "com.other.app"],
                ])
            #expect(exchanges.map(\.status) == [200, 403])
            #expect(exchanges.map(\.reason) == [nil, "UnrelatedKeyIdInToken"])
            #expect(exchanges.map(\.newConnection) == [true, false])
        }
    }

    /// Apple's key model of February 2025: a connection is bound to the key of its first accepted
    /// token; a later token of that key or of its related key is taken (after the update
    /// interval); a token of any other key, of the same team too, is 403 UnrelatedKeyIdInToken.
    @Test func aConnectionTakesItsKeyAndTheRelatedKeyOnly() async throws {
        try await MockHarness.withRunningMock(configure: {
            Self.configure(&$0)
            $0.tokenUpdateInterval = 0
            // DEMOKEY001 and SECONDAPP1 related (named from one side); PRODONLY01 not.
            if let index = $0.teams[0].keys.firstIndex(where: { $0.keyId == "SECONDAPP1" }) {
                $0.teams[0].keys[index].topics = []
                $0.teams[0].keys[index].relatedKeyId = "DEMOKEY001"
            }
        }) { mock in
            let exchanges = try await Curl.sequence(
                url: "\(mock.baseURL)/3/device/\(Self.deviceToken)", caPath: mock.caPath, requests: [
                    ["authorization": "bearer " + (try Self.token(iat: Self.now - 30)), "apns-topic": "com.example.app"],
                    ["authorization": "bearer " + (try Self.token(keyID: "SECONDAPP1", signedWith: "SECONDAPP1", iat: Self.now - 20)),
                     "apns-topic": "com.example.app"],
                    ["authorization": "bearer " + (try Self.token(iat: Self.now - 10)), "apns-topic": "com.example.app"],
                ])
            #expect(exchanges.map(\.status) == [200, 200, 200])
            #expect(exchanges.map(\.newConnection) == [true, false, false])

        }
        // Without the relation, SECONDAPP1 (same team) is another key: refused on the connection
        // bound to DEMOKEY001.
        try await MockHarness.withRunningMock(configure: {
            Self.configure(&$0)
            $0.tokenUpdateInterval = 0
        }) { mock in
            let refused = try await Curl.sequence(
                url: "\(mock.baseURL)/3/device/\(Self.deviceToken)", caPath: mock.caPath, requests: [
                    ["authorization": "bearer " + (try Self.token(iat: Self.now - 5)), "apns-topic": "com.example.second"],
                    ["authorization": "bearer " + (try Self.token(keyID: "SECONDAPP1", signedWith: "SECONDAPP1")),
                     "apns-topic": "com.example.second"],
                ])
            #expect(refused.map(\.status) == [200, 403])
            #expect(refused.map(\.reason) == [nil, "UnrelatedKeyIdInToken"])
        }
    }

    @Test func tokenSignedByPythonCryptographyIsAccepted() async throws {
        try await MockHarness.withRunningMock(configure: Self.configure) { mock in
            let material = try MockHarness.sharedCertificates()
            let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            let script = repository.appendingPathComponent("scripts/python/es256_jwt.py").path
            // scripts/setup's .venv carries `cryptography` (an aioapns dependency); fall back to the
            // system interpreter when it is absent.
            let venvPython = repository.appendingPathComponent(".venv/bin/python").path
            let python = FileManager.default.isExecutableFile(atPath: venvPython) ? venvPython : "python3"
            let output = try await ExternalTool.run(python, [
                script, material.tokenKeyPath(material.tokenKeys[0]), "DEMOTEAM01", "DEMOKEY001", "\(Self.now)",
            ])
            #expect(output.exitCode == 0, "\(output.stderr)")
            let jwt = output.text.trimmingCharacters(in: .whitespacesAndNewlines)
            let response = try await Curl.send(
                url: "\(mock.baseURL)/3/device/\(Self.deviceToken)", caPath: mock.caPath, authorization: "bearer " + jwt)
            #expect(response.status == 200)
            #expect(response.reason == nil)
        }
    }

    @Test func tokenConnectionAllowsOneStreamUntilATokenIsAccepted() async throws {
        try await MockHarness.withRunningMock(configure: { $0.http2.maxConcurrentStreams = 250 }) { mock in
            let client = try await RawClient.connect(port: mock.apnsPort, security: .tls(caPath: mock.caPath, alpn: ["h2"]))
            try await client.send(H2.preface + H2.settings())
            let first = await client.waitUntil { !H2.parse($0).isEmpty }
            #expect(H2Connections.maxConcurrentStreams(in: H2.parse(first)) == [1])
            try await client.send(H2.request(stream: 1, token: Self.deviceToken, body: Array(#"{"aps":{}}"#.utf8)))
            let after = await client.waitUntil { H2Connections.maxConcurrentStreams(in: H2.parse($0)).count == 2 }
            #expect(H2Connections.maxConcurrentStreams(in: H2.parse(after)) == [1, 250])
            await client.close()
        }
    }

    @Test func refusedTokenKeepsOneStream() async throws {
        try await MockHarness.withRunningMock(configure: { $0.http2.maxConcurrentStreams = 250 }) { mock in
            let client = try await RawClient.connect(port: mock.apnsPort, security: .tls(caPath: mock.caPath, alpn: ["h2"]))
            try await client.send(H2.preface + H2.settings()
                + H2.request(stream: 1, token: Self.deviceToken, authorization: "bearer x.y.z", body: Array(#"{"aps":{}}"#.utf8)))
            let received = await client.waitUntil { H2.parse($0).contains { $0.type == H2.FrameType.data.rawValue } }
            #expect(H2Connections.maxConcurrentStreams(in: H2.parse(received)) == [1])
            await client.close()
        }
    }
}

import Foundation
import Testing
@testable import APNSMockCore

/// The repository's fixtures/ folder, found from this file's path (tests run from any directory).
private func fixture(_ name: String) throws -> String {
    let url = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("fixtures").appendingPathComponent(name)
    return try String(contentsOf: url, encoding: .utf8)
}

@Test func defaultsMatchTheInterface() {
    let configuration = Configuration()
    #expect(configuration.server.host == "127.0.0.1")
    #expect(configuration.server.port == 2197)
    #expect(configuration.server.maxConcurrentStreams == 1000)
    #expect(configuration.server.idleTimeout == 3600)
    #expect(configuration.server.threads == nil)
    #expect(configuration.server.shutdownGracePeriod == 10)
    #expect(configuration.faultSeed == nil)
    #expect(configuration.admin.host == "127.0.0.1")
    #expect(configuration.admin.port == 2198)
    #expect(configuration.admin.token == nil)
    #expect(configuration.tls.certificate == "certs/server.pem")
    #expect(configuration.tls.privateKey == "certs/server-key.pem")
    #expect(configuration.tls.clientCA == "certs/ca.pem")
    #expect(configuration.environment == .sandbox)
    #expect(configuration.teams == [Configuration.Team(
        teamId: "DEMOTEAM01", apps: ["com.example.app"],
        keys: [Configuration.Key(keyId: "DEMOKEY001", path: "certs/AuthKey_DEMOKEY001.p8", environment: .any, topics: [])])])
    #expect(configuration.devices.policy == .open)
    #expect(configuration.devices.tokens.isEmpty)
    #expect(configuration.recording.capacity == 100_000)
    #expect(configuration.faults.isEmpty)
    #expect(configuration.validationSettings == ValidationSettings())
    #expect(configuration.allowedTopics == .bundleIDs(["com.example.app"]))
}

@Test func emptyDocumentIsTheDefaults() throws {
    #expect(try Configuration.parse(yaml: "", file: "empty.yaml") == Configuration())
    #expect(try Configuration.parse(yaml: "# nothing\n", file: "empty.yaml") == Configuration())
}

@Test func minimalFixtureParses() throws {
    let configuration = try Configuration.parse(yaml: fixture("minimal.yaml"), file: "fixtures/minimal.yaml")
    var expected = Configuration()
    expected.validation.strictLint = true
    #expect(configuration == expected)
}

@Test func fullFixtureParses() throws {
    let configuration = try Configuration.parse(yaml: fixture("full.yaml"), file: "fixtures/full.yaml")
    #expect(configuration.admin.token == "s3cret")
    #expect(configuration.server.streamsBeforeAuthentication == 1)
    #expect(configuration.server.tokenUpdateInterval == 1200)
    #expect(configuration.server.maxConnections == 2000)
    #expect(configuration.server.requestTimeout == 10 && configuration.server.responseTimeout == 30)
    #expect(configuration.server.handshakeTimeout == 10)
    #expect(configuration.server.threads == 2 && configuration.server.shutdownGracePeriod == 10)
    #expect(configuration.faultSeed == 42)
    #expect(configuration.state.url == "postgres://apnsmock:secret@postgres.staging:5432/apnsmock")
    #expect(configuration.state.retentionRecords == 1_000_000 && configuration.state.retentionSeconds == 604_800)
    #expect(configuration.admin.maxConnections == 256 && configuration.admin.idleTimeout == 60)
    #expect(configuration.admin.requestTimeout == 10 && configuration.admin.responseTimeout == 30)
    #expect(configuration.admin.allowedOrigins == ["http://dashboard.internal:8080"])
    #expect(configuration.admin.allowedHosts == ["apns-mock.ci.svc.cluster.local"])
    #expect(configuration.teams.map(\.teamId) == ["DEMOTEAM01", "OTHERTEAM1"])
    #expect(configuration.teams[0].keys[1] == Configuration.Key(
        keyId: "SANDBOXK01", path: "certs/AuthKey_SANDBOXK01.p8", environment: .sandbox, topics: ["com.example.other"]))
    #expect(configuration.teams[1].keys[0].environment == .production)
    #expect(configuration.key(id: "PRODKEY001")?.team.teamId == "OTHERTEAM1")
    #expect(configuration.teams[0].allowedTopics(for: configuration.teams[0].keys[0])
        == .bundleIDs(["com.example.app", "com.example.other"]))

    let devices = configuration.devices.tokens
    #expect(devices.count == 4)
    #expect(devices[0].environment == .sandbox)
    #expect(devices[2].unregistration == DeviceEntry.Unregistration(timestamp: 1_767_225_600_000, reason: .unregistered))
    #expect(devices[3].unregistration == DeviceEntry.Unregistration(timestamp: 1_751_277_600_250, reason: .expiredToken))

    #expect(configuration.faults.count == 3)
    #expect(configuration.faults[0].respond == Rejection(.serviceUnavailable))
    #expect(configuration.faults[0].times == 3)
    #expect(configuration.faults[1].action == .goaway(FaultRule.GoAway()))
    #expect(configuration.faults[1].match.pushType == .voip)
    #expect(configuration.faults[2].delayMs == 250)
    #expect(configuration.faults[2].probability == 0.5)

    #expect(configuration.validation.rateLimit == RateLimit(requests: 100, interval: .seconds(1)))
    #expect(configuration.validation.topicPolicy == .teams)
    #expect(configuration.allowedTopics == .bundleIDs(["com.example.app", "com.example.other", "org.example.news"]))
}

@Test func everyFixtureParses() throws {
    let folder = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("fixtures")
    let names = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasSuffix(".yaml") }
    #expect(names.count >= 2)
    for name in names {
        #expect(throws: Never.self, "\(name)") { try Configuration.parse(yaml: fixture(name), file: name) }
    }
}

@Test func alternativeSpellingsAndPolicies() throws {
    let configuration = try Configuration.parse(yaml: """
        validation:
          badEnvironmentKeyReason: BadEnvironmentKeyInToken
          topicPolicy: any
          strictDeviceTokens: true
        devices:
          policy: registered
          tokens:
            - { token: "\(String(repeating: "AB", count: 32))", topic: com.anything.app, unregisteredAt: 1767225600000 }
        """, file: "alt.yaml")
    #expect(configuration.validationSettings.environmentKeyReasonSpelling == .observed)
    #expect(configuration.allowedTopics == .any)
    #expect(configuration.devices.registry.policy == .registered)
    #expect(configuration.devices.tokens[0].token == String(repeating: "ab", count: 32))
    #expect(configuration.devices.tokens[0].unregistration?.timestamp == 1_767_225_600_000)
}

/// A document with one mistake, and where the error must point.
struct ConfigurationErrorRow: Sendable, CustomTestStringConvertible {
    let yaml: String
    let field: String
    let kind: ConfigurationError.Kind

    init(_ field: String, _ kind: ConfigurationError.Kind, _ yaml: String) {
        self.yaml = yaml
        self.field = field
        self.kind = kind
    }

    var testDescription: String { "\(field): \(kind)" }
}

private let tokenA = String(repeating: "a", count: 64)
private let tokenB = String(repeating: "b", count: 64)

let configurationErrorRows: [ConfigurationErrorRow] = [
    ConfigurationErrorRow("bogus", .unknownField, "bogus: 1"),
    ConfigurationErrorRow("server.prot", .unknownField, "server: { prot: 1 }"),
    ConfigurationErrorRow("server", .wrongType, "server: [1, 2]"),
    ConfigurationErrorRow("server.port", .invalidValue, "server: { port: 70000 }"),
    ConfigurationErrorRow("server.port", .invalidValue, "server: { port: -1 }"),
    ConfigurationErrorRow("server.threads", .invalidValue, "server: { threads: 0 }"),
    ConfigurationErrorRow("server.shutdownGracePeriod", .invalidValue, "server: { shutdownGracePeriod: -1 }"),
    ConfigurationErrorRow("faultSeed", .invalidValue, "faultSeed: -1"),
    ConfigurationErrorRow("server.port", .wrongType, "server: { port: http }"),
    ConfigurationErrorRow("server.host", .invalidValue, "server: { host: '' }"),
    ConfigurationErrorRow("server.maxConcurrentStreams", .invalidValue, "server: { maxConcurrentStreams: 0 }"),
    ConfigurationErrorRow("server.streamsBeforeAuthentication", .invalidValue, "server: { streamsBeforeAuthentication: 0 }"),
    ConfigurationErrorRow("server.tokenUpdateInterval", .invalidValue, "server: { tokenUpdateInterval: -1 }"),
    ConfigurationErrorRow("server.maxConnections", .invalidValue, "server: { maxConnections: 0 }"),
    ConfigurationErrorRow("server.errorDisconnect.after", .invalidValue, "server: { errorDisconnect: { after: 0 } }"),
    ConfigurationErrorRow("server.errorDisconnect.after", .missingField, "server: { errorDisconnect: { badDeviceTokenCounts: 2 } }"),
    ConfigurationErrorRow(
        "server.errorDisconnect.badDeviceTokenCounts", .invalidValue, "server: { errorDisconnect: { after: 3, badDeviceTokenCounts: 0 } }"),
    ConfigurationErrorRow("server.errorDisconnect.sooner", .unknownField, "server: { errorDisconnect: { after: 3, sooner: 1 } }"),
    ConfigurationErrorRow("server.maxConnections", .invalidValue, "server: { maxConnections: 99999999999999999 }"),
    ConfigurationErrorRow("server.requestTimeout", .invalidValue, "server: { requestTimeout: 0 }"),
    ConfigurationErrorRow("server.responseTimeout", .invalidValue, "server: { responseTimeout: 86401 }"),
    ConfigurationErrorRow("server.handshakeTimeout", .wrongType, "server: { handshakeTimeout: soon }"),
    ConfigurationErrorRow("admin.maxConnections", .invalidValue, "admin: { maxConnections: -5 }"),
    ConfigurationErrorRow("admin.idleTimeout", .invalidValue, "admin: { idleTimeout: 0 }"),
    ConfigurationErrorRow("admin.requestTimeout", .wrongType, "admin: { requestTimeout: 1e9 }"),
    ConfigurationErrorRow("admin.responseTimeout", .wrongType, "admin: { responseTimeout: 99999999999999999999999 }"),
    ConfigurationErrorRow("admin.port", .contradiction, "admin: { port: 2197 }"),
    ConfigurationErrorRow("admin.token", .invalidValue, "admin: { token: '' }"),
    ConfigurationErrorRow("tls.key", .unknownField, "tls: { key: x.pem }"),
    ConfigurationErrorRow("environment", .invalidValue, "environment: staging"),
    ConfigurationErrorRow("recording.capacity", .invalidValue, "recording: { capacity: -1 }"),
    ConfigurationErrorRow("recording.capacity", .wrongType, "recording: { capacity: 1.5 }"),
    // Found by FuzzConfiguration: server and admin both on port 0 with a broadcast section
    // trapped on a duplicate dictionary key; a real clash is still a contradiction.
    ConfigurationErrorRow("broadcast.sandboxPort", .contradiction, "server: { port: 2300 }\nbroadcast: { sandboxPort: 2300 }"),
    // Once an allocation failure that named no field; then 819 MB resident before any request.
    ConfigurationErrorRow("recording.capacity", .invalidValue, "recording: { capacity: 1000000000000 }"),
    ConfigurationErrorRow("recording.capacity", .invalidValue, "recording: { capacity: 10000001 }"),
    ConfigurationErrorRow("teams", .contradiction, "teams: []"),
    ConfigurationErrorRow("teams[0].teamId", .invalidValue, "teams: [{ teamId: short, apps: [a.b] }]"),
    ConfigurationErrorRow("teams[0].teamId", .missingField, "teams: [{ apps: [a.b] }]"),
    ConfigurationErrorRow("teams[0].apps", .invalidValue, "teams: [{ teamId: TEAM000001, apps: [] }]"),
    ConfigurationErrorRow("teams[0].apps[1]", .invalidValue, "teams: [{ teamId: TEAM000001, apps: [a.b, 'a b'] }]"),
    ConfigurationErrorRow("teams[1].teamId", .duplicate, """
        teams: [{ teamId: TEAM000001, apps: [a.b] }, { teamId: TEAM000001, apps: [c.d] }]
        """),
    ConfigurationErrorRow("teams[1].apps[0]", .duplicate, """
        teams: [{ teamId: TEAM000001, apps: [a.b] }, { teamId: TEAM000002, apps: [a.b] }]
        """),
    ConfigurationErrorRow("teams[1].keys[0].keyId", .duplicate, """
        teams:
          - { teamId: TEAM000001, apps: [a.b], keys: [{ keyId: KEY0000001 }] }
          - { teamId: TEAM000002, apps: [c.d], keys: [{ keyId: KEY0000001 }] }
        """),
    ConfigurationErrorRow("teams[0].keys[0].topics[1]", .contradiction, """
        teams: [{ teamId: TEAM000001, apps: [a.b], keys: [{ keyId: KEY0000001, topics: [a.b, c.d] }] }]
        """),
    ConfigurationErrorRow("teams[0].keys[0].colour", .unknownField, """
        teams: [{ teamId: TEAM000001, apps: [a.b], keys: [{ keyId: KEY0000001, colour: red }] }]
        """),
    ConfigurationErrorRow("teams[0].keys[0].environment", .invalidValue, """
        teams: [{ teamId: TEAM000001, apps: [a.b], keys: [{ keyId: KEY0000001, environment: both }] }]
        """),
    ConfigurationErrorRow("devices.policy", .invalidValue, "devices: { policy: closed }"),
    ConfigurationErrorRow("devices.tokens[0].token", .invalidValue, "devices: { tokens: [{ token: abc }] }"),
    ConfigurationErrorRow("devices.tokens[0].token", .missingField, "devices: { tokens: [{ topic: com.example.app }] }"),
    ConfigurationErrorRow("devices.tokens[2].token", .duplicate, """
        devices:
          tokens:
            - { token: "\(tokenA)" }
            - { token: "\(tokenB)" }
            - { token: "\(tokenA.uppercased())" }
        """),
    ConfigurationErrorRow("devices.tokens[0].token", .invalidValue, """
        validation: { strictDeviceTokens: true }
        devices: { tokens: [{ token: "\(tokenA)aa" }] }
        """),
    ConfigurationErrorRow("devices.tokens[0].topic", .contradiction, """
        devices: { tokens: [{ token: "\(tokenA)", topic: org.unknown.app }] }
        """),
    ConfigurationErrorRow("devices.tokens[0].environment", .invalidValue, """
        devices: { tokens: [{ token: "\(tokenA)", environment: development }] }
        """),
    ConfigurationErrorRow("devices.tokens[0].unregisteredAt", .invalidValue, """
        devices: { tokens: [{ token: "\(tokenA)", unregisteredAt: "last week" }] }
        """),
    ConfigurationErrorRow("devices.tokens[0].reason", .contradiction, """
        devices: { tokens: [{ token: "\(tokenA)", reason: ExpiredToken }] }
        """),
    ConfigurationErrorRow("devices.tokens[0].reason", .invalidValue, """
        devices: { tokens: [{ token: "\(tokenA)", unregisteredAt: 1, reason: Gone }] }
        """),
    ConfigurationErrorRow("devices.tokens[0].extra", .unknownField, """
        devices: { tokens: [{ token: "\(tokenA)", extra: 1 }] }
        """),
    ConfigurationErrorRow("faults", .wrongType, "faults: { match: {} }"),
    ConfigurationErrorRow("faults[0]", .missingField, "faults: [{ match: { topic: com.example.app } }]"),
    ConfigurationErrorRow("faults[0].respond.reason", .invalidValue, "faults: [{ respond: { reason: Teapot } }]"),
    ConfigurationErrorRow("faults[0].respond.reason", .missingField, "faults: [{ respond: { status: 503 } }]"),
    ConfigurationErrorRow("faults[0].respond.status", .contradiction, "faults: [{ respond: { status: 500, reason: Shutdown } }]"),
    ConfigurationErrorRow("faults[0].respond.timestamp", .contradiction, "faults: [{ respond: { reason: BadTopic, timestamp: 1 } }]"),
    ConfigurationErrorRow("faults[0].respond", .contradiction, "faults: [{ action: reset, respond: { reason: Shutdown } }]"),
    ConfigurationErrorRow("faults[0].action", .invalidValue, "faults: [{ action: explode }]"),
    ConfigurationErrorRow("faults[0].probability", .invalidValue, "faults: [{ action: close, probability: 1.5 }]"),
    ConfigurationErrorRow("faults[0].times", .invalidValue, "faults: [{ action: close, times: 0 }]"),
    ConfigurationErrorRow("faults[0].delayMs", .invalidValue, "faults: [{ delayMs: -5 }]"),
    ConfigurationErrorRow("faults[0].match.pushType", .invalidValue, "faults: [{ action: close, match: { pushType: sms } }]"),
    ConfigurationErrorRow("faults[0].match.token", .invalidValue, "faults: [{ action: close, match: { token: xyz } }]"),
    ConfigurationErrorRow("faults[0].match.device", .unknownField, "faults: [{ action: close, match: { device: x } }]"),
    ConfigurationErrorRow("validation.strictLint", .wrongType, "validation: { strictLint: maybe }"),
    ConfigurationErrorRow("validation.lintRejectionReason", .invalidValue, "validation: { lintRejectionReason: Unregistered }"),
    ConfigurationErrorRow("validation.badEnvironmentKeyReason", .invalidValue, "validation: { badEnvironmentKeyReason: BadKey }"),
    ConfigurationErrorRow("validation.rateLimit.requests", .missingField, "validation: { rateLimit: { perSeconds: 1 } }"),
    ConfigurationErrorRow("validation.rateLimit.perSeconds", .invalidValue, "validation: { rateLimit: { requests: 5, perSeconds: 0 } }"),
    ConfigurationErrorRow("validation.strictTokens", .unknownField, "validation: { strictTokens: true }"),
    ConfigurationErrorRow("", .wrongType, "- just\n- a list"),
    ConfigurationErrorRow("", .syntax, "server: { port: 1"),
    ConfigurationErrorRow("", .syntax, "server: {}\nserver: {}"),
]

@Test("each mistake is reported with file, field and kind", arguments: configurationErrorRows)
func configurationError(row: ConfigurationErrorRow) throws {
    let error = try #require(throws: ConfigurationError.self) {
        try Configuration.parse(yaml: row.yaml, file: "test.yaml")
    }
    #expect(error.file == "test.yaml")
    #expect(error.field == row.field, "\(error)")
    #expect(error.kind == row.kind, "\(error)")
    #expect(!error.problem.isEmpty)
    #expect(error.description.hasPrefix("test.yaml"))
}

@Test func errorsCarryTheLine() throws {
    let yaml = """
        server:
          port: 2197
        devices:
          tokens:
            - token: nothex
        """
    let error = try #require(throws: ConfigurationError.self) { try Configuration.parse(yaml: yaml, file: "c.yaml") }
    #expect(error.line == 5)
    #expect(error.field == "devices.tokens[0].token")
    #expect(error.description.hasPrefix("c.yaml:5: devices.tokens[0].token: "))
}

@Test func faultRulesAndDevicesDecodeFromAdminJSON() throws {
    let rule = try FaultRule.decode(json: JSONValue.parse(#"""
        {"match":{"token":"ABCD","pushType":"alert"},"respond":{"status":410,"reason":"Unregistered","timestamp":5},"times":2}
        """#))
    #expect(rule.match.token == "abcd")
    #expect(rule.respond == Rejection(.unregistered, timestamp: 5))
    #expect(rule.match.matches(token: "AbCd", topic: "any.topic", pushType: .alert))
    #expect(!rule.match.matches(token: "abcd", topic: nil, pushType: .voip))

    let error = try #require(throws: ConfigurationError.self) {
        try FaultRule.decode(json: JSONValue.parse(#"{"respond":{"reason":"Nope"}}"#))
    }
    #expect(error.file == nil)
    #expect(error.field == "respond.reason")
    #expect(error.description.hasPrefix("respond.reason: "))

    let wrongType = try #require(throws: ConfigurationError.self) {
        try FaultRule.decode(json: JSONValue.parse(#"{"delayMs":"5"}"#))
    }
    #expect(wrongType.field == "delayMs")
    #expect(wrongType.kind == .wrongType)

    let repeated = try #require(throws: ConfigurationError.self) {
        try FaultRule.decode(json: JSONValue.parse(#"{"action":"close","action":"reset"}"#))
    }
    #expect(repeated.field == "action")
    #expect(repeated.kind == .duplicate)

    let device = try DeviceEntry.decode(json: JSONValue.parse(#"{"token":"ABCD","topic":"com.example.app","environment":"production"}"#))
    #expect(device == DeviceEntry(token: "abcd", topic: "com.example.app", environment: .production))
    let badDevice = try #require(throws: ConfigurationError.self) {
        try DeviceEntry.decode(json: JSONValue.parse(#"{"token":"ab","topic":"x.y"}"#), knownApps: ["com.example.app"])
    }
    #expect(badDevice.field == "topic")
    #expect(badDevice.kind == .contradiction)
}

/// Found by FuzzConfiguration: every listener on port 0 (each gets a free port) is no clash, and
/// once trapped on a duplicate dictionary key while the broadcast section was checked.
@Test("related keys: what Apple refuses is refused naming the key", arguments: [
    ("keys: [{keyId: KEYAAAAAA1, relatedKeyId: KEYBBBBBB1}]", "no configured key"),
    ("keys: [{keyId: KEYAAAAAA1, relatedKeyId: KEYAAAAAA1}]", "itself"),
    ("keys: [{keyId: KEYAAAAAA1, environment: sandbox, relatedKeyId: KEYBBBBBB1}, {keyId: KEYBBBBBB1, environment: production}]",
     "same environment"),
    ("keys: [{keyId: KEYAAAAAA1, relatedKeyId: KEYBBBBBB1}, {keyId: KEYBBBBBB1}, {keyId: KEYCCCCCC1, relatedKeyId: KEYBBBBBB1}]",
     "two related keys"),
])
func relatedKeysAreChecked(_ keys: String, _ problem: String) throws {
    let yaml = "teams: [{teamId: TEAMAAAAA1, apps: [com.example.app], \(keys)}]"
    do {
        _ = try Configuration.parse(yaml: yaml, file: "mock.yaml")
        Issue.record("accepted: \(keys)")
    } catch {
        #expect("\(error)".contains(problem), "\(error)")
        #expect("\(error)".contains("relatedKeyId"), "\(error)")
    }
}

@Test func relatedKeysOfTwoTeamsAreRefusedAndAPairIsTaken() throws {
    let across = """
        teams:
          - {teamId: TEAMAAAAA1, apps: [com.example.app], keys: [{keyId: KEYAAAAAA1, relatedKeyId: KEYBBBBBB1}]}
          - {teamId: TEAMBBBBB1, apps: [com.example.other], keys: [{keyId: KEYBBBBBB1}]}
        """
    #expect(throws: ConfigurationError.self) { try Configuration.parse(yaml: across, file: "mock.yaml") }
    let pair = """
        teams: [{teamId: TEAMAAAAA1, apps: [com.example.app], keys: [{keyId: KEYAAAAAA1, relatedKeyId: KEYBBBBBB1}, {keyId: KEYBBBBBB1, relatedKeyId: KEYAAAAAA1}]}]
        """
    let parsed = try Configuration.parse(yaml: pair, file: "mock.yaml")
    #expect(parsed.teams[0].keys.map(\.relatedKeyId) == ["KEYBBBBBB1", "KEYAAAAAA1"])
}

@Test func errorDisconnectIsOffUnlessGiven() throws {
    #expect(try Configuration.parse(yaml: "", file: "mock.yaml").server.errorDisconnect == nil)
    let penalty = try Configuration.parse(yaml: "server: { errorDisconnect: { after: 5, badDeviceTokenCounts: 5 } }", file: "mock.yaml")
    #expect(penalty.server.errorDisconnect == .init(after: 5, badDeviceTokenCounts: 5))
    var configuration = penalty
    try EnvironmentVariables(["APNS_MOCK_ERROR_DISCONNECT_AFTER": "20"]).apply(to: &configuration)
    #expect(configuration.server.errorDisconnect == .init(after: 20, badDeviceTokenCounts: 5))
    #expect(throws: ConfigurationError.self) {
        var defaults = Configuration()
        try EnvironmentVariables(["APNS_MOCK_ERROR_DISCONNECT_AFTER": "often"]).apply(to: &defaults)
    }
}

@Test func everyListenerOnPortZeroParses() throws {
    let configuration = try Configuration.parse(
        yaml: "server: { port: 0 }\nadmin: { port: 0 }\nbroadcast: { sandboxPort: 0, productionPort: 0 }\n", file: "ports.yaml")
    #expect(configuration.server.port == 0)
    #expect(configuration.admin.port == 0)
    #expect(configuration.broadcast.sandboxPort == 0)
}

/// `state.url` must be a PostgreSQL URL; anything else is refused naming the field.
@Test func stateURLMustBePostgres() throws {
    for url in ["mysql://u:p@db/x", "postgres:///nohost", "redis://cache", ""] {
        #expect(throws: ConfigurationError.self) {
            try Configuration.parse(yaml: "state: { url: \"\(url)\" }", file: "t.yaml")
        }
    }
    let accepted = try Configuration.parse(yaml: "state: { url: \"postgresql://u@db:5433/x?sslmode=require\" }", file: "t.yaml")
    #expect(accepted.state.url == "postgresql://u@db:5433/x?sslmode=require")
}

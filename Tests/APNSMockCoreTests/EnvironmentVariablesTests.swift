import Testing
@testable import APNSMockCore

/// `APNS_MOCK_*` variables over a configuration (docs/configuration.md, "Environment variables").
@Suite("Environment variables")
struct EnvironmentVariablesTests {
    static let pem = """
        -----BEGIN PRIVATE KEY-----
        MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgevZzL1gdAFr88hb2
        OF/2NxApJCzGCEDdfSp6VQO30hyhRANCAAQRWz+jn65BtOMvdyHKcvjBeBSDZH2r
        1RTwjmYSi9R/zpBnuQ4EiMnCqfMPWiZqB4QdbAd0E7oH50VpuZ1P087G
        -----END PRIVATE KEY-----
        """

    static func applied(_ variables: [String: String], to base: Configuration = Configuration()) throws(ConfigurationError) -> Configuration {
        var configuration = base
        try EnvironmentVariables(variables).apply(to: &configuration)
        return configuration
    }

    static func problem(_ variables: [String: String], base: Configuration = Configuration()) -> ConfigurationError? {
        do {
            _ = try applied(variables, to: base)
            return nil
        } catch {
            return error
        }
    }

    @Test func everySettingVariableSetsItsField() throws {
        let configuration = try Self.applied([
            "APNS_MOCK_HOST": "0.0.0.0", "APNS_MOCK_PORT": "2197", "APNS_MOCK_ADDITIONAL_PORTS": "443, 8443",
            "APNS_MOCK_ADMIN_HOST": "0.0.0.0", "APNS_MOCK_ADMIN_PORT": "9000", "APNS_MOCK_ADMIN_TOKEN": "s3cret",
            "APNS_MOCK_BROADCAST_HOST": "::", "APNS_MOCK_BROADCAST_SANDBOX_PORT": "3195",
            "APNS_MOCK_BROADCAST_PRODUCTION_PORT": "3196", "APNS_MOCK_ENVIRONMENT": "production",
            "APNS_MOCK_TOPIC_POLICY": "any", "APNS_MOCK_TEAM_ID": "TEAMENV001", "APNS_MOCK_TOPICS": "com.a.app,com.b.app",
            "APNS_MOCK_KEY_ID": "KEYENV0001", "APNS_MOCK_KEY_PEM": Self.pem, "APNS_MOCK_DEVICE_POLICY": "registered",
            "APNS_MOCK_DEVICE_TOKENS": "abab, cdcd", "APNS_MOCK_RECORDING_CAPACITY": "50", "APNS_MOCK_THREADS": "2",
            // The command's own: read by the command, accepted here.
            "APNS_MOCK_CERTS": "/var/lib/apns-mock/certs",
        ])
        #expect(configuration.server.host == "0.0.0.0")
        #expect(configuration.server.port == 2197)
        #expect(configuration.server.additionalPorts == [443, 8443])
        #expect(configuration.admin.host == "0.0.0.0" && configuration.admin.port == 9000)
        #expect(configuration.admin.token == "s3cret")
        #expect(configuration.broadcast.host == "::")
        #expect(configuration.broadcast.sandboxPort == 3195 && configuration.broadcast.productionPort == 3196)
        #expect(configuration.environment == .production)
        #expect(configuration.validation.topicPolicy == .any)
        #expect(configuration.teams == [Configuration.Team(
            teamId: "TEAMENV001", apps: ["com.a.app", "com.b.app"],
            keys: [Configuration.Key(keyId: "KEYENV0001", pem: Self.pem)])])
        #expect(configuration.devices.policy == .registered)
        #expect(configuration.devices.tokens.map(\.token) == ["abab", "cdcd"])
        #expect(configuration.recording.capacity == 50)
        #expect(configuration.server.threads == 2)
        try configuration.checkListenerPorts()
    }

    /// Each variable sets only its own field: the rest of the file stays.
    @Test func variablesChangeOnlyTheirFields() throws {
        let file = try Configuration.parse(yaml: """
            server: { port: 3000, maxConcurrentStreams: 50 }
            teams:
              - { teamId: TEAMFILE01, apps: [com.file.app], keys: [{ keyId: KEYFILE001, environment: sandbox }] }
              - { teamId: TEAMFILE02, apps: [com.other.app] }
            """, file: "mock.yaml")
        let configuration = try Self.applied(["APNS_MOCK_PORT": "3001", "APNS_MOCK_KEY_PEM": Self.pem], to: file)
        #expect(configuration.server.port == 3001)
        #expect(configuration.server.maxConcurrentStreams == 50)
        #expect(configuration.teams[0].teamId == "TEAMFILE01")
        // The inline key keeps the file's key ID and environment.
        #expect(configuration.teams[0].keys == [Configuration.Key(keyId: "KEYFILE001", pem: Self.pem, environment: .sandbox)])
        #expect(configuration.teams[1] == file.teams[1])
    }

    @Test func emptyValuesAreUnsetButNoAdditionalPortMeansNone() throws {
        var base = Configuration()
        base.server.additionalPorts = [443]
        let configuration = try Self.applied(["APNS_MOCK_PORT": "", "APNS_MOCK_ADMIN_TOKEN": ""], to: base)
        #expect(configuration == base)
        #expect(try Self.applied(["APNS_MOCK_ADDITIONAL_PORTS": ""], to: base).server.additionalPorts == [])
        #expect(try Self.applied(["APNS_MOCK_ADDITIONAL_PORTS": "none"], to: base).server.additionalPorts == [])
    }

    @Test func variablesOfOtherProgramsAreIgnored() throws {
        #expect(try Self.applied(["HOME": "/root", "APNS_TOPIC": "x", "PORT": "80"]) == Configuration())
    }

    struct BadCase: Sendable, CustomTestStringConvertible {
        var name: String
        var value: String
        /// Words the message must contain besides the variable's name.
        var says: String
        var testDescription: String { "\(name)=\(value.prefix(20))" }
    }

    static let badCases: [BadCase] = [
        BadCase(name: "APNS_MOCK_PORT", value: "70000", says: "out of range"),
        BadCase(name: "APNS_MOCK_PORT", value: "twenty", says: "whole number"),
        BadCase(name: "APNS_MOCK_ADDITIONAL_PORTS", value: "443,443", says: "listed twice"),
        BadCase(name: "APNS_MOCK_ADDITIONAL_PORTS", value: "2197", says: "already server.port"),
        BadCase(name: "APNS_MOCK_ADDITIONAL_PORTS", value: "443;8443", says: "whole number"),
        BadCase(name: "APNS_MOCK_ADMIN_PORT", value: "-1", says: "out of range"),
        BadCase(name: "APNS_MOCK_ENVIRONMENT", value: "prod", says: "sandbox, production"),
        BadCase(name: "APNS_MOCK_TOPIC_POLICY", value: "all", says: "teams, any"),
        BadCase(name: "APNS_MOCK_TEAM_ID", value: "team1", says: "10 uppercase letters and digits"),
        BadCase(name: "APNS_MOCK_KEY_ID", value: "KEY", says: "10 uppercase letters and digits"),
        BadCase(name: "APNS_MOCK_TOPICS", value: "com.a.app,,not a topic", says: "not a well-formed bundle ID"),
        BadCase(name: "APNS_MOCK_TOPICS", value: "com.a.app,com.a.app", says: "listed twice"),
        BadCase(name: "APNS_MOCK_TOPICS", value: ",", says: "at least one app"),
        BadCase(name: "APNS_MOCK_KEY_PEM", value: "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEH", says: "BEGIN PRIVATE KEY"),
        BadCase(name: "APNS_MOCK_KEY_PEM", value: "-----BEGIN PRIVATE KEY-----\n%%%%\n-----END PRIVATE KEY-----", says: "base64"),
        BadCase(name: "APNS_MOCK_DEVICE_POLICY", value: "closed", says: "open, registered"),
        BadCase(name: "APNS_MOCK_DEVICE_TOKENS", value: "abc", says: "not a device token"),
        BadCase(name: "APNS_MOCK_DEVICE_TOKENS", value: "abab,abab", says: "listed twice"),
        BadCase(name: "APNS_MOCK_RECORDING_CAPACITY", value: "100000000000", says: "out of range"),
        BadCase(name: "APNS_MOCK_HOST", value: "   ", says: "must not be empty"),
    ]

    @Test("A bad value names the variable and says what is wrong", arguments: badCases)
    func badValueNamesTheVariable(_ bad: BadCase) throws {
        let error = try #require(Self.problem([bad.name: bad.value]), "\(bad.name)=\(bad.value) was accepted")
        #expect(error.field.hasPrefix(bad.name), "\(error)")
        #expect(error.file == nil)
        #expect(error.description.hasPrefix(bad.name), "\(error)")
        #expect(error.problem.contains(bad.says), "\(error)")
    }

    @Test func unknownVariableIsRefusedByName() {
        #expect(throws: ConfigurationError.self) { try EnvironmentVariables(["APNS_MOCK_PROT": "2197"]) }
        do {
            _ = try EnvironmentVariables(["APNS_MOCK_PROT": "2197"])
        } catch {
            #expect(error.field == "APNS_MOCK_PROT")
            #expect(error.problem.contains("APNS_MOCK_PORT"), "the message lists the known names")
        }
    }

    /// The team variables keep what the rest of the configuration says consistent.
    @Test func teamVariablesCannotContradictTheFile() throws {
        let file = try Configuration.parse(yaml: """
            teams:
              - { teamId: TEAMFILE01, apps: [com.file.app, com.more.app], keys: [{ keyId: KEYFILE001, topics: [com.more.app] }] }
              - { teamId: TEAMFILE02, apps: [com.other.app], keys: [{ keyId: KEYFILE002 }] }
            """, file: "mock.yaml")
        #expect(Self.problem(["APNS_MOCK_TOPICS": "com.file.app"], base: file)?.kind == .contradiction)
        #expect(Self.problem(["APNS_MOCK_TOPICS": "com.other.app"], base: file)?.kind == .duplicate)
        #expect(Self.problem(["APNS_MOCK_TEAM_ID": "TEAMFILE02"], base: file)?.kind == .duplicate)
        #expect(Self.problem(["APNS_MOCK_KEY_ID": "KEYFILE002"], base: file)?.kind == .duplicate)
        // A new key ID replaces the team's keys (and their topic restriction).
        let replaced = try Self.applied(["APNS_MOCK_KEY_ID": "KEYNEW0001", "APNS_MOCK_TOPICS": "com.file.app"], to: file)
        #expect(replaced.teams[0].keys == [Configuration.Key(keyId: "KEYNEW0001")])
        #expect(replaced.teams[0].apps == ["com.file.app"])
    }

    @Test func noTeamsGetTheDemoTeamEdited() throws {
        var base = Configuration()
        base.validation.topicPolicy = .any
        base.teams = []
        let configuration = try Self.applied(["APNS_MOCK_TEAM_ID": "TEAMENV001"], to: base)
        #expect(configuration.teams.map(\.teamId) == ["TEAMENV001"])
        #expect(configuration.teams[0].apps == Configuration.Team.demo.apps)
    }

    @Test func listenersCannotShareAPort() throws {
        var configuration = Configuration()
        try configuration.checkListenerPorts()
        configuration.admin.port = 2197
        #expect(throws: ConfigurationError.self) { try configuration.checkListenerPorts() }
        configuration.admin.port = 2198
        configuration.broadcast.sandboxPort = 0
        configuration.broadcast.productionPort = 0
        configuration.server.additionalPorts = [0, 0, 2198]
        do {
            try configuration.checkListenerPorts()
            Issue.record("an additional port equal to admin.port was accepted")
        } catch {
            #expect(error.field == "admin.port" || error.field == "server.additionalPorts", "\(error)")
            #expect(error.problem.contains("2198"))
        }
    }

    @Test func filesSayKeysInlineOrAsAFileNotBoth() throws {
        let inline = try Configuration.parse(yaml: """
            teams:
              - teamId: TEAMFILE01
                apps: [com.file.app]
                keys:
                  - keyId: KEYFILE001
                    pem: |
            \(Self.pem.split(separator: "\n").map { "          " + $0 }.joined(separator: "\n"))
            """, file: "mock.yaml")
        #expect(inline.teams[0].keys[0].pem?.hasPrefix("-----BEGIN PRIVATE KEY-----") == true)
        #expect(throws: ConfigurationError.self) {
            try Configuration.parse(yaml: """
                teams: [{ teamId: TEAMFILE01, apps: [com.file.app], keys: [{ keyId: KEYFILE001, path: k.p8, pem: "-----BEGIN PRIVATE KEY-----" }] }]
                """, file: "mock.yaml")
        }
    }
}

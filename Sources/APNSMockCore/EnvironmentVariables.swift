/// Configuration from `APNS_MOCK_*` environment variables (docs/configuration.md, "Environment
/// variables"), for containers that start before any file of the repository exists: a CI job's
/// service container, a Testcontainers container, a compose service.
///
/// Precedence, lowest first: the built-in defaults; the configuration file (`--config`,
/// `APNS_MOCK_CONFIG` or the whole YAML in `APNS_MOCK_CONFIG_YAML`); the other variables; the
/// command line. An empty value counts as unset (compose and CI systems expand unset variables to
/// empty), except `APNS_MOCK_ADDITIONAL_PORTS`, where it means no additional port. A variable
/// this table does not know stops start-up: a misspelt name would otherwise change nothing, silently.
public struct EnvironmentVariables: Sendable, Equatable {
    public static let prefix = "APNS_MOCK_"

    /// One variable: its name, the setting it stands for (for docs and messages) and how it applies.
    public struct Variable: Sendable {
        public let name: String
        /// The configuration field or command-line option it sets.
        public let setting: String
        fileprivate let apply: @Sendable (Field<EnvironmentValue>, inout Configuration) throws(ConfigurationError) -> Void

        fileprivate init(
            _ name: String, _ setting: String,
            _ apply: @escaping @Sendable (Field<EnvironmentValue>, inout Configuration) throws(ConfigurationError) -> Void
        ) {
            self.name = name
            self.setting = setting
            self.apply = apply
        }
    }

    /// What the command reads itself rather than the configuration: where the configuration is,
    /// and the options that are not configuration fields.
    public static let commandVariables: [(name: String, setting: String)] = [
        ("APNS_MOCK_CONFIG", "--config: a configuration file's path"),
        ("APNS_MOCK_CONFIG_YAML", "the whole configuration file's text"),
        ("APNS_MOCK_CERTS", "--certs"),
        ("APNS_MOCK_LOG_LEVEL", "--log-level"),
        ("APNS_MOCK_LOG_FORMAT", "--log-format"),
        ("APNS_MOCK_FUZZ", "Package.swift only: adds the fuzz targets to a build (ignored when running)"),
    ]

    /// The variables that set configuration fields, in the order they apply.
    public static let configurationVariables: [Variable] = [
        Variable("APNS_MOCK_HOST", "server.host") { field, configuration throws(ConfigurationError) in
            configuration.server.host = try field.nonEmptyString()
        },
        Variable("APNS_MOCK_PORT", "server.port") { field, configuration throws(ConfigurationError) in
            configuration.server.port = try field.integer(in: Configuration.portRange)
        },
        Variable("APNS_MOCK_ADDITIONAL_PORTS", "server.additionalPorts (comma-separated; empty or none: no additional port)") {
            field, configuration throws(ConfigurationError) in
            let text = field.node.text.lowercased()
            configuration.server.additionalPorts = text.isEmpty || text == "none"
                ? [] : try Configuration.additionalPorts(field, mainPort: configuration.server.port)
        },
        Variable("APNS_MOCK_ADMIN_HOST", "admin.host") { field, configuration throws(ConfigurationError) in
            configuration.admin.host = try field.nonEmptyString()
        },
        Variable("APNS_MOCK_ADMIN_PORT", "admin.port") { field, configuration throws(ConfigurationError) in
            configuration.admin.port = try field.integer(in: Configuration.portRange)
        },
        Variable("APNS_MOCK_ADMIN_TOKEN", "admin.token") { field, configuration throws(ConfigurationError) in
            configuration.admin.token = try Configuration.adminToken(field)
        },
        Variable("APNS_MOCK_ADMIN_ALLOWED_ORIGINS", "admin.allowedOrigins (comma-separated origins)") {
            field, configuration throws(ConfigurationError) in
            configuration.admin.allowedOrigins = try Configuration.allowedOrigins(field)
        },
        Variable("APNS_MOCK_ADMIN_ALLOWED_HOSTS", "admin.allowedHosts (comma-separated names or addresses; * for any)") {
            field, configuration throws(ConfigurationError) in
            configuration.admin.allowedHosts = try Configuration.allowedHosts(field)
        },
        Variable("APNS_MOCK_BROADCAST_HOST", "broadcast.host") { field, configuration throws(ConfigurationError) in
            configuration.broadcast.host = try field.nonEmptyString()
        },
        Variable("APNS_MOCK_BROADCAST_SANDBOX_PORT", "broadcast.sandboxPort") { field, configuration throws(ConfigurationError) in
            configuration.broadcast.sandboxPort = try field.integer(in: Configuration.portRange)
        },
        Variable("APNS_MOCK_BROADCAST_PRODUCTION_PORT", "broadcast.productionPort") { field, configuration throws(ConfigurationError) in
            configuration.broadcast.productionPort = try field.integer(in: Configuration.portRange)
        },
        Variable("APNS_MOCK_STATE_URL", "state.url (replicas sharing one PostgreSQL; unset: in memory)") {
            field, configuration throws(ConfigurationError) in
            configuration.state.url = try Configuration.stateURL(field)
        },
        Variable("APNS_MOCK_STATE_RETENTION_RECORDS", "state.retention.records") { field, configuration throws(ConfigurationError) in
            configuration.state.retentionRecords = try field.integer(in: 1_000...100_000_000)
        },
        Variable("APNS_MOCK_STATE_RETENTION_SECONDS", "state.retention.seconds") { field, configuration throws(ConfigurationError) in
            configuration.state.retentionSeconds = try field.integer(in: 60...(10 * 365 * 24 * 3600))
        },
        Variable("APNS_MOCK_PROXY_HOST", "proxy.host") { field, configuration throws(ConfigurationError) in
            configuration.proxy.host = try field.nonEmptyString()
        },
        Variable("APNS_MOCK_PROXY_PORT", "proxy.port (the CONNECT proxy listener; unset: none)") {
            field, configuration throws(ConfigurationError) in
            configuration.proxy.port = try field.integer(in: Configuration.portRange)
        },
        Variable("APNS_MOCK_ENVIRONMENT", "environment") { field, configuration throws(ConfigurationError) in
            configuration.environment = try field.oneOf(APNSEnvironment.self)
        },
        Variable("APNS_MOCK_TOPIC_POLICY", "validation.topicPolicy") { field, configuration throws(ConfigurationError) in
            configuration.validation.topicPolicy = try field.oneOf(Configuration.TopicPolicy.self)
        },
        Variable("APNS_MOCK_TEAM_ID", "teams[0].teamId") { field, configuration throws(ConfigurationError) in
            let teamId = try Configuration.appleIdentifier(field, what: "team ID")
            if configuration.teams.dropFirst().contains(where: { $0.teamId == teamId }) {
                throw field.error(.duplicate, "team \(teamId) is already another team of the configuration")
            }
            configuration.firstTeam { $0.teamId = teamId }
        },
        Variable("APNS_MOCK_KEY_ID", "teams[0].keys[0].keyId (replaces the team's keys)") { field, configuration throws(ConfigurationError) in
            let keyId = try Configuration.appleIdentifier(field, what: "key ID")
            if configuration.teams.dropFirst().contains(where: { $0.keys.contains { $0.keyId == keyId } }) {
                throw field.error(.duplicate, "key \(keyId) is already a key of another team")
            }
            configuration.firstTeam { team in
                let existing = team.keys.first
                team.keys = [Configuration.Key(
                    keyId: keyId, pem: existing?.keyId == keyId ? existing?.pem : nil,
                    environment: existing?.environment ?? .any)]
            }
        },
        Variable("APNS_MOCK_KEY_PEM", "teams[0].keys[0].pem (the .p8 key, or its public key, as PEM text)") {
            field, configuration throws(ConfigurationError) in
            let pem = try Configuration.checkedPEM(field)
            configuration.firstTeam { team in
                let existing = team.keys.first
                team.keys = [Configuration.Key(
                    keyId: existing?.keyId ?? Configuration.Team.demo.keys[0].keyId, pem: pem,
                    environment: existing?.environment ?? .any)]
            }
        },
        Variable("APNS_MOCK_TOPICS", "teams[0].apps (comma-separated bundle IDs)") { field, configuration throws(ConfigurationError) in
            var apps: [String] = []
            for (app, element) in try field.stringList() {
                guard HeaderSyntax.isWellFormedTopic(app) else {
                    throw element.error(.invalidValue, "\"\(app)\" is not a well-formed bundle ID")
                }
                if let owner = configuration.teams.dropFirst().first(where: { $0.apps.contains(app) }) {
                    throw element.error(.duplicate, "\(app) is already an app of team \(owner.teamId)")
                }
                guard !apps.contains(app) else { throw element.error(.duplicate, "\(app) is listed twice") }
                apps.append(app)
            }
            guard !apps.isEmpty else { throw field.error(.invalidValue, "a team needs at least one app") }
            for key in configuration.teams.first?.keys ?? [] {
                if let stray = key.topics.first(where: { !apps.contains($0) }) {
                    throw field.error(.contradiction, "key \(key.keyId) of the file may push only to \(stray), which this list leaves out")
                }
            }
            configuration.firstTeam { $0.apps = apps }
        },
        Variable("APNS_MOCK_DEVICE_POLICY", "devices.policy") { field, configuration throws(ConfigurationError) in
            configuration.devices.policy = try field.oneOf(DevicePolicy.self)
        },
        Variable("APNS_MOCK_DEVICE_TOKENS", "devices.tokens (comma-separated tokens, each for any app and environment)") {
            field, configuration throws(ConfigurationError) in
            var entries: [DeviceEntry] = []
            let strict = configuration.validation.strictDeviceTokens
            for (token, element) in try field.stringList() {
                guard DeviceToken.isWellFormed(token.utf8, strict: strict) else {
                    throw element.error(.invalidValue, "\"\(token)\" is not a device token: expected an even number of hex digits")
                }
                guard !entries.contains(where: { $0.token == token }) else {
                    throw element.error(.duplicate, "token \(token) is listed twice")
                }
                entries.append(DeviceEntry(token: token))
            }
            configuration.devices.tokens = entries
        },
        Variable("APNS_MOCK_MAGIC_DEVICE_TOKENS", "validation.magicDeviceTokens (true or false)") {
            field, configuration throws(ConfigurationError) in
            configuration.validation.magicDeviceTokens = try field.boolean()
        },
        Variable("APNS_MOCK_RECORDING_CAPACITY", "recording.capacity") { field, configuration throws(ConfigurationError) in
            configuration.recording.capacity = try field.integer(in: Configuration.Recording.capacityRange)
        },
        Variable("APNS_MOCK_THREADS", "server.threads") { field, configuration throws(ConfigurationError) in
            configuration.server.threads = try field.integer(in: Configuration.threadRange)
        },
        Variable(
            "APNS_MOCK_TLS_HOSTS",
            "tls.hosts (comma-separated names or addresses the mock's own server certificate adds, e.g. a cluster's service name)"
        ) { field, configuration throws(ConfigurationError) in
            let hosts = try field.string().split(separator: ",").map { String($0.filter { $0 != " " }) }.filter { !$0.isEmpty }
            for host in hosts {
                if let problem = Configuration.certificateHostProblem(host) {
                    throw field.error(.invalidValue, "\"\(host.prefix(64))\" cannot name a certificate: \(problem)")
                }
            }
            configuration.tls.hosts = hosts
        },
        Variable(
            "APNS_MOCK_ERROR_DISCONNECT_AFTER",
            "server.errorDisconnect.after (Apple's connection penalty; each BadDeviceToken counts once unless the file says otherwise)"
        ) { field, configuration throws(ConfigurationError) in
            let after = try field.integer(in: Configuration.errorDisconnectRange)
            let weight = configuration.server.errorDisconnect?.badDeviceTokenCounts ?? 1
            configuration.server.errorDisconnect = .init(after: after, badDeviceTokenCounts: weight)
        },
    ]

    /// Every name this table knows.
    public static var knownNames: [String] {
        commandVariables.map(\.name) + configurationVariables.map(\.name)
    }

    /// The `APNS_MOCK_*` variables of the environment, empty ones left out (but for
    /// `APNS_MOCK_ADDITIONAL_PORTS`).
    public let values: [String: String]

    /// Reads the `APNS_MOCK_*` variables of `environment`; an unknown one throws, naming it.
    public init(_ environment: [String: String]) throws(ConfigurationError) {
        var values: [String: String] = [:]
        let known = Set(Self.knownNames)
        for (name, value) in environment where name.hasPrefix(Self.prefix) {
            guard known.contains(name) else {
                throw ConfigurationError(
                    file: nil, field: name, kind: .unknownField,
                    problem: "not an apns-mock variable; known: \(Self.knownNames.joined(separator: ", "))")
            }
            if value.isEmpty, name != "APNS_MOCK_ADDITIONAL_PORTS" { continue }
            values[name] = value
        }
        self.values = values
    }

    public subscript(name: String) -> String? { values[name] }

    /// Whether any variable sets a configuration field (not only the command's own).
    public var setsConfiguration: Bool {
        Self.configurationVariables.contains { values[$0.name] != nil }
    }

    /// Sets the fields the variables give, in table order; a bad value throws, naming the variable.
    /// Checks the listeners' ports against each other afterwards.
    public func apply(to configuration: inout Configuration) throws(ConfigurationError) {
        for variable in Self.configurationVariables {
            guard let text = values[variable.name] else { continue }
            try variable.apply(Field(node: EnvironmentValue(text), path: variable.name, file: nil), &configuration)
        }
    }

    /// One of an enumeration's raw values (`APNS_MOCK_LOG_FORMAT`).
    public func oneOf<Value: RawRepresentable & CaseIterable>(_ name: String, _ type: Value.Type) throws(ConfigurationError) -> Value?
    where Value.RawValue == String {
        guard let text = values[name] else { return nil }
        return try Field(node: EnvironmentValue(text), path: name, file: nil).oneOf(type)
    }
}

/// An environment variable's text as a document node: a scalar that is also a comma-separated
/// list, so that the configuration's own field checks (ranges, spellings, bundle IDs) apply to it
/// with the same messages.
struct EnvironmentValue: DocumentNode {
    let text: String

    init(_ text: String) {
        self.text = Self.trimmed(Substring(text))
    }

    private static func trimmed(_ text: Substring) -> String {
        String(text.drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed())
    }

    var line: Int? { nil }
    var mappingEntries: [(key: String?, value: EnvironmentValue)]? { nil }

    var sequenceElements: [EnvironmentValue]? {
        text.split(separator: ",", omittingEmptySubsequences: false).map { EnvironmentValue(Self.trimmed($0)) }
            .filter { !$0.text.isEmpty }
    }

    var textValue: String? { text }
    var wholeNumber: Int? { Int(text) }
    var realNumber: Double? { Double(text) }

    var flag: Bool? {
        switch text.lowercased() {
        case "true", "1", "yes", "on": true
        case "false", "0", "no", "off": false
        default: nil
        }
    }

    var isNullValue: Bool { false }
    var kindDescription: String { "\"\(text)\"" }
}

extension Configuration {
    /// Edits the first team, making it the demo team first when none is configured.
    fileprivate mutating func firstTeam(_ edit: (inout Team) -> Void) {
        if teams.isEmpty { teams = [.demo] }
        edit(&teams[0])
    }

    /// The listeners' ports against each other, after every source (file, environment, command
    /// line) has had its say: two listeners cannot bind the same port. Port 0 (any free port)
    /// collides with nothing.
    public func checkListenerPorts() throws(ConfigurationError) {
        var owners: [Int: String] = [:]
        let listeners: [(String, Int)] = [("server.port", server.port)]
            + server.additionalPorts.map { ("server.additionalPorts", $0) }
            + [("admin.port", admin.port), ("broadcast.sandboxPort", broadcast.sandboxPort),
               ("broadcast.productionPort", broadcast.productionPort)]
            + (proxy.port.map { [("proxy.port", $0)] } ?? [])
        for (setting, port) in listeners where port != 0 {
            if let owner = owners[port] {
                throw ConfigurationError(
                    file: nil, field: setting, kind: .contradiction, problem: "port \(port) is already \(owner)")
            }
            owners[port] = setting
        }
    }
}

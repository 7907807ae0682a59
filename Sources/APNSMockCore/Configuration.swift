import Foundation
import Yams

/// Everything the configuration file can say (docs/configuration.md), with the
/// built-in defaults that let `apns-mock serve` run on a fresh checkout without one.
///
/// `Configuration()` is the defaults; ``parse(yaml:file:)`` overlays a file on them. Sections a
/// file leaves out keep their defaults; a section it gives replaces the default field by field,
/// except lists (`teams`, `devices.tokens`, `faults`), which replace the default list whole. Paths
/// are kept as written; the command resolves relative ones.
public struct Configuration: Sendable, Equatable {
    /// The APNs listener (TLS, HTTP/2).
    public struct Server: Sendable, Equatable {
        public var host = "127.0.0.1"
        /// 0 picks a free port (the command prints the one chosen).
        public var port = 2197
        /// More ports on `host` served exactly like `port`: Apple's APNs answers on 443 as well as
        /// 2197, and clients that hard-code Apple's host dial 443 (the container image listens on
        /// both). 0 picks a free port.
        public var additionalPorts: [Int] = []
        /// Announced in SETTINGS once a connection is authenticated; Apple announces 1000.
        public var maxConcurrentStreams = 1000
        /// Seconds a connection may stay idle before the mock ends it with GOAWAY IdleTimeout;
        /// 0 never ends idle connections.
        public var idleTimeout = 3600
        /// MAX_CONCURRENT_STREAMS of a token-auth connection until a request carries a valid token
        /// (APNs: 1). Raise it for load tools that open many streams before reading SETTINGS.
        public var streamsBeforeAuthentication = 1
        /// Seconds a token-auth connection must keep its token before sending a new one; sooner is
        /// 429 TooManyProviderTokenUpdates (Apple: 20 minutes).
        public var tokenUpdateInterval = 1200
        /// After a rejected request, lower the connection's MAX_CONCURRENT_STREAMS to 1 until a
        /// request is accepted again, as production APNs was seen to do. Off by default.
        public var shrinkStreamsAfterRejection = false
        /// Connections open at once; past it new ones are closed at once (RST). `nil`: the default,
        /// ``defaultMaxConnections``, lowered at start-up to what the descriptor limit allows.
        public var maxConnections: Int?
        /// Seconds a request's HEADERS and body may take to arrive before the connection is ended.
        public var requestTimeout = 10
        /// Seconds an answered stream may wait for the client to take its response (flow-control
        /// window) before the connection is ended.
        public var responseTimeout = 30
        /// Seconds a new connection gets to finish its TLS handshake and send the HTTP/2 preface.
        public var handshakeTimeout = 10
        /// Event-loop threads serving the TLS listeners; `nil`: one per core.
        public var threads: Int?
        /// Seconds in-flight requests get to finish after SIGTERM before connections are cut.
        public var shutdownGracePeriod = 10
        /// Apple's connection penalty, opt-in (`nil`: off): "APNs disconnects a provider connection
        /// with too many error conditions. APNs disconnects sooner with certain error conditions,
        /// such as BadDeviceToken. Note that status code 410 isn't considered an error condition."
        /// Apple publishes no numbers, so the mock takes them from here.
        public var errorDisconnect: ErrorDisconnect?

        /// After `after` error answers on one connection (4xx other than 410, each BadDeviceToken
        /// counting `badDeviceTokenCounts`), the connection gets GOAWAY and is closed.
        public struct ErrorDisconnect: Sendable, Equatable {
            public var after: Int
            public var badDeviceTokenCounts: Int

            public init(after: Int, badDeviceTokenCounts: Int = 1) {
                self.after = after
                self.badDeviceTokenCounts = badDeviceTokenCounts
            }
        }

        public static let defaultMaxConnections = 10_000

        public init() {}
    }

    /// The admin and query listener (plain HTTP/1.1).
    public struct Admin: Sendable, Equatable {
        public var host = "127.0.0.1"
        public var port = 2198
        /// When set, every admin request needs `Authorization: Bearer <token>`.
        public var token: String?
        /// Connections open at once; past it new ones are closed at once (RST). `nil`: the default,
        /// ``defaultMaxConnections``, lowered at start-up to what the descriptor limit allows.
        public var maxConnections: Int?
        /// Seconds a request's head and body may take to arrive, from its first byte.
        public var requestTimeout = 10
        /// Seconds a response (not an event stream) may take to be written out, from its head.
        public var responseTimeout = 30
        /// Seconds a connection may stay open between requests.
        public var idleTimeout = 60
        /// Origins (`scheme://host[:port]`, as browsers send them) whose pages may use the admin
        /// API besides the listener's own and loopback origins (docs/admin-api.md, "Browsers and
        /// the admin API").
        public var allowedOrigins: [String] = []
        /// Names (or addresses) a request's `Host` may give besides the mock's own; `*`: any.
        public var allowedHosts: [String] = []

        public static let defaultMaxConnections = 4096

        public init() {}
    }

    /// The HTTP CONNECT proxy listener (plain HTTP/1.1): off unless `port` is set. It tunnels only
    /// to Apple's push hosts, into the mock's own listeners, for clients that dial Apple's host
    /// names and take a proxy but no other host (docs/configuration.md, "proxy").
    public struct Proxy: Sendable, Equatable {
        public var host = "127.0.0.1"
        /// `nil`: no proxy listener. 0 picks a free port.
        public var port: Int?
        /// Tunnels open at once; past it a new connection is closed at once (RST).
        public var maxConnections = 1024

        public init() {}
    }

    /// A state shared by several replicas (docs/replicas.md): off unless `url` names a PostgreSQL
    /// database; in memory, one process, otherwise.
    public struct SharedState: Sendable, Equatable {
        /// `postgres://user:password@host:port/database` (or `postgresql://`); `nil`: in memory.
        public var url: String?
        /// Shared records kept at most, the newest (the database deletes older ones).
        public var retentionRecords = 1_000_000
        /// Shared records older than this many seconds are deleted.
        public var retentionSeconds = 7 * 24 * 3600

        public init() {}

        /// Whether `url` is one this mock can use: a PostgreSQL URL with a host.
        public static func isPostgresURL(_ url: String) -> Bool {
            guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased(),
                  let host = components.host else { return false }
            return ["postgres", "postgresql"].contains(scheme) && !host.isEmpty
        }
    }

    /// Certificate files for the APNs listener.
    public struct TLS: Sendable, Equatable {
        public var certificate = "certs/server.pem"
        public var privateKey = "certs/server-key.pem"
        /// The CA whose client certificates are accepted for certificate authentication.
        public var clientCA = "certs/ca.pem"
        /// Serve one of the trust scenarios `certs init` prepares instead of the normal server
        /// certificate (docs/configuration.md).
        public var scenario: TLSScenario = .standard
        /// More names (DNS names, `*.` wildcards, IP addresses) for the server certificate the mock
        /// issues itself, besides localhost, apns-mock and Apple's hosts: a cluster's service
        /// names (`apns-mock.ci.svc.cluster.local`), a container network's alias.
        public var hosts: [String] = []

        public init() {}
    }

    /// Whether `host` may name a server certificate: an IPv4 or IPv6 address, or a DNS name of
    /// letters, digits and hyphens in dot-separated labels of 1–63 characters (at most 253 in all),
    /// no label starting or ending with a hyphen; `*.` may stand first. Returns what is wrong.
    public static func certificateHostProblem(_ host: String) -> String? {
        if host.isEmpty { return "an empty name" }
        if host.contains(":") {
            // IPv6: hex groups and colons (and an embedded IPv4 tail).
            let allowed = Set("0123456789abcdefABCDEF:.")
            let groups = host.split(separator: ":", omittingEmptySubsequences: false).count
            return host.allSatisfy(allowed.contains) && (3...8).contains(groups) && (groups == 8 || host.contains("::"))
                ? nil : "not an IPv6 address"
        }
        let labels = host.split(separator: ".", omittingEmptySubsequences: false)
        if labels.count == 4, labels.allSatisfy({ !$0.isEmpty && $0.allSatisfy(\.isNumber) }) {
            return labels.allSatisfy { Int($0).map { (0...255).contains($0) } ?? false } ? nil : "not an IPv4 address"
        }
        guard host.utf8.count <= 253 else { return "longer than 253 characters" }
        for (index, label) in labels.enumerated() {
            if index == 0, label == "*", labels.count > 2 { continue }
            guard (1...63).contains(label.utf8.count) else { return "a label of \(label.utf8.count) characters (1–63)" }
            let letterOrDigit: (UInt8) -> Bool = { byte in
                byte.isDecimalDigit || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte | 0x20)
            }
            guard label.utf8.allSatisfy({ letterOrDigit($0) || $0 == UInt8(ascii: "-") }),
                  label.first != "-", label.last != "-"
            else { return "\"\(label)\" is not a DNS label (letters, digits, inner hyphens)" }
        }
        return nil
    }

    /// Which server certificate the listeners present, to test what a client trusts.
    public enum TLSScenario: String, Sendable, CaseIterable, Codable {
        /// The normal server certificate (`server.pem`), under the test CA.
        case standard
        /// A certificate under the test CA that expired yesterday (`server-expired.pem`).
        case expired
        /// A certificate under the test CA that names only `wrong-host.invalid`
        /// (`server-wrong-host.pem`).
        case wrongHost = "wrong-host"
        /// A chain under a second root CA, `ca-next.pem`, through an intermediate
        /// (`server-next.pem`), as when Apple moved its servers to a new root.
        case newRoot = "new-root"
    }

    /// Which environment a token-auth key may be used in (Apple lets a key be restricted).
    public enum KeyEnvironment: String, Sendable, CaseIterable, Codable {
        case any
        case sandbox
        case production

        public func allows(_ environment: APNSEnvironment) -> Bool {
            switch self {
            case .any: return true
            case .sandbox: return environment == .sandbox
            case .production: return environment == .production
            }
        }
    }

    /// A token-auth signing key (`AuthKey_<KEYID>.p8`).
    public struct Key: Sendable, Equatable {
        /// Apple's 10-character key ID, the JWT header's `kid`.
        public var keyId: String
        /// The key file: a private key (`.p8`) or only its public key. Not read when ``pem`` is set.
        public var path: String
        /// The key itself, PEM text (a `.p8` private key or its public key), for configurations
        /// that cannot ship a file (a CI service container configured by environment variables).
        public var pem: String?
        public var environment: KeyEnvironment
        /// The apps (bundle IDs) this key may push to; empty for every app of its team.
        public var topics: [String]
        /// The one key this one is related to (Apple's key model of February 2025: a key may have
        /// one related key, of the same team and environment). A connection bound to a key takes a
        /// later token of that key or of its related key; any other key is UnrelatedKeyIdInToken.
        public var relatedKeyId: String?

        public init(
            keyId: String, path: String? = nil, pem: String? = nil, environment: KeyEnvironment = .any, topics: [String] = [],
            relatedKeyId: String? = nil
        ) {
            self.keyId = keyId
            self.path = path ?? Key.defaultPath(keyId: keyId)
            self.pem = pem
            self.environment = environment
            self.topics = topics
            self.relatedKeyId = relatedKeyId
        }

        /// Where `apns-mock keys new` writes a key: `certs/AuthKey_<KEYID>.p8`.
        public static func defaultPath(keyId: String) -> String {
            "certs/AuthKey_\(keyId).p8"
        }
    }

    /// A developer team: its apps and its signing keys.
    public struct Team: Sendable, Equatable {
        /// Apple's 10-character team ID, the JWT's `iss`.
        public var teamId: String
        /// Bundle IDs of the team's apps.
        public var apps: [String]
        public var keys: [Key]

        public init(teamId: String, apps: [String], keys: [Key] = []) {
            self.teamId = teamId
            self.apps = apps
            self.keys = keys
        }

        /// What a request signed with `key` may push to: the key's own topics, or every app of the
        /// team when the key lists none.
        public func allowedTopics(for key: Key) -> AllowedTopics {
            .bundleIDs(Set(key.topics.isEmpty ? apps : key.topics))
        }

        /// The team a fresh checkout works with: `apns-mock serve` creates its key.
        public static let demo = Team(
            teamId: "DEMOTEAM01", apps: ["com.example.app"], keys: [Key(keyId: "DEMOKEY001")])
    }

    /// The device registry's starting state.
    public struct Devices: Sendable, Equatable {
        public var policy: DevicePolicy = .open
        public var tokens: [DeviceEntry] = []
        /// Whether `policy` was given (a team's devices without one keep the mock's policy).
        public var policySet = true

        public init() {}

        public var registry: DeviceRegistry {
            DeviceRegistry(policy: policy, entries: tokens)
        }
    }

    public struct Recording: Sendable, Equatable {
        /// Records kept; the oldest are evicted past this, and evictions are counted. 0 turns
        /// recording off (to measure its cost).
        public var capacity = 100_000

        /// The largest `capacity`: ten million records. A slot is reserved address space that
        /// becomes resident only when a record lands in it, but each record holds its request
        /// (payload included), so a full ring of this size takes gigabytes.
        public static let maxCapacity = 10_000_000
        /// What `capacity` may be: 0 (off) to ``maxCapacity``.
        public static let capacityRange = 0...maxCapacity

        public init() {}
    }

    /// Which topics a request may name before authentication says who sent it.
    public enum TopicPolicy: String, Sendable, CaseIterable, Codable {
        /// Only apps of the configured teams (mock's choice, the default): pushing to an app nobody
        /// configured is TopicDisallowed, as it is for APNs when the key's team does not own it.
        case teams
        /// Any well-formed topic: for trying the mock with a real app's bundle ID without
        /// configuring it.
        case any
    }

    /// The mock's own validation choices (under `validation`).
    public struct Validation: Sendable, Equatable {
        public var strictDeviceTokens = false
        public var strictLint = false
        /// The reason strict lint answers with; any 400 reason.
        public var lintRejectionReason: Reason = .payloadEmpty
        public var topicPolicy: TopicPolicy = .teams
        public var rateLimit: RateLimit?
        public var badEnvironmentKeyReason: EnvironmentKeyReasonSpelling = .documented
        /// Only an integer `iat` in provider tokens (see ``ValidationSettings/strictProviderTokens``).
        public var strictProviderTokens = false
        /// Device tokens starting `fa11<status>` are answered that status (``MagicDeviceToken``).
        public var magicDeviceTokens = false

        public init() {}

        public var settings: ValidationSettings {
            ValidationSettings(
                strictDeviceTokens: strictDeviceTokens,
                strictLint: strictLint,
                lintRejectionReason: lintRejectionReason,
                environmentKeyReasonSpelling: badEnvironmentKeyReason,
                rateLimit: rateLimit,
                strictProviderTokens: strictProviderTokens)
        }
    }

    public var server = Server()
    public var admin = Admin()
    public var tls = TLS()
    /// The environment of requests whose host names neither of Apple's.
    public var environment: APNSEnvironment = .sandbox
    public var teams: [Team] = [.demo]
    public var devices = Devices()
    public var recording = Recording()
    public var faults: [FaultRule] = []
    public var validation = Validation()
    public var broadcast = BroadcastSettings()
    public var proxy = Proxy()
    /// `state`: where replicas share their state; in memory by default.
    public var state = SharedState()
    /// Seeds the fault rules' probability rolls, for reproducible runs; `nil` for random.
    public var faultSeed: UInt64?

    /// The built-in defaults.
    public init() {}

    /// The validator's settings.
    public var validationSettings: ValidationSettings { validation.settings }

    /// The bundle IDs of every configured team's apps.
    public var appBundleIDs: Set<String> {
        Set(teams.flatMap(\.apps))
    }

    /// What a request may push to while the server does not know (or does not yet check) who sent
    /// it: every configured app under the `teams` policy, anything under `any`. Authentication
    /// narrows this to the sender's key or certificate. Built on each call: keep the result.
    public var allowedTopics: AllowedTopics {
        switch validation.topicPolicy {
        case .teams: return .bundleIDs(appBundleIDs)
        case .any: return .any
        }
    }

    /// The team and key with this key ID, for checking a JWT's `kid`.
    public func key(id keyId: String) -> (team: Team, key: Key)? {
        for team in teams {
            if let key = team.keys.first(where: { $0.keyId == keyId }) {
                return (team, key)
            }
        }
        return nil
    }
}

// MARK: - Parsing

extension Configuration {
    /// Reads a configuration from YAML text. `file` names the text's origin in errors; the caller
    /// reads the file (the core does no I/O). An empty document is the defaults.
    public static func parse(yaml: String, file: String) throws(ConfigurationError) -> Configuration {
        let root: Node?
        do {
            root = try Yams.compose(yaml: yaml)
        } catch let error as YamlError {
            throw ConfigurationError(yamlError: error, file: file)
        } catch {
            throw ConfigurationError(file: file, field: "", kind: .syntax, problem: "not YAML: \(error)")
        }
        guard let root else { return Configuration() }
        return try decode(Field(node: root, path: "", file: file))
    }

    static func decode<N: DocumentNode>(_ root: Field<N>) throws(ConfigurationError) -> Configuration {
        var configuration = Configuration()
        let fields = try root.mapping(allowing: [
            "server", "admin", "tls", "environment", "teams", "devices", "recording", "faults", "validation",
            "broadcast", "proxy", "faultSeed", "state",
        ])
        if let field = fields.optional("validation") {
            configuration.validation = try decodeValidation(field)
        }
        if let field = fields.optional("server") {
            configuration.server = try decodeServer(field)
        }
        if let field = fields.optional("admin") {
            configuration.admin = try decodeAdmin(field, server: configuration.server)
        }
        if let field = fields.optional("tls") {
            configuration.tls = try decodeTLS(field)
        }
        if let field = fields.optional("environment") {
            configuration.environment = try field.oneOf(APNSEnvironment.self)
        }
        if let field = fields.optional("teams") {
            configuration.teams = try decodeTeams(field, topicPolicy: configuration.validation.topicPolicy)
        }
        if let field = fields.optional("devices") {
            configuration.devices = try decodeDevices(field, configuration: configuration)
        }
        if let field = fields.optional("recording") {
            let recording = try field.mapping(allowing: ["capacity"])
            if let capacity = recording.optional("capacity") {
                configuration.recording.capacity = try capacity.integer(in: Recording.capacityRange)
            }
        }
        if let field = fields.optional("faultSeed") {
            configuration.faultSeed = UInt64(try field.integer(in: seedRange))
        }
        if let field = fields.optional("faults") {
            configuration.faults = []
            for element in try field.elements() {
                configuration.faults.append(
                    try FaultRule.decode(element, maxConcurrentStreams: configuration.server.maxConcurrentStreams))
            }
        }
        if let field = fields.optional("broadcast") {
            configuration.broadcast = try decodeBroadcast(field, configuration: configuration)
        }
        if let field = fields.optional("state") {
            let state = try field.mapping(allowing: ["url", "retention"])
            if let url = state.optional("url") { configuration.state.url = try Self.stateURL(url) }
            if let retention = state.optional("retention") {
                let fields = try retention.mapping(allowing: ["records", "seconds"])
                if let records = fields.optional("records") {
                    configuration.state.retentionRecords = try records.integer(in: 1_000...100_000_000)
                }
                if let seconds = fields.optional("seconds") {
                    configuration.state.retentionSeconds = try seconds.integer(in: 60...(10 * 365 * 24 * 3600))
                }
            }
        }
        if let field = fields.optional("proxy") {
            let proxy = try field.mapping(allowing: ["host", "port", "maxConnections"])
            if let host = proxy.optional("host") { configuration.proxy.host = try host.nonEmptyString() }
            if let port = proxy.optional("port") { configuration.proxy.port = try port.integer(in: portRange) }
            if let limit = proxy.optional("maxConnections") {
                configuration.proxy.maxConnections = try limit.integer(in: connectionRange)
            }
        }
        return configuration
    }

    /// Most channels an app may be allowed per environment (they are held in memory).
    public static let maximumChannelLimit = 1_000_000

    private static func decodeBroadcast<N>(_ field: Field<N>, configuration: Configuration) throws(ConfigurationError) -> BroadcastSettings {
        let fields = try field.mapping(allowing: [
            "host", "sandboxPort", "productionPort", "channelLimit", "disabledApps", "channels", "requireExpiration",
            "allowPriority1", "strictPushTypeSpelling",
        ])
        var broadcast = BroadcastSettings()
        if let host = fields.optional("host") { broadcast.host = try host.nonEmptyString() }
        // Port 0 (a free port each) collides with nothing; server and admin may both ask for it.
        var taken: [Int: String] = [:]
        for (port, owner) in [(configuration.server.port, "server.port"), (configuration.admin.port, "admin.port")] where port != 0 {
            taken[port] = taken[port] ?? owner
        }
        for name in ["sandboxPort", "productionPort"] {
            guard let port = fields.optional(name) else { continue }
            let value = try port.integer(in: portRange)
            if value != 0, let owner = taken[value] {
                throw port.error(.contradiction, "port \(value) is already \(owner)'s")
            }
            taken[value] = "broadcast.\(name)"
            if name == "sandboxPort" { broadcast.sandboxPort = value } else { broadcast.productionPort = value }
        }
        if broadcast.sandboxPort != 0, broadcast.sandboxPort == broadcast.productionPort {
            throw field.error(.contradiction, "sandboxPort and productionPort are both \(broadcast.sandboxPort)")
        }
        if let limit = fields.optional("channelLimit") {
            broadcast.channelLimit = try limit.integer(in: 0...maximumChannelLimit)
        }
        if let apps = fields.optional("disabledApps") {
            for (app, appField) in try apps.stringList() {
                guard HeaderSyntax.isWellFormedTopic(app) else {
                    throw appField.error(.invalidValue, "\"\(app)\" is not a well-formed bundle ID")
                }
                broadcast.disabledApps.insert(app)
            }
        }
        if let value = fields.optional("requireExpiration") { broadcast.requireExpiration = try value.boolean() }
        if let value = fields.optional("allowPriority1") { broadcast.allowPriority1 = try value.boolean() }
        if let value = fields.optional("strictPushTypeSpelling") { broadcast.strictPushTypeSpelling = try value.boolean() }
        if let channels = fields.optional("channels") {
            var registry = ChannelRegistry()
            for element in try channels.elements() {
                let channel = try BroadcastChannel.decode(element, knownApps: configuration.validation.topicPolicy == .teams ? configuration.appBundleIDs : nil)
                if registry.channel(id: channel.id) != nil {
                    throw try element.mapping(allowing: BroadcastChannel.fieldNames).required("channelId")
                        .error(.duplicate, "channel \(channel.id) is listed twice")
                }
                if registry.count(bundleID: channel.bundleID, environment: channel.environment) >= broadcast.channelLimit {
                    throw element.error(.contradiction, "more channels for \(channel.bundleID) in \(channel.environment.rawValue) than channelLimit (\(broadcast.channelLimit))")
                }
                registry.insert(channel)
                broadcast.channels.append(channel)
            }
        }
        return broadcast
    }

    // MARK: Ranges
    // Each setting's range lives here once; the file, the environment variables and the command
    // line all check against it.

    /// A listener port; 0 picks a free one.
    public static let portRange = 0...65_535

    /// `state.url` (or `APNS_MOCK_STATE_URL`): a PostgreSQL URL, or the field is named.
    static func stateURL<N: DocumentNode>(_ field: Field<N>) throws(ConfigurationError) -> String {
        let url = try field.nonEmptyString()
        guard SharedState.isPostgresURL(url) else {
            throw field.error(
                .invalidValue,
                "expected a PostgreSQL URL (postgres://user:password@host:5432/database), the only shared state apns-mock has")
        }
        return url
    }
    /// Event-loop threads (`server.threads`, `--threads`).
    public static let threadRange = 1...4096
    /// A connection limit: at least one, at most what any process may hold open.
    public static let connectionRange = 1...1_048_576
    /// Seconds for the defensive timeouts: at least one (they cannot be switched off), at most a day.
    public static let timeoutRange = 1...86_400
    /// Seconds of the shutdown grace period: none up to a day.
    public static let gracePeriodRange = 0...86_400
    /// A fault seed as the file and environment write it (the command line takes any UInt64).
    public static let seedRange = 0...Int.max

    private static func decodeServer<N>(_ field: Field<N>) throws(ConfigurationError) -> Server {
        let fields = try field.mapping(allowing: [
            "host", "port", "additionalPorts", "maxConcurrentStreams", "idleTimeout", "streamsBeforeAuthentication",
            "tokenUpdateInterval",
            "shrinkStreamsAfterRejection",
            "maxConnections", "requestTimeout", "responseTimeout", "handshakeTimeout", "threads", "shutdownGracePeriod",
            "errorDisconnect",
        ])
        var server = Server()
        if let host = fields.optional("host") { server.host = try host.nonEmptyString() }
        if let port = fields.optional("port") { server.port = try port.integer(in: portRange) }
        if let ports = fields.optional("additionalPorts") {
            server.additionalPorts = try additionalPorts(ports, mainPort: server.port)
        }
        if let streams = fields.optional("maxConcurrentStreams") {
            // An HTTP/2 SETTINGS value is 31 bits.
            server.maxConcurrentStreams = try streams.integer(in: 1...Int(Int32.max))
        }
        if let timeout = fields.optional("idleTimeout") {
            server.idleTimeout = try timeout.integer(in: 0...Int(Int32.max))
        }
        if let streams = fields.optional("streamsBeforeAuthentication") {
            server.streamsBeforeAuthentication = try streams.integer(in: 1...Int(Int32.max))
        }
        if let shrink = fields.optional("shrinkStreamsAfterRejection") {
            server.shrinkStreamsAfterRejection = try shrink.boolean()
        }
        if let interval = fields.optional("tokenUpdateInterval") {
            server.tokenUpdateInterval = try interval.integer(in: 0...Int(Int32.max))
        }
        if let limit = fields.optional("maxConnections") { server.maxConnections = try limit.integer(in: connectionRange) }
        if let timeout = fields.optional("requestTimeout") { server.requestTimeout = try timeout.integer(in: timeoutRange) }
        if let timeout = fields.optional("responseTimeout") { server.responseTimeout = try timeout.integer(in: timeoutRange) }
        if let timeout = fields.optional("handshakeTimeout") { server.handshakeTimeout = try timeout.integer(in: timeoutRange) }
        if let threads = fields.optional("threads") { server.threads = try threads.integer(in: threadRange) }
        if let grace = fields.optional("shutdownGracePeriod") {
            server.shutdownGracePeriod = try grace.integer(in: gracePeriodRange)
        }
        if let penalty = fields.optional("errorDisconnect") {
            let penaltyFields = try penalty.mapping(allowing: ["after", "badDeviceTokenCounts"])
            var disconnect = Server.ErrorDisconnect(after: try penaltyFields.required("after").integer(in: errorDisconnectRange))
            if let weight = penaltyFields.optional("badDeviceTokenCounts") {
                disconnect.badDeviceTokenCounts = try weight.integer(in: errorDisconnectRange)
            }
            server.errorDisconnect = disconnect
        }
        return server
    }

    /// `server.errorDisconnect`'s `after` and `badDeviceTokenCounts`.
    public static let errorDisconnectRange = 1...1_000_000

    /// `server.additionalPorts`: ports, none twice, none the main port (0, any free port, may repeat).
    static func additionalPorts<N>(_ field: Field<N>, mainPort: Int) throws(ConfigurationError) -> [Int] {
        var ports: [Int] = []
        for element in try field.elements() {
            let port = try element.integer(in: portRange)
            if port != 0, port == mainPort {
                throw element.error(.contradiction, "port \(port) is already server.port")
            }
            if port != 0, ports.contains(port) {
                throw element.error(.duplicate, "port \(port) is listed twice")
            }
            ports.append(port)
        }
        return ports
    }

    private static func decodeAdmin<N>(_ field: Field<N>, server: Server) throws(ConfigurationError) -> Admin {
        let fields = try field.mapping(allowing: [
            "host", "port", "token", "maxConnections", "requestTimeout", "responseTimeout", "idleTimeout",
            "allowedOrigins", "allowedHosts",
        ])
        var admin = Admin()
        if let host = fields.optional("host") { admin.host = try host.nonEmptyString() }
        if let port = fields.optional("port") {
            admin.port = try port.integer(in: portRange)
            if admin.port != 0, admin.port == server.port, admin.host == server.host {
                throw port.error(.contradiction, "the admin listener cannot share \(admin.host):\(admin.port) with server")
            }
        }
        if let token = fields.optional("token") { admin.token = try adminToken(token) }
        if let origins = fields.optional("allowedOrigins") { admin.allowedOrigins = try allowedOrigins(origins) }
        if let hosts = fields.optional("allowedHosts") { admin.allowedHosts = try allowedHosts(hosts) }
        if let limit = fields.optional("maxConnections") { admin.maxConnections = try limit.integer(in: connectionRange) }
        if let timeout = fields.optional("requestTimeout") { admin.requestTimeout = try timeout.integer(in: timeoutRange) }
        if let timeout = fields.optional("responseTimeout") { admin.responseTimeout = try timeout.integer(in: timeoutRange) }
        if let timeout = fields.optional("idleTimeout") { admin.idleTimeout = try timeout.integer(in: timeoutRange) }
        return admin
    }

    private static func decodeTLS<N>(_ field: Field<N>) throws(ConfigurationError) -> TLS {
        let fields = try field.mapping(allowing: ["certificate", "privateKey", "clientCA", "scenario", "hosts"])
        var tls = TLS()
        if let hosts = fields.optional("hosts") {
            for (host, hostField) in try hosts.stringList() {
                if let problem = certificateHostProblem(host) {
                    throw hostField.error(.invalidValue, "\"\(host.prefix(64))\" cannot name a certificate: \(problem)")
                }
                tls.hosts.append(host)
            }
        }
        if let value = fields.optional("scenario") { tls.scenario = try value.oneOf(TLSScenario.self) }
        if let value = fields.optional("certificate") { tls.certificate = try value.nonEmptyString() }
        if let value = fields.optional("privateKey") { tls.privateKey = try value.nonEmptyString() }
        if let value = fields.optional("clientCA") { tls.clientCA = try value.nonEmptyString() }
        return tls
    }

    private static func decodeValidation<N>(_ field: Field<N>) throws(ConfigurationError) -> Validation {
        let fields = try field.mapping(allowing: [
            "strictDeviceTokens", "strictLint", "lintRejectionReason", "topicPolicy", "rateLimit",
            "badEnvironmentKeyReason", "strictProviderTokens", "magicDeviceTokens",
        ])
        var validation = Validation()
        if let value = fields.optional("strictDeviceTokens") { validation.strictDeviceTokens = try value.boolean() }
        if let value = fields.optional("strictProviderTokens") { validation.strictProviderTokens = try value.boolean() }
        if let value = fields.optional("strictLint") { validation.strictLint = try value.boolean() }
        if let value = fields.optional("magicDeviceTokens") { validation.magicDeviceTokens = try value.boolean() }
        if let value = fields.optional("lintRejectionReason") {
            let reason = try value.oneOf(Reason.self)
            guard reason.status == 400 else {
                throw value.error(.invalidValue, "must be a 400 reason, so that clients neither retry nor drop the token; \(reason.rawValue) is \(reason.status)")
            }
            validation.lintRejectionReason = reason
        }
        if let value = fields.optional("topicPolicy") { validation.topicPolicy = try value.oneOf(TopicPolicy.self) }
        if let value = fields.optional("badEnvironmentKeyReason") {
            validation.badEnvironmentKeyReason = try value.oneOf(EnvironmentKeyReasonSpelling.self)
        }
        if let value = fields.optional("rateLimit") {
            let limit = try value.mapping(allowing: ["requests", "perSeconds"])
            let requests = try limit.required("requests").integer(in: 1...Int(Int32.max))
            let seconds = try limit.required("perSeconds").number(in: 0.001...86_400)
            guard let rateLimit = RateLimit(requests: requests, interval: .milliseconds(Int64((seconds * 1000).rounded()))) else {
                throw value.error(.invalidValue, "requests and perSeconds must be positive")
            }
            validation.rateLimit = rateLimit
        }
        return validation
    }

    private static func decodeTeams<N>(_ field: Field<N>, topicPolicy: TopicPolicy) throws(ConfigurationError) -> [Team] {
        var teams: [Team] = []
        var teamIDs: Set<String> = []
        var appOwners: [String: String] = [:]
        var keyIDs: Set<String> = []
        // Every key's relation, checked once every team is read (a related key may come later).
        var relations: [(key: Key, team: String, field: Field<N>)] = []
        let elements = try field.elements()
        if elements.isEmpty, topicPolicy == .teams {
            throw field.error(.contradiction, "no teams means no topic is allowed under validation.topicPolicy teams")
        }
        for element in elements {
            let fields = try element.mapping(allowing: ["teamId", "apps", "keys"])
            teams.append(try decodeTeam(
                fields, teamIDs: &teamIDs, appOwners: &appOwners, keyIDs: &keyIDs, relations: &relations, inlineKeysOnly: false))
        }
        try checkRelatedKeys(relations, teams: teams)
        return teams
    }

    /// One team's `teamId`, `apps` and `keys` (a `teams` element of the configuration, or the body
    /// of `POST /v1/teams`), checked against the teams, apps and keys read before it.
    static func decodeRegistrationTeam<N>(
        _ fields: Mapping<N>, teamIDs: inout Set<String>, appOwners: inout [String: String], keyIDs: inout Set<String>,
        relations: inout [(key: Key, team: String, field: Field<N>)]
    ) throws(ConfigurationError) -> Team {
        let team = try decodeTeam(
            fields, teamIDs: &teamIDs, appOwners: &appOwners, keyIDs: &keyIDs, relations: &relations, inlineKeysOnly: true)
        try checkRelatedKeys(relations, teams: [team])
        return team
    }

    private static func decodeTeam<N>(
        _ fields: Mapping<N>, teamIDs: inout Set<String>, appOwners: inout [String: String], keyIDs: inout Set<String>,
        relations: inout [(key: Key, team: String, field: Field<N>)], inlineKeysOnly: Bool
    ) throws(ConfigurationError) -> Team {
            let teamIdField = try fields.required("teamId")
            let teamId = try appleIdentifier(teamIdField, what: "team ID")
            guard teamIDs.insert(teamId).inserted else {
                throw teamIdField.error(.duplicate, "team \(teamId) is configured twice")
            }
            let appsField = try fields.required("apps")
            var apps: [String] = []
            for (app, appField) in try appsField.stringList() {
                guard HeaderSyntax.isWellFormedTopic(app) else {
                    throw appField.error(.invalidValue, "\"\(app)\" is not a well-formed bundle ID")
                }
                if let owner = appOwners[app] {
                    throw appField.error(.duplicate, "\(app) is already an app of team \(owner)")
                }
                appOwners[app] = teamId
                apps.append(app)
            }
            if apps.isEmpty {
                throw appsField.error(.invalidValue, "a team needs at least one app")
            }
            var keys: [Key] = []
            if let keysField = fields.optional("keys") {
                for keyElement in try keysField.elements() {
                    if inlineKeysOnly, let path = try keyElement.mapping(allowing: keyFieldNames).optional("path") {
                        throw path.error(.invalidValue, "give the key inline as pem: the admin API reads no files")
                    }
                    let key = try decodeKey(keyElement, apps: apps)
                    guard keyIDs.insert(key.keyId).inserted else {
                        let keyIdField = try keyElement.mapping(allowing: keyFieldNames).required("keyId")
                        throw keyIdField.error(.duplicate, "key \(key.keyId) is configured twice")
                    }
                    keys.append(key)
                    if key.relatedKeyId != nil, let related = try keyElement.mapping(allowing: keyFieldNames).optional("relatedKeyId") {
                        relations.append((key, teamId, related))
                    }
                }
            }
            return Team(teamId: teamId, apps: apps, keys: keys)
    }

    /// What Apple refuses of related keys: a related key must exist, be of the same team and the
    /// same environment, and a key has at most one related key (A related to B and C related to B
    /// gives B two). A pair may be named from both sides.
    private static func checkRelatedKeys<N>(
        _ relations: [(key: Key, team: String, field: Field<N>)], teams: [Team]
    ) throws(ConfigurationError) {
        var owners: [String: (team: String, key: Key)] = [:]
        for team in teams { for key in team.keys { owners[key.keyId] = (team.teamId, key) } }
        var partner: [String: String] = [:]
        for (key, team, field) in relations {
            guard let relatedID = key.relatedKeyId else { continue }
            guard relatedID != key.keyId else {
                throw field.error(.contradiction, "key \(key.keyId) cannot be related to itself")
            }
            guard let related = owners[relatedID] else {
                throw field.error(.invalidValue, "key \(key.keyId) names \(relatedID), which is no configured key")
            }
            guard related.team == team else {
                throw field.error(
                    .contradiction, "key \(key.keyId) of team \(team) names \(relatedID), a key of team \(related.team): Apple relates keys within one team")
            }
            guard related.key.environment == key.environment else {
                throw field.error(
                    .contradiction,
                    "key \(key.keyId) (environment \(key.environment.rawValue)) names \(relatedID) (environment \(related.key.environment.rawValue)): a related key is of the same environment")
            }
            for (one, other) in [(key.keyId, relatedID), (relatedID, key.keyId)] {
                if let existing = partner[one], existing != other {
                    throw field.error(
                        .contradiction, "key \(one) would have two related keys (\(existing) and \(other)): Apple allows one")
                }
                partner[one] = other
            }
        }
    }

    private static func decodeKey<N>(_ field: Field<N>, apps: [String]) throws(ConfigurationError) -> Key {
        let fields = try field.mapping(allowing: keyFieldNames)
        let keyId = try appleIdentifier(try fields.required("keyId"), what: "key ID")
        var key = Key(keyId: keyId)
        if let path = fields.optional("path") { key.path = try path.nonEmptyString() }
        if let pem = fields.optional("pem") {
            if fields.optional("path") != nil {
                throw pem.error(.contradiction, "give the key as a file (path) or inline (pem), not both")
            }
            key.pem = try checkedPEM(pem)
        }
        if let environment = fields.optional("environment") { key.environment = try environment.oneOf(KeyEnvironment.self) }
        if let related = fields.optional("relatedKeyId") {
            key.relatedKeyId = try appleIdentifier(related, what: "key ID")
        }
        if let topics = fields.optional("topics") {
            for (topic, topicField) in try topics.stringList() {
                guard apps.contains(topic) else {
                    throw topicField.error(.contradiction, "\(topic) is not an app of this team (\(apps.joined(separator: ", ")))")
                }
                key.topics.append(topic)
            }
        }
        return key
    }

    private static let keyFieldNames = ["keyId", "path", "pem", "environment", "topics", "relatedKeyId"]

    /// Text that has the shape of one PEM block (`-----BEGIN …-----`, base64, `-----END …-----`).
    /// Whether it is a P-256 key is checked when the keys are loaded.
    static func checkedPEM<N>(_ field: Field<N>) throws(ConfigurationError) -> String {
        let text = try field.nonEmptyString()
        let lines = text.split(whereSeparator: \.isNewline)
            .map { String($0.drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed()) }
            .filter { !$0.isEmpty }
        guard let first = lines.first, let last = lines.last, lines.count >= 3,
              first.hasPrefix("-----BEGIN "), first.hasSuffix("-----"),
              last.hasPrefix("-----END "), last.hasSuffix("-----")
        else {
            throw field.error(
                .invalidValue,
                "not a PEM key: expected -----BEGIN PRIVATE KEY----- (or PUBLIC KEY), base64 lines, -----END …----- (with its line breaks)")
        }
        let base64 = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=")
        guard lines.dropFirst().dropLast().allSatisfy({ $0.allSatisfy(base64.contains) }) else {
            throw field.error(.invalidValue, "not a PEM key: the lines between BEGIN and END must be base64")
        }
        return text
    }

    /// Whether `text` has the shape of Apple's team and key IDs: 10 characters, uppercase letters
    /// and digits.
    public static func isAppleIdentifier(_ text: String) -> Bool {
        text.utf8.count == 10 && text.utf8.allSatisfy { byte in
            (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) || byte.isDecimalDigit
        }
    }

    /// Apple's team and key IDs: 10 characters, uppercase letters and digits.
    static func appleIdentifier<N>(_ field: Field<N>, what: String) throws(ConfigurationError) -> String {
        let value = try field.string()
        guard isAppleIdentifier(value) else {
            throw field.error(.invalidValue, "\"\(value)\" is not a \(what): 10 uppercase letters and digits")
        }
        return value
    }

    private static func decodeDevices<N>(_ field: Field<N>, configuration: Configuration) throws(ConfigurationError) -> Devices {
        let fields = try field.mapping(allowing: ["policy", "tokens"])
        var devices = Devices()
        if let policy = fields.optional("policy") { devices.policy = try policy.oneOf(DevicePolicy.self) }
        if let tokens = fields.optional("tokens") {
            let knownApps = configuration.validation.topicPolicy == .teams ? configuration.appBundleIDs : nil
            var seen: Set<String> = []
            for element in try tokens.elements() {
                let entry = try DeviceEntry.decode(
                    element, strictTokens: configuration.validation.strictDeviceTokens, knownApps: knownApps)
                guard seen.insert(entry.token).inserted else {
                    let tokenField = try element.mapping(allowing: DeviceEntry.fieldNames).required("token")
                    throw tokenField.error(.duplicate, "token \(entry.token) is listed twice")
                }
                devices.tokens.append(entry)
            }
        }
        return devices
    }
}

extension DeviceEntry {
    static let fieldNames = ["token", "topic", "environment", "unregisteredAt", "reason"]

    /// Decodes and checks a device from an admin API body (`POST /v1/devices`), by the rules of the
    /// configuration's `devices.tokens`. Errors name the field and have no file.
    ///
    /// - Parameters:
    ///   - strictTokens: Accept only 64-digit tokens (the validation setting).
    ///   - knownApps: When given, `topic` must be one of these apps.
    ///   - appsOwner: Whose apps `knownApps` are, for the message (`team ABC1234567`).
    public static func decode(
        json: JSONValue, strictTokens: Bool = false, knownApps: Set<String>? = nil, appsOwner: String? = nil
    ) throws(ConfigurationError) -> DeviceEntry {
        try decode(Field(node: json, path: "", file: nil), strictTokens: strictTokens, knownApps: knownApps, appsOwner: appsOwner)
    }

    static func decode<N>(
        _ field: Field<N>, strictTokens: Bool, knownApps: Set<String>?, appsOwner: String? = nil
    ) throws(ConfigurationError) -> DeviceEntry {
        let fields = try field.mapping(allowing: fieldNames)
        let tokenField = try fields.required("token")
        let token = try tokenField.string()
        guard DeviceToken.isWellFormed(token.utf8, strict: strictTokens) else {
            let rule = strictTokens
                ? "exactly \(DeviceToken.strictLength) hex digits (validation.strictDeviceTokens)"
                : "an even number of hex digits, at most \(DeviceToken.maximumLength)"
            throw tokenField.error(.invalidValue, "\"\(token)\" is not a device token: expected \(rule)")
        }
        var entry = DeviceEntry(token: token)
        if let topicField = fields.optional("topic") {
            let topic = try topicField.string()
            guard HeaderSyntax.isWellFormedTopic(topic) else {
                throw topicField.error(.invalidValue, "\"\(topic)\" is not a well-formed bundle ID")
            }
            if let knownApps, !knownApps.contains(topic) {
                throw topicField.error(
                    .contradiction, "\(topic) is not an app of \(appsOwner ?? "any team"), so no request could reach this token")
            }
            entry.topic = topic
        }
        if let environment = fields.optional("environment") {
            entry.environment = try environment.oneOf(APNSEnvironment.self)
        }
        var timestamp: Int64?
        if let at = fields.optional("unregisteredAt") {
            if let milliseconds = at.node.wholeNumber {
                guard milliseconds >= 0 else {
                    throw at.error(.invalidValue, "\(milliseconds) is before 1970: expected milliseconds since the epoch, or an RFC 3339 time")
                }
                timestamp = Int64(milliseconds)
            } else {
                let text = try at.string()
                guard let milliseconds = Timestamp.milliseconds(rfc3339: text) else {
                    throw at.error(.invalidValue, "\"\(text)\" is not an RFC 3339 time such as 2026-01-01T00:00:00Z")
                }
                timestamp = milliseconds
            }
        }
        if let reasonField = fields.optional("reason") {
            let reason = try reasonField.oneOf(UnregistrationReason.self)
            guard let timestamp else {
                throw reasonField.error(.contradiction, "a reason needs unregisteredAt: the token is not unregistered")
            }
            entry.unregistration = .init(timestamp: timestamp, reason: reason)
        } else if let timestamp {
            entry.unregistration = .init(timestamp: timestamp)
        }
        return entry
    }
}

extension ConfigurationError {
    /// Locates a YAML syntax error by the line Yams reports.
    init(yamlError: YamlError, file: String) {
        let line: Int?
        let problem: String
        switch yamlError {
        case .scanner(_, let text, let mark, _), .parser(_, let text, let mark, _), .composer(_, let text, let mark, _):
            line = mark.line
            problem = text
        case .duplicatedKeysInMapping(let duplicates, let context):
            line = context.mark.line
            problem = "duplicate key \(duplicates.joined(separator: ", "))"
        default:
            line = nil
            problem = "\(yamlError)"
        }
        self.init(file: file, field: "", line: line, kind: .syntax, problem: "not valid YAML: \(problem)")
    }
}

extension BroadcastChannel {
    static let fieldNames = ["bundleId", "environment", "channelId", "messageStoragePolicy"]

    /// Decodes and checks a channel from an admin API body (`POST /v1/channels`), by the rules of the
    /// configuration's `broadcast.channels`: `bundleId` (a configured app when `knownApps` is
    /// given), `environment` (sandbox or production, default sandbox), `channelId` (base64;
    /// `nil` when `idRequired` is false and it is absent: the store generates one) and
    /// `messageStoragePolicy` (0 or 1, default 1). Errors name the field and have no file.
    public static func decode(json: JSONValue, knownApps: Set<String>?, appsOwner: String? = nil) throws(ConfigurationError) -> (
        bundleID: String, environment: APNSEnvironment, id: String?, storagePolicy: MessageStoragePolicy
    ) {
        try decodeFields(Field(node: json, path: "", file: nil), knownApps: knownApps, appsOwner: appsOwner, idRequired: false)
    }

    static func decode<N>(_ field: Field<N>, knownApps: Set<String>?) throws(ConfigurationError) -> BroadcastChannel {
        let fields = try decodeFields(field, knownApps: knownApps, idRequired: true)
        return BroadcastChannel(bundleID: fields.bundleID, environment: fields.environment, id: fields.id ?? "", storagePolicy: fields.storagePolicy)
    }

    private static func decodeFields<N>(
        _ field: Field<N>, knownApps: Set<String>?, appsOwner: String? = nil, idRequired: Bool
    ) throws(ConfigurationError) -> (
        bundleID: String, environment: APNSEnvironment, id: String?, storagePolicy: MessageStoragePolicy
    ) {
        let fields = try field.mapping(allowing: fieldNames)
        let bundleField = try fields.required("bundleId")
        let bundleID = try bundleField.string()
        guard HeaderSyntax.isWellFormedTopic(bundleID) else {
            throw bundleField.error(.invalidValue, "\"\(bundleID)\" is not a well-formed bundle ID")
        }
        if let knownApps, !knownApps.contains(bundleID) {
            throw bundleField.error(.contradiction, "\(bundleID) is not an app of \(appsOwner ?? "a team of this mock")")
        }
        var environment = APNSEnvironment.sandbox
        if let value = fields.optional("environment") { environment = try value.oneOf(APNSEnvironment.self) }
        var id: String?
        if let idField = idRequired ? try fields.required("channelId") : fields.optional("channelId") {
            let value = try idField.string()
            guard ChannelID.isWellFormed(value) else {
                throw idField.error(.invalidValue, "\"\(value.prefix(64))\" is not a channel ID (base64, at most \(ChannelID.maximumLength) characters)")
            }
            id = value
        }
        var policy = MessageStoragePolicy.mostRecentMessageStored
        if let value = fields.optional("messageStoragePolicy") {
            policy = MessageStoragePolicy(rawValue: try value.integer(in: 0...1))!
        }
        return (bundleID, environment, id, policy)
    }
}

extension Configuration.Team {
    /// Decodes and checks a team from the admin API's body (`POST /v1/teams`): `teamId`, `apps` and
    /// `keys` by the rules of the configuration's `teams` (keys only inline, as `pem`), and
    /// `devices` (`policy`, `tokens`) by the rules of its `devices`, each token's `topic` one of
    /// the team's apps. Errors name the field and have no file. Whether the team, its apps or its
    /// keys clash with the mock's other teams is the caller's to check.
    public static func decodeRegistration(
        json: JSONValue, strictTokens: Bool = false
    ) throws(ConfigurationError) -> (team: Configuration.Team, devices: Configuration.Devices?) {
        let field = Field(node: json, path: "", file: nil)
        let fields = try field.mapping(allowing: ["teamId", "apps", "keys", "devices"])
        var teamIDs: Set<String> = []
        var appOwners: [String: String] = [:]
        var keyIDs: Set<String> = []
        var relations: [(key: Configuration.Key, team: String, field: Field<JSONValue>)] = []
        let team = try Configuration.decodeRegistrationTeam(
            fields, teamIDs: &teamIDs, appOwners: &appOwners, keyIDs: &keyIDs, relations: &relations)
        var devices: Configuration.Devices?
        if let devicesField = fields.optional("devices") {
            let deviceFields = try devicesField.mapping(allowing: ["policy", "tokens"])
            var decoded = Configuration.Devices()
            var policySet = false
            if let policy = deviceFields.optional("policy") {
                decoded.policy = try policy.oneOf(DevicePolicy.self)
                policySet = true
            }
            if let tokens = deviceFields.optional("tokens") {
                var seen: Set<String> = []
                for element in try tokens.elements() {
                    let entry = try DeviceEntry.decode(
                        element, strictTokens: strictTokens, knownApps: Set(team.apps), appsOwner: "team \(team.teamId)")
                    guard seen.insert(entry.token).inserted else {
                        let tokenField = try element.mapping(allowing: DeviceEntry.fieldNames).required("token")
                        throw tokenField.error(.duplicate, "token \(entry.token) is listed twice")
                    }
                    decoded.tokens.append(entry)
                }
            }
            devices = decoded
            devices?.policySet = policySet
        }
        return (team, devices)
    }
}

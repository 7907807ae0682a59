import APNSMockCore
import NIOCore

/// Everything the mock's listeners (APNs, channel management, admin, proxy) need to run, with the
/// product's built-in defaults.
///
/// The command line and the configuration file are folded into this value by the `apns-mock`
/// command; tests build it directly (usually with `port: 0`).
public struct ServerConfiguration: Sendable {
    public var host: String = "127.0.0.1"
    /// 0 picks a free port; the chosen one is reported by ``RunningAPNSListener/port``.
    public var port: Int = 2197
    /// More ports the APNs listener binds on `host`, each served like `port` (Apple's APNs
    /// answers on 443 and 2197). 0 picks a free one.
    public var additionalPorts: [Int] = []
    /// Event-loop threads serving APNs connections.
    public var threads: Int = System.coreCount
    public var http2 = HTTP2Settings()
    /// A connection with no traffic for this long gets GOAWAY `{"reason":"IdleTimeout"}`.
    public var idleTimeout: TimeAmount = .seconds(3600)
    /// A connection that has not completed its TLS handshake and sent the HTTP/2 preface by then
    /// is closed.
    public var handshakeTimeout: TimeAmount = .seconds(10)
    /// A request whose HEADERS and body have not all arrived this long after its HEADERS began
    /// ends its connection (GOAWAY `{"reason":"IdleTimeout"}`, then close): a stuck upload.
    public var requestTimeout: TimeAmount = .seconds(10)
    /// A stream whose response the client has not taken this long after it was answered (a zero
    /// flow-control window, a client that stops reading) ends its connection the same way.
    /// Streams flagged ``HTTP2Stream/exemptFromTimeouts`` (answers deliberately held back) are
    /// not timed.
    public var responseTimeout: TimeAmount = .seconds(30)
    /// Connections open at once on the TLS listeners together (APNs ports and channel
    /// management); past it a new connection is closed at once (RST) and the refusal logged
    /// (docs/architecture.md, "Limits and defences").
    public var maxConnections = Configuration.Server.defaultMaxConnections
    /// In-flight requests get this long to finish after SIGTERM before connections are cut.
    public var shutdownGracePeriod: TimeAmount = .seconds(10)
    public var certificatePath: String = "certs/server.pem"
    public var privateKeyPath: String = "certs/server-key.pem"
    /// Client certificates are verified against this CA; `nil` still requests one.
    public var clientCAPath: String? = "certs/ca.pem"
    /// The CA certificates `GET /v1/ca.pem` serves, in this order: what a client must trust for
    /// the server's chain, then the client CA when that differs. `nil`: ``clientCAPath``.
    public var caCertificatePaths: [String]?
    /// The environment of requests whose host names none (docs/apns.md, "Environments").
    public var environment: APNSEnvironment = .sandbox
    public var validation = ValidationSettings()
    /// Topics senders may push to (until authentication narrows it per key or certificate).
    public var allowedTopics: AllowedTopics = Configuration().allowedTopics
    /// The device registry's starting state (also what `/v1/reset` returns to).
    public var devices = DeviceRegistry()
    /// Teams and their token-auth keys, with key paths as they are to be opened (the command
    /// resolves relative ones). Loaded at start-up; a bad key file stops it (``TokenKeyError``).
    public var teams: [Configuration.Team] = []
    /// Seconds a token-auth connection must keep its token before sending a new one; sooner is
    /// 429 TooManyProviderTokenUpdates (Apple: 20 minutes).
    public var tokenUpdateInterval: Int64 = 1200
    /// Records kept for the query API; 0 turns recording off (to measure its cost).
    public var recordingCapacity = 100_000
    /// Fault rules in force at start (and after `/v1/reset`).
    public var faults: [FaultRule] = []
    /// Seeds the fault rules' probability rolls, for reproducible runs; `nil` for random.
    public var faultSeed: UInt64?
    /// The admin and query listener (plain HTTP/1.1).
    public var admin = AdminSettings()
    /// Broadcast push: the channel-management listeners, the channel limit, seeded channels and the
    /// mock's choices where Apple is silent (docs/broadcast.md).
    public var broadcast = BroadcastSettings()
    /// The CONNECT proxy listener (`proxy`); off unless its port is set.
    public var proxy = Configuration.Proxy()

    public init() {}

    /// Everything a configuration file sets; what a file cannot set (``threads``,
    /// ``shutdownGracePeriod``, ``faultSeed``, ``caCertificatePaths``) keeps its built-in default.
    public init(_ file: Configuration) {
        host = file.server.host
        port = file.server.port
        additionalPorts = file.server.additionalPorts
        http2 = HTTP2Settings(maxConcurrentStreams: UInt32(clamping: file.server.maxConcurrentStreams))
        idleTimeout = file.server.idleTimeout == 0 ? .hours(24 * 365 * 100) : .seconds(Int64(file.server.idleTimeout))
        certificatePath = file.tls.certificate
        privateKeyPath = file.tls.privateKey
        clientCAPath = file.tls.clientCA
        environment = file.environment
        validation = file.validationSettings
        allowedTopics = file.allowedTopics
        devices = file.devices.registry
        teams = file.teams
        tokenUpdateInterval = Int64(file.server.tokenUpdateInterval)
        http2.streamsBeforeAuthentication = UInt32(clamping: file.server.streamsBeforeAuthentication)
        http2.shrinkStreamsAfterRejection = file.server.shrinkStreamsAfterRejection
        recordingCapacity = file.recording.capacity
        faults = file.faults
        admin = AdminSettings(host: file.admin.host, port: file.admin.port, token: file.admin.token)
        broadcast = file.broadcast
        proxy = file.proxy
        maxConnections = file.server.maxConnections ?? Configuration.Server.defaultMaxConnections
        requestTimeout = .seconds(Int64(file.server.requestTimeout))
        responseTimeout = .seconds(Int64(file.server.responseTimeout))
        handshakeTimeout = .seconds(Int64(file.server.handshakeTimeout))
        admin.maxConnections = file.admin.maxConnections ?? Configuration.Admin.defaultMaxConnections
        admin.requestTimeout = .seconds(Int64(file.admin.requestTimeout))
        admin.responseTimeout = .seconds(Int64(file.admin.responseTimeout))
        admin.idleTimeout = .seconds(Int64(file.admin.idleTimeout))
    }
}

/// Where the admin API listens and whether it wants a bearer token.
public struct AdminSettings: Sendable {
    public var host: String = "127.0.0.1"
    /// 0 picks a free port; the chosen one is reported by ``RunningAPNSListener/adminPort``.
    public var port: Int = 2198
    /// When set, every admin request needs `Authorization: Bearer <token>`.
    public var token: String?
    /// Connections open at once; past it a new connection is closed at once (RST).
    public var maxConnections = Configuration.Admin.defaultMaxConnections
    /// A request (head and body) must arrive within this, counted from its first byte.
    public var requestTimeout: TimeAmount = .seconds(10)
    /// A response must be written out within this of its head (a client that does not read it is
    /// cut off); event streams, which skip records for a slow client, are not timed.
    public var responseTimeout: TimeAmount = .seconds(30)
    /// A connection with no request in progress is closed after this.
    public var idleTimeout: TimeAmount = .seconds(60)

    public init(host: String = "127.0.0.1", port: Int = 2198, token: String? = nil) {
        self.host = host
        self.port = port
        self.token = token
    }
}

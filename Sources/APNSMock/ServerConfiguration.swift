import APNSMockCore
import NIOCore

/// The runtime settings of the mock's listeners (APNs, channel management, admin, proxy), derived
/// from the one configuration model, ``Configuration``.
///
/// The file, the `APNS_MOCK_*` variables and the command line merge into a `Configuration` once
/// (`apns-mock serve`); ``init(_:)`` derives this value from it: durations as `TimeAmount`, the
/// validator's and the device registry's starting values, HTTP/2 SETTINGS. No default is written
/// here: ``init()`` derives from `Configuration()`'s. What only the running command knows (the
/// certificate material's CA paths, key paths resolved in the certificate directory, a connection
/// limit lowered to the descriptor limit) is set on the derived value. Tests derive the defaults
/// and adjust them (usually `port: 0` and timeouts shorter than a second).
public struct ServerConfiguration: Sendable {
    public var host: String
    /// 0 picks a free port; the chosen one is reported by ``RunningAPNSMock/port``.
    public var port: Int
    /// More ports the APNs listener binds on `host`, each served like `port` (Apple's APNs
    /// answers on 443 and 2197). 0 picks a free one.
    public var additionalPorts: [Int]
    /// Event-loop threads serving APNs connections.
    public var threads: Int
    /// SETTINGS the APNs listeners announce.
    public var http2: HTTP2Settings
    /// After a rejected request, lower the connection's MAX_CONCURRENT_STREAMS to 1 until a
    /// request is accepted again, as production APNs was seen to do (pushy #356/#486/#732).
    public var shrinkStreamsAfterRejection: Bool
    /// `validation.magicDeviceTokens`: device tokens `fa11<status>…` are answered that status.
    public var magicDeviceTokens = false
    /// Apple's connection penalty (`server.errorDisconnect`), off when `nil`.
    public var errorDisconnect: Configuration.Server.ErrorDisconnect?
    /// A connection with no traffic for this long gets GOAWAY `{"reason":"IdleTimeout"}`.
    public var idleTimeout: TimeAmount
    /// A connection that has not completed its TLS handshake and sent the HTTP/2 preface by then
    /// is closed.
    public var handshakeTimeout: TimeAmount
    /// A request whose HEADERS and body have not all arrived this long after its HEADERS began
    /// ends its connection (GOAWAY `{"reason":"IdleTimeout"}`, then close): a stuck upload.
    public var requestTimeout: TimeAmount
    /// A stream whose response the client has not taken this long after it was answered (a zero
    /// flow-control window, a client that stops reading) ends its connection the same way.
    /// Streams whose answer is deliberately held back (``HTTP2Stream/isExemptFromTimeouts``) are
    /// not timed.
    public var responseTimeout: TimeAmount
    /// Connections open at once on the TLS listeners together (APNs ports and channel
    /// management); past it a new connection is closed at once (RST) and the refusal logged
    /// (docs/architecture.md, "Limits and defences").
    public var maxConnections: Int
    /// In-flight requests get this long to finish after SIGTERM before connections are cut.
    public var shutdownGracePeriod: TimeAmount
    public var certificatePath: String
    public var privateKeyPath: String
    /// Client certificates are verified against this CA; `nil` still requests one.
    public var clientCAPath: String?
    /// The CA certificates `GET /v1/ca.pem` serves, in this order: what a client must trust for
    /// the server's chain, then the client CA when that differs. `nil`: ``clientCAPath``.
    public var caCertificatePaths: [String]?
    /// The environment of requests whose host names none (docs/apns.md, "Environments").
    public var environment: APNSEnvironment
    public var validation: ValidationSettings
    /// Topics senders may push to (until authentication narrows it per key or certificate).
    public var allowedTopics: AllowedTopics
    /// The device registry's starting state (also what `/v1/reset` returns to).
    public var devices: DeviceRegistry
    /// Teams and their token-auth keys, with key paths as they are to be opened (the command
    /// resolves relative ones). Loaded at start-up; a bad key file stops it (``TokenKeyError``).
    /// The default is the model's demo team, whose key file `serve` creates; a mock started
    /// in-process sets its own (``MockHarness`` uses the demo team with its generated key).
    public var teams: [Configuration.Team]
    /// Seconds a token-auth connection must keep its token before sending a new one; sooner is
    /// 429 TooManyProviderTokenUpdates (Apple: 20 minutes).
    public var tokenUpdateInterval: Int64
    /// Records kept for the query API; 0 turns recording off (to measure its cost).
    public var recordingCapacity: Int
    /// Fault rules in force at start (and after `/v1/reset`).
    public var faults: [FaultRule]
    /// Seeds the fault rules' probability rolls, for reproducible runs; `nil` for random.
    public var faultSeed: UInt64?
    /// The admin and query listener (plain HTTP/1.1).
    public var admin: AdminSettings
    /// Broadcast push: the channel-management listeners, the channel limit, seeded channels and the
    /// mock's choices where Apple is silent (docs/broadcast.md).
    public var broadcast: BroadcastSettings
    /// The CONNECT proxy listener (`proxy`); off unless its port is set.
    public var proxy: Configuration.Proxy
    /// Where replicas share their state (`state`); in memory while its `url` is `nil`.
    public var state: Configuration.SharedState
    /// How many log lines the process's log sink has dropped since start (the command line's
    /// `LogSink`), for `apns_log_lines_dropped_total`; `nil` where logs are not sunk so (tests).
    public var droppedLogLines: (@Sendable () -> Int)?

    /// The built-in defaults (``Configuration``'s).
    public init() {
        self.init(Configuration())
    }

    /// The runtime settings of `configuration`, after every source has merged into it.
    public init(_ configuration: Configuration) {
        let server = configuration.server
        host = server.host
        port = server.port
        additionalPorts = server.additionalPorts
        threads = server.threads ?? System.coreCount
        http2 = HTTP2Settings(maxConcurrentStreams: UInt32(clamping: server.maxConcurrentStreams))
        http2.streamsBeforeAuthentication = UInt32(clamping: server.streamsBeforeAuthentication)
        shrinkStreamsAfterRejection = server.shrinkStreamsAfterRejection
        magicDeviceTokens = configuration.validation.magicDeviceTokens
        errorDisconnect = server.errorDisconnect
        // 0 (never) as a timer that does not fire in practice: a century.
        idleTimeout = server.idleTimeout == 0 ? .hours(24 * 365 * 100) : .seconds(Int64(server.idleTimeout))
        handshakeTimeout = .seconds(Int64(server.handshakeTimeout))
        requestTimeout = .seconds(Int64(server.requestTimeout))
        responseTimeout = .seconds(Int64(server.responseTimeout))
        maxConnections = server.maxConnections ?? Configuration.Server.defaultMaxConnections
        shutdownGracePeriod = .seconds(Int64(server.shutdownGracePeriod))
        tokenUpdateInterval = Int64(server.tokenUpdateInterval)
        certificatePath = configuration.tls.certificate
        privateKeyPath = configuration.tls.privateKey
        clientCAPath = configuration.tls.clientCA
        caCertificatePaths = nil
        environment = configuration.environment
        validation = configuration.validationSettings
        allowedTopics = configuration.allowedTopics
        devices = configuration.devices.registry
        teams = configuration.teams
        recordingCapacity = configuration.recording.capacity
        faults = configuration.faults
        faultSeed = configuration.faultSeed
        admin = AdminSettings(configuration.admin)
        broadcast = configuration.broadcast
        proxy = configuration.proxy
        state = configuration.state
    }
}

/// The admin listener's runtime settings, derived from ``Configuration/Admin``.
public struct AdminSettings: Sendable {
    public var host: String
    /// 0 picks a free port; the chosen one is reported by ``RunningAPNSMock/adminPort``.
    public var port: Int
    /// When set, every admin request needs `Authorization: Bearer <token>`.
    public var token: String?
    /// Connections open at once; past it a new connection is closed at once (RST).
    public var maxConnections: Int
    /// A request (head and body) must arrive within this, counted from its first byte.
    public var requestTimeout: TimeAmount
    /// A response must be written out within this of its head (a client that does not read it is
    /// cut off); event streams, which skip records for a slow client, are not timed.
    public var responseTimeout: TimeAmount
    /// A connection with no request in progress is closed after this.
    public var idleTimeout: TimeAmount
    /// Origins besides the listener's own and loopback's whose pages may use the API
    /// (`scheme://host[:port]`, as browsers send them).
    public var allowedOrigins: [String]
    /// Names a request's `Host` may give besides the mock's own; `*`: any.
    public var allowedHosts: [String]

    public init(_ admin: Configuration.Admin) {
        host = admin.host
        port = admin.port
        token = admin.token
        maxConnections = admin.maxConnections ?? Configuration.Admin.defaultMaxConnections
        requestTimeout = .seconds(Int64(admin.requestTimeout))
        responseTimeout = .seconds(Int64(admin.responseTimeout))
        idleTimeout = .seconds(Int64(admin.idleTimeout))
        allowedOrigins = admin.allowedOrigins
        allowedHosts = admin.allowedHosts
    }
}

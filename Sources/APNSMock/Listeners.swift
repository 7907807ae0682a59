import APNSMockCore
import NIOCore
#if canImport(Glibc)
import Glibc
#endif

/// One TLS listener: what it serves and where it binds.
public struct ListenerAddress: Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
        /// The APNs listener (`server.port`).
        case apns
        /// The APNs listener on one of `server.additionalPorts` (Apple's 443 beside 2197).
        case apnsAdditional
        /// A channel-management listener (`broadcast.sandboxPort`, `broadcast.productionPort`).
        case channelManagement(APNSEnvironment)
        /// The CONNECT proxy listener (`proxy.port`): plain HTTP/1.1, no TLS.
        case proxy
    }

    public var kind: Kind
    public var host: String
    /// The configured port before binding (0: any free one), the bound one after.
    public var port: Int

    /// The requests its connections serve.
    var role: ListenerRole {
        switch kind {
        case .apns, .apnsAdditional, .proxy: .apns
        case .channelManagement(let environment): .channelManagement(environment)
        }
    }

    /// The listener's name in logs and errors.
    public var name: String {
        switch kind {
        case .apns: "apns"
        case .apnsAdditional: "apns-\(port)"
        case .channelManagement(let environment): "channel-management-\(environment.rawValue)"
        case .proxy: "proxy"
        }
    }

    /// The configuration field that sets its port.
    var setting: String {
        switch kind {
        case .apns: "server.port"
        case .apnsAdditional: "server.additionalPorts"
        case .channelManagement(.sandbox): "broadcast.sandboxPort"
        case .channelManagement(.production): "broadcast.productionPort"
        case .proxy: "proxy.port"
        }
    }

    /// The TLS listeners a configuration asks for, in the order they start: the APNs listener,
    /// its additional ports, then channel management for sandbox and production.
    static func tlsListeners(of configuration: ServerConfiguration) -> [ListenerAddress] {
        [ListenerAddress(kind: .apns, host: configuration.host, port: configuration.port)]
            + configuration.additionalPorts.map { ListenerAddress(kind: .apnsAdditional, host: configuration.host, port: $0) }
            + [
                ListenerAddress(kind: .channelManagement(.sandbox), host: configuration.broadcast.host, port: configuration.broadcast.sandboxPort),
                ListenerAddress(kind: .channelManagement(.production), host: configuration.broadcast.host, port: configuration.broadcast.productionPort),
            ]
    }
}

/// Every bound port, by listener: the body of `GET /v1/health` and what the listening line prints.
public struct ListenerPorts: Sendable, Equatable, Codable {
    public var apns: Int
    /// `server.additionalPorts` as bound (empty when none is configured).
    public var apnsAdditional: [Int]
    public var broadcastSandbox: Int
    public var broadcastProduction: Int
    /// `nil` until the admin listener is bound.
    public var admin: Int?
    /// The CONNECT proxy listener; `nil` when none is configured.
    public var proxy: Int?

    public init(apns: Int, apnsAdditional: [Int], broadcastSandbox: Int, broadcastProduction: Int, admin: Int?, proxy: Int? = nil) {
        self.apns = apns
        self.apnsAdditional = apnsAdditional
        self.broadcastSandbox = broadcastSandbox
        self.broadcastProduction = broadcastProduction
        self.admin = admin
        self.proxy = proxy
    }
}

/// Why a stream was refused (RST_STREAM REFUSED_STREAM).
public enum RefusedStreamCause: String, Sendable, CaseIterable, Codable {
    /// A token-auth connection past `server.streamsBeforeAuthentication` before its first valid
    /// token (APNs allows one stream until then).
    case beforeAuthentication
    /// Past the connection's MAX_CONCURRENT_STREAMS otherwise.
    case overLimit
    /// Completed above the last stream id of a GOAWAY this side sent: not processed (RFC 9113
    /// §6.8), reset with REFUSED_STREAM, never decided, recorded or counted as a request.
    case afterGoAway

    var index: Int {
        switch self {
        case .beforeAuthentication: 0
        case .overLimit: 1
        case .afterGoAway: 2
        }
    }

    /// The Prometheus label value.
    var metricLabel: String {
        switch self {
        case .beforeAuthentication: "before_authentication"
        case .overLimit: "over_limit"
        case .afterGoAway: "after_goaway"
        }
    }
}

/// Why this side sent a GOAWAY (`/v1/stats` `goaways.byCause`, `apns_goaways_total{cause}`).
public enum GoAwayCause: String, Sendable, CaseIterable, Codable {
    /// A `goaway` fault rule.
    case fault
    /// The mock is shutting down.
    case shutdown
    /// The idle timeout, or a connection stuck in its handshake or on a stream past its timeout.
    case idle
    /// `server.errorDisconnect`: too many error answers on one connection (Apple's penalty).
    case errorDisconnect = "error-disconnect"
    /// The client broke RFC 9113 (this side's rules or nghttp2's).
    case `protocol`
    /// One of nghttp2's defences against floods (PING, SETTINGS, mass stream resets).
    case flood
}

/// A GOAWAY this side sent: what `/v1/events` tells as `event: goaway`, the inbox shows and the
/// log says.
public struct GoAwayNotice: Sendable, Codable, Equatable {
    public var connectionId: UInt64
    public var cause: GoAwayCause
    /// The error code's name (`NO_ERROR`, `ENHANCE_YOUR_CALM`, …).
    public var code: String
    /// The last stream id it named: streams above it were not processed.
    public var lastStreamId: Int32
    /// Its debug data, as text (empty when none).
    public var debugData: String
    /// When, RFC 3339 with milliseconds (wall clock).
    public var at: String
    /// The team the connection was bound to, if any (an event stream of one team hears only its own).
    public var team: String?
}

/// What event streams hear besides records: both are told as they happen, neither is a record.
enum ConnectionNotice: Sendable, Equatable {
    case refusedStreams(RefusedStreamsNotice)
    case goAway(GoAwayNotice)

    /// The team of the connection it happened on.
    var team: String? {
        switch self {
        case .refusedStreams(let notice): notice.team
        case .goAway(let notice): notice.team
        }
    }
}

/// Streams one connection refused in one read: what `/v1/events` tells as `event: refused-streams`
/// and the inbox page shows as a warning.
public struct RefusedStreamsNotice: Sendable, Codable, Equatable {
    public var connectionId: UInt64
    public var cause: RefusedStreamCause
    public var count: Int
    /// The lowest and highest stream ids refused.
    public var firstStreamId: Int32
    public var lastStreamId: Int32
    /// The MAX_CONCURRENT_STREAMS the connection announced.
    public var limit: UInt32
    /// When, RFC 3339 with milliseconds (wall clock).
    public var at: String
    /// The team the connection was bound to, if any (an event stream of one team hears only its own).
    public var team: String?
}

/// The mock's health as `GET /v1/health` tells it.
enum ListenerHealth: Sendable {
    /// Every listener is bound and serving.
    case ok(ListenerPorts)
    /// The TLS listeners are bound; the admin listener is being started.
    case starting(ListenerPorts)
    /// Shutting down (`nil`: the listener is gone).
    case stopping(ListenerPorts?)
}

/// A listener that could not bind, said so that the user can act: which listener and setting,
/// the address, and for the usual causes what to do.
public struct ListenerBindError: Error, CustomStringConvertible {
    public let listener: String
    public let setting: String
    public let host: String
    public let port: Int
    public let underlying: any Error

    init(address: ListenerAddress, underlying: any Error) {
        self.init(listener: address.name, setting: address.setting, host: address.host, port: address.port, underlying: underlying)
    }

    init(listener: String, setting: String, host: String, port: Int, underlying: any Error) {
        self.listener = listener
        self.setting = setting
        self.host = host
        self.port = port
        self.underlying = underlying
    }

    /// The command-line option and variable that set each listener's port besides the file.
    static let otherSpellings: [String: String] = [
        "server.port": "--port or APNS_MOCK_PORT",
        "server.additionalPorts": "--additional-port or APNS_MOCK_ADDITIONAL_PORTS",
        "admin.port": "--admin-port or APNS_MOCK_ADMIN_PORT",
        "broadcast.sandboxPort": "--broadcast-sandbox-port or APNS_MOCK_BROADCAST_SANDBOX_PORT",
        "broadcast.productionPort": "--broadcast-production-port or APNS_MOCK_BROADCAST_PRODUCTION_PORT",
        "proxy.port": "--proxy-port or APNS_MOCK_PROXY_PORT",
    ]

    public var description: String {
        let spellings = Self.otherSpellings[setting].map { ", \($0)" } ?? ""
        var text = "cannot listen on \(host):\(port) (\(setting)\(spellings), the \(listener) listener): \(underlying)"
        switch (underlying as? IOError)?.errnoCode {
        case EACCES where port > 0 && port < 1024:
            text += ". Ports below 1024 need net.ipv4.ip_unprivileged_port_start at or below \(port): Docker sets it to 0 in"
                + " its containers; with podman add --sysctl net.ipv4.ip_unprivileged_port_start=0; outside a container use a"
                + " port of 1024 or more, or leave \(port) out of \(setting)"
        case EADDRINUSE:
            text += ". Another process (another apns-mock?) listens there; choose another port, or 0 for any free one"
        case EADDRNOTAVAIL:
            text += ". No interface of this machine has that address"
        default:
            break
        }
        return text
    }
}

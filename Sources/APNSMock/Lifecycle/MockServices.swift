import APNSMockCore
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOExtras
import NIOPosix
import ServiceLifecycle
import Synchronization

// The running mock as peer services of one service group (docs/architecture.md, "Lifecycle"):
// the event loops, each TLS listener, the CONNECT proxy and the admin listener. A service group
// shuts its services down in reverse order, one after the other, so the order they are listed in
// (``APNSMockServer/services()``) is the order they stop in, reversed: the proxy first, then each
// TLS listener (GOAWAY, drain within one grace period shared by all), then the admin listener
// (`/v1/health` says `stopping` meanwhile; waiters and event streams answer as it stops), and the
// event loops last.

/// The event loops every listener runs on: shut down last, once every listener has stopped.
struct EventLoopService: Service {
    let group: MultiThreadedEventLoopGroup

    func run() async throws {
        // Returns on graceful shutdown; throws CancellationError when cancelled: either way the
        // loops stop (closing any connection still open).
        try? await gracefulShutdown()
        try? await group.shutdownGracefully()
    }
}

/// One TLS listener (APNs, an additional APNs port, channel management): binds, serves, and on
/// graceful shutdown stops accepting, sends every connection GOAWAY `{"reason":"Shutdown"}` and
/// lets in-flight requests finish until the shared grace period ends.
struct TLSListenerService: Service {
    let index: Int
    let address: ListenerAddress
    let routes: ListenerRoutes
    let tlsContext: TLSContext
    let group: MultiThreadedEventLoopGroup
    let configuration: ServerConfiguration
    let board: ListenerBoard
    let logger: Logger

    func run() async throws {
        // A quiescing helper follows a single server channel, so each listener has its own. It is
        // released when this returns, before the event loops stop (its deinit needs one of them).
        let quiesce = ServerQuiescingHelper(group: group)
        let open = OpenChannels()
        let channel: any Channel
        do {
            channel = try await APNSMockServer.bindTLSListener(
                address, routes: routes, tlsContext: tlsContext, group: group, quiesce: quiesce,
                configuration: configuration, logger: logger, open: open)
        } catch {
            board.failed()
            throw error
        }
        let port = channel.localAddress?.port ?? address.port
        let loop = channel.eventLoop
        let drained = loop.makePromise(of: Void.self)
        // Every TLS listener starts its drain when the first of them is stopped (the service group
        // stops them one after the other): none keeps accepting while another drains.
        board.onDrain(index) { quiesce.initiateShutdown(promise: drained) }
        board.bound(index, port: port)
        logger.info(
            address.role == .apns ? "APNs listener up" : "channel-management listener up",
            metadata: [
                "listener": "\(address.name)", "host": "\(address.host)", "port": "\(port)",
                "threads": "\(configuration.threads)",
            ])
        try? await gracefulShutdown()
        board.stopping()
        let deadline = board.drainDeadline()
        logger.info("shutting down: GOAWAY to the listener's connections", metadata: [
            "listener": "\(address.name)", "open connections (all listeners)": "\(routes.state.connections.open)",
        ])
        board.drainAll()
        let outcome = loop.makePromise(of: Bool.self)
        let timer = loop.scheduleTask(deadline: deadline) { outcome.succeed(false) }
        drained.futureResult.whenComplete { _ in outcome.succeed(true) }
        let inTime = (try? await outcome.futureResult.get()) ?? false
        timer.cancel()
        board.forgetDrain(index)
        if !inTime {
            logger.warning(
                "grace period over; the remaining connections are closed", metadata: ["listener": "\(address.name)"])
            // Closed here, while the event loops still run: left to the loops' own shutdown, a
            // connection closing on one loop had work scheduled on another that had already stopped.
            await open.closeAll()
            // The quiescing helper's own bookkeeping of them, on its loop, within a bound.
            let settled = loop.makePromise(of: Void.self)
            let bound = loop.scheduleTask(in: .seconds(2)) { settled.succeed() }
            drained.futureResult.whenComplete { _ in settled.succeed() }
            try? await settled.futureResult.get()
            bound.cancel()
        }
    }
}

/// The HTTP CONNECT proxy listener: binds once the TLS listeners it tunnels into are bound.
struct ProxyListenerService: Service {
    let index: Int
    let settings: Configuration.Proxy
    let port: Int
    let group: MultiThreadedEventLoopGroup
    let memory: MemoryReturn
    let board: ListenerBoard
    let logger: Logger

    func run() async throws {
        // Waiting ends early when another listener fails, or shutting down or cancellation begins.
        let ready = await withTaskCancellationOrGracefulShutdownHandler {
            await board.waitForTLSListeners()
        } onCancelOrGracefulShutdown: {
            board.stopping()
        }
        guard ready else {
            // Returning now would count as ending unexpectedly and cancel the group; wait for the
            // group's own shutdown instead, which a failed listener has started.
            try? await gracefulShutdown()
            return
        }
        let destinations = ProxyDestinations(board.listeners)
        let channel: any Channel
        do {
            channel = try await ConnectProxy.bind(
                settings: settings, port: port, group: group, memory: memory,
                destination: { destinations.address(of: $0) }, logger: logger)
        } catch {
            board.failed()
            throw error
        }
        let bound = channel.localAddress?.port ?? port
        board.bound(index, port: bound)
        logger.info("proxy listener up", metadata: ["host": "\(settings.host)", "port": "\(bound)"])
        try? await gracefulShutdown()
        board.stopping()
        // No new tunnels; open ones end with the connections they carry.
        try? await channel.close()
    }
}

/// The admin and query listener: a Hummingbird application with the admin listener's defences.
/// On graceful shutdown, event streams and waiting queries end first (answering with what they
/// have), as a graceful shutdown waits for every request in flight.
struct AdminListenerService: Service {
    private let application: any Service
    private let records: RecordStore
    private let board: ListenerBoard

    init(api: AdminAPI, settings: AdminSettings, board: ListenerBoard, logger: Logger) {
        var adminLogger = logger
        adminLogger[metadataKey: "listener"] = "admin"
        // The admin listener's defences (docs/architecture.md, "Limits and defences"): a connection
        // limit and timeouts, around Hummingbird's HTTP/1.1 channel. Hummingbird binds through NIO's
        // async bootstrap, whose AcceptBackoffHandler cannot be replaced from here and does not stop
        // a listener whose first accept fails (see AcceptPauseHandler); the descriptor budget
        // (`serve`) is what keeps this listener away from EMFILE.
        let limiter = ConnectionLimiter(
            listener: "admin", limit: settings.maxConnections, setting: "admin.maxConnections", memory: api.state.memory,
            logger: adminLogger)
        let timeouts = AdminTimeouts(settings)
        let server = HTTPServerBuilder { responder in
            GuardedHTTP1Channel(inner: HTTP1Channel(responder: responder), limiter: limiter, timeouts: timeouts)
        }
        application = Application(
            router: api.router(),
            server: server,
            configuration: .init(address: .hostname(settings.host, port: settings.port), serverName: "apns-mock"),
            onServerRunning: { channel in
                let port = channel.localAddress?.port ?? settings.port
                logger.info("admin listener up", metadata: ["host": "\(settings.host)", "port": "\(port)"])
                board.adminBound(port: port)
            },
            logger: adminLogger)
        records = api.state.records
        self.board = board
        self.settings = settings
    }

    private let settings: AdminSettings

    func run() async throws {
        do {
            try await withGracefulShutdownHandler {
                try await application.run()
            } onGracefulShutdown: { [records, board] in
                board.stopping()
                records.closeSubscriptions()
            }
        } catch {
            board.failed()
            // Before it is bound, what stops the listener is its bind: said as the other
            // listeners say it, with the port and the setting.
            if board.ports.admin == nil, error is IOError {
                throw ListenerBindError(
                    listener: "admin", setting: "admin.port", host: settings.host, port: settings.port, underlying: error)
            }
            throw error
        }
    }
}

/// Says in the log, at info level and once per ``interval``, how many requests were rejected and
/// for which reasons: rejections are logged one by one only at debug level, so that a load test of
/// bad requests neither fills the log nor spends its CPU writing it. Quiet while nothing is
/// rejected; a last summary on shutdown.
struct RejectionSummaryService: Service {
    let statistics: RequestStatistics
    let logger: Logger
    var interval: Duration = .seconds(10)

    func run() async throws {
        var previous = statistics.rejectionsByReason()
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: interval) }
            previous = summarise(since: previous)
        }
    }

    private func summarise(since previous: [Reason: Int]) -> [Reason: Int] {
        let now = statistics.rejectionsByReason()
        let new = now.compactMap { reason, count -> (Reason, Int)? in
            let added = count - previous[reason, default: 0]
            return added > 0 ? (reason, added) : nil
        }.sorted { $0.1 > $1.1 }
        guard !new.isEmpty else { return now }
        logger.info(
            "rejected requests (each one at debug level)",
            metadata: [
                "count": "\(new.reduce(0) { $0 + $1.1 })",
                "reasons": "\(new.map { "\($0.0.rawValue)=\($0.1)" }.joined(separator: ","))",
                "interval": "\(interval)",
            ])
        return now
    }
}

/// The connections of one TLS listener that are open, so that a shutdown whose grace period ran
/// out closes them itself before the event loops stop.
final class OpenChannels: Sendable {
    private let channels = Mutex<[ObjectIdentifier: any Channel]>([:])

    /// Keeps `channel` until it closes.
    func add(_ channel: any Channel) {
        let key = ObjectIdentifier(channel)
        channels.withLock { $0[key] = channel }
        channel.closeFuture.whenComplete { [self] _ in
            _ = channels.withLock { $0.removeValue(forKey: key) }
        }
    }

    /// Closes every connection still open and waits until they are closed.
    func closeAll() async {
        let open = channels.withLock { Array($0.values) }
        for channel in open {
            channel.close(promise: nil)
        }
        for channel in open {
            try? await channel.closeFuture.get()
        }
    }
}

import APNSMockCore
import Logging
import NIOCore
import NIOExtras
import NIOPosix
import ServiceLifecycle
import Synchronization

/// The APNs listener as a swift-service-lifecycle `Service`.
///
/// `run()` binds, serves until graceful shutdown is requested (SIGINT/SIGTERM through a
/// `ServiceGroup`), then stops accepting, sends every connection GOAWAY `{"reason":"Shutdown"}`,
/// lets in-flight requests finish, and returns. Tests use ``start()`` and
/// ``RunningAPNSListener/shutdown()`` directly.
public struct APNSMockServer: Service {
    public let configuration: ServerConfiguration
    public let logger: Logger
    private let onListening: (@Sendable (RunningAPNSListener) -> Void)?

    public init(
        configuration: ServerConfiguration, logger: Logger,
        onListening: (@Sendable (RunningAPNSListener) -> Void)? = nil
    ) {
        self.configuration = configuration
        self.logger = logger
        self.onListening = onListening
    }

    public func run() async throws {
        let listener = try await start()
        onListening?(listener)
        // Returns on graceful shutdown; throws CancellationError if the task is cancelled, in
        // which case the drain below still runs.
        try? await gracefulShutdown()
        await listener.shutdown()
    }

    /// Binds the listener and starts serving.
    public func start() async throws -> RunningAPNSListener {
        let tlsContext = try TLSContext(
            certificateChainPath: configuration.certificatePath,
            privateKeyPath: configuration.privateKeyPath,
            clientCAPath: configuration.clientCAPath)
        let tokenKeys = try TokenKeys.load(configuration.teams)
        let state = MockState(configuration: configuration)
        let router = APIRouter(role: .apns, configuration: configuration, tokenKeys: tokenKeys, state: state, logger: logger)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: max(1, configuration.threads))
        // One quiescing helper per listener: a helper follows a single server channel (the first
        // that registers), so a shared one would leave the others' connections without GOAWAY.
        var quiescers: [ServerQuiescingHelper] = []
        var ports: [Int] = []
        do {
            // The APNs listener, then one channel-management listener per environment.
            let listeners: [(role: ListenerRole, host: String, port: Int)] = [
                (.apns, configuration.host, configuration.port),
                (.channelManagement(.sandbox), configuration.broadcast.host, configuration.broadcast.sandboxPort),
                (.channelManagement(.production), configuration.broadcast.host, configuration.broadcast.productionPort),
            ]
            for (role, host, port) in listeners {
                let quiesce = ServerQuiescingHelper(group: group)
                quiescers.append(quiesce)
                let channel = try await Self.bindTLSListener(
                    host: host, port: port, router: router.serving(role), tlsContext: tlsContext,
                    group: group, quiesce: quiesce, configuration: configuration, logger: logger)
                let bound = channel.localAddress?.port ?? port
                ports.append(bound)
                logger.info(
                    role == .apns ? "APNs listener up" : "channel-management listener up",
                    metadata: ["host": "\(host)", "port": "\(bound)", "role": "\(role)", "threads": "\(configuration.threads)"])
            }
        } catch {
            try? await group.shutdownGracefully()
            throw error
        }
        let listener = RunningAPNSListener(
            port: ports[0], broadcastSandboxPort: ports[1], broadcastProductionPort: ports[2], group: group,
            quiescers: quiescers, connections: state.connections, gracePeriod: configuration.shutdownGracePeriod,
            logger: logger)
        // The admin listener starts once the APNs one is bound, so /healthz never answers 200
        // before requests can be sent.
        let api = AdminAPI(
            state: state, validator: router.device.validator,
            knownApps: configuration.allowedTopics == .any ? nil : Set(configuration.teams.flatMap(\.apps)),
            maxConcurrentStreams: Int(configuration.http2.maxConcurrentStreams),
            token: configuration.admin.token,
            apnsIsUp: { [weak listener] in listener?.isServing ?? false })
        do {
            listener.admin = try await AdminServer.start(api: api, settings: configuration.admin, logger: logger)
        } catch {
            await listener.shutdown()
            throw error
        }
        return listener
    }
}

extension APNSMockServer {
    /// Binds one TLS + HTTP/2 listener whose connections serve `router`'s APIs: the APNs listener,
    /// and any other listener of the same kind. Every connection is counted in the router's
    /// ``MockState``, gets the configured timeouts, and hears about graceful shutdown through
    /// `quiesce`. The listener's defences (docs/architecture.md, "Limits and defences"): at most
    /// `configuration.maxConnections` connections on the TLS listeners together (more are closed
    /// at once with a reset and logged), and a pause in accepting when `accept` fails for want of descriptors instead of
    /// a busy retry.
    static func bindTLSListener(
        host: String, port: Int, router: APIRouter, tlsContext: TLSContext, group: MultiThreadedEventLoopGroup,
        quiesce: ServerQuiescingHelper, configuration: ServerConfiguration, logger: Logger
    ) async throws -> Channel {
        let connections = router.state.connections
        let name: String
        switch router.role {
        case .apns: name = "apns"
        case .channelManagement(let environment): name = "channel-management-\(environment.rawValue)"
        }
        // One limit for the TLS listeners together, kept in the shared registry.
        let refusals = RefusalLog(
            listener: name, limit: configuration.maxConnections, setting: "server.maxConnections", logger: logger)
        let timeouts = ConnectionTimeouts(configuration)
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 512)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .serverChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(AcceptPauseHandler(listener: name, logger: logger))
                    try channel.pipeline.syncOperations.addHandler(quiesce.makeServerChannelHandler(channel: channel))
                }
            }
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelOption(.maxMessagesPerRead, value: 16)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    guard let id = connections.opened(limit: configuration.maxConnections) else {
                        refusals.note()
                        try ConnectionLimiter.refuse(channel)
                        return
                    }
                    MemoryReturn.shared.connectionOpened()
                    var connectionLogger = logger
                    connectionLogger[metadataKey: "connection"] = "\(id)"
                    let connection: APNSConnection
                    do {
                        connection = try APNSConnection(
                            id: id, tlsContext: tlsContext, settings: configuration.http2,
                            router: router, logger: connectionLogger)
                    } catch {
                        connections.closed()
                        MemoryReturn.shared.connectionClosed()
                        throw error
                    }
                    let handler = APNSChannelHandler(
                        connection: connection, timeouts: timeouts, logger: connectionLogger,
                        onClose: {
                            connections.closed()
                            MemoryReturn.shared.connectionClosed()
                        })
                    try channel.pipeline.syncOperations.addHandler(handler)
                }
            }
        return try await bootstrap.bind(host: host, port: port).get()
    }
}

/// A bound, serving APNs listener.
public final class RunningAPNSListener: Sendable {
    /// The port actually bound (the chosen one when configured with port 0).
    public let port: Int
    /// The channel-management listeners' ports, sandbox and production.
    public let broadcastSandboxPort: Int
    public let broadcastProductionPort: Int
    private let group: MultiThreadedEventLoopGroup
    /// One per TLS listener. Released before the event loops are (see ``shutdown()``): a helper's
    /// deinit completes a promise on one of them, which must still be running.
    private let quiescers: Mutex<[ServerQuiescingHelper]>
    private let connections: ConnectionRegistry
    private let gracePeriod: TimeAmount
    private let logger: Logger
    private let stopped = Mutex(false)
    private let adminServer = Mutex<AdminServer?>(nil)

    /// The admin listener, set once by ``APNSMockServer/start()``.
    var admin: AdminServer? {
        get { adminServer.withLock { $0 } }
        set { adminServer.withLock { $0 = newValue } }
    }

    /// The admin listener's port (the chosen one when configured with port 0).
    public var adminPort: Int { admin?.port ?? 0 }

    /// False once ``shutdown()`` began.
    var isServing: Bool { !stopped.withLock { $0 } }

    init(
        port: Int, broadcastSandboxPort: Int, broadcastProductionPort: Int, group: MultiThreadedEventLoopGroup,
        quiescers: [ServerQuiescingHelper], connections: ConnectionRegistry, gracePeriod: TimeAmount, logger: Logger
    ) {
        self.port = port
        self.broadcastSandboxPort = broadcastSandboxPort
        self.broadcastProductionPort = broadcastProductionPort
        self.group = group
        self.quiescers = Mutex(quiescers)
        self.connections = connections
        self.gracePeriod = gracePeriod
        self.logger = logger
    }

    /// Connections currently open.
    public var openConnections: Int { connections.open }
    /// Connections accepted since start.
    public var totalConnections: UInt64 { connections.total }

    /// Stops accepting, sends GOAWAY `{"reason":"Shutdown"}` on every connection, waits up to the
    /// grace period for in-flight requests, then releases the event loops. Safe to call twice.
    public func shutdown() async {
        let alreadyStopped = stopped.withLock { stopped in
            defer { stopped = true }
            return stopped
        }
        guard !alreadyStopped else { return }
        await admin?.shutdown()
        logger.info("shutting down: GOAWAY to \(connections.open) connection(s)")
        // Everything here lives on one event loop, so that no callback hops to another loop that
        // may already have stopped when the group shuts down.
        let loop = group.next()
        var quiescers = self.quiescers.withLock { quiescers in
            defer { quiescers = [] }
            return quiescers
        }
        let drained = quiescers.map { quiesce in
            let listenerDrained = loop.makePromise(of: Void.self)
            quiesce.initiateShutdown(promise: listenerDrained)
            return listenerDrained.futureResult
        }
        let outcome = loop.makePromise(of: Bool.self)
        let deadline = loop.scheduleTask(in: gracePeriod) { outcome.succeed(false) }
        EventLoopFuture.andAllComplete(drained, on: loop).whenComplete { _ in outcome.succeed(true) }
        let inTime = (try? await outcome.futureResult.get()) ?? false
        deadline.cancel()
        if !inTime {
            logger.warning("grace period over; closing the remaining connections")
        }
        quiescers.removeAll()  // their deinits need the event loops; they stop below
        try? await group.shutdownGracefully()
        logger.info("APNs listener stopped")
    }
}


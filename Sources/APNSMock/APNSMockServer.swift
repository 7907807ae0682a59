import APNSMockCore
import Foundation
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
        let routes = Routes(configuration: configuration, tokenKeys: tokenKeys, state: state, logger: logger)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: max(1, configuration.threads))
        // One quiescing helper per listener: a helper follows a single server channel (the first
        // that registers), so a shared one would leave the others' connections without GOAWAY.
        var quiescers: [ServerQuiescingHelper] = []
        var bound: [ListenerAddress] = []
        var channels: [any Channel] = []
        /// After a failed bind: the listeners bound so far close, and their quiescing helpers go,
        /// while the event loops still run (a helper's deinit completes a promise on one of them).
        func abandon() async {
            for channel in channels {
                try? await channel.close()
            }
            quiescers.removeAll()
            try? await group.shutdownGracefully()
        }
        do {
            for address in ListenerAddress.tlsListeners(of: configuration) {
                let quiesce = ServerQuiescingHelper(group: group)
                quiescers.append(quiesce)
                let channel = try await Self.bindTLSListener(
                    address, routes: routes.serving(address.role), tlsContext: tlsContext,
                    group: group, quiesce: quiesce, configuration: configuration, logger: logger)
                channels.append(channel)
                var listening = address
                listening.port = channel.localAddress?.port ?? address.port
                bound.append(listening)
                logger.info(
                    address.role == .apns ? "APNs listener up" : "channel-management listener up",
                    metadata: [
                        "listener": "\(address.name)", "host": "\(address.host)", "port": "\(listening.port)",
                        "threads": "\(configuration.threads)",
                    ])
            }
        } catch {
            await abandon()
            throw error
        }
        if let proxyPort = configuration.proxy.port {
            // The CONNECT proxy tunnels into the listeners just bound.
            let destinations = ProxyDestinations(bound)
            do {
                let channel = try await ConnectProxy.bind(
                    settings: configuration.proxy, port: proxyPort, group: group, memory: state.memory,
                    destination: { destinations.address(of: $0) }, logger: logger)
                channels.append(channel)
                bound.append(ListenerAddress(kind: .proxy, host: configuration.proxy.host, port: channel.localAddress?.port ?? proxyPort))
                logger.info("proxy listener up", metadata: ["host": "\(configuration.proxy.host)", "port": "\(bound.last!.port)"])
            } catch {
                await abandon()
                throw error
            }
        }
        let listener = RunningAPNSListener(
            listeners: bound, group: group, quiescers: quiescers, connections: state.connections,
            gracePeriod: configuration.shutdownGracePeriod, logger: logger,
            proxy: configuration.proxy.port == nil ? nil : channels.last)
        // The admin listener starts once the APNs one is bound, so /healthz never answers 200
        // before requests can be sent.
        let api = AdminAPI(
            state: state, validator: routes.validator,
            knownApps: configuration.allowedTopics == .any ? nil : Set(configuration.teams.flatMap(\.apps)),
            maxConcurrentStreams: Int(configuration.http2.maxConcurrentStreams),
            token: configuration.admin.token,
            caCertificatePEM: Self.caCertificatePEM(configuration),
            health: { [weak listener] in listener?.health ?? .stopping(nil) })
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
    /// The CA certificates `GET /v1/ca.pem` serves, read once at start (they are small and do not
    /// change while the mock runs); `nil` when none of the files exists.
    static func caCertificatePEM(_ configuration: ServerConfiguration) -> String? {
        let paths = configuration.caCertificatePaths ?? configuration.clientCAPath.map { [$0] } ?? []
        let texts = paths.compactMap { try? String(contentsOfFile: $0, encoding: .utf8) }
        guard !texts.isEmpty else { return nil }
        return texts.map { $0.hasSuffix("\n") ? $0 : $0 + "\n" }.joined()
    }

    /// Binds one TLS + HTTP/2 listener whose connections serve `routes`' APIs: the APNs listener,
    /// and any other listener of the same kind. Every connection is counted in the routes'
    /// ``MockState``, gets the configured timeouts, and hears about graceful shutdown through
    /// `quiesce`. The listener's defences (docs/architecture.md, "Limits and defences"): at most
    /// `configuration.maxConnections` connections on the TLS listeners together (more are closed
    /// at once with a reset and logged), and a pause in accepting when `accept` fails for want of descriptors instead of
    /// a busy retry.
    static func bindTLSListener(
        _ address: ListenerAddress, routes: ListenerRoutes, tlsContext: TLSContext, group: MultiThreadedEventLoopGroup,
        quiesce: ServerQuiescingHelper, configuration: ServerConfiguration, logger: Logger
    ) async throws -> Channel {
        let connections = routes.state.connections
        let memory = routes.state.memory
        let name = address.name
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
            // TCP_NODELAY is a TCP-level option: `.socketOption(.tcp_nodelay)` would be level
            // SOL_SOCKET, where its number (1) is SO_DEBUG, which needs CAP_NET_ADMIN.
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            .childChannelOption(.maxMessagesPerRead, value: 16)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    guard let id = connections.opened(limit: configuration.maxConnections) else {
                        refusals.note()
                        try ConnectionLimiter.refuse(channel)
                        return
                    }
                    memory.connectionOpened()
                    var connectionLogger = logger
                    connectionLogger[metadataKey: "connection"] = "\(routes.state.connectionNumber(of: id))"
                    let connection: APNSConnection
                    do {
                        connection = try APNSConnection(
                            id: id, tlsContext: tlsContext, settings: configuration.http2,
                            routes: routes, logger: connectionLogger)
                    } catch {
                        connections.closed()
                        memory.connectionClosed()
                        throw error
                    }
                    let handler = APNSChannelHandler(
                        connection: connection, timeouts: timeouts, logger: connectionLogger,
                        onClose: {
                            connections.closed()
                            memory.connectionClosed()
                        })
                    try channel.pipeline.syncOperations.addHandler(handler)
                }
            }
        let channel: any Channel
        do {
            channel = try await bootstrap.bind(host: address.host, port: address.port).get()
        } catch {
            throw ListenerBindError(address: address, underlying: error)
        }
        try await SetupFailureLog.install(on: channel, listener: name, logger: logger)
        return channel
    }
}

/// Where the CONNECT proxy's tunnels lead: the bound listener of each target, dialled on loopback
/// when it listens on every interface.
struct ProxyDestinations: Sendable {
    let apns: (host: String, port: Int)
    let sandbox: (host: String, port: Int)
    let production: (host: String, port: Int)

    init(_ listeners: [ListenerAddress]) {
        func address(_ kind: ListenerAddress.Kind) -> (host: String, port: Int) {
            let listener = listeners.first { $0.kind == kind }
            let host = listener?.host ?? "127.0.0.1"
            return (host == "0.0.0.0" ? "127.0.0.1" : host == "::" ? "::1" : host, listener?.port ?? 0)
        }
        apns = address(.apns)
        sandbox = address(.channelManagement(.sandbox))
        production = address(.channelManagement(.production))
    }

    func address(of target: ProxyRequest.Target) -> (host: String, port: Int) {
        switch target {
        case .apns: apns
        case .channelManagement(.sandbox): sandbox
        case .channelManagement(.production): production
        }
    }
}

/// A bound, serving APNs listener.
public final class RunningAPNSListener: Sendable {
    /// The TLS listeners as bound (ports chosen where port 0 was configured), in start order.
    public let listeners: [ListenerAddress]
    private let group: MultiThreadedEventLoopGroup
    /// One per TLS listener. Released before the event loops are (see ``shutdown()``): a helper's
    /// deinit completes a promise on one of them, which must still be running.
    private let quiescers: Mutex<[ServerQuiescingHelper]>
    private let connections: ConnectionRegistry
    private let gracePeriod: TimeAmount
    private let logger: Logger
    private let stopped = Mutex(false)
    private let adminServer = Mutex<AdminServer?>(nil)
    /// The CONNECT proxy's listening channel, when one is configured: closed first on shutdown.
    private let proxy: (any Channel)?

    /// The admin listener, set once by ``APNSMockServer/start()``.
    var admin: AdminServer? {
        get { adminServer.withLock { $0 } }
        set { adminServer.withLock { $0 = newValue } }
    }

    /// The APNs listener's port (the chosen one when configured with port 0).
    public var port: Int { port(of: .apns) }
    /// The APNs listener's additional ports (`server.additionalPorts`), as bound.
    public var additionalPorts: [Int] { listeners.filter { $0.kind == .apnsAdditional }.map(\.port) }
    /// The channel-management listeners' ports, sandbox and production.
    public var broadcastSandboxPort: Int { port(of: .channelManagement(.sandbox)) }
    public var broadcastProductionPort: Int { port(of: .channelManagement(.production)) }

    private func port(of kind: ListenerAddress.Kind) -> Int {
        listeners.first { $0.kind == kind }?.port ?? 0
    }

    /// The admin listener's port (the chosen one when configured with port 0).
    public var adminPort: Int { admin?.port ?? 0 }

    /// Every bound port by listener, as `GET /v1/health` and the listening line show them.
    public var ports: ListenerPorts {
        ListenerPorts(
            apns: port, apnsAdditional: additionalPorts, broadcastSandbox: broadcastSandboxPort,
            broadcastProduction: broadcastProductionPort, admin: admin?.port,
            proxy: listeners.first { $0.kind == .proxy }?.port)
    }

    /// False once ``shutdown()`` began.
    var isServing: Bool { !stopped.withLock { $0 } }

    /// What `GET /v1/health` reports: every listener bound (the admin listener's port is known
    /// once ``APNSMockServer/start()`` has it), or shutting down.
    var health: ListenerHealth {
        let ports = self.ports
        guard isServing else { return .stopping(ports) }
        return ports.admin == nil ? .starting(ports) : .ok(ports)
    }

    init(
        listeners: [ListenerAddress], group: MultiThreadedEventLoopGroup, quiescers: [ServerQuiescingHelper],
        connections: ConnectionRegistry, gracePeriod: TimeAmount, logger: Logger, proxy: (any Channel)? = nil
    ) {
        self.proxy = proxy
        self.listeners = listeners
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
        // No new tunnels; open ones end with the connections they carry.
        try? await proxy?.close()
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


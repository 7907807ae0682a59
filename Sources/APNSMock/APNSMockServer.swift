import APNSMockCore
import Foundation
import Hummingbird
import Logging
import NIOCore
import NIOEmbedded
import NIOExtras
import NIOPosix
import ServiceLifecycle

/// The mock: every listener it is configured with and the admin listener, built from the runtime
/// settings and run as peer services of a swift-service-lifecycle `ServiceGroup`.
///
/// `apns-mock serve` puts ``services()`` into its own group, with SIGTERM and SIGINT as graceful
/// shutdown signals. In-process users (tests, ``MockHarness``) call ``start()``, which runs the same
/// services in a group of their own and returns once every listener is bound;
/// ``RunningAPNSMock/shutdown()`` stops it the same way a signal does.
public struct APNSMockServer: Sendable {
    public let configuration: ServerConfiguration
    public let logger: Logger
    private let onListening: (@Sendable (ListenerPorts) -> Void)?

    /// `onListening` is called once, when every listener is bound, with the bound ports.
    public init(
        configuration: ServerConfiguration, logger: Logger,
        onListening: (@Sendable (ListenerPorts) -> Void)? = nil
    ) {
        self.configuration = configuration
        self.logger = logger
        self.onListening = onListening
    }

    /// The mock's services, in the order a service group should list them (it stops them in
    /// reverse): the event loops, each TLS listener, the proxy when configured, the admin
    /// listener. Any of them ending (a listener that cannot bind throws) shuts the group down
    /// gracefully. Reads the certificate and key files, and throws on a bad one.
    public func services() async throws -> [ServiceGroupConfiguration.ServiceConfiguration] {
        try await assemble().services.map {
            .init(service: $0, successTerminationBehavior: .gracefullyShutdownGroup, failureTerminationBehavior: .gracefullyShutdownGroup)
        }
    }

    /// Runs the services in a service group of their own and returns once every listener is
    /// bound; throws what stopped one from binding.
    public func start() async throws -> RunningAPNSMock {
        let assembly = try await assemble()
        let group = ServiceGroup(
            configuration: .init(
                services: assembly.services.map {
                    .init(
                        service: $0, successTerminationBehavior: .gracefullyShutdownGroup,
                        failureTerminationBehavior: .gracefullyShutdownGroup)
                },
                logger: logger))
        let task = Task { try await group.run() }
        let board = assembly.board
        let listening = await withTaskCancellationHandler {
            await board.waitForAll()
        } onCancel: {
            board.stopping()
        }
        guard listening else {
            // A listener could not bind (the group shuts the others down and throws its error), or
            // the caller was cancelled.
            await group.triggerGracefulShutdown()
            try await task.value
            throw MockStartError()
        }
        return RunningAPNSMock(board: assembly.board, state: assembly.state, services: group, task: task, logger: logger)
    }

    /// What one run of the mock is made of.
    private struct Assembly {
        let board: ListenerBoard
        let state: MockState
        let services: [any Service]
    }

    private func assemble() async throws -> Assembly {
        let tlsContext = try TLSContext(
            certificateChainPath: configuration.certificatePath,
            privateKeyPath: configuration.privateKeyPath,
            clientCAPath: configuration.clientCAPath)
        let tokenKeys = try TokenKeys.load(configuration.teams)
        // With `state.url`, the replicas' shared state: reachable and at this schema version, or
        // start-up stops here naming the setting (docs/replicas.md).
        let shared = try await Self.connectSharedState(configuration, logger: logger)
        let state = MockState(
            configuration: configuration, parts: .inMemory(configuration), tokenKeys: tokenKeys, shared: shared)
        let routes = Routes(configuration: configuration, state: state, logger: logger)
        let tlsListeners = ListenerAddress.tlsListeners(of: configuration)
        let proxy = configuration.proxy.port.map { ListenerAddress(kind: .proxy, host: configuration.proxy.host, port: $0) }
        let board = ListenerBoard(
            expected: tlsListeners + (proxy.map { [$0] } ?? []), gracePeriod: configuration.shutdownGracePeriod,
            onListening: onListening)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: max(1, configuration.threads))
        let api = AdminAPI(
            state: state, validator: routes.validator,
            checksApps: configuration.allowedTopics != .any,
            maxConcurrentStreams: Int(configuration.http2.maxConcurrentStreams),
            token: configuration.admin.token,
            caCertificatePEM: Self.caCertificatePEM(configuration),
            health: { [board] in board.health },
            access: AdminAccessPolicy(configuration.admin), shared: shared)
        if let shared {
            // Every admin change any replica made is applied here before the listeners serve.
            let responder = api.router().buildResponder()
            let requestLogger = logger
            try await shared.attach(state: state) { request in
                // A change from the log has no connection of its own: its context gets a stand-in.
                try await responder.respond(
                    to: request,
                    context: AdminAPI.Context(source: ApplicationRequestContextSource(channel: EmbeddedChannel(), logger: requestLogger)))
            }
        }
        // The order is the shutdown order reversed (docs/architecture.md, "Lifecycle"): the
        // listeners of pushes first, then the admin listener (it answers `/v1/health` 503
        // `stopping`, queries and event streams while the connections drain), the rejection
        // summary (its last line counts every request answered), the event loops last.
        var services: [any Service] = [
            EventLoopService(group: group),
        ]
        if let shared { services.append(SharedStateService(engine: shared)) }
        services += [
            RejectionSummaryService(statistics: state.statistics, logger: logger),
            AdminListenerService(api: api, settings: configuration.admin, board: board, logger: logger),
        ]
        for (index, address) in tlsListeners.enumerated() {
            services.append(TLSListenerService(
                index: index, address: address, routes: routes.serving(address.role), tlsContext: tlsContext,
                group: group, configuration: configuration, board: board, logger: logger))
        }
        if let proxy {
            services.append(ProxyListenerService(
                index: tlsListeners.count, settings: configuration.proxy, port: proxy.port, group: group,
                memory: state.memory, board: board, logger: logger))
        }
        return Assembly(board: board, state: state, services: services)
    }
}

extension APNSMockServer {
    /// The shared state `state.url` names, connected and at this schema version; `nil` in memory.
    static func connectSharedState(_ configuration: ServerConfiguration, logger: Logger) async throws -> PostgresSharedState? {
        guard let url = configuration.state.url else { return nil }
        let engine = try PostgresSharedState(
            url: url, settings: configuration.state,
            queueCapacity: configuration.recordingCapacity == 0 ? 0 : max(10_000, min(configuration.recordingCapacity, 200_000)),
            logger: logger)
        try await engine.connect()
        return engine
    }

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
        quiesce: ServerQuiescingHelper, configuration: ServerConfiguration, logger: Logger,
        open: OpenChannels? = nil
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
                            routes: routes, logger: connectionLogger, errorDisconnect: configuration.errorDisconnect)
                    } catch {
                        connections.closed()
                        memory.connectionClosed()
                        throw error
                    }
                    let handler = APNSChannelHandler(
                        connection: connection, timeouts: timeouts, logger: connectionLogger, memory: memory,
                        onClose: {
                            connections.closed()
                            memory.connectionClosed()
                        })
                    try channel.pipeline.syncOperations.addHandler(handler)
                    open?.add(channel)
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

/// The mock stopped before every listener was bound, without an error of a listener's: the task
/// that called ``APNSMockServer/start()`` was cancelled.
public struct MockStartError: Error, CustomStringConvertible {
    public var description: String { "apns-mock stopped before every listener was bound (the start was cancelled)" }
}

/// A running mock started in-process by ``APNSMockServer/start()``: every listener bound.
public final class RunningAPNSMock: Sendable {
    private let board: ListenerBoard
    private let state: MockState
    private let services: ServiceGroup
    private let task: Task<Void, any Error>
    private let logger: Logger

    init(board: ListenerBoard, state: MockState, services: ServiceGroup, task: Task<Void, any Error>, logger: Logger) {
        self.board = board
        self.state = state
        self.services = services
        self.task = task
        self.logger = logger
    }

    /// The TLS and proxy listeners as bound (ports chosen where port 0 was configured), in start
    /// order.
    public var listeners: [ListenerAddress] { board.listeners }

    /// The APNs listener's port (the chosen one when configured with port 0).
    public var port: Int { ports.apns }
    /// The APNs listener's additional ports (`server.additionalPorts`), as bound.
    public var additionalPorts: [Int] { ports.apnsAdditional }
    /// The channel-management listeners' ports, sandbox and production.
    public var broadcastSandboxPort: Int { ports.broadcastSandbox }
    public var broadcastProductionPort: Int { ports.broadcastProduction }
    /// The admin listener's port (the chosen one when configured with port 0).
    public var adminPort: Int { ports.admin ?? 0 }

    /// Every bound port by listener, as `GET /v1/health` and the listening line show them.
    public var ports: ListenerPorts { board.ports }

    /// What `GET /v1/health` reports.
    var health: ListenerHealth { board.health }

    /// The recorded requests.
    var records: RecordStore { state.records }

    /// Connections currently open.
    public var openConnections: Int { state.connections.open }
    /// Connections accepted since start.
    public var totalConnections: UInt64 { state.connections.total }

    /// Stops as SIGTERM stops `serve`: the admin listener (waiters and event streams answer first),
    /// the proxy, then every TLS listener stops accepting and sends GOAWAY `{"reason":"Shutdown"}`,
    /// in-flight requests get up to the grace period, and the event loops stop. Safe to call twice.
    public func shutdown() async {
        board.stopping()
        await services.triggerGracefulShutdown()
        _ = await task.result
        logger.info("apns-mock stopped")
    }
}

/// The name ``RunningAPNSMock`` had before: it is the whole running mock, not one listener.
@available(*, deprecated, renamed: "RunningAPNSMock")
public typealias RunningAPNSListener = RunningAPNSMock

import APNSMockCore
import Logging
import NIOCore
import NIOPosix

/// The HTTP CONNECT proxy listener (`proxy.port`): clients that dial Apple's host names and cannot
/// be pointed elsewhere, but take an HTTP proxy, reach the mock through it unmodified and without a
/// hosts-file entry. `CONNECT api.push.apple.com:443` opens a TCP tunnel into the mock's own APNs
/// listener (a channel-management host, into that environment's listener); the client's TLS runs
/// through it with Apple's host name as SNI, which picks the environment as it does on a direct
/// connection. Anything but CONNECT to one of Apple's push hosts on its port is refused
/// (``ProxyRequest``): never an open proxy.
///
/// Limits: at most `proxy.maxConnections` connections at once; a request head must arrive
/// within ``headTimeout`` and fit ``ProxyRequest/headLimit`` bytes; the tunnel's far side must
/// connect within ``connectTimeout``. An open tunnel is the mock's own connection on the far side,
/// with its own timeouts; the relay reads from one side only while the other can take the bytes.
enum ConnectProxy {
    static let headTimeout: TimeAmount = .seconds(10)
    static let connectTimeout: TimeAmount = .seconds(5)

    /// Binds the proxy listener. `destination` gives the address of the listener a target leads
    /// to (the mock's own, bound already).
    static func bind(
        settings: Configuration.Proxy, port: Int, group: MultiThreadedEventLoopGroup, memory: MemoryReturn,
        destination: @escaping @Sendable (ProxyRequest.Target) -> (host: String, port: Int), logger: Logger
    ) async throws -> any Channel {
        var proxyLogger = logger
        proxyLogger[metadataKey: "listener"] = "proxy"
        let logger = proxyLogger
        let limiter = ConnectionLimiter(
            listener: "proxy", limit: settings.maxConnections, setting: "proxy.maxConnections", memory: memory,
            logger: logger)
        let refusals = ThrottledWarning("refused a proxy request", logger: logger)
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .serverChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(AcceptPauseHandler(listener: "proxy", logger: logger))
                }
            }
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            .childChannelOption(.allowRemoteHalfClosure, value: true)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    guard limiter.admit() else {
                        try ConnectionLimiter.refuse(channel)
                        return
                    }
                    channel.closeFuture.whenComplete { _ in limiter.release() }
                    try channel.pipeline.syncOperations.addHandler(
                        ConnectRequestHandler(destination: destination, refusals: refusals, logger: logger))
                }
            }
        let address = ListenerAddress(kind: .proxy, host: settings.host, port: port)
        let channel: any Channel
        do {
            channel = try await bootstrap.bind(host: settings.host, port: port).get()
        } catch {
            throw ListenerBindError(address: address, underlying: error)
        }
        try await SetupFailureLog.install(on: channel, listener: "proxy", logger: logger)
        return channel
    }
}

/// Reads one CONNECT request, opens the tunnel or refuses, then hands the connection to a
/// ``TunnelRelay`` pair. Runs on the connection's event loop.
final class ConnectRequestHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private enum State {
        case readingHead
        /// The far side is connecting; bytes the client sends meanwhile (its TLS ClientHello, sent
        /// before it read the 200) wait here.
        case connecting
        case done
    }

    private let destination: @Sendable (ProxyRequest.Target) -> (host: String, port: Int)
    private let refusals: ThrottledWarning
    private let logger: Logger
    private var state = State.readingHead
    private var head: [UInt8] = []
    private var pending: [ByteBuffer] = []
    private var timeout: Scheduled<Void>?

    init(
        destination: @escaping @Sendable (ProxyRequest.Target) -> (host: String, port: Int), refusals: ThrottledWarning,
        logger: Logger
    ) {
        self.destination = destination
        self.refusals = refusals
        self.logger = logger
    }

    func handlerAdded(context: ChannelHandlerContext) {
        let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
        timeout = context.eventLoop.scheduleTask(in: ConnectProxy.headTimeout) {
            let context = loopBound.value
            context.close(promise: nil)
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timeout?.cancel()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = Self.unwrapInboundIn(data)
        switch state {
        case .readingHead:
            head += buffer.readBytes(length: buffer.readableBytes) ?? []
            guard let end = ProxyRequest.headEnd(head) else {
                if head.count > ProxyRequest.headLimit {
                    refuse(ProxyRequest.Refusal(status: 431, message: "the request head is longer than \(ProxyRequest.headLimit) bytes"),
                           context: context)
                }
                return
            }
            let rest = Array(head[end...])
            if !rest.isEmpty { pending.append(ByteBuffer(bytes: rest)) }
            switch ProxyRequest.target(head: Array(head[..<end])) {
            case .failure(let refusal):
                refuse(refusal, context: context)
            case .success(let target):
                state = .connecting
                open(target.target, host: target.host, port: target.port, context: context)
            }
        case .connecting:
            pending.append(buffer)
        case .done:
            break
        }
    }

    private func refuse(_ refusal: ProxyRequest.Refusal, context: ChannelHandlerContext) {
        state = .done
        refusals.note(["status": "\(refusal.status)", "why": "\(refusal.message)"])
        let reason = switch refusal.status {
        case 400: "Bad Request"
        case 403: "Forbidden"
        case 405: "Method Not Allowed"
        case 431: "Request Header Fields Too Large"
        default: "Bad Gateway"
        }
        let body = refusal.message + "\n"
        var response = "HTTP/1.1 \(refusal.status) \(reason)\r\nContent-Type: text/plain; charset=utf-8\r\n"
        if refusal.status == 405 { response += "Allow: CONNECT\r\n" }
        response += "Content-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n" + body
        let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
        context.writeAndFlush(Self.wrapOutboundOut(ByteBuffer(string: response))).whenComplete { _ in
            loopBound.value.close(promise: nil)
        }
    }

    /// Connects the far side on the same event loop (so that the relay pair shares it), then answers
    /// 200 and glues the two connections together.
    private func open(_ target: ProxyRequest.Target, host: String, port: Int, context: ChannelHandlerContext) {
        let address = destination(target)
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        ClientBootstrap(group: context.eventLoop)
            .connectTimeout(ConnectProxy.connectTimeout)
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .channelOption(.allowRemoteHalfClosure, value: true)
            .connect(host: address.host, port: address.port)
            .whenComplete { result in
                let (handler, context) = loopBound.value
                switch result {
                case .failure(let error):
                    handler.logger.warning(
                        "proxy tunnel could not reach the mock's listener",
                        metadata: ["target": "\(host):\(port)", "error": "\(error)"])
                    handler.refuse(ProxyRequest.Refusal(status: 502, message: "the mock's listener did not answer: \(error)"), context: context)
                case .success(let far):
                    guard context.channel.isActive else {
                        far.close(promise: nil)
                        return
                    }
                    handler.glue(context: context, to: far, target: "\(host):\(port)")
                }
            }
    }

    private func glue(context: ChannelHandlerContext, to far: any Channel, target: String) {
        state = .done
        timeout?.cancel()
        let (near, farSide) = TunnelRelay.matchedPair()
        do {
            try far.pipeline.syncOperations.addHandler(farSide)
        } catch {
            far.close(promise: nil)
            context.close(promise: nil)
            return
        }
        logger.debug("proxy tunnel open", metadata: ["target": "\(target)"])
        context.writeAndFlush(Self.wrapOutboundOut(ByteBuffer(string: "HTTP/1.1 200 Connection established\r\n\r\n")), promise: nil)
        let pending = self.pending
        self.pending = []
        for buffer in pending {
            far.write(buffer, promise: nil)
        }
        far.flush()
        do {
            try context.pipeline.syncOperations.addHandler(near, position: .after(self))
        } catch {
            far.close(promise: nil)
            context.close(promise: nil)
            return
        }
        context.pipeline.syncOperations.removeHandler(self, promise: nil)
    }
}

/// One side of a tunnel: what it reads goes to its partner's channel, read only while the partner
/// can take it (back-pressure both ways), and a close or half-close on one side reaches the other.
/// Both sides run on one event loop.
final class TunnelRelay: ChannelDuplexHandler {
    typealias InboundIn = NIOAny
    typealias OutboundIn = NIOAny
    typealias OutboundOut = NIOAny

    private var partner: TunnelRelay?
    private var context: ChannelHandlerContext?
    private var pendingRead = false

    private init() {}

    static func matchedPair() -> (TunnelRelay, TunnelRelay) {
        let first = TunnelRelay(), second = TunnelRelay()
        first.partner = second
        second.partner = first
        return (first, second)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        partner = nil
    }

    private func partnerWrite(_ data: NIOAny) { context?.write(data, promise: nil) }
    private func partnerFlush() { context?.flush() }
    private func partnerWriteEOF() { context?.close(mode: .output, promise: nil) }
    private func partnerClose() { context?.close(promise: nil) }
    private var isWritable: Bool { context?.channel.isWritable ?? false }

    private func partnerBecameWritable() {
        if pendingRead {
            pendingRead = false
            context?.read()
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        partner?.partnerWrite(data)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        partner?.partnerFlush()
    }

    func channelInactive(context: ChannelHandlerContext) {
        partner?.partnerClose()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, case .inputClosed = event {
            partner?.partnerWriteEOF()
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        partner?.partnerClose()
        context.close(promise: nil)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            partner?.partnerBecameWritable()
        }
    }

    func read(context: ChannelHandlerContext) {
        if partner?.isWritable ?? false {
            context.read()
        } else {
            pendingRead = true
        }
    }
}

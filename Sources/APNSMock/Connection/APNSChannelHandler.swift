import APNSMockCore
import Logging
import NIOCore
import NIOExtras
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Moves bytes between a socket and an ``APNSConnection`` and turns NIO events into calls on it.
///
/// Back-pressure: output is produced only while the channel is writable, and reads are held back
/// while it is not. A client that stops reading therefore stops being read from once the socket's
/// send buffer and NIO's write watermark fill up, so the server never buffers without bound.
final class APNSChannelHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let connection: APNSConnection
    private let idleTimeout: TimeAmount
    private let handshakeTimeout: TimeAmount
    private let logger: Logger
    private var readHeldBack = false
    private var closing = false
    private var idleCheck: Scheduled<Void>?
    private var handshakeCheck: Scheduled<Void>?
    private var lastActivity = NIODeadline.now()
    private let onClose: (@Sendable () -> Void)?

    /// Output produced per turn before checking writability again.
    private static let outputBudget = 64 * 1024

    init(
        connection: APNSConnection, idleTimeout: TimeAmount, handshakeTimeout: TimeAmount,
        logger: Logger, onClose: (@Sendable () -> Void)? = nil
    ) {
        self.connection = connection
        self.idleTimeout = idleTimeout
        self.handshakeTimeout = handshakeTimeout
        self.logger = logger
        self.onClose = onClose
    }

    func handlerAdded(context: ChannelHandlerContext) {
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        let eventLoop = context.eventLoop
        // Delayed answers: a timer on this loop runs the connection's work, then writes what it
        // queued. The loop is never blocked while waiting.
        connection.schedule = { milliseconds, work in
            let task = NIOLoopBound(work, eventLoop: eventLoop)
            eventLoop.scheduleTask(in: .milliseconds(Int64(milliseconds))) {
                let (handler, context) = loopBound.value
                guard !handler.closing else { return }
                task.value()
                handler.writeOutput(context: context)
            }
        }
        handshakeCheck = context.eventLoop.scheduleTask(in: handshakeTimeout) {
            let (handler, context) = loopBound.value
            if !handler.connection.isHandshakeComplete {
                handler.logger.info("closing a connection that did not complete the TLS handshake in time")
                handler.close(context: context)
            }
        }
        scheduleIdleCheck(context: context, after: idleTimeout)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        connection.schedule = nil
        idleCheck?.cancel()
        handshakeCheck?.cancel()
    }

    func channelInactive(context: ChannelHandlerContext) {
        idleCheck?.cancel()
        handshakeCheck?.cancel()
        onClose?()
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        lastActivity = .now()
        connection.receive(buffer)
        writeOutput(context: context)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        context.flush()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            writeOutput(context: context)
            if readHeldBack {
                readHeldBack = false
                context.read()
            }
        }
        context.fireChannelWritabilityChanged()
    }

    func read(context: ChannelHandlerContext) {
        if context.channel.isWritable || closing {
            context.read()
        } else {
            readHeldBack = true
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is ChannelShouldQuiesceEvent {
            connection.beginGracefulClose(reason: .shutdown)
            writeOutput(context: context)
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        logger.debug("channel error", metadata: ["error": "\(error)"])
        close(context: context)
    }

    /// Produces output while the channel accepts it, then closes if the connection is done.
    private func writeOutput(context: ChannelHandlerContext) {
        if let abort = connection.abortRequested {
            // A `close` or `tcp-reset` fault: the connection ends without TLS close_notify or
            // GOAWAY; with SO_LINGER 0 the kernel resets it (RST) instead of closing it (FIN).
            guard !closing else { return }
            closing = true
            if abort == .reset, let socket = context.channel as? SocketOptionProvider {
                let channel = context.channel
                socket.setSoLinger(linger(l_onoff: 1, l_linger: 0)).whenComplete { _ in
                    channel.close(promise: nil)
                }
            } else {
                context.close(promise: nil)
            }
            return
        }
        var wrote = false
        while context.channel.isWritable {
            var buffer = context.channel.allocator.buffer(capacity: 0)
            let more = connection.produceOutput(into: &buffer, budget: Self.outputBudget)
            if buffer.readableBytes > 0 {
                context.write(wrapOutboundOut(buffer), promise: nil)
                wrote = true
            }
            if !more { break }
            context.flush()
            wrote = false
        }
        if wrote {
            context.flush()
        }
        if connection.isFinished {
            close(context: context)
        }
    }

    /// Closes once everything written so far has been flushed to the socket.
    private func close(context: ChannelHandlerContext) {
        guard !closing else { return }
        closing = true
        let channel = context.channel
        let promise = context.eventLoop.makePromise(of: Void.self)
        var buffer = channel.allocator.buffer(capacity: 0)
        connection.produceOutput(into: &buffer, budget: Self.outputBudget)
        context.writeAndFlush(wrapOutboundOut(buffer), promise: promise)
        promise.futureResult.whenComplete { _ in
            channel.close(promise: nil)
        }
    }

    private func scheduleIdleCheck(context: ChannelHandlerContext, after delay: TimeAmount) {
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        idleCheck = context.eventLoop.scheduleTask(in: delay) {
            let (handler, context) = loopBound.value
            handler.checkIdle(context: context)
        }
    }

    private func checkIdle(context: ChannelHandlerContext) {
        guard !closing else { return }
        let idleFor = NIODeadline.now() - lastActivity
        if idleFor >= idleTimeout, connection.openStreamCount == 0 {
            logger.debug("idle timeout")
            connection.beginGracefulClose(reason: .idleTimeout)
            writeOutput(context: context)
            // A client that does not answer the GOAWAY is not waited for.
            close(context: context)
        } else {
            scheduleIdleCheck(context: context, after: max(idleTimeout - idleFor, .milliseconds(10)))
        }
    }
}

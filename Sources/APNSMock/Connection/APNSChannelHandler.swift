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
    private let timeouts: ConnectionTimeouts
    private let logger: Logger
    private var readHeldBack = false
    private var closing = false
    /// The connection's one timer: the handshake deadline first, then the housekeeping check
    /// (idle timeout, stuck streams). Never more than one is scheduled.
    private var check: Scheduled<Void>?
    private var checkDeadline = NIODeadline.distantFuture
    private var lastActivity = NIODeadline.now()
    private var handshakeDeadline = NIODeadline.distantFuture
    private let onClose: (@Sendable () -> Void)?
    /// Told when the connection gives its TLS buffers back, so that the heap they leave is trimmed.
    private let memory: MemoryReturn?

    /// Output produced per turn before checking writability again.
    private static let outputBudget = 64 * 1024
    /// How long a connection being closed gets to flush its last frames (a GOAWAY, a TLS alert)
    /// before it is closed anyway: a client that does not read must not keep it open.
    static let closeGrace: TimeAmount = .seconds(2)

    init(
        connection: APNSConnection, timeouts: ConnectionTimeouts, logger: Logger, memory: MemoryReturn? = nil,
        onClose: (@Sendable () -> Void)? = nil
    ) {
        self.connection = connection
        self.timeouts = timeouts
        self.logger = logger
        self.memory = memory
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
        // Fault claims: the shared state's answer comes back on this loop; the request is settled
        // and recorded even when the connection is closing (its answer then is not written).
        connection.claimWaiter = { claim, then in
            claim(eventLoop).hop(to: eventLoop).assumeIsolated().whenComplete { result in
                let (handler, context) = loopBound.value
                let granted: Bool? = switch result {
                case .success(let granted): granted
                case .failure: nil
                }
                then(granted, !handler.closing)
                if !handler.closing { handler.writeOutput(context: context) }
            }
        }
        handshakeDeadline = .now() + timeouts.handshake
        scheduleCheck(context: context, at: min(handshakeDeadline, lastActivity + timeouts.idle))
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        connection.schedule = nil
        connection.claimWaiter = nil
        check?.cancel()
    }

    func channelInactive(context: ChannelHandlerContext) {
        check?.cancel()
        closing = true
        onClose?()
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // A connection closing gracefully reads what the client still sends and drops it.
        if closing { return }
        let buffer = unwrapInboundIn(data)
        let now = NIODeadline.now()
        lastActivity = now
        connection.receive(buffer)
        writeOutput(context: context)
        // A stream left open (waiting for its body, its answer or the client's window) is looked
        // at within one check interval; the idle deadline alone may be an hour away.
        if connection.openStreamCount > 0, checkDeadline > now + timeouts.checkInterval, connection.isReadyForRequests {
            scheduleCheck(context: context, at: now + timeouts.checkInterval)
        } else if connection.holdsTLSBuffers, checkDeadline > now + Self.quietRelease {
            // Its TLS buffers are given back once it has been quiet for a while (housekeeping).
            scheduleCheck(context: context, at: now + Self.quietRelease)
        }
    }

    /// How long a connection must be quiet (no read, no open stream, nothing to send) before its
    /// TLS buffers are given back. Not at once: a client with one request in flight is quiet
    /// between every request and the next, and giving the buffers back and taking them again per
    /// request cost about 3,200 instructions each time (the instruction gate's `-m 1` load).
    static let quietRelease = TimeAmount.seconds(1)

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
            connection.beginGracefulClose(reason: .shutdown, cause: .shutdown)
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

    /// Closes once everything written so far has been flushed to the socket, or after
    /// ``closeGrace`` if the client does not take it.
    private func close(context: ChannelHandlerContext) {
        guard !closing else { return }
        closing = true
        check?.cancel()
        let channel = context.channel
        guard channel.isActive else {
            // Already closed (the event loops closing every channel at the end of a shutdown):
            // nothing to flush, and no timer may be scheduled on a loop that is going away.
            channel.close(promise: nil)
            return
        }
        let promise = context.eventLoop.makePromise(of: Void.self)
        var buffer = channel.allocator.buffer(capacity: 0)
        connection.produceOutput(into: &buffer, budget: Self.outputBudget)
        context.writeAndFlush(wrapOutboundOut(buffer), promise: promise)
        let forced = context.eventLoop.scheduleTask(in: Self.closeGrace) {
            channel.close(promise: nil)
        }
        promise.futureResult.whenComplete { result in
            guard case .success = result else {
                forced.cancel()
                channel.close(promise: nil)
                return
            }
            // Everything is out (the GOAWAY, TLS close_notify): the output is shut (FIN), and what
            // the client still sends is read and dropped until it closes too, or the grace ends.
            // Closing with unread input would make the kernel reset the connection (RST), and a
            // client still writing would get ECONNRESET, maybe before it read the GOAWAY.
            channel.close(mode: .output, promise: nil)
        }
    }

    /// Ends the connection for a timeout: GOAWAY `{"reason":"IdleTimeout"}` when HTTP/2 is up,
    /// then close without waiting for in-flight streams (the stuck ones would never finish).
    private func end(context: ChannelHandlerContext, _ message: Logger.Message) {
        logger.info(message)
        connection.beginGracefulClose(reason: .idleTimeout, cause: .idle)
        writeOutput(context: context)
        close(context: context)
    }

    private func scheduleCheck(context: ChannelHandlerContext, at deadline: NIODeadline) {
        check?.cancel()
        guard !closing else { return }
        checkDeadline = deadline
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        check = context.eventLoop.scheduleTask(deadline: deadline) {
            let (handler, context) = loopBound.value
            handler.housekeeping(context: context)
        }
    }

    /// The connection's timer: the handshake deadline, stuck streams, the idle timeout. Always
    /// schedules its next run at least a check interval ahead, so it never spins.
    private func housekeeping(context: ChannelHandlerContext) {
        guard !closing else { return }
        let now = NIODeadline.now()
        let ready = connection.isReadyForRequests
        if !ready, now >= handshakeDeadline {
            // Still in the TLS handshake, or waiting for the HTTP/2 preface, past handshakeTimeout.
            end(context: context, "closing a connection that did not complete the TLS handshake and HTTP/2 preface in time")
            return
        }
        let inspection = connection.inspectStreams(
            now: now.uptimeNanoseconds, receiving: timeouts.request.nanosecondsUInt64,
            answering: timeouts.response.nanosecondsUInt64)
        if let phase = inspection.stuck {
            end(
                context: context,
                phase == .receiving || phase == .discarding
                    ? "closing a connection with a request that did not arrive within requestTimeout"
                    : "closing a connection with a response the client did not take within responseTimeout")
            return
        }
        let idleDeadline = lastActivity + timeouts.idle
        if now >= idleDeadline, inspection.exempt == 0 {
            logger.debug("idle timeout")
            connection.beginGracefulClose(reason: .idleTimeout, cause: .idle)
            writeOutput(context: context)
            // A client that does not answer the GOAWAY is not waited for.
            close(context: context)
            return
        }
        if connection.holdsTLSBuffers, now >= lastActivity + Self.quietRelease, connection.releaseBuffersIfQuiet() {
            memory?.buffersReleased()
        }
        var next = ready ? idleDeadline : min(idleDeadline, handshakeDeadline)
        if connection.holdsTLSBuffers {
            // Still busy, or not quiet for long enough: looked at again when it may be.
            next = min(next, max(lastActivity + Self.quietRelease, now + .milliseconds(50)))
        }
        if connection.openStreamCount > 0 || next <= now {
            next = min(next, now + timeouts.checkInterval)
            if next <= now { next = now + timeouts.checkInterval }
        }
        scheduleCheck(context: context, at: next)
    }
}

/// The timeouts of one APNs-listener connection (docs/architecture.md, "Limits and defences").
struct ConnectionTimeouts: Sendable {
    /// TLS handshake plus the client's HTTP/2 preface and SETTINGS.
    var handshake: TimeAmount
    /// No bytes from the client (and no answer held back on purpose) for this long.
    var idle: TimeAmount
    /// A request's HEADERS and body, from its first HEADERS frame.
    var request: TimeAmount
    /// A response the client does not take.
    var response: TimeAmount

    /// How often open streams are looked at: a quarter of the shorter stream timeout, between
    /// 50 ms and 5 s. Busy connections pay one scan of their open streams per interval.
    let checkInterval: TimeAmount

    init(_ configuration: ServerConfiguration) {
        handshake = configuration.handshakeTimeout
        idle = configuration.idleTimeout
        request = configuration.requestTimeout
        response = configuration.responseTimeout
        let quarter = min(request, response).nanoseconds / 4
        checkInterval = .nanoseconds(Swift.min(Swift.max(quarter, 50_000_000), 5_000_000_000))
    }
}

extension TimeAmount {
    fileprivate var nanosecondsUInt64: UInt64 { UInt64(clamping: nanoseconds) }
}

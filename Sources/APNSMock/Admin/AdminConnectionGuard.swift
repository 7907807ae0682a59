import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTPTypes
import Synchronization

/// The admin listener's timeouts (docs/architecture.md, "Limits and defences").
struct AdminTimeouts: Sendable {
    /// A connection with no request in progress is closed after this.
    var idle: TimeAmount
    /// A request (head and body) must arrive within this, counted from its first byte.
    var request: TimeAmount
    /// A response (not an event stream) must be written out within this of its head.
    var response: TimeAmount

    init(_ settings: AdminSettings) {
        idle = settings.idleTimeout
        request = settings.requestTimeout
        response = settings.responseTimeout
    }
}

/// Hummingbird's HTTP/1.1 child channel with the admin listener's defences around it: the
/// connection limit (a connection past it is closed at once with a reset) and the timeouts of
/// ``AdminTimeouts``, which close the connection. Hummingbird itself only offers an idle timeout
/// that a client sending a request slowly, or never reading its answer, would not meet.
struct GuardedHTTP1Channel: ServerChildChannel {
    typealias Value = HTTP1Channel.Value

    let inner: HTTP1Channel
    let limiter: ConnectionLimiter
    let timeouts: AdminTimeouts

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        let admitted = limiter.admit()
        // Event streams write one small record at a time: without TCP_NODELAY (at the TCP level)
        // Nagle's algorithm would hold each behind the last one's ACK.
        do {
            try channel.syncOptions?.setOption(.tcpOption(.tcp_nodelay), value: 1)
        } catch {
            logger.debug("TCP_NODELAY not set on an admin connection", metadata: ["error": "\(error)"])
        }
        // Hummingbird's pipeline, but answering requests that ask to upgrade over HTTP/1.1 and
        // keeping their connection usable (``IgnoredUpgradeHandler``).
        return AdminHTTP1Pipeline.setup(channel: channel, configuration: inner.configuration, logger: logger).flatMapThrowing { value in
            guard admitted else {
                try ConnectionLimiter.refuse(channel)
                return value
            }
            let clock = AdminConnectionClock(channel: channel, timeouts: timeouts, logger: logger)
            let pipeline = channel.pipeline.syncOperations
            // Bytes first, before the HTTP decoder: a request starts with its first byte.
            try pipeline.addHandler(AdminBytesWatcher(clock: clock, peer: AdminPeer()), position: .first)
            // Request and response parts, after the decoder (where Hummingbird keeps its own
            // connection-state handler).
            let state = try pipeline.handler(type: HTTPConnectionStateHandler.self)
            try pipeline.addHandler(AdminPartsWatcher(clock: clock, memory: self.limiter.memory), position: .before(state))
            // Last, once nothing above can throw: the error path below releases otherwise.
            let limiter = self.limiter
            channel.closeFuture.whenComplete { _ in limiter.release() }
            return value
        }.flatMapErrorThrowing { error in
            if admitted { limiter.release() }
            throw error
        }
    }

    func handle(value: Value, logger: Logger) async {
        // The connection's AdminPeer, for the responses (event streams) that must stop when the
        // client goes rather than at their next write.
        let peer = try? await value.channel.pipeline.handler(type: AdminBytesWatcher.self).map(\.peer).get()
        await AdminPeer.$current.withValue(peer) {
            await inner.handle(value: value, logger: logger)
        }
    }
}

/// Where an admin connection is between requests, and its one timer. Confined to the
/// connection's event loop.
final class AdminConnectionClock {
    enum Phase {
        /// Between requests: the idle timeout runs.
        case idle
        /// A request's bytes have begun: the request timeout runs until its end.
        case receiving
        /// The request is complete and being handled (a wait may take minutes): no timer.
        case handling
        /// The response is being written: the response timeout runs from its head until it is
        /// out, except for an event stream, which goes on for as long as its client reads and
        /// bounds what it buffers itself.
        case responding
    }

    private(set) var phase = Phase.idle
    /// The response being written is an event stream (`text/event-stream`), whose writer bounds
    /// what it buffers itself (it skips records for a client that falls behind): not timed.
    var streaming = false
    private var timer: Scheduled<Void>?
    private let channel: Channel
    private let timeouts: AdminTimeouts
    private let logger: Logger

    init(channel: Channel, timeouts: AdminTimeouts, logger: Logger) {
        self.channel = channel
        self.timeouts = timeouts
        self.logger = logger
        enter(.idle)
    }

    func enter(_ phase: Phase) {
        self.phase = phase
        stop()
        let limit: (TimeAmount, String)?
        switch phase {
        case .idle: limit = (timeouts.idle, "admin.idleTimeout")
        case .receiving: limit = (timeouts.request, "admin.requestTimeout")
        case .handling: limit = nil
        case .responding: limit = streaming ? nil : (timeouts.response, "admin.responseTimeout")
        }
        guard let (amount, setting) = limit else { return }
        let channel = self.channel
        let logger = self.logger
        timer = channel.eventLoop.scheduleTask(in: amount) {
            logger.debug("closing an admin connection", metadata: ["timeout": "\(setting)"])
            channel.close(promise: nil)
        }
    }

    func stop() {
        timer?.cancel()
        timer = nil
    }
}

/// Whether an admin connection's client has gone: its input closed (the listener allows half
/// closure, so a client's close is first an end of input) or the connection closed. An event
/// stream waits for records, not for the socket, and would notice only at its next write (up to a
/// keep-alive later) while holding one of the 64 stream places; it asks to be woken instead.
final class AdminPeer: Sendable {
    private struct State {
        var gone = false
        var onGone: (@Sendable () -> Void)?
    }

    private let state = Mutex(State())

    /// The peer of the connection whose request the current task is handling.
    @TaskLocal static var current: AdminPeer?

    var isGone: Bool { state.withLock(\.gone) }

    /// Runs `action` once when the client goes (at once if it has); replaces the previous action.
    /// One response at a time is written on an HTTP/1 connection, so one slot is enough.
    func whenGone(_ action: (@Sendable () -> Void)?) {
        let runNow = state.withLock { state -> Bool in
            if state.gone { return true }
            state.onGone = action
            return false
        }
        if runNow { action?() }
    }

    func markGone() {
        state.withLock { state -> (@Sendable () -> Void)? in
            guard !state.gone else { return nil }
            state.gone = true
            defer { state.onGone = nil }
            return state.onGone
        }?()
    }
}

/// Sees the raw bytes: the first byte of a request starts the request timeout; the end of input
/// or of the connection marks the peer gone.
private final class AdminBytesWatcher: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    let clock: AdminConnectionClock
    let peer: AdminPeer

    init(clock: AdminConnectionClock, peer: AdminPeer) {
        self.clock = clock
        self.peer = peer
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, event == .inputClosed {
            peer.markGone()
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if clock.phase == .idle {
            clock.enter(.receiving)
        }
        context.fireChannelRead(data)
    }

    func channelInactive(context: ChannelHandlerContext) {
        clock.stop()
        peer.markGone()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        clock.stop()
        peer.markGone()
    }
}

/// Sees decoded request parts and the response parts written: a request's end stops the
/// request timeout, a response's head starts the response timeout (not for an event stream), and
/// the flushed end of the last response started begins the idle one.
private final class AdminPartsWatcher: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart
    let clock: AdminConnectionClock
    /// Body bytes of the responses being written; a large one asks for freed memory to be
    /// returned once it is out (or dropped with its connection).
    private var bodyBytes = 0
    /// Responses whose head was written and whose end is not out yet (more than one when a client
    /// pipelines requests): the connection is idle again only when none is left.
    private var responsesOpen = 0

    private let memory: MemoryReturn

    init(clock: AdminConnectionClock, memory: MemoryReturn) {
        self.clock = clock
        self.memory = memory
    }

    private func responseReleased() {
        if bodyBytes >= MemoryReturn.largeResponse {
            memory.largeResponseReleased()
        }
        bodyBytes = 0
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        responseReleased()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head:
            // A pipelined request decoded from bytes that arrived earlier.
            if clock.phase == .idle { clock.enter(.receiving) }
        case .body:
            break
        case .end:
            if clock.phase == .receiving { clock.enter(.handling) }
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head(let head):
            let streaming = head.headerFields[.contentType]?.hasPrefix("text/event-stream") ?? false
            responsesOpen += 1
            // An event stream behind a response still going out keeps that response's timer.
            if !(streaming && responsesOpen > 1) {
                clock.streaming = streaming
                clock.enter(.responding)
            }
            context.write(data, promise: promise)
        case .body(let buffer):
            bodyBytes += buffer.readableBytes
            context.write(data, promise: promise)
        case .end:
            let written = promise ?? context.eventLoop.makePromise()
            let watcher = NIOLoopBound(self, eventLoop: context.eventLoop)
            written.futureResult.whenComplete { result in
                let watcher = watcher.value
                watcher.responsesOpen = max(0, watcher.responsesOpen - 1)
                guard watcher.responsesOpen == 0 else { return }
                watcher.responseReleased()
                if case .success = result, watcher.clock.phase == .responding {
                    watcher.clock.enter(.idle)
                }
            }
            context.write(data, promise: written)
        }
    }

}

import Logging
import NIOCore
import NIOPosix
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

internal import CAPNSMockShims

/// A listener's connection limit as the admin and proxy listeners keep it: connections past it are closed
/// at once with a TCP reset, and the refusals are logged (docs/architecture.md, "Limits and
/// defences"). The TLS listeners count against one shared limit in ``ConnectionRegistry``.
///
/// The count is taken when a connection is set up and given back when it closes, on whichever
/// event loop that happens; a compare-and-exchange keeps it exact across loops.
final class ConnectionLimiter: Sendable {
    let limit: Int
    let refusals: RefusalLog
    /// The mock's memory return, told of every connection let in and closed.
    let memory: MemoryReturn
    private let open = Atomic<Int>(0)

    init(listener: String, limit: Int, setting: String, memory: MemoryReturn, logger: Logger) {
        self.limit = max(1, limit)
        self.memory = memory
        self.refusals = RefusalLog(listener: listener, limit: self.limit, setting: setting, logger: logger)
    }

    /// Counts a new connection in, or returns false (and notes the refusal) at the limit.
    func admit() -> Bool {
        guard open.increment(below: limit) else {
            refusals.note()
            return false
        }
        memory.connectionOpened()
        return true
    }

    /// Gives back the count of a connection ``admit()`` let in.
    func release() {
        open.subtract(1, ordering: .relaxed)
        memory.connectionClosed()
    }

    /// Closes a connection the limit refused, with a reset (SO_LINGER 0) so that the client
    /// learns at once and the server keeps no TIME_WAIT state, as soon as it is registered.
    static func refuse(_ channel: Channel) throws {
        try channel.pipeline.syncOperations.addHandler(RefuseConnectionHandler())
    }
}

/// A warning that may be due many times a second (a refused connection, a connection that could
/// not be set up): the first is logged at once, then at most one every ``reportInterval``, with
/// how many happened since the last one logged. Safe from any event loop.
final class ThrottledWarning: Sendable {
    private let message: Logger.Message
    private let logger: Logger
    private let state = Mutex(State())

    private struct State {
        var count: UInt64 = 0
        var reported: UInt64 = 0
        var lastReport: NIODeadline?
        /// Occurrences came after the last report: a report is due when its interval ends.
        var flushScheduled = false
        var pendingMetadata: Logger.Metadata = [:]
    }

    static let reportInterval: TimeAmount = .seconds(10)
    private let interval: TimeAmount

    init(_ message: Logger.Message, logger: Logger, interval: TimeAmount = ThrottledWarning.reportInterval) {
        self.message = message
        self.logger = logger
        self.interval = interval
    }

    /// Occurrences so far.
    var count: UInt64 { state.withLock { $0.count } }

    /// Counts one occurrence. The first after a quiet interval is logged at once (`"count": 1`);
    /// the ones after it within ``reportInterval`` are counted and logged together when that
    /// interval ends (not at the next occurrence, which may never come).
    func note(_ metadata: @autoclosure () -> Logger.Metadata) {
        let now = NIODeadline.now()
        enum Step { case report(UInt64), schedule(TimeAmount), nothing }
        let step: Step = state.withLock { state in
            state.count += 1
            if let last = state.lastReport, now - last < interval {
                guard !state.flushScheduled else { return .nothing }
                state.flushScheduled = true
                state.pendingMetadata = metadata()
                return .schedule(interval - (now - last))
            }
            state.lastReport = now
            defer { state.reported = state.count }
            return .report(state.count - state.reported)
        }
        switch step {
        case .report(let count):
            var fields = metadata()
            fields["count"] = "\(count)"
            logger.warning(message, metadata: fields)
        case .schedule(let delay):
            // NIO's shared loop, not a Task: it fires on time whatever the concurrency pool does.
            MultiThreadedEventLoopGroup.singleton.next().scheduleTask(in: delay) { [self] in flush() }
        case .nothing:
            break
        }
    }

    /// Logs what was counted since the last report (the end of an interval).
    private func flush() {
        let (count, metadata) = state.withLock { state -> (UInt64, Logger.Metadata) in
            state.flushScheduled = false
            let count = state.count - state.reported
            state.reported = state.count
            if count > 0 { state.lastReport = NIODeadline.now() }
            return (count, state.pendingMetadata)
        }
        guard count > 0 else { return }
        var fields = metadata
        fields["count"] = "\(count)"
        logger.warning(message, metadata: fields)
    }
}

/// Logs a listener's refused connections (``ThrottledWarning``), naming the listener, the limit
/// and the setting that raises it.
final class RefusalLog: Sendable {
    let listener: String
    let limit: Int
    /// The configuration field that sets ``limit``.
    let setting: String
    private let warning: ThrottledWarning

    init(listener: String, limit: Int, setting: String, logger: Logger) {
        self.listener = listener
        self.limit = limit
        self.setting = setting
        self.warning = ThrottledWarning("connection limit reached: new connections are closed at once", logger: logger)
    }

    func note() {
        warning.note(["listener": "\(listener)", "limit": "\(limit)", "setting": "\(setting)"])
    }
}

/// Logs the connections a listener accepted but could not set up, which NIO closes at once: a
/// socket option the kernel refused, a pipeline handler that failed to initialise. Without it the
/// client sees its connection closed before the TLS handshake and the server says nothing (as
/// when `TCP_NODELAY` was set at the socket level, where option 1 is `SO_DEBUG`, which needs
/// CAP_NET_ADMIN: every connection of an unprivileged server was dropped in silence).
///
/// It goes last in the listening channel's pipeline, after NIO's accept handler, which reports a
/// failed set-up there as an error (``install(on:listener:logger:)``). Accept errors that
/// ``AcceptPauseHandler`` does not handle reach it as well.
final class SetupFailureLog: ChannelInboundHandler, Sendable {
    typealias InboundIn = NIOAny

    private let listener: String
    private let warning: ThrottledWarning

    init(listener: String, logger: Logger) {
        self.listener = listener
        self.warning = ThrottledWarning("a connection was closed because it could not be set up", logger: logger)
    }

    /// Failures so far.
    var count: UInt64 { warning.count }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        warning.note(["listener": "\(listener)", "error": "\(error)"])
    }

    /// Appends a log to a bound listening channel, behind NIO's accept handler.
    @discardableResult
    static func install(on channel: any Channel, listener: String, logger: Logger) async throws -> SetupFailureLog {
        let log = SetupFailureLog(listener: listener, logger: logger)
        try await channel.pipeline.addHandler(log).get()
        return log
    }
}

/// Closes its channel with a TCP reset as soon as it becomes active.
private final class RefuseConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = NIOAny

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { refuse(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        refuse(context)
    }

    private func refuse(_ context: ChannelHandlerContext) {
        let channel = context.channel
        guard let socket = channel as? SocketOptionProvider else {
            channel.close(promise: nil)
            return
        }
        socket.setSoLinger(linger(l_onoff: 1, l_linger: 0)).whenComplete { _ in
            channel.close(promise: nil)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {}
}

/// Accept back-off for a listener: when `accept` fails for want of a resource (descriptors,
/// kernel buffers), the listener stops accepting for ``delay`` instead of retrying at once (which
/// would spin a core on `accept4` → EMFILE while the shortage lasts).
///
/// NIO's own `AcceptBackoffHandler` does not stop that loop: when the first `accept` of a read
/// fails, the channel's read stays pending and it stays registered for readability, so the
/// level-triggered poll wakes it again at once and its delayed `read()` is never asked for. This
/// handler switches `autoRead` off instead, which unregisters the listening socket, and back on
/// after the pause. Connections wait in the kernel's backlog meanwhile. Runs on the listener's
/// event loop.
final class AcceptPauseHandler: ChannelInboundHandler {
    typealias InboundIn = NIOAny

    /// Pause after a failed accept.
    static let delay: TimeAmount = .milliseconds(100)

    private let listener: String
    private let logger: Logger
    private var resume: Scheduled<Void>?
    private var lastReport: NIODeadline?
    private var failures = 0

    init(listener: String, logger: Logger) {
        self.listener = listener
        self.logger = logger
    }

    /// The errors worth pausing for: NIO keeps the listener open on exactly these.
    static func isResourceShortage(_ error: any Error) -> Bool {
        guard let error = error as? IOError else { return false }
        switch error.errnoCode {
        case EMFILE, ENFILE, ENOBUFS, ENOMEM: return true
        default: return false
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard Self.isResourceShortage(error) else {
            context.fireErrorCaught(error)
            return
        }
        failures += 1
        let now = NIODeadline.now()
        if lastReport.map({ now - $0 >= ThrottledWarning.reportInterval }) ?? true {
            lastReport = now
            logger.warning(
                "accept failed: pausing the listener",
                metadata: [
                    "listener": "\(listener)", "error": "\(error)", "pause": "\(Self.delay)", "failures": "\(failures)",
                ])
            failures = 0
        }
        guard resume == nil, let options = context.channel.syncOptions else { return }
        try? options.setOption(.autoRead, value: false)
        let channel = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        resume = context.eventLoop.scheduleTask(in: Self.delay) {
            let (handler, context) = channel.value
            handler.resume = nil
            try? context.channel.syncOptions?.setOption(.autoRead, value: true)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        resume?.cancel()
        resume = nil
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        resume?.cancel()
        resume = nil
    }
}

/// Gives freed heap memory back to the system after a burst of connections.
///
/// Each connection holds TLS and HTTP/2 buffers; when a burst of them closes, glibc's allocator
/// keeps the freed pages in its arenas, so the process stays at its peak size. Once the open count
/// falls to a quarter of the peak since the last trim (and the peak was a burst), a
/// `malloc_trim(0)` runs a second later, at most once per ``minimumInterval``.
///
/// One per mock (``MockState/memory``), so that two mocks in one process (tests) count only their
/// own connections; the trim itself is process-wide, as the allocator is.
final class MemoryReturn: Sendable {
    /// A peak below this is not a burst worth trimming after.
    static let burst = 64
    static let minimumInterval: TimeAmount = .seconds(10)
    static let settleDelay: TimeAmount = .seconds(1)

    private struct State {
        var open = 0
        var peak = 0
        var pending = false
        var lastTrim: NIODeadline?
        /// Quiet connections that gave their TLS buffers back since the last trim was due.
        var releasedBuffers = 0
    }

    private let state = Mutex(State())
    /// Called when a listener lets a connection in (``ConnectionLimiter/admit()``, or
    /// `bindTLSListener` for the TLS listeners).
    func connectionOpened() {
        state.withLock { state in
            state.open += 1
            state.peak = max(state.peak, state.open)
        }
    }

    /// Called when such a connection closed.
    func connectionClosed() {
        scheduleTrim { state in
            state.open = max(0, state.open - 1)
            return state.peak >= Self.burst && state.open * 4 <= state.peak
        }
    }

    /// A quiet connection gave its TLS buffers back (about 64 kB). Freed in the heap between the
    /// live allocations of idle connections, they stay resident until a trim: after ``burst`` of
    /// them one follows, as after a burst of connections.
    func buffersReleased() {
        scheduleTrim { state in
            state.releasedBuffers += 1
            guard state.releasedBuffers >= Self.burst else { return false }
            state.releasedBuffers = 0
            return true
        }
    }

    /// A response of at least ``largeResponse`` bytes (an admin page of big records) was written
    /// out or dropped: its buffers are free, and a trim follows like after a burst.
    func largeResponseReleased() {
        scheduleTrim { _ in true }
    }

    /// Updates the state with `due` and, when it says a trim is due and none is pending, schedules
    /// one after ``settleDelay`` but no sooner than ``minimumInterval`` after the last.
    private func scheduleTrim(_ due: (inout State) -> Bool) {
        let now = NIODeadline.now()
        let delay: TimeAmount? = state.withLock { state in
            guard due(&state), !state.pending else { return nil }
            state.pending = true
            guard let last = state.lastTrim, now - last < Self.minimumInterval else { return Self.settleDelay }
            return max(Self.settleDelay, Self.minimumInterval - (now - last))
        }
        if let delay {
            MultiThreadedEventLoopGroup.singleton.next().scheduleTask(in: delay) { self.trim() }
        }
    }

    /// Responses this large leave enough freed heap behind to be worth a trim.
    static let largeResponse = 8 << 20

    private func trim() {
        state.withLock { state in
            state.pending = false
            state.lastTrim = .now()
            state.peak = state.open
        }
        _ = CAPNSMockShims_release_free_memory()
    }
}

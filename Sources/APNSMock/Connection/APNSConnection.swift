import APNSMockCore
import Logging
import NIOCore

/// One client connection as a sans-I/O state machine: ciphertext in, ciphertext out.
///
/// It owns the connection's TLS object and, once the handshake completes, its HTTP/2 session; hands
/// each complete request to the API its listener's ``ListenerRoutes`` pick; and alone carries out
/// the ``Effects`` an API returns (the answer, RST_STREAM, GOAWAY, SETTINGS, a delay, a held
/// stream, the end of the connection, withheld PINGs). Nothing here touches a socket; time is read
/// only through the mock's ``MockClock`` by the APIs. The NIO handler (``APNSChannelHandler``)
/// moves bytes between it and the network, and turns timers and shutdown into calls.
final class APNSConnection {
    enum State {
        case handshaking
        case open(HTTP2Session)
        /// Nothing more will be read; pending output is flushed, then the connection closes.
        case closing
    }

    /// How the connection ended, for the log.
    enum CloseCause: Equatable {
        case handshakeFailed(String)
        case refusedALPN
        case protocolError(String)
        case peerClosed
        case drained
    }

    let id: UInt64
    private let tls: TLSConnection
    private let settings: HTTP2Settings
    private let routes: ListenerRoutes
    private var logger: Logger
    private(set) var state: State = .handshaking
    /// Runs work on the connection's event loop after a delay, then flushes output; set by the
    /// channel handler. Delayed answers (fault `delayMs`) need it; without it they go out at once.
    var schedule: ((_ milliseconds: Int, _ work: @escaping () -> Void) -> Void)?
    /// Waits for a fault rule's claim in the shared state: calls `claim` with the connection's
    /// event loop, and once its future completes, `then` on that loop with its answer (`nil` when
    /// it failed) and whether the connection can still send, then flushes output; set by the
    /// channel handler. Without it a claimed rule counts down in this process alone.
    var claimWaiter: ClaimWaiter?
    typealias ClaimWaiter = (
        _ claim: (any EventLoop) -> EventLoopFuture<Bool?>, _ then: @escaping (_ granted: Bool?, _ deliverable: Bool) -> Void
    ) -> Void
    /// How a fault ends the TCP connection: the handler drops it without flushing.
    enum Abort {
        /// `close`: FIN, no TLS close_notify, no GOAWAY.
        case close
        /// `tcp-reset`: RST (SO_LINGER 0).
        case reset
    }

    /// Set by a `close` or `tcp-reset` fault.
    private(set) var abortRequested: Abort?
    /// Why this side queued the GOAWAY that goes out next (`nil`: nghttp2 queued it, for a
    /// protocol error or as a defence), with its debug data for the log and the events.
    private var goAwayCause: (cause: GoAwayCause, debugData: String)?
    /// A `goaway` fault with `keepOpen`: the connection does not close once its streams are done.
    private var keepsOpenAfterGoAway = false
    /// The MAX_CONCURRENT_STREAMS the connection advertises now, and what it returns to after a
    /// fault or a rejection lowered it.
    private var streamLimit: UInt32 = 0
    private var normalStreamLimit: UInt32 = 0
    /// Streams this connection holds unanswered (`hang`), counted in ``MockState/heldStreams``.
    private var heldStreams = 0
    /// Streams refused during the current read, by cause: told once per read (a client opening a
    /// hundred streams before it reads SETTINGS has them refused in one burst).
    private var refusedInRead: [RefusedStreamsNotice] = []
    /// When refused streams were last logged: at most one line per ``refusalLogInterval``.
    private var lastRefusalLog: NIODeadline?
    static let refusalLogInterval: TimeAmount = .seconds(10)
    // Read, and for the request state borrowed `inout`, by every request while deciding and
    // recording calls into other types: the compiler cannot prove those calls leave the properties
    // alone, so it would check each access at run time. Only this connection's event loop touches
    // them, and nothing reached from deciding or recording holds the connection, so the accesses
    // never overlap; the per-request checks are skipped. Measured: with the checks, paired A/Bs of
    // 25 rounds read 1.000 and 1.026 of the CPU per request, aggregates +0.8% both times; holding
    // both in a small generic class with the opt-out (in the core's memory helpers) read 1.028,
    // +2.3% in aggregate (15 rounds, nanosecond CPU accounting).
    @exclusivity(unchecked) private var context: ConnectionContext
    @exclusivity(unchecked) private var requestState: ConnectionMemo

    /// Apple's connection penalty (`server.errorDisconnect`), and the error answers counted so far.
    private let errorDisconnect: Configuration.Server.ErrorDisconnect?
    private var errorCount = 0

    init(
        id: UInt64, tlsContext: TLSContext, settings: HTTP2Settings, routes: ListenerRoutes, logger: Logger,
        errorDisconnect: Configuration.Server.ErrorDisconnect? = nil
    ) throws {
        self.id = id
        self.errorDisconnect = errorDisconnect
        self.tls = try TLSConnection(context: tlsContext)
        self.settings = settings
        self.routes = routes
        // Logs, records and fault rules name a connection by one number: its number since start or
        // the last reset (`match.connection` counts the same way).
        let number = routes.state.connectionNumber(of: id)
        self.logger = logger
        self.logger[metadataKey: "connection"] = "\(number)"
        self.context = ConnectionContext(connectionID: id, connectionNumber: number, sniEnvironment: nil)
        self.requestState = ConnectionMemo(state: routes.state)
    }

    deinit {
        // Held streams of a connection that went away no longer count against the cap.
        if heldStreams > 0 { routes.state.releaseHeldStreams(heldStreams) }
        // The connection counted in its team's connections while it was bound to it.
        (requestState.auth.binding?.space ?? requestState.auth.certificateSpace)?.connectionClosed()
    }

    /// True once the connection has nothing left to do but flush its output and close.
    var isFinished: Bool {
        if case .closing = state { return true }
        return false
    }

    var isHandshakeComplete: Bool { tls.isHandshakeComplete }

    /// Requests still being answered.
    var openStreamCount: Int {
        if case .open(let session) = state { return session.openStreamCount }
        return 0
    }

    /// True once TLS is up and the client's HTTP/2 preface and SETTINGS arrived.
    var isReadyForRequests: Bool {
        if case .open(let session) = state { return session.receivedPreface }
        return false
    }

    /// The stuck-stream check: see ``StreamPool/inspect(now:receiving:answering:)``.
    func inspectStreams(now: UInt64, receiving: UInt64, answering: UInt64) -> StreamPool.Inspection {
        if case .open(let session) = state {
            return session.inspectStreams(now: now, receiving: receiving, answering: answering)
        }
        return StreamPool.Inspection()
    }

    /// Whether the TLS layer holds buffers that ``releaseBuffersIfQuiet()`` could give back.
    var holdsTLSBuffers: Bool { tls.holdsBuffers }

    /// Gives back the TLS buffers while nothing is in flight: no stream open and nothing waiting
    /// to be sent (``TLSConnection/releaseBuffers()``). An idle connection then holds no record or
    /// plaintext buffers. Its channel handler calls it once the connection has been quiet for a
    /// while, not after every quiet turn.
    /// Returns whether they were given back.
    func releaseBuffersIfQuiet() -> Bool {
        guard case .open(let session) = state, session.openStreamCount == 0, !session.wantsWrite else { return false }
        return tls.releaseBuffers()
    }

    // MARK: Input

    /// Processes ciphertext from the client. Responses it triggers are produced by
    /// ``produceOutput(into:budget:)``.
    func receive(_ bytes: ByteBuffer) {
        if isFinished { return }
        requestState.readMilliseconds = nil
        let kept = tls.receiving(bytes) {
            if case .handshaking = state {
                switch tls.handshake() {
                case .needsMoreData:
                    return
                case .failed(let error):
                    finish(.handshakeFailed(error.description))
                    return
                case .complete:
                    guard startHTTP2() else { return }
                }
            }
            readPlaintext()
        }
        if !kept {
            finish(.protocolError("out of memory for received TLS bytes"))
        }
        if !refusedInRead.isEmpty {
            tellRefusedStreams()
        }
    }

    private func startHTTP2() -> Bool {
        // ALPN: the callback already refused clients offering ALPN without h2; no ALPN means h2.
        if let alpn = tls.negotiatedALPN, alpn != "h2" {
            finish(.refusedALPN)
            return false
        }
        let serverName = tls.serverName
        context.sniEnvironment = serverName.flatMap { APNSEnvironment(host: $0) }
        // A client certificate means certificate auth for the whole connection: read it once here.
        // Token auth starts with a single stream until a valid token arrives (see HTTP2Settings).
        let certificate = tls.peerCertificate?.identity
        requestState.auth.certificate = certificate
        var sessionSettings = settings
        if certificate == nil {
            sessionSettings.maxConcurrentStreams = min(settings.streamsBeforeAuthentication, settings.maxConcurrentStreams)
        }
        streamLimit = sessionSettings.maxConcurrentStreams
        normalStreamLimit = streamLimit
        do {
            state = .open(try HTTP2Session(settings: sessionSettings, delegate: self))
        } catch {
            finish(.protocolError("\(error)"))
            return false
        }
        logger.debug(
            "TLS handshake complete",
            metadata: [
                "tls": "\(tls.protocolVersion)",
                "alpn": "\(tls.negotiatedALPN ?? "none")",
                "sni": "\(serverName ?? "none")",
                "auth": "\(certificate == nil ? "token" : "certificate")",
            ])
        return true
    }

    private func readPlaintext() {
        while case .open(let session) = state {
            var sessionError: HTTP2Session.ProtocolError?
            let result = tls.read { plaintext in sessionError = session.receive(plaintext) }
            if let sessionError {
                // A rule of this session's that ends the connection on purpose says which rule;
                // otherwise nghttp2 found the client's protocol error.
                let description = session.deliberateEnd.map { "\($0.reason): GOAWAY \($0.code)" } ?? sessionError.description
                logger.debug("HTTP/2 session error", metadata: ["error": "\(description)"])
                // nghttp2 usually queued a GOAWAY explaining the error: send it, then close.
                flushSession(session, budget: .max)
                finish(.protocolError(description))
                return
            }
            switch result {
            case .bytes:
                continue
            case .needsMoreData:
                return
            case .closed:
                finish(.peerClosed)
                return
            case .failed(let error):
                finish(.protocolError(error.description))
                return
            }
        }
    }

    // MARK: Output

    /// Moves up to about `budget` bytes of output into `buffer`: frames nghttp2 has queued are
    /// encrypted and appended. Returns true when more output is waiting (the caller should come
    /// back once the channel is writable again).
    @discardableResult
    func produceOutput(into buffer: inout ByteBuffer, budget: Int) -> Bool {
        if case .open(let session) = state {
            flushSession(session, budget: budget)
            if case .open = state, !session.wantsRead && !session.wantsWrite && !keepsOpenAfterGoAway {
                finish(.drained)
            }
        }
        tls.drainCiphertext(into: &buffer)
        if case .open(let session) = state {
            return session.wantsWrite
        }
        return false
    }

    /// Runs nghttp2's send side into TLS until it has nothing more or `budget` bytes went out.
    private func flushSession(_ session: HTTP2Session, budget: Int) {
        var produced = 0
        var encrypted = true
        let error = session.send { chunk in
            produced += chunk.count
            encrypted = tls.append(chunk)
            return encrypted && produced < budget
        }
        if encrypted {
            encrypted = tls.flush()
        }
        if let error {
            finish(.protocolError(error.description))
        } else if !encrypted {
            finish(.protocolError("TLS write failed"))
        }
    }

    // MARK: Ending

    /// Starts a graceful end: GOAWAY with `{"reason":…}`, requests already received are still
    /// answered, then the connection closes. Before the handshake completed it just closes.
    func beginGracefulClose(reason: Reason, cause: GoAwayCause) {
        switch state {
        case .open(let session):
            let debugData = ErrorBody.bytes(for: reason)
            goAwayCause = (cause, String(decoding: debugData, as: UTF8.self))
            session.submitGoAway(debugData: debugData)
        case .handshaking:
            finish(.drained)
        case .closing:
            break
        }
    }

    private func finish(_ cause: CloseCause) {
        if case .closing = state { return }
        if case .open(let session) = state {
            // Responses submitted and not yet sent will not be: their records say so.
            session.abandonPendingResponses()
            tls.shutdown()
        }
        state = .closing
        switch cause {
        case .handshakeFailed(let message):
            logger.info("TLS handshake failed", metadata: ["error": "\(message)"])
        case .refusedALPN:
            logger.info("refused a client that does not offer h2 through ALPN")
        case .protocolError(let message):
            logger.info("connection error", metadata: ["error": "\(message)"])
        case .peerClosed, .drained:
            break
        }
    }
}

extension APNSConnection: HTTP2SessionDelegate {
    func session(_ session: HTTP2Session, didReceive stream: HTTP2Stream) {
        // A request of the same read as a `close` or `tcp-reset` that ended the connection is still
        // decided and recorded; its answer cannot leave.
        let requestStream = RequestStream(id: stream.id, isOpen: stream.phase == .dispatched && !isFinished)
        requestState.requestCount &+= 1
        // The latency histogram locks inside swift-prometheus: observe a sample of requests only.
        // A plain number (0: not sampled): an optional `ContinuousClock.Instant`, a resilient type
        // handled through its metadata, cost about 250 instructions per request to carry.
        let started: UInt64 = requestState.requestCount % RequestStatistics.latencySampleInterval == 1
            ? NIODeadline.now().uptimeNanoseconds : 0
        let effects = stream.withRequest { request in
            routes.answer(request, stream: requestStream, context: context, connection: &requestState)
        }
        if _slowPath(effects.actions.awaitsClaim) {
            awaitClaim(session: session, stream: stream, id: requestStream.id, started: started)
            return
        }
        deliver(effects, session: session, stream: stream, id: requestStream.id, started: started)
    }

    /// Carries out a request's settled effects: the stream-limit changes at once, the answer and
    /// the fault action after the rule's delay.
    @inline(__always)
    private func deliver(_ effects: Effects, session: HTTP2Session, stream: HTTP2Stream, id: Int32, started: UInt64) {
        carryOutNow(effects, session: session)
        defer { if let errorDisconnect { countError(effects, session: session, penalty: errorDisconnect) } }
        if effects.actions.delayMs == 0 || schedule == nil {
            carryOut(effects, session: session, stream: stream, id: id)
            if started != 0 { routes.state.statistics.observeLatency(sinceUptimeNanoseconds: started) }
        } else {
            // The stream may be recycled for another stream before the timer fires; its id,
            // unique within the connection, tells (``HTTP2Stream/awaitsAnswer(id:)``). Held back
            // on purpose, it is not a stuck stream.
            session.delayAnswer(on: stream, id: id)
            schedule?(effects.actions.delayMs) { [weak self] in
                guard let self, case .open(let session) = self.state else { return }
                self.carryOut(effects, session: session, stream: stream, id: id)
                if started != 0 { self.routes.state.statistics.observeLatency(sinceUptimeNanoseconds: started) }
            }
        }
    }

    /// A request whose fault rule waits for its claim in the shared state (``AwaitingClaim``): its
    /// answer is held back, as a fault's delay holds it, until the claim is answered; then the
    /// request is settled and recorded, and its effects carried out. Without a way to wait (no
    /// channel handler, or no shared state) the rule counts down in this process alone, as when
    /// the shared state cannot answer.
    @inline(never)
    private func awaitClaim(session: HTTP2Session, stream: HTTP2Stream, id: Int32, started: UInt64) {
        guard let awaiting = requestState.awaitingClaim.take() else { return }
        guard let claimWaiter, let shared = routes.state.shared else {
            finishClaim(awaiting, granted: nil, deliverable: true, stream: stream, id: id, started: started)
            return
        }
        session.delayAnswer(on: stream, id: id)
        // The connection is held (not `weak`) until the claim is answered: the request must be
        // recorded, as answered or not, even if the connection ends meanwhile.
        claimWaiter({ loop in shared.claimFault(key: awaiting.key, times: awaiting.times, on: loop) }) { granted, deliverable in
            self.finishClaim(awaiting, granted: granted, deliverable: deliverable, stream: stream, id: id, started: started)
        }
    }

    /// Settles and records a request whose claim was answered (`granted`; `nil`: no answer), and
    /// carries out its effects while its stream still waits for them and the connection can
    /// still send (`deliverable`); otherwise its record says that its answer was not written.
    private func finishClaim(
        _ awaiting: AwaitingClaim, granted: Bool?, deliverable: Bool, stream: HTTP2Stream, id: Int32, started: UInt64
    ) {
        var session: HTTP2Session?
        if deliverable, case .open(let open) = state { session = open }
        let streamOpen = session != nil && stream.awaitsAnswer(id: id)
        let effects = awaiting.finish(granted, RequestStream(id: id, isOpen: streamOpen), &requestState)
        guard let session else { return }
        deliver(effects, session: session, stream: stream, id: id, started: started)
    }

    /// Apple's connection penalty: an error answer (4xx other than 410; BadDeviceToken weighs
    /// `badDeviceTokenCounts`) counts towards `after`; reaching it sends GOAWAY (debug data: the last
    /// error's reason) once the answers already decided are queued, and the connection closes
    /// gracefully. Apple publishes neither the numbers nor the frame; docs/configuration.md says so.
    private func countError(_ effects: Effects, session: HTTP2Session, penalty: Configuration.Server.ErrorDisconnect) {
        guard let rejection = effects.response?.rejection, (400..<500).contains(rejection.status), rejection.status != 410,
              !session.queuedGoAway else { return }
        errorCount += rejection.reason == .badDeviceToken ? penalty.badDeviceTokenCounts : 1
        guard errorCount >= penalty.after else { return }
        logger.info(
            "too many error answers on this connection: GOAWAY (server.errorDisconnect)",
            metadata: ["errors": "\(errorCount)", "after": "\(penalty.after)", "last": "\(rejection.reason.rawValue)"])
        beginGracefulClose(reason: rejection.reason, cause: .errorDisconnect)
    }

    /// The effects that do not wait for a fault's delay: the stream-limit changes.
    private func carryOutNow(_ effects: Effects, session: HTTP2Session) {
        if effects.actions.raisesStreamLimit {
            // The first valid provider token lifts the one-stream limit (docs/authentication.md).
            normalStreamLimit = settings.maxConcurrentStreams
            setStreamLimit(normalStreamLimit, session: session)
        }
        switch effects.actions.streamLimit {
        case .one?: setStreamLimit(1, session: session)
        case .normal?: setStreamLimit(normalStreamLimit, session: session)
        case nil: break
        }
    }

    /// The answer and the fault action, on the stream if it still waits for them.
    private func carryOut(_ effects: Effects, session: HTTP2Session, stream: HTTP2Stream, id: Int32) {
        guard !isFinished, stream.awaitsAnswer(id: id) else { return }
        switch effects.actions.disposition {
        case .answer:
            break
        case .reset:
            session.reset(stream, id: id, code: .internalError)
        case .goAway(let form, let reason):
            // The request that triggered it is refused, so a client knows it may retry it.
            session.reset(stream, id: id, code: .refusedStream)
            let debugData = form.carriesReason ? ErrorBody.bytes(for: reason) : []
            goAwayCause = (.fault, String(decoding: debugData, as: UTF8.self))
            let named: Int32? = if case .id(let last) = form.lastStream { last } else { nil }
            session.submitGoAway(code: HTTP2ErrorCode(rawValue: form.code.value), debugData: debugData, lastStreamID: named)
            if form.keepOpen {
                // The client must leave by itself: until it does (or the idle timeout), its new
                // streams are refused.
                keepsOpenAfterGoAway = true
                session.refusesNewStreams = true
            }
        case .close:
            abortRequested = .close
            finish(.drained)
        case .tcpReset:
            abortRequested = .reset
            finish(.drained)
        case .hang:
            if routes.state.holdStream() {
                session.hold(stream, id: id)
                heldStreams += 1
                logger.debug("holding a stream unanswered (fault)", metadata: ["stream": "\(id)"])
            } else {
                // Past the server-wide cap of held streams: refused, so the client may retry.
                logger.warning("too many held streams; refusing instead of holding", metadata: ["stream": "\(id)"])
                session.reset(stream, id: id, code: .refusedStream)
            }
        case .answerAndShrinkStreams(let limit, let durationMs):
            setStreamLimit(UInt32(clamping: limit), session: session)
            if let durationMs {
                schedule?(durationMs) { [weak self] in
                    guard let self, case .open(let session) = self.state else { return }
                    self.setStreamLimit(self.normalStreamLimit, session: session)
                }
            }
        case .answerAndIgnorePings(let durationMs):
            session.answersPings = false
            schedule?(durationMs) { [weak self] in
                guard let self, case .open(let session) = self.state else { return }
                session.answersPings = true
            }
        }
        let token = ResponseToken(record: effects.recordSeq, saysWritten: effects.actions.writtenAtOnce(streamOpen: true))
        switch effects.response {
        case .apns(let response)?: session.submit(response, on: stream, id: id, token: token)
        case .broadcast(let response)?: session.submit(response, on: stream, id: id, token: token)
        case nil: break
        }
    }

    /// A request whose header list passed the limit this side announced gets HTTP's 431, handed
    /// over and recorded as every request is, though no API decides it: its headers were never all
    /// read, so there is nothing to validate. The record belongs to the API whose route takes its
    /// `:path` (its kind, and its environment when the request names none) and says what was
    /// answered: status 431 and no reason (Apple has none for it, and the body carries none), the
    /// fields that came before the limit, no payload, no credentials read; it counts as rejected
    /// (docs/architecture.md, "Limits and defences").
    func session(_ session: HTTP2Session, didReceiveOversized stream: HTTP2Stream) {
        let requestStream = RequestStream(id: stream.id, isOpen: stream.phase == .dispatched && !isFinished)
        let seq = stream.withRequest { request in recordOversized(request, stream: requestStream) }
        logger.debug(
            "header list larger than SETTINGS_MAX_HEADER_LIST_SIZE: answered 431",
            metadata: ["stream": "\(requestStream.id)", "limit": "\(session.maxHeaderListSize)"])
        guard requestStream.isOpen else { return }
        session.submit(
            HeaderListTooLarge(limit: session.maxHeaderListSize), on: stream, id: requestStream.id,
            token: ResponseToken(record: seq, saysWritten: requestStream.isOpen))
    }

    /// Counts and records a request ``session(_:didReceiveOversized:)`` answers, through the
    /// recorder of the API whose route takes it. Returns the record's sequence number (0:
    /// recording is off, or no route takes the request).
    private func recordOversized(_ request: borrowing PushRequest, stream: RequestStream) -> UInt64 {
        guard let route = routes.undecidedRoute(for: request.path) else {
            routes.state.counting.count(status: HeaderListTooLarge.status, rejection: nil, action: nil)
            return 0
        }
        return route.recorder.recordUndecided(
            request, status: HeaderListTooLarge.status, kind: route.kind, fallback: route.environment, stream: stream,
            context: context, connection: &requestState)
    }

    func session(_ session: HTTP2Session, responseFinished token: ResponseToken) {
        if !token.recordSaysWritten { routes.state.recording.setResponseWritten(true, seq: token.record) }
    }

    func session(_ session: HTTP2Session, responseAbandoned token: ResponseToken) {
        if token.recordSaysWritten { routes.state.recording.setResponseWritten(false, seq: token.record) }
    }

    func session(_ session: HTTP2Session, refusedAfterGoAway id: Int32) {
        noteRefused(id, cause: .afterGoAway)
    }

    func session(_ session: HTTP2Session, sentGoAway rawCode: UInt32, lastStreamID: Int32) {
        let code = HTTP2ErrorCode(rawValue: rawCode)
        let cause: GoAwayCause
        var debugData = ""
        if let queued = goAwayCause {
            (cause, debugData) = queued
            goAwayCause = nil
        } else if let deliberate = session.deliberateEnd {
            cause = .protocol
            debugData = deliberate.reason
        } else {
            // nghttp2's own: its defences end a flood with ENHANCE_YOUR_CALM, or (mass stream
            // resets) INTERNAL_ERROR; anything else is the client's protocol error.
            cause = code == .enhanceYourCalm || code == .internalError ? .flood : .protocol
        }
        routes.state.statistics.countGoAway(cause: cause, code: code.description)
        let team = boundTeam
        team?.counts.countGoAway(cause)
        logger.info(
            "sent GOAWAY",
            metadata: [
                "cause": "\(cause.rawValue)", "code": "\(code)", "lastStreamId": "\(lastStreamID)",
                "debugData": "\(debugData)",
            ])
        routes.state.records.publish(.goAway(GoAwayNotice(
            connectionId: UInt64(context.connectionNumber), cause: cause, code: code.description, lastStreamId: lastStreamID,
            debugData: debugData, at: Timestamp.rfc3339(milliseconds: MockClock.wallMilliseconds()), team: team?.teamID)))
    }

    func session(_ session: HTTP2Session, refusedStream id: Int32) {
        noteRefused(id, cause: requestState.auth.isAwaitingToken ? .beforeAuthentication : .overLimit)
    }

    /// The team the connection is bound to (its token's key, or its certificate), if any.
    private var boundTeam: TeamSpace? {
        requestState.auth.binding?.space ?? requestState.auth.certificateSpace
    }

    private func noteRefused(_ id: Int32, cause: RefusedStreamCause) {
        routes.state.statistics.countRefused(cause)
        boundTeam?.counts.refused[cause.index].increment()
        if let index = refusedInRead.firstIndex(where: { $0.cause == cause }) {
            refusedInRead[index].count += 1
            refusedInRead[index].firstStreamId = min(refusedInRead[index].firstStreamId, id)
            refusedInRead[index].lastStreamId = max(refusedInRead[index].lastStreamId, id)
        } else {
            refusedInRead.append(RefusedStreamsNotice(
                connectionId: UInt64(context.connectionNumber), cause: cause, count: 1, firstStreamId: id, lastStreamId: id,
                limit: streamLimit, at: Timestamp.rfc3339(milliseconds: MockClock.wallMilliseconds()), team: boundTeam?.teamID))
        }
    }

    /// Tells what was refused in this read: event streams and the inbox page hear of it, and the
    /// log (at most once per ``refusalLogInterval`` per connection). A refused stream is no
    /// record: a client that does not retry it (node-apn) loses that push.
    private func tellRefusedStreams() {
        let notices = refusedInRead
        refusedInRead.removeAll(keepingCapacity: true)
        for notice in notices {
            routes.state.records.publish(.refusedStreams(notice))
        }
        let now = NIODeadline.now()
        guard lastRefusalLog.map({ now - $0 >= Self.refusalLogInterval }) ?? true else { return }
        lastRefusalLog = now
        for notice in notices {
            let advice = switch notice.cause {
            case .beforeAuthentication:
                "the client opened them before its first token was accepted; APNs allows one stream until then"
                    + " (server.streamsBeforeAuthentication raises it for load tools)"
            case .overLimit: "the client opened more streams than the connection's MAX_CONCURRENT_STREAMS"
            case .afterGoAway:
                "they completed above the last stream id of the GOAWAY sent: not processed, the client may resend them"
            }
            logger.warning(
                "refused streams (RST_STREAM REFUSED_STREAM); a client that does not retry them loses those pushes",
                metadata: [
                    "count": "\(notice.count)", "cause": "\(notice.cause.rawValue)", "limit": "\(notice.limit)",
                    "streams": "\(notice.firstStreamId)...\(notice.lastStreamId)", "why": "\(advice)",
                ])
        }
    }

    /// Advertises a new MAX_CONCURRENT_STREAMS when it differs from the current one.
    private func setStreamLimit(_ limit: UInt32, session: HTTP2Session) {
        guard limit != streamLimit else { return }
        streamLimit = limit
        session.submitMaxConcurrentStreams(limit)
    }

    func session(_ session: HTTP2Session, heldStreamClosed id: Int32) {
        heldStreams -= 1
        routes.state.releaseHeldStreams(1)
    }
}

/// The connection's response tokens stand for records: a record's sequence number, and whether
/// the record says its response was written, which the session's report then confirms or
/// corrects (``RawRecord/responseWritten``). No token when there is no record (recording off).
extension ResponseToken {
    init(record seq: UInt64, saysWritten: Bool) {
        self.init(rawValue: seq == 0 ? 0 : seq << 1 | (saysWritten ? 1 : 0))
    }

    var record: UInt64 { rawValue >> 1 }
    var recordSaysWritten: Bool { rawValue & 1 != 0 }
}

/// What recording a request that no API decides (the 431 of an oversized header list) needs of
/// the API whose route takes it: the kind of its records (its verdict's), its recorder, and the
/// environment of a request whose `:authority` and TLS server name name none.
protocol UndecidedRequestRecording: DecidingAPI {
    var defaultEnvironment: APNSEnvironment { get }
}

extension DeviceAPI: UndecidedRequestRecording {}

extension BroadcastAPI: UndecidedRequestRecording {}

extension ChannelAPI: UndecidedRequestRecording {
    var defaultEnvironment: APNSEnvironment { environment }
}

extension ListenerRoutes {
    /// Where a request that no API decides belongs: the record kind, default environment and
    /// recorder of the API whose route takes `path` (`nil` when no route does, which
    /// ``Routes/table`` rules out).
    func undecidedRoute(for path: String?) -> (kind: RecordKind, environment: APNSEnvironment, recorder: Recorder)? {
        guard let index = routeIndex(for: path), let api = routes[index].api as? any UndecidedRequestRecording else {
            return nil
        }
        return (Self.recordKind(of: api), api.defaultEnvironment, api.pipeline.recorder)
    }

    private static func recordKind<API: UndecidedRequestRecording>(of api: API) -> RecordKind { API.Decided.kind }
}

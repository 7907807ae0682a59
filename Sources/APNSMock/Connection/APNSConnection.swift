import APNSMockCore
import Logging
import NIOCore

/// One client connection as a sans-I/O state machine: ciphertext in, ciphertext out.
///
/// It owns the connection's TLS object and, once the handshake completes, its HTTP/2 session.
/// Nothing here touches a socket or a clock, so tests drive it with bytes alone; the NIO handler
/// (``APNSChannelHandler``) moves bytes between it and the network, and turns timers and
/// shutdown into calls.
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
    private let responder: Responder
    private var logger: Logger
    @exclusivity(unchecked) private(set) var state: State = .handshaking
    private(set) var closeCause: CloseCause?
    /// Runs work on the connection's event loop after a delay, then flushes output; set by the
    /// channel handler. Delayed answers (fault `delayMs`) need it; without it they go out at once.
    var schedule: ((_ milliseconds: Int, _ work: @escaping () -> Void) -> Void)?
    /// Set by a `close` fault: the handler drops the TCP connection without flushing.
    private(set) var abortRequested = false
    @exclusivity(unchecked) private var requestCount = 0
    @exclusivity(unchecked) private(set) var context: ConnectionContext
    @exclusivity(unchecked) private var requestState: ConnectionState

    // The properties marked @exclusivity(unchecked) are touched for every request, only from the
    // connection's event loop and never through overlapping accesses, so the runtime check is skipped.

    /// Plaintext from TLS on its way into nghttp2; plaintext from nghttp2 on its way into TLS,
    /// coalesced so that many small frames become few TLS records.
    private let plaintextIn: UnsafeMutableRawBufferPointer
    private let plaintextOut: UnsafeMutableRawBufferPointer
    @exclusivity(unchecked) private var plaintextOutCount = 0
    private static let plaintextBufferSize = 16 * 1024

    init(id: UInt64, tlsContext: TLSContext, settings: HTTP2Settings, responder: Responder, logger: Logger) throws {
        self.id = id
        self.tls = try TLSConnection(context: tlsContext)
        self.settings = settings
        self.responder = responder
        self.logger = logger
        self.logger[metadataKey: "connection"] = "\(id)"
        self.context = ConnectionContext(connectionID: id, sniEnvironment: nil)
        self.requestState = ConnectionState(devices: responder.devices)
        plaintextIn = .allocate(byteCount: Self.plaintextBufferSize, alignment: 16)
        plaintextOut = .allocate(byteCount: Self.plaintextBufferSize, alignment: 16)
    }

    deinit {
        plaintextIn.deallocate()
        plaintextOut.deallocate()
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

    // MARK: Input

    /// Processes ciphertext from the client. Responses it triggers are produced by
    /// ``produceOutput(into:budget:)``.
    func receive(_ bytes: UnsafeRawBufferPointer) {
        if isFinished { return }
        requestState.readMilliseconds = nil
        tls.receive(bytes)
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
            switch tls.read(into: plaintextIn) {
            case .bytes(let count):
                if let error = session.receive(UnsafeRawBufferPointer(rebasing: plaintextIn[..<count])) {
                    logger.debug("HTTP/2 session error", metadata: ["error": "\(error)"])
                    // nghttp2 usually queued a GOAWAY explaining the error: send it, then close.
                    closeCause = .protocolError(error.description)
                    flushSession(session, budget: .max)
                    finish(.protocolError(error.description))
                    return
                }
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
            if !session.wantsRead && !session.wantsWrite {
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
        let error = session.send { chunk in
            produced += chunk.count
            var chunk = chunk
            while !chunk.isEmpty {
                let room = Self.plaintextBufferSize - plaintextOutCount
                if room == 0 {
                    flushPlaintextOut()
                    continue
                }
                let count = min(room, chunk.count)
                (plaintextOut.baseAddress! + plaintextOutCount).copyMemory(from: chunk.baseAddress!, byteCount: count)
                plaintextOutCount += count
                chunk = UnsafeRawBufferPointer(rebasing: chunk[count...])
            }
            return produced < budget
        }
        flushPlaintextOut()
        if let error {
            finish(.protocolError(error.description))
        }
    }

    private func flushPlaintextOut() {
        guard plaintextOutCount > 0 else { return }
        tls.write(UnsafeRawBufferPointer(rebasing: plaintextOut[..<plaintextOutCount]))
        plaintextOutCount = 0
    }

    // MARK: Ending

    /// Starts a graceful end: GOAWAY with `{"reason":…}`, requests already received are still
    /// answered, then the connection closes. Before the handshake completed it just closes.
    func beginGracefulClose(reason: Reason) {
        switch state {
        case .open(let session):
            logger.debug("sending GOAWAY", metadata: ["reason": "\(reason.rawValue)"])
            session.submitGoAway(reason: reason)
        case .handshaking:
            finish(.drained)
        case .closing:
            break
        }
    }

    private func finish(_ cause: CloseCause) {
        if case .closing = state { return }
        if closeCause == nil {
            closeCause = cause
        }
        if case .open = state {
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
    func session(_ session: HTTP2Session, didReceive stream: StreamState) {
        // Move the request out of the stream state rather than copying it (a copy retains every
        // field), and move it back afterwards so its storage is reused by the next stream.
        let request = stream.takeRequest()
        // The latency histogram locks inside swift-prometheus: observe a sample of requests only.
        requestCount &+= 1
        let started: ContinuousClock.Instant? =
            requestCount % RequestStatistics.latencySampleInterval == 1 ? .now : nil
        let answer = responder.respond(
            to: request, streamID: stream.streamID, connection: context, state: &requestState)
        stream.restoreRequest(request)
        if requestState.auth.streamLimitRaisePending {
            // The first valid provider token lifts the one-stream limit (apns-behavior.md §1).
            requestState.auth.streamLimitRaisePending = false
            session.submitMaxConcurrentStreams(settings.maxConcurrentStreams)
        }
        if answer.delayMs == 0 || schedule == nil {
            carryOut(answer, session: session, stream: stream, streamID: stream.streamID)
            if let started { responder.statistics.observeLatency(since: started) }
        } else {
            // The stream state may be recycled for another stream before the timer fires; the
            // stream id, unique within the connection, tells.
            let streamID = stream.streamID
            schedule?(answer.delayMs) { [weak self] in
                guard let self, case .open(let session) = self.state else { return }
                self.carryOut(answer, session: session, stream: stream, streamID: streamID)
                if let started { self.responder.statistics.observeLatency(since: started) }
            }
        }
    }

    private func carryOut(_ answer: Answer, session: HTTP2Session, stream: StreamState, streamID: Int32) {
        guard stream.streamID == streamID else { return }
        switch answer.action {
        case nil:
            if let response = answer.response {
                session.submit(response, for: stream)
            }
        case .reset?:
            session.reset(streamID: streamID)
        case .goaway?:
            // The request that triggered it is refused, so a client knows it may retry it.
            session.reset(streamID: streamID, errorCode: 7)  // REFUSED_STREAM
            beginGracefulClose(reason: answer.goAwayReason)
        case .close?:
            abortRequested = true
            finish(.drained)
        }
    }
}

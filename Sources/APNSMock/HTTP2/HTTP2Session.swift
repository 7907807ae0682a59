internal import CNGHTTP2
internal import CAPNSMockShims
import APNSMockCore

/// Receives complete requests, and what became of their streams and responses, from an
/// ``HTTP2Session``. Never called from inside nghttp2: the session's callbacks only note the
/// frame-level facts nghttp2 gives, and the session tells them once `nghttp2_session_mem_recv` or
/// `nghttp2_session_mem_send` has returned, in the order they happened (a read's facts before the
/// requests it completed are handed over).
protocol HTTP2SessionDelegate: AnyObject {
    /// Called once per complete request (END_STREAM arrived), after nghttp2 has processed the
    /// whole input that completed it: requests completed in one ``HTTP2Session/receive(_:)`` are
    /// handed over in order once `nghttp2_session_mem_recv` returns. The stream is then
    /// ``HTTP2Stream/Phase/dispatched``, or ``HTTP2Stream/Phase/reset`` when the client closed it
    /// later in the same input (the request is still to be decided and recorded; its answer cannot
    /// leave). The delegate answers through ``HTTP2Session/submit(_:on:id:token:)`` or
    /// ``HTTP2Session/reset(_:id:code:)``, now or later. The stream's request is readable only
    /// during this call: its storage serves the next request.
    func session(_ session: HTTP2Session, didReceive stream: HTTP2Stream)
    /// The same hand-over, for a request whose header list passed the SETTINGS_MAX_HEADER_LIST_SIZE
    /// this side announced (``HTTP2Session/maxHeaderListSize``): its request holds the fields that
    /// came before the limit; the rest of the block and the body were dropped. HTTP's answer is
    /// 431 (``HeaderListTooLarge``), which the default implementation submits.
    func session(_ session: HTTP2Session, didReceiveOversized stream: HTTP2Stream)
    /// A stream held unanswered (``HTTP2Session/hold(_:id:)``) closed: the client reset it.
    func session(_ session: HTTP2Session, heldStreamClosed id: Int32)
    /// The last frame of the response submitted with `token` went out.
    func session(_ session: HTTP2Session, responseFinished token: ResponseToken)
    /// The response submitted with `token` will not go out: its stream was reset or closed, or the
    /// connection ended (``HTTP2Session/abandonPendingResponses()``), before its last frame was sent.
    func session(_ session: HTTP2Session, responseAbandoned token: ResponseToken)
    /// nghttp2 refused a new stream (RST_STREAM REFUSED_STREAM): the client opened it past the
    /// MAX_CONCURRENT_STREAMS this side announced (before the client read that SETTINGS, too).
    func session(_ session: HTTP2Session, refusedStream id: Int32)
    /// A request completed on a stream above the last stream id of the GOAWAY this side sent: the
    /// GOAWAY told the client it was not processed (RFC 9113 §6.8), so it is reset with
    /// REFUSED_STREAM and never handed over, decided or recorded.
    func session(_ session: HTTP2Session, refusedAfterGoAway id: Int32)
    /// A GOAWAY frame went out (whoever queued it: this side's code, or nghttp2 itself).
    func session(_ session: HTTP2Session, sentGoAway code: UInt32, lastStreamID: Int32)
}

extension HTTP2SessionDelegate {
    /// Delegates that keep no records (tests, the fuzz target) answer 431 and have nothing to
    /// correct.
    func session(_ session: HTTP2Session, didReceiveOversized stream: HTTP2Stream) {
        session.submit(HeaderListTooLarge(limit: session.maxHeaderListSize), on: stream, id: stream.id)
    }
    func session(_ session: HTTP2Session, responseFinished token: ResponseToken) {}
    func session(_ session: HTTP2Session, responseAbandoned token: ResponseToken) {}
    func session(_ session: HTTP2Session, refusedStream id: Int32) {}
    func session(_ session: HTTP2Session, refusedAfterGoAway id: Int32) {}
    func session(_ session: HTTP2Session, sentGoAway code: UInt32, lastStreamID: Int32) {}
}

/// Owner of one nghttp2 server session, fed through `nghttp2_session_mem_recv` and drained through
/// `nghttp2_session_mem_send`. It speaks HTTP/2 only: requests come out as ``PushRequest`` values
/// in ``HTTP2Stream``s, responses go in as ``HTTP2Response``s; what they mean is the APIs' business.
///
/// All nghttp2 callbacks live in this file. They find their session through the `user_data`
/// pointer (unretained: the session outlives every callback, which only run inside `receive` and
/// `send`), never throw, and turn every problem into an nghttp2 return code. They do HTTP/2's own
/// work (collecting requests, the RFC 9113 rules, stream bookkeeping) and note what the delegate
/// must hear as ``Event``s, told once nghttp2 has returned: no delegate code runs inside nghttp2.
/// A problem confined to one stream leaves through one door, ``reset(_:id:code:)`` (RST_STREAM,
/// the stream's phase becomes `reset`), and the connection carries on.
///
/// Properties marked `@exclusivity(unchecked)` are touched on every request, mostly from inside
/// callbacks, while calls into other types are in flight; only the connection's event loop
/// touches a session and nothing those calls reach holds them, so the run-time check is skipped.
final class HTTP2Session {
    struct ProtocolError: Error, CustomStringConvertible {
        var code: Int
        var description: String {
            "HTTP/2 error \(code): " + String(cString: nghttp2_strerror(Int32(truncatingIfNeeded: code)))
        }
    }

    private var session: OpaquePointer?
    /// nghttp2's allocator for this session: size-class free lists, so the stream, frame and
    /// header buffers of each request are recycled rather than malloc'd and freed.
    private let pool: OpaquePointer
    private let settings: HTTP2Settings
    unowned let delegate: any HTTP2SessionDelegate

    private let streams = StreamPool()
    private let values = HeaderValueCache()
    private let responseHeaders = ResponseHeaderBlock()
    /// The stream whose request headers are arriving: a header block is never interleaved with
    /// another stream's frames (RFC 9113 §6.10), so the header callbacks that follow a
    /// begin-headers callback find their stream here without a look-up.
    // Read per header field (see the type's comment).
    @exclusivity(unchecked) private var headerBlockStream: Unmanaged<HTTP2Stream>?

    /// Flow control (RFC 9113 §6.9), kept strict: received DATA is credited back to the client
    /// (WINDOW_UPDATE) only in ``send(_:)``, right before the update goes out. nghttp2's automatic
    /// window updates credit the window when the update is queued, in the middle of reading, so a
    /// client sending past the advertised window within one read would go unnoticed. These are the
    /// DATA bytes received and not yet credited: the connection's, and per stream.
    // Both written per DATA chunk (see the type's comment).
    @exclusivity(unchecked) private var uncreditedConnectionBytes = 0
    @exclusivity(unchecked) private var uncreditedStreamBytes: [(id: Int32, bytes: Int)] = []
    /// Stream bodies up to this many bytes are not credited at stream level (see `data`).
    static let streamCreditThreshold = 16_384

    /// Stream identifiers (RFC 9113 §5.1.1): the highest client stream id seen in a HEADERS frame,
    /// the ids a client skipped (idle forever: HEADERS on them is a PROTOCOL_ERROR), and the
    /// streams recently ended with RST_STREAM from this side (HEADERS still in flight for them is
    /// ignored, §5.1). nghttp2 itself forgets closed streams and ignores HEADERS on them.
    // Read per frame header, by the scanner and the begin-frame callback (see the type's comment).
    @exclusivity(unchecked) private var highestClientStream: Int32 = 0
    @exclusivity(unchecked) private var skippedStreams: [ClosedRange<Int32>] = []
    @exclusivity(unchecked) private var recentlyReset = RecentStreams()
    /// Skipped-id ranges remembered; an older one is forgotten (its ids then count as closed).
    static let skippedRangesKept = 16

    init(settings: HTTP2Settings, delegate: any HTTP2SessionDelegate) throws {
        self.settings = settings
        self.delegate = delegate
        guard let pool = CAPNSMockPool_create() else {
            throw ProtocolError(code: Int(NGHTTP2_ERR_NOMEM.rawValue))
        }
        self.pool = pool

        var callbacks: OpaquePointer?
        nghttp2_session_callbacks_new(&callbacks)
        defer { nghttp2_session_callbacks_del(callbacks) }
        Self.install(into: callbacks)

        var option: OpaquePointer?
        nghttp2_option_new(&option)
        defer { nghttp2_option_del(option) }
        // PRIORITY is ignored by APNs; keeping closed streams only serves the priority tree.
        nghttp2_option_set_no_closed_streams(option, 1)
        // The session enforces RFC 9113's request rules itself, checking only values it has not
        // seen on the connection (RequestFieldRules); nghttp2's layer checks every byte every time.
        nghttp2_option_set_no_http_messaging(option, 1)
        // PINGs are acknowledged by this session (``answersPings``), so a fault can withhold them.
        nghttp2_option_set_no_auto_ping_ack(option, 1)
        // WINDOW_UPDATE is sent by `send`, as data is credited (see uncreditedConnectionBytes).
        nghttp2_option_set_no_auto_window_update(option, 1)

        var created: OpaquePointer?
        let rc = nghttp2_session_server_new3(
            &created, callbacks, Unmanaged.passUnretained(self).toOpaque(), option, CAPNSMockPool_mem(pool))
        guard rc == 0, let created else {
            // Every stored property is set by now, so deinit runs and frees the pool.
            throw ProtocolError(code: Int(rc))
        }
        session = created

        let entries: [nghttp2_settings_entry] = [
            .init(settings_id: Int32(NGHTTP2_SETTINGS_HEADER_TABLE_SIZE.rawValue), value: settings.headerTableSize),
            .init(settings_id: Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue), value: settings.maxConcurrentStreams),
            .init(settings_id: Int32(NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE.rawValue), value: settings.initialWindowSize),
            .init(settings_id: Int32(NGHTTP2_SETTINGS_MAX_FRAME_SIZE.rawValue), value: settings.maxFrameSize),
            .init(settings_id: Int32(NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE.rawValue), value: settings.maxHeaderListSize),
        ]
        let submitted = nghttp2_submit_settings(created, UInt8(NGHTTP2_FLAG_NONE.rawValue), entries, entries.count)
        guard submitted == 0 else {
            throw ProtocolError(code: Int(submitted))
        }
    }

    deinit {
        nghttp2_session_del(session)
        CAPNSMockPool_destroy(pool)
    }

    // MARK: Driving the session

    /// Feeds plaintext received from the client. Returns an error when the connection must end
    /// (nghttp2 has then usually queued a GOAWAY that ``send(_:)`` still delivers).
    func receive(_ bytes: UnsafeRawBufferPointer) -> ProtocolError? {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return nil }
        let input = base.assumingMemoryBound(to: UInt8.self)
        // Bytes of this chunk nghttp2 has read (or the scanner holds), and how far the scanner has
        // read ahead of nghttp2.
        var fed = 0
        var scanned = 0
        var failure: ProtocolError?
        func feed(_ start: UnsafePointer<UInt8>, _ count: Int) -> Bool {
            guard count > 0 else { return true }
            let rc = nghttp2_session_mem_recv(session, start, count)
            if rc < 0 { failure = ProtocolError(code: rc) }
            return rc >= 0
        }
        func dataOnClosedStream(_ stream: Int32) -> ProtocolError {
            // Before nghttp2 reads the frame, which it would skip without a callback.
            _ = endSession(.streamClosed, "DATA on closed stream \(stream)")
            return ProtocolError(code: Int(NGHTTP2_ERR_CALLBACK_FAILURE.rawValue))
        }
        scanning: while let event = frames.scan(bytes, from: &scanned, dataOnClosedStream: isClosedClientStream) {
            switch event {
            case .suspect(let stream, let frameStart):
                // The scanner judged that DATA frame by the session as it stood before this chunk,
                // ahead of nghttp2: a stream whose HEADERS began in an earlier read but whose
                // PRIORITY or padding fields are in this one (netty sets PRIORITY on every
                // request) does not exist yet. nghttp2 reads everything before the frame first;
                // then it is judged again.
                guard feed(input + fed, frameStart - fed) else { break scanning }
                fed = frameStart
                if isClosedClientStream(stream) {
                    failure = dataOnClosedStream(stream)
                    break scanning
                }
            case .heldFrom(let frameStart):
                // The chunk ends inside a frame header: nghttp2 gets it whole with the next chunk
                // (it never holds part of a frame header, which some of its checks count per read).
                guard feed(input + fed, frameStart - fed) else { break scanning }
                fed = bytes.count
            case .newStream(let stream):
                refuseAfterGoAway(stream)
            case .completed(let resumeAt, let dataStream):
                // The header held from earlier chunks is whole: nghttp2 has read everything before
                // it, so a DATA frame's stream is judged exactly, then nghttp2 reads the header.
                if let dataStream, isClosedClientStream(dataStream) {
                    failure = dataOnClosedStream(dataStream)
                    break scanning
                }
                let whole = frames.withHeldHeader { feed($0, 9) }
                guard whole else { break scanning }
                fed = resumeAt
            }
        }
        if failure == nil, fed < bytes.count {
            _ = feed(input + fed, bytes.count - fed)
        }
        // Also after an error: what nghttp2 reported is told, and what was complete before it is
        // decided and recorded.
        tellEvents()
        handOverCompleted()
        tellEvents()
        return failure
    }

    /// A HEADERS frame opening `stream` arrived while the connection stays open after its GOAWAY
    /// (`keepOpen`). Once its GOAWAY is out and no stream is open, nghttp2 wants to read nothing
    /// more and drops all input, so the session itself refuses the stream, writing the RST_STREAM
    /// in ``send(_:)``; before that, nghttp2 reads it and ``handOverCompleted()`` refuses it.
    private func refuseAfterGoAway(_ stream: Int32) {
        guard stream & 1 == 1, stream > highestClientStream, stream > goAwayLastStream, goAwayWentOut,
              nghttp2_session_want_read(session) == 0
        else { return }
        highestClientStream = stream
        guard refusalsAfterGoAway.count < RecentStreams.capacity else { return }
        refusalsAfterGoAway.append(stream)
        delegate.session(self, refusedAfterGoAway: stream)
    }

    /// Requests completed during the current `mem_recv`, in order, waiting to be handed to the
    /// delegate once it returns. A stream here stays out of the pool until then, even when the
    /// client closes it meanwhile, so its request is not overwritten by a stream opened after it.
    // Appended to per request, from a callback (see the type's comment).
    @exclusivity(unchecked) private var completed: [HTTP2Stream] = []

    /// Hands the requests completed during the last `mem_recv` to the delegate; a stream the
    /// client closed meanwhile goes back to the pool afterwards.
    private func handOverCompleted() {
        guard !completed.isEmpty else { return }
        // Loaded once, not per request: each load of an unowned reference checks it is alive.
        let delegate = self.delegate
        for stream in completed {
            // Only the client's close moves a complete stream before it is handed over.
            let closedMeanwhile = stream.phase == .reset
            if stream.id > goAwayLastStream {
                // Above the GOAWAY's last stream id: not processed, as the GOAWAY told the client.
                if !closedMeanwhile { reset(stream, id: stream.id, code: .refusedStream) }
                delegate.session(self, refusedAfterGoAway: stream.id)
                if closedMeanwhile { streams.close(stream) } else { streams.recycleStorage(of: stream) }
                continue
            }
            if !closedMeanwhile { stream.dispatch() }
            if stream.headerListSize > Int(settings.maxHeaderListSize) {
                delegate.session(self, didReceiveOversized: stream)
            } else {
                delegate.session(self, didReceive: stream)
            }
            lastHandedOver = stream.id
            if closedMeanwhile {
                streams.close(stream)
            } else {
                // Deciding is done with the request (a late answer keeps only the answer).
                streams.recycleStorage(of: stream)
            }
        }
        completed.removeAll(keepingCapacity: true)
    }

    /// Frame headers of the input, read ahead of nghttp2 (see ``FrameHeaderScanner``).
    // Read and written per input chunk (see the type's comment).
    @exclusivity(unchecked) private var frames = FrameHeaderScanner()

    /// A client stream that was open and is closed now: at or below the highest id seen in HEADERS,
    /// not open, not one the client skipped (§5.1.1 closes those too, but nghttp2 judges them), and
    /// not reset by this side lately (its frames in flight are ignored, §5.1).
    private func isClosedClientStream(_ id: Int32) -> Bool {
        // Above a GOAWAY's last stream id, frames are ignored (§6.8), as nghttp2 ignores them.
        id & 1 == 1 && id <= highestClientStream && id <= goAwayLastStream && nghttp2_session_find_stream(session, id) == nil
            && !recentlyReset.contains(id) && !skippedStreams.contains { $0.contains(id) }
    }

    /// Hands each chunk nghttp2 wants to send to `sink` until nghttp2 has nothing more or `sink`
    /// returns false (the caller's output budget is spent). Returns an error on a fatal failure.
    func send(_ sink: (UnsafeRawBufferPointer) -> Bool) -> ProtocolError? {
        // What the frames that went out settled (responses finished, streams closed, GOAWAYs) is
        // told once nghttp2 has returned, however this ends.
        defer { tellEvents() }
        if let error = creditReceivedData() {
            return error
        }
        if !refusalsAfterGoAway.isEmpty {
            // RST_STREAM frames written here, not by nghttp2: once its GOAWAY is out and no stream
            // is open, nghttp2 considers the session closing and sends no RST_STREAM. Every chunk
            // nghttp2 hands out ends a frame (response header blocks are a few fields, never
            // CONTINUATION), so these go between frames.
            var frames: [UInt8] = []
            frames.reserveCapacity(13 * refusalsAfterGoAway.count)
            for id in refusalsAfterGoAway {
                let stream = UInt32(bitPattern: id), code = HTTP2ErrorCode.refusedStream.rawValue
                frames += [0, 0, 4, UInt8(NGHTTP2_RST_STREAM.rawValue), 0]
                frames += [UInt8(stream >> 24 & 0x7F), UInt8(stream >> 16 & 0xFF), UInt8(stream >> 8 & 0xFF), UInt8(stream & 0xFF)]
                frames += [UInt8(code >> 24), UInt8(code >> 16 & 0xFF), UInt8(code >> 8 & 0xFF), UInt8(code & 0xFF)]
            }
            refusalsAfterGoAway.removeAll(keepingCapacity: false)
            guard frames.withUnsafeBytes({ sink($0) }) else { return nil }
        }
        while true {
            var data: UnsafePointer<UInt8>?
            let count = nghttp2_session_mem_send(session, &data)
            if count < 0 {
                return ProtocolError(code: count)
            }
            guard count > 0, let data else { return nil }
            if !sink(UnsafeRawBufferPointer(start: data, count: count)) {
                return nil
            }
        }
    }

    /// Hands the DATA received since the last call back to nghttp2 as consumed, which queues the
    /// WINDOW_UPDATE frames (once half a window is consumed, as nghttp2 does by itself) that the
    /// `mem_send` after it sends at once. Streams that no longer receive get no stream update.
    private func creditReceivedData() -> ProtocolError? {
        if uncreditedConnectionBytes > 0 {
            let rc = nghttp2_session_consume_connection(session, uncreditedConnectionBytes)
            uncreditedConnectionBytes = 0
            if rc != 0 && nghttp2_is_fatal(rc) != 0 { return ProtocolError(code: Int(rc)) }
        }
        guard !uncreditedStreamBytes.isEmpty else { return nil }
        for (id, bytes) in uncreditedStreamBytes where withStream(id, { $0.collects }) == true {
            let rc = nghttp2_session_consume_stream(session, id, bytes)
            if rc != 0 && nghttp2_is_fatal(rc) != 0 { return ProtocolError(code: Int(rc)) }
        }
        uncreditedStreamBytes.removeAll(keepingCapacity: true)
        return nil
    }

    /// The SETTINGS_MAX_HEADER_LIST_SIZE this side announced and enforces.
    var maxHeaderListSize: UInt32 { settings.maxHeaderListSize }

    var wantsRead: Bool { nghttp2_session_want_read(session) != 0 }
    var wantsWrite: Bool { nghttp2_session_want_write(session) != 0 }
    var openStreamCount: Int { streams.openCount }
    /// True once the client's preface and first SETTINGS frame arrived: the connection is ready
    /// for requests (the handshake timer wants this within `handshakeTimeout`).
    private(set) var receivedPreface = false

    /// The stuck-stream check (see ``StreamPool/inspect(now:receiving:answering:)``).
    func inspectStreams(now: UInt64, receiving: UInt64, answering: UInt64) -> StreamPool.Inspection {
        streams.inspect(now: now, receiving: receiving, answering: answering)
    }

    /// The last stream id of the GOAWAY this side queued, `Int32.max` before one: requests that
    /// complete above it are refused, not handed over (see ``handOverCompleted()``).
    private(set) var goAwayLastStream: Int32 = .max

    /// Whether this side has queued a GOAWAY.
    var queuedGoAway: Bool { goAwayLastStream != .max }
    /// The last request handed over to be decided: a GOAWAY never names a lower stream, since a
    /// decided request is not undone.
    private var lastHandedOver: Int32 = 0
    /// Whether a GOAWAY of this side's has gone out (nghttp2 ignores new streams from then on).
    private var goAwayWentOut = false
    /// After a GOAWAY that leaves the connection open (`keepOpen`), streams the client still opens
    /// are refused with RST_STREAM REFUSED_STREAM rather than silently ignored.
    var refusesNewStreams = false {
        didSet { frames.reportsNewStreams = refusesNewStreams }
    }
    /// Those refusals, written by ``send(_:)`` (at most ``RecentStreams/capacity`` between two
    /// sends; a client opening more before it reads is told by the GOAWAY alone).
    private var refusalsAfterGoAway: [Int32] = []

    /// Announces the end of the connection: GOAWAY with `code` and `debugData`, naming as the last
    /// stream the last one received (`nil`), or `lastStreamID` when that is lower. Streams up to it
    /// are still answered; requests above it are refused and never decided (RFC 9113 §6.8), and
    /// nghttp2 stops wanting to read once the streams up to it are answered. A second GOAWAY never
    /// names a higher stream than the first. Returns the last stream id it named.
    @discardableResult
    func submitGoAway(code: HTTP2ErrorCode = .noError, debugData: [UInt8], lastStreamID: Int32? = nil) -> Int32 {
        let received = nghttp2_session_get_last_proc_stream_id(session)
        let named = lastStreamID.map { max($0, lastHandedOver) } ?? received
        let last = min(named, received, goAwayLastStream)
        goAwayLastStream = last
        _ = debugData.withUnsafeBufferPointer { bytes in
            nghttp2_submit_goaway(
                session, UInt8(NGHTTP2_FLAG_NONE.rawValue), last, code.rawValue, bytes.baseAddress, bytes.count)
        }
        return last
    }

    /// Whether PING frames are acknowledged (they are, at once, unless an `ignore-pings` fault is
    /// in force).
    var answersPings = true

    /// Changes the advertised MAX_CONCURRENT_STREAMS (APNs raises it once a token is accepted).
    func submitMaxConcurrentStreams(_ value: UInt32) {
        var entry = nghttp2_settings_entry(
            settings_id: Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue), value: value)
        _ = nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), &entry, 1)
    }

    // MARK: Answering

    /// Queues `response` on `stream`, if the stream still waits for the answer to request `id`
    /// (it may have been closed, or recycled for another stream, meanwhile). Returns whether it did.
    /// Unless `token` is `.none`, the delegate hears of it once: when the response's last frame goes
    /// out, or when it will not.
    @discardableResult
    func submit<Response: HTTP2Response>(
        _ response: borrowing Response, on stream: HTTP2Stream, id: Int32, token: ResponseToken = .none
    ) -> Bool {
        guard stream.awaitsAnswer(id: id) else {
            // A delayed answer whose stream went away meanwhile never goes out: its submitter,
            // which holds the token, knows.
            return false
        }
        let body = response.body
        stream.respond(body: body, token: token)
        let rc = responseHeaders.withHeaders(for: response) { headers, count in
            if body.isEmpty {
                return nghttp2_submit_response(session, id, headers, count, nil)
            }
            var provider = nghttp2_data_provider(source: nghttp2_data_source(ptr: nil), read_callback: readResponseBody)
            return nghttp2_submit_response(session, id, headers, count, &provider)
        }
        return rc == 0
    }

    /// Holds the answer to request `id` back for a while on purpose (a fault's delay): until it is
    /// submitted, the stuck-stream check does not time the stream. Does nothing when `stream` no
    /// longer waits for that answer.
    func delayAnswer(on stream: HTTP2Stream, id: Int32) {
        guard stream.awaitsAnswer(id: id) else { return }
        stream.delayAnswer()
    }

    /// Leaves request `id` unanswered for good (a `hang` fault): the stream is not timed, and its
    /// close is told (``HTTP2SessionDelegate/session(_:heldStreamClosed:)``). Does nothing when
    /// `stream` no longer waits for that answer.
    func hold(_ stream: HTTP2Stream, id: Int32) {
        guard stream.awaitsAnswer(id: id) else { return }
        stream.hold()
    }

    /// Ends one stream with RST_STREAM(`code`): the single way a stream error leaves. Does nothing
    /// when `stream` no longer carries request `id`.
    func reset(_ stream: HTTP2Stream, id: Int32, code: HTTP2ErrorCode) {
        guard stream.id == id, stream.phase != .idle, stream.phase != .reset else { return }
        let token = stream.reset()
        if token != .none { events.append(.responseAbandoned(token)) }
        // Remembered now, not when the RST_STREAM goes out (output may be backed up): the client's
        // frames for it until it reads the reset are in flight, and ignored (RFC 9113 §5.1).
        recentlyReset.insert(id)
        _ = nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), id, code.rawValue)
    }

    /// nghttp2 refused a new stream (its RST_STREAM REFUSED_STREAM is queued): remembered at once,
    /// as a reset of this side's, and told to the delegate once `mem_recv` returns.
    fileprivate func refused(_ id: Int32) {
        recentlyReset.insert(id)
        events.append(.refusedStream(id))
    }

    // MARK: Telling the delegate

    /// What the delegate hears of, noted by the callbacks as it happens and told once nghttp2 has
    /// returned (``tellEvents()``). Plain values: a stream may be recycled before it is told.
    private enum Event {
        case refusedStream(Int32)
        case heldStreamClosed(Int32)
        case responseFinished(ResponseToken)
        case responseAbandoned(ResponseToken)
        case sentGoAway(code: UInt32, lastStreamID: Int32)
    }

    // Appended to per response, from a callback (see the type's comment).
    @exclusivity(unchecked) private var events: [Event] = []
    /// Set while ``tellEvents()`` runs: what the delegate does meanwhile may note more events,
    /// which the same run tells.
    private var tellingEvents = false

    /// Tells the delegate the events noted so far, in order.
    private func tellEvents() {
        guard !events.isEmpty, !tellingEvents else { return }
        tellingEvents = true
        // Loaded once, not per event (as in ``handOverCompleted()``).
        let delegate = self.delegate
        var index = 0
        while index < events.count {
            let event = events[index]
            index += 1
            switch event {
            case .refusedStream(let id): delegate.session(self, refusedStream: id)
            case .heldStreamClosed(let id): delegate.session(self, heldStreamClosed: id)
            case .responseFinished(let token): delegate.session(self, responseFinished: token)
            case .responseAbandoned(let token): delegate.session(self, responseAbandoned: token)
            case .sentGoAway(let code, let lastStreamID): delegate.session(self, sentGoAway: code, lastStreamID: lastStreamID)
            }
        }
        events.removeAll(keepingCapacity: true)
        tellingEvents = false
    }

    // MARK: Stream bookkeeping (callbacks)

    fileprivate func beginStream(_ id: Int32) {
        let stream = streams.open(id: id)
        let unmanaged = Unmanaged.passUnretained(stream)
        headerBlockStream = unmanaged
        nghttp2_session_set_stream_user_data(session, id, unmanaged.toOpaque())
    }

    /// The stream of `id`, unretained: the pool owns every stream, and a callback that needs one
    /// for longer than `body` (closing a stream, which may drop it) takes a strong reference.
    private func unmanagedStream(_ id: Int32) -> Unmanaged<HTTP2Stream>? {
        if let current = headerBlockStream, current._withUnsafeGuaranteedRef({ $0.id == id }) {
            return current
        }
        guard let pointer = nghttp2_session_get_stream_user_data(session, id) else { return nil }
        return Unmanaged<HTTP2Stream>.fromOpaque(pointer)
    }

    /// Runs `body` with an open stream without retaining it (the header callbacks run this for
    /// every header of every request). `body` must not close streams.
    @inline(__always)
    private func withStream<R>(_ id: Int32, _ body: (HTTP2Stream) -> R) -> R? {
        unmanagedStream(id)?._withUnsafeGuaranteedRef(body)
    }

    fileprivate func closeStream(_ id: Int32) {
        guard let stream = unmanagedStream(id)?.takeUnretainedValue() else { return }
        nghttp2_session_set_stream_user_data(session, id, nil)
        if headerBlockStream?.toOpaque() == Unmanaged.passUnretained(stream).toOpaque() {
            headerBlockStream = nil
        }
        switch stream.phase {
        case .complete:
            // Not yet handed over: it can no longer be answered, and goes back to the pool once
            // the delegate has decided it (``handOverCompleted()``).
            stream.reset()
            return
        case .held:
            events.append(.heldStreamClosed(id))
        default:
            break
        }
        // A response whose last frame has not gone out will not.
        let token = streams.close(stream)
        if token != .none { events.append(.responseAbandoned(token)) }
    }

    /// A PING arrived: acknowledge it with the same opaque data, unless pings are withheld.
    /// A client that sends PINGs faster than it reads the acknowledgements fills nghttp2's queue
    /// of them (1,000): the connection then ends with ENHANCE_YOUR_CALM, as nghttp2's own
    /// acknowledging did (docs/architecture.md, "Limits and defences").
    fileprivate func ping(_ opaqueData: UnsafePointer<UInt8>) {
        guard answersPings else { return }
        let rc = nghttp2_submit_ping(session, UInt8(NGHTTP2_FLAG_ACK.rawValue), opaqueData)
        if rc == NGHTTP2_ERR_FLOODED.rawValue {
            nghttp2_session_terminate_session(session, HTTP2ErrorCode.enhanceYourCalm.rawValue)
        }
    }

    // MARK: Collecting a request (callbacks)

    fileprivate func header(
        streamID: Int32, name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>, trailer: Bool
    ) -> Bool {
        withStream(streamID) { header(stream: $0, name: name, value: value, trailer: trailer) } ?? true
    }

    /// Collects one field, enforcing RFC 9113's request rules (see ``RequestFieldRules``) on the
    /// way. Returns false to have nghttp2 reset the stream itself (header list over the limit).
    private func header(
        stream: HTTP2Stream, name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>, trailer: Bool
    ) -> Bool {
        // A reset stream's remaining fields are decoded by nghttp2 (HPACK state) and dropped.
        guard stream.collects else { return true }
        guard stream.countField(size: name.count + value.count + 32, limit: Int(settings.maxHeaderListSize)) else {
            // Past SETTINGS_MAX_HEADER_LIST_SIZE: the rest of the block is decoded (HPACK state)
            // and dropped, and the request is handed over as oversized once it ends (431: RFC 6585,
            // RFC 9113 §10.5.1).
            return true
        }
        if let known = KnownHeader(name: UnsafeRawBufferPointer(name)) {
            if known.isPseudoHeader {
                // Pseudo-headers: only in the request's own block, before any regular field.
                guard !trailer, !stream.seen.contains(.regular), !stream.seen.contains(RequestFieldRules.Seen(known))
                else { return malformed(stream) }
                stream.seen.insert(RequestFieldRules.Seen(known))
            } else {
                stream.seen.insert(.regular)
            }
            var fresh = false
            guard let text = values.value(of: known, value, fresh: &fresh, isValid: { RequestFieldRules.isValid($0, for: known) })
            else { return malformed(stream) }
            // Per-request values do not move the generation (the memos compare them on their own),
            // but a second one still rules the key out (DuplicateHeaders).
            noteRepeat(stream, bit: HeaderValueCache.bit(known: known), fresh: fresh && !known.isPerRequest, trailer: trailer)
            stream.seen.formUnion(RequestFieldRules.Seen(known, value: text))
            stream.request.set(known, value: text)
        } else {
            if name.first == UInt8(ascii: ":") {
                return malformed(stream)  // an unknown pseudo-header
            }
            stream.seen.insert(.regular)
            var fresh = false
            guard let (name, role, text, index) = values.other(name, value, fresh: &fresh) else {
                return malformed(stream)
            }
            if let index {
                noteRepeat(stream, bit: HeaderValueCache.bit(other: index), fresh: fresh, trailer: trailer)
            } else {
                stream.repeatable = false
            }
            switch role {
            case .contentLength:
                guard stream.declaredLength == nil, let length = RequestFieldRules.contentLength(value) else {
                    return malformed(stream)
                }
                stream.declaredLength = length
            case .host:
                guard !stream.seen.contains(.host) else { return malformed(stream) }
                stream.seen.insert(.host)
            case .plain, .te, .connectionSpecific, .malformed:
                break
            }
            stream.request.addOtherHeader(name: name, value: text)
        }
        return true
    }

    /// Keeps the request's ``RepeatKey`` honest: a value that is not the one last handed out for its
    /// field moves the generation; a field twice, or in trailers, rules the key out.
    private func noteRepeat(_ stream: HTTP2Stream, bit: UInt64, fresh: Bool, trailer: Bool) {
        if fresh {
            values.valueChanged()
        }
        if trailer || stream.repeatFields & bit != 0 {
            stream.repeatable = false
        }
        stream.repeatFields |= bit
    }

    /// A request that breaks RFC 9113's rules: RST_STREAM(PROTOCOL_ERROR), nothing answered.
    /// Returns what the header callback returns (true: go on decoding the header block).
    private func malformed(_ stream: HTTP2Stream) -> Bool {
        reset(stream, id: stream.id, code: .protocolError)
        return true
    }

    fileprivate func data(streamID: Int32, bytes: UnsafeRawBufferPointer) {
        uncreditedConnectionBytes += bytes.count
        withStream(streamID) { stream in
            guard stream.collects else { return }
            let before = stream.request.bodyLength
            stream.request.appendBody(bytes)
            // A body within a quarter of the stream window never needs its window credited back
            // (the request path's bodies are a few KB): only larger ones are, from then on whole.
            let after = stream.request.bodyLength
            if after > Self.streamCreditThreshold {
                let credit = before > Self.streamCreditThreshold ? bytes.count : after
                if let last = uncreditedStreamBytes.last, last.id == streamID {
                    uncreditedStreamBytes[uncreditedStreamBytes.count - 1].bytes += credit
                } else {
                    uncreditedStreamBytes.append((streamID, credit))
                }
            }
            if let declared = stream.declaredLength, stream.request.bodyLength > declared {
                _ = malformed(stream)  // more DATA than content-length announced
            }
        }
    }

    /// A complete HEADERS frame arrived: the request's header block (`trailer` false) or its
    /// trailers. Checks what the block as a whole must hold.
    fileprivate func endOfHeaders(_ streamID: Int32, trailer: Bool, endStream: Bool) {
        withStream(streamID) { stream in
            guard stream.collects else { return }
            if trailer ? !endStream : !RequestFieldRules.isComplete(stream.seen) {
                // Trailers must end the stream (§8.1); a request needs its pseudo-headers (§8.3.1).
                _ = malformed(stream)
                return
            }
            stream.request.repeatKey = stream.repeatable && !trailer
                ? RepeatKey(generation: values.generation, fields: stream.repeatFields) : nil
        }
    }

    /// A frame header arrived. For HEADERS on a client stream id not above every id seen before,
    /// with no open stream: RFC 9113 §5.1.1 makes that a connection error, PROTOCOL_ERROR for an id
    /// the client skipped, STREAM_CLOSED for a closed stream — except a stream this side reset,
    /// whose late frames are ignored (§5.1). (DATA on a closed stream is found earlier, in
    /// ``receive(_:)``.) Returns false when the connection must end (the GOAWAY is queued, and
    /// the end is logged as this rule's).
    fileprivate func beginFrame(type: UInt8, streamID: Int32) -> Bool {
        guard type == UInt8(NGHTTP2_HEADERS.rawValue), streamID & 1 == 1 else { return true }
        if streamID > highestClientStream {
            let expected = highestClientStream == 0 ? 1 : highestClientStream + 2
            if streamID > expected {
                if skippedStreams.count == Self.skippedRangesKept { skippedStreams.removeFirst() }
                skippedStreams.append(expected...(streamID - 2))
            }
            highestClientStream = streamID
            return true
        }
        if nghttp2_session_find_stream(session, streamID) != nil || recentlyReset.contains(streamID) {
            return true  // trailers of an open stream (nghttp2 judges them), or late after our reset
        }
        let skipped = skippedStreams.contains { $0.contains(streamID) }
        return skipped
            ? endSession(.protocolError, "HEADERS on skipped stream \(streamID)")
            : endSession(.streamClosed, "HEADERS on closed stream \(streamID)")
    }

    /// Why this side ended the session on purpose, for the connection's log (instead of nghttp2's
    /// "the user callback function failed", which is how a callback stops it).
    private(set) var deliberateEnd: (code: HTTP2ErrorCode, reason: String)?

    /// Ends the session with GOAWAY `code` (queued), noting why; returns false for the callback.
    private func endSession(_ code: HTTP2ErrorCode, _ reason: String) -> Bool {
        deliberateEnd = (code, reason)
        goAwayLastStream = min(goAwayLastStream, nghttp2_session_get_last_proc_stream_id(session))
        nghttp2_session_terminate_session(session, code.rawValue)
        return false
    }

    /// A GOAWAY went out (this side's or nghttp2's own): streams above its last stream id are
    /// ignored from now on, and the delegate counts and tells it.
    fileprivate func sentGoAway(code: UInt32, lastStreamID: Int32) {
        goAwayLastStream = min(goAwayLastStream, lastStreamID)
        goAwayWentOut = true
        events.append(.sentGoAway(code: code, lastStreamID: lastStreamID))
    }

    /// A frame went out; RST_STREAM ids are remembered (see ``beginFrame(type:streamID:)``), and
    /// a response's last frame finishes it (its token is told).
    fileprivate func sentFrame(type: UInt8, streamID: Int32, endStream: Bool) {
        if type == UInt8(NGHTTP2_RST_STREAM.rawValue) {
            recentlyReset.insert(streamID)
        } else if endStream {
            guard let token = withStream(streamID, { $0.responseSent() }), token != .none else { return }
            events.append(.responseFinished(token))
        }
    }

    /// The connection ends: no response still waiting to go out will (their tokens are told).
    func abandonPendingResponses() {
        for stream in streams.openStreams {
            let token = stream.abandonResponse()
            if token != .none { events.append(.responseAbandoned(token)) }
        }
        tellEvents()
    }

    fileprivate func receivedSettings() {
        receivedPreface = true
    }

    fileprivate func endOfStream(_ streamID: Int32) {
        withStream(streamID) { stream in
            switch stream.phase {
            case .receiving:
                if let declared = stream.declaredLength, stream.request.bodyLength != declared {
                    _ = malformed(stream)  // less DATA than content-length announced
                    return
                }
            case .discarding:
                break  // handed over as oversized (its body was dropped, so not compared)
            default:
                return
            }
            stream.complete()
            completed.append(stream)
        }
    }

    fileprivate func copyResponseBody(
        streamID: Int32, into buffer: UnsafeMutablePointer<UInt8>, length: Int, flags: UnsafeMutablePointer<UInt32>
    ) -> Int {
        guard let (count, last) = withStream(streamID, { $0.readBody(into: buffer, length: length) }) ?? nil else {
            return Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue)
        }
        if last {
            flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
        }
        return count
    }
}

// MARK: - nghttp2 callbacks

/// Runs `body` with the session a callback's `user_data` points to, without retaining it: the
/// session is alive for the whole `mem_recv`/`mem_send` call the callback runs inside.
private func withOwner<T>(_ userData: UnsafeMutableRawPointer?, _ body: (HTTP2Session) -> T) -> T {
    Unmanaged<HTTP2Session>.fromOpaque(userData!)._withUnsafeGuaranteedRef(body)
}

private let readResponseBody: nghttp2_data_source_read_callback = {
    _, streamID, buffer, length, flags, _, userData in
    withOwner(userData) { $0.copyResponseBody(streamID: streamID, into: buffer!, length: length, flags: flags!) }
}

extension HTTP2Session {
    fileprivate static func install(into callbacks: OpaquePointer?) {
        nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks) { _, frame, userData in
            guard let frame else { return 0 }
            if frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue),
               frame.pointee.headers.cat == NGHTTP2_HCAT_REQUEST {
                withOwner(userData) { $0.beginStream(frame.pointee.hd.stream_id) }
            }
            return 0
        }
        nghttp2_session_callbacks_set_on_header_callback(callbacks) {
            _, frame, name, nameLength, value, valueLength, _, userData in
            guard let frame, let name, let value else { return 0 }
            let accepted = withOwner(userData) {
                $0.header(
                    streamID: frame.pointee.hd.stream_id,
                    name: UnsafeBufferPointer(start: name, count: nameLength),
                    value: UnsafeBufferPointer(start: value, count: valueLength),
                    trailer: frame.pointee.headers.cat == NGHTTP2_HCAT_HEADERS)
            }
            return accepted ? 0 : Int32(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue)
        }
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks) {
            _, _, streamID, data, length, userData in
            guard let data else { return 0 }
            withOwner(userData) { $0.data(streamID: streamID, bytes: UnsafeRawBufferPointer(start: data, count: length)) }
            return 0
        }
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks) { _, frame, userData in
            guard let frame else { return 0 }
            let type = frame.pointee.hd.type
            let endStream = frame.pointee.hd.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0
            if type == UInt8(NGHTTP2_HEADERS.rawValue) {
                let category = frame.pointee.headers.cat
                if category == NGHTTP2_HCAT_REQUEST || category == NGHTTP2_HCAT_HEADERS {
                    withOwner(userData) {
                        $0.endOfHeaders(
                            frame.pointee.hd.stream_id, trailer: category == NGHTTP2_HCAT_HEADERS, endStream: endStream)
                    }
                }
            }
            if type == UInt8(NGHTTP2_PING.rawValue), frame.pointee.hd.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) == 0 {
                withUnsafePointer(to: frame.pointee.ping.opaque_data) { opaque in
                    opaque.withMemoryRebound(to: UInt8.self, capacity: 8) { bytes in
                        withOwner(userData) { $0.ping(bytes) }
                    }
                }
                return 0
            }
            if endStream, type == UInt8(NGHTTP2_HEADERS.rawValue) || type == UInt8(NGHTTP2_DATA.rawValue) {
                // The stream may already be gone, or reset; endOfStream checks.
                withOwner(userData) { $0.endOfStream(frame.pointee.hd.stream_id) }
            } else if type == UInt8(NGHTTP2_SETTINGS.rawValue) {
                withOwner(userData) { $0.receivedSettings() }
            }
            return 0
        }
        nghttp2_session_callbacks_set_on_begin_frame_callback(callbacks) { _, header, userData in
            guard let header, header.pointee.type == UInt8(NGHTTP2_HEADERS.rawValue) else { return 0 }
            let accepted = withOwner(userData) { $0.beginFrame(type: header.pointee.type, streamID: header.pointee.stream_id) }
            return accepted ? 0 : Int32(NGHTTP2_ERR_CALLBACK_FAILURE.rawValue)
        }
        nghttp2_session_callbacks_set_on_frame_send_callback(callbacks) { _, frame, userData in
            guard let frame else { return 0 }
            let type = frame.pointee.hd.type
            if type == UInt8(NGHTTP2_GOAWAY.rawValue) {
                // Every GOAWAY, nghttp2's own defences' too, is told once it is on its way.
                let code = frame.pointee.goaway.error_code, last = frame.pointee.goaway.last_stream_id
                withOwner(userData) { $0.sentGoAway(code: code, lastStreamID: last) }
                return 0
            }
            let endStream = frame.pointee.hd.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0
            guard type == UInt8(NGHTTP2_RST_STREAM.rawValue)
                || (endStream && (type == UInt8(NGHTTP2_HEADERS.rawValue) || type == UInt8(NGHTTP2_DATA.rawValue)))
            else { return 0 }
            withOwner(userData) { $0.sentFrame(type: type, streamID: frame.pointee.hd.stream_id, endStream: endStream) }
            return 0
        }
        nghttp2_session_callbacks_set_on_invalid_frame_recv_callback(callbacks) { _, frame, libraryError, userData in
            // The one invalid-frame case that is not the client's protocol error: a stream refused
            // for the concurrency limit (the session answers it with RST_STREAM REFUSED_STREAM).
            guard let frame, libraryError == NGHTTP2_ERR_REFUSED_STREAM.rawValue,
                  frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue)
            else { return 0 }
            withOwner(userData) { $0.refused(frame.pointee.hd.stream_id) }
            return 0
        }
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks) { _, streamID, _, userData in
            withOwner(userData) { $0.closeStream(streamID) }
            return 0
        }
    }
}

/// Reads the frame headers of a session's input ahead of nghttp2, which skips DATA for a stream it
/// no longer knows without telling (closed streams are not kept: `no_closed_streams`), so that DATA
/// on a closed stream can be answered as RFC 9113 §6.1 requires. It reads 9 bytes per frame and
/// skips payloads, across chunk boundaries, after the 24-byte client preface; DATA frames only are
/// judged, by their stream id.
///
/// Two things keep it in step with nghttp2 however the input is cut (``HTTP2Session/receive(_:)``
/// acts on its events):
/// - Its judgement of a DATA frame whole in a chunk is a suspicion only: it reads the session as
///   nghttp2 left it after the previous chunk, and a frame earlier in the same chunk may have
///   opened the stream since (HEADERS whose PRIORITY or padding fields arrive in this chunk open
///   their stream only once those are read). nghttp2 reads up to the suspect frame, which is then
///   judged again.
/// - A frame header cut by the end of a chunk is held here, not given to nghttp2, until its 9
///   bytes are in; nghttp2 then reads it whole, after everything before it, so a DATA frame's
///   stream is judged exactly, and nghttp2's per-read counting (its limit of CONTINUATION frames
///   counts a header read in pieces once per piece) never sees a header in pieces.
struct FrameHeaderScanner {
    enum Event {
        /// A DATA frame whose header is whole in the chunk at `frameStart`, on a stream that looked
        /// closed when the scanner read it.
        case suspect(stream: Int32, frameStart: Int)
        /// A frame header starts at `frameStart` and the chunk ends before its 9 bytes: the bytes
        /// from there on are held by the scanner, not to be given to nghttp2.
        case heldFrom(Int)
        /// The header held from earlier chunks is whole (``withHeldHeader(_:)``), with the chunk's
        /// bytes before `resumeAt`; `dataStream` is its stream when it is a DATA frame's.
        case completed(resumeAt: Int, dataStream: Int32?)
        /// A HEADERS frame (whole in the chunk) on `stream`, reported only while
        /// ``reportsNewStreams`` is set.
        case newStream(Int32)
    }

    /// Whether HEADERS frames are reported (``Event/newStream(_:)``): only after a GOAWAY that
    /// keeps the connection open.
    var reportsNewStreams = false

    /// Preface bytes still to skip, then payload bytes of the current frame.
    private var skip = 24
    /// Bytes of a frame header split across chunks, collected so far (0 to 8; 9 completes it).
    private var headerBytes = 0
    /// Room for that header's 9 bytes.
    private var partial: (UInt64, UInt64) = (0, 0)

    /// Scans `bytes` from `index` on; returns the next event, with `index` just past what it read
    /// (call again from there), or `nil` at the end of the chunk.
    mutating func scan(
        _ bytes: UnsafeRawBufferPointer, from index: inout Int, dataOnClosedStream: (Int32) -> Bool
    ) -> Event? {
        guard let base = bytes.baseAddress else { return nil }
        let count = bytes.count
        while index < count {
            if skip > 0 {
                let taken = min(skip, count - index)
                skip -= taken
                index += taken
                continue
            }
            if headerBytes == 0, count - index >= 9 {
                // The whole header is in this chunk, as it nearly always is: read in place.
                let start = index
                index += 9
                let header = base + start
                skip = Self.payloadLength(header)
                if let stream = Self.dataStream(header), dataOnClosedStream(stream) {
                    return .suspect(stream: stream, frameStart: start)
                }
                if reportsNewStreams, let stream = Self.headersStream(header) {
                    return .newStream(stream)
                }
                continue
            }
            // A header cut by the chunk's end: collected here until whole. One begun in an earlier
            // chunk goes on at this chunk's first byte, so `start` is 0 for it.
            let start = index
            let taken = min(9 - headerBytes, count - index)
            withUnsafeMutableBytes(of: &partial) { held in
                for offset in 0..<taken { held[headerBytes + offset] = bytes[index + offset] }
            }
            headerBytes += taken
            index += taken
            guard headerBytes == 9 else {
                // The chunk ended first: hold its bytes from the header's start on.
                return .heldFrom(start)
            }
            headerBytes = 0
            let (length, stream) = withUnsafeBytes(of: partial) { (Self.payloadLength($0.baseAddress!), Self.dataStream($0.baseAddress!)) }
            skip = length
            return .completed(resumeAt: index, dataStream: stream)
        }
        return nil
    }

    /// Runs `body` with the 9 bytes of the header that ``Event/completed(resumeAt:dataStream:)``
    /// reported.
    func withHeldHeader<R>(_ body: (UnsafePointer<UInt8>) -> R) -> R {
        withUnsafeBytes(of: partial) { body($0.baseAddress!.assumingMemoryBound(to: UInt8.self)) }
    }

    private static func payloadLength(_ header: UnsafeRawPointer) -> Int {
        let bytes = header.assumingMemoryBound(to: UInt8.self)
        return Int(bytes[0]) << 16 | Int(bytes[1]) << 8 | Int(bytes[2])
    }

    /// The stream id of a HEADERS frame's header, else `nil`.
    private static func headersStream(_ header: UnsafeRawPointer) -> Int32? {
        stream(of: header, type: NGHTTP2_HEADERS)
    }

    /// The stream id of a DATA frame's header (not stream 0), else `nil`.
    private static func dataStream(_ header: UnsafeRawPointer) -> Int32? {
        stream(of: header, type: NGHTTP2_DATA).flatMap { $0 == 0 ? nil : $0 }
    }

    /// The stream id of a frame header of `type`, else `nil`.
    private static func stream(of header: UnsafeRawPointer, type: nghttp2_frame_type) -> Int32? {
        let bytes = header.assumingMemoryBound(to: UInt8.self)
        guard bytes[3] == UInt8(type.rawValue) else { return nil }
        return Int32(bitPattern: UInt32(bytes[5] & 0x7F) << 24 | UInt32(bytes[6]) << 16
            | UInt32(bytes[7]) << 8 | UInt32(bytes[8]))
    }
}

/// The stream ids this side reset lately, oldest forgotten first: a client may have sent frames
/// for them before it read the reset (RFC 9113 §5.1: those are ignored). Up to ``capacity`` of them
/// (a client opening a thousand streams before it reads SETTINGS has all but one refused); the
/// storage grows as resets happen and then is reused as a ring, so a connection that resets
/// nothing costs nothing, and a client resetting streams by the thousand costs 4 KB.
struct RecentStreams {
    static let capacity = 1024
    private var ids: [Int32] = []
    private var next = 0

    mutating func insert(_ id: Int32) {
        if ids.count < Self.capacity {
            ids.append(id)
        } else {
            ids[next] = id
            next = (next + 1) % Self.capacity
        }
    }

    func contains(_ id: Int32) -> Bool {
        id != 0 && ids.contains(id)
    }
}

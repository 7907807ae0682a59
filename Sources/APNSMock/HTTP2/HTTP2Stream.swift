import APNSMockCore
internal import CAPNSMockShims

/// An opaque value a response is submitted with (``HTTP2Session/submit(_:on:id:token:)``) and
/// given back once: when the response's last frame goes out
/// (``HTTP2SessionDelegate/session(_:responseFinished:)``) or when its stream or connection ends
/// first (``HTTP2SessionDelegate/session(_:responseAbandoned:)``). What it stands for is the
/// submitter's business; ``none`` asks for neither report.
struct ResponseToken: Equatable {
    var rawValue: UInt64
    static let none = ResponseToken(rawValue: 0)
}

/// One request stream: what it collected, where it is in its life, and the body it answers with.
///
/// Where it is in its life is one private ``State``, written only by the transition methods below,
/// each of which stops the process on a move its state does not allow (a bug in the session, not
/// something a client can cause), as swift-nio-http2's stream state machine does.
///
/// Instances are recycled by their session's ``StreamPool``, so a long-lived connection does not
/// allocate a new one, nor new body storage, for every request. Only the session's event loop
/// touches a stream. Properties marked `@exclusivity(unchecked)` are read or written on every
/// request (several of them per header field, from nghttp2's callbacks) while calls into other
/// types are in flight, which the compiler cannot prove leave them alone; nothing reached from
/// those calls holds the stream's properties `inout`, so no access overlaps and the run-time check
/// is skipped.
final class HTTP2Stream {
    /// Where a stream is in its life, as readers outside the state machine see it (the
    /// stuck-stream check, tests): ``State`` without its payloads.
    enum Phase: Equatable {
        case idle, receiving, discarding, complete, dispatched, held, responding, answered, reset
    }

    private enum State {
        /// In the pool, bound to no stream.
        case idle
        /// Its header block and body are arriving.
        case receiving
        /// Its header list passed SETTINGS_MAX_HEADER_LIST_SIZE: the rest of the block (decoded,
        /// for HPACK's sake) and the body are dropped; it is handed over as oversized once it ends.
        case discarding
        /// END_STREAM arrived: waiting, with the other requests completed by the same input, to be
        /// handed over once `mem_recv` returns.
        case complete
        /// Handed over and not answered yet: an answer may come late, or never. `delayed`: its
        /// answer is held back on purpose for a while (a fault's delay), so the stuck-stream check
        /// does not time it and its connection is not ended for idleness.
        case dispatched(delayed: Bool)
        /// Deliberately never answered (a `hang` fault): not timed either; its close is reported.
        case held
        /// Its response was submitted; `body[offset...]` is still to go out. `token` is reported
        /// once: when the last frame goes out, or when the stream closes (or the connection ends,
        /// then it is `.none`) first.
        case responding(body: [UInt8], offset: Int, token: ResponseToken)
        /// Its response's last frame went out (nghttp2 closes it next): the body is dropped.
        case answered
        /// Reset with RST_STREAM (a malformed request, a limit, an API's choice), or closed by the
        /// client while complete; whatever else arrives for it is dropped.
        case reset
    }

    // The state and the ids are read by every callback of the stream (see the type's comment).
    @exclusivity(unchecked) private var state = State.idle
    /// The HTTP/2 stream identifier while the stream is not idle.
    @exclusivity(unchecked) private(set) var id: Int32 = 0
    /// Position in the owning pool's storage (read when a stream past the idle limit is freed).
    var poolIndex = 0

    /// The request being collected, read and written in place (several times per header, from
    /// nghttp2 callbacks on one event loop). It lives in a cell of its own so that
    /// ``withRequest(_:)`` can move it out and back, which a stored property does not allow.
    var request: PushRequest {
        unsafeAddress {
            assert(!requestIsLent, "the request of a stream is read while it is being decided")
            return UnsafePointer(requestCell)
        }
        unsafeMutableAddress {
            assert(!requestIsLent, "the request of a stream is written while it is being decided")
            return requestCell
        }
    }
    private let requestCell: UnsafeMutablePointer<PushRequest> = {
        let cell = UnsafeMutablePointer<PushRequest>.allocate(capacity: 1)
        cell.initialize(to: PushRequest())
        return cell
    }()
    /// Set while ``withRequest(_:)`` has the request out of its cell (checked in debug builds).
    private var requestIsLent = false
    /// Header-list bytes so far, counted as RFC 9113 does (name + value + 32 per field). Counting
    /// stops at the field that passes the limit, so a stream whose count is past the limit is one
    /// whose header list was too large.
    // Written per header field, from the header callback (see the type's comment).
    @exclusivity(unchecked) private(set) var headerListSize = 0
    /// Pseudo-headers and `host` seen so far, and whether a regular field came (RFC 9113 rules).
    // Read and written per header field (see the type's comment).
    @exclusivity(unchecked) var seen = RequestFieldRules.Seen()
    /// For the request's ``RepeatKey``: a bit per field carried, and whether the key can vouch for
    /// the request (not when a field came twice, came in trailers, or was not cached).
    // Both read and written per header field (see the type's comment).
    @exclusivity(unchecked) var repeatFields: UInt64 = 0
    @exclusivity(unchecked) var repeatable = true
    /// The `content-length` the request announced.
    // Read per DATA chunk (see the type's comment).
    @exclusivity(unchecked) var declaredLength: Int?
    /// What the stuck-stream check (``StreamPool/inspect(now:receiving:answering:)``) last saw of
    /// this instance, and since when (uptime nanoseconds). Only that check reads or writes these,
    /// every few seconds, so the request path pays nothing for it.
    var watchedID: Int32 = 0
    var watchedPhase = Phase.idle
    var watchedSince: UInt64 = 0

    // MARK: Reading the state

    var phase: Phase {
        switch state {
        case .idle: .idle
        case .receiving: .receiving
        case .discarding: .discarding
        case .complete: .complete
        case .dispatched: .dispatched
        case .held: .held
        case .responding: .responding
        case .answered: .answered
        case .reset: .reset
        }
    }

    /// Whether this instance is bound to stream `id` and waiting for its answer.
    func awaitsAnswer(id: Int32) -> Bool {
        if case .dispatched = state { return self.id == id }
        return false
    }

    /// Whether header fields and DATA are still collected (not once the header list is too large).
    var collects: Bool {
        if case .receiving = state { return true }
        return false
    }

    /// Whether its answer is held back on purpose, for a while or for ever: the stuck-stream check
    /// does not time it, and its connection is not ended for idleness (docs/architecture.md,
    /// "Limits and defences").
    var isExemptFromTimeouts: Bool {
        switch state {
        case .dispatched(delayed: true), .held: true
        default: false
        }
    }

    var isHeld: Bool { phase == .held }

    /// The body being sent (empty when none is).
    var responseBody: [UInt8] {
        if case .responding(let body, _, _) = state { return body }
        return []
    }

    // MARK: Transitions: the only writers of the state

    /// idle → receiving: binds a recycled instance to a new stream, its request collected into
    /// `storage` (see ``PushRequest/Storage``).
    func open(id: Int32, storage: consuming PushRequest.Storage = PushRequest.Storage()) {
        guard case .idle = state else { preconditionFailure("opening a stream that is \(phase)") }
        state = .receiving
        self.id = id
        request.reset(adopting: storage)
        headerListSize = 0
        seen = []
        repeatFields = 0
        repeatable = true
        declaredLength = nil
    }

    /// Counts a header field of `size` bytes (RFC 9113's count) against `limit`: receiving →
    /// discarding when the header list passes it. Returns whether the field is to be collected.
    func countField(size: Int, limit: Int) -> Bool {
        guard case .receiving = state else { preconditionFailure("counting a field of a stream that is \(phase)") }
        headerListSize += size
        guard headerListSize > limit else { return true }
        state = .discarding
        return false
    }

    /// receiving or discarding → complete: END_STREAM arrived.
    func complete() {
        switch state {
        case .receiving, .discarding: state = .complete
        default: preconditionFailure("completing a stream that is \(phase)")
        }
    }

    /// complete → dispatched: handed over to be answered.
    func dispatch() {
        guard case .complete = state else { preconditionFailure("dispatching a stream that is \(phase)") }
        state = .dispatched(delayed: false)
    }

    /// dispatched → dispatched, its answer held back on purpose for a while (a fault's delay).
    func delayAnswer() {
        guard case .dispatched = state else { preconditionFailure("delaying the answer of a stream that is \(phase)") }
        state = .dispatched(delayed: true)
    }

    /// dispatched → held: never answered on purpose (a `hang` fault).
    func hold() {
        guard case .dispatched = state else { preconditionFailure("holding a stream that is \(phase)") }
        state = .held
    }

    /// dispatched → responding, with the body the data provider sends and the response's token.
    func respond(body: [UInt8], token: ResponseToken = .none) {
        guard case .dispatched = state else { preconditionFailure("answering a stream that is \(phase)") }
        state = .responding(body: body, offset: 0, token: token)
    }

    /// Copies the next part of the response body, at most `length` bytes, into `buffer`. Returns
    /// how many, and whether that was the last of it; `nil` when the stream is not responding.
    func readBody(into buffer: UnsafeMutablePointer<UInt8>, length: Int) -> (count: Int, last: Bool)? {
        guard case .responding(let body, let offset, let token) = state else { return nil }
        let count = min(body.count - offset, length)
        if count > 0 {
            body.withUnsafeBufferPointer { buffer.update(from: $0.baseAddress! + offset, count: count) }
            state = .responding(body: body, offset: offset + count, token: token)
        }
        return (count, offset + count == body.count)
    }

    /// The token of the response going out, not given back yet (`.none` when there is none).
    /// Read in place: binding the body too would retain it.
    private var pendingToken: ResponseToken {
        if case .responding(_, _, let token) = state { return token }
        return .none
    }

    /// responding → answered: the response's last frame went out. Returns its token (`.none` when
    /// it had none, or the stream was not responding), which is given back once.
    func responseSent() -> ResponseToken {
        guard case .responding(_, _, let token) = state else { return .none }
        state = .answered
        return token
    }

    /// The response will not go out (its connection ends first): its token, given back once, as
    /// ``responseSent()`` does; the stream stays responding until it closes.
    func abandonResponse() -> ResponseToken {
        guard case .responding(let body, let offset, let token) = state, token != .none else { return .none }
        state = .responding(body: body, offset: offset, token: .none)
        return token
    }

    /// Any state but idle → reset (RST_STREAM, or the client closed a complete stream). A
    /// response's token not given back yet is returned: that response will not go out.
    @discardableResult
    func reset() -> ResponseToken {
        if case .idle = state { preconditionFailure("resetting an idle stream") }
        let token = pendingToken
        state = .reset
        return token
    }

    /// Any → idle: the stream closed; its storage waits for reuse. A response's token not given
    /// back yet is returned: that response did not go out.
    @discardableResult
    func close() -> ResponseToken {
        let token = pendingToken
        state = .idle
        id = 0
        return token
    }

    /// Runs `body` with the collected request moved out of its cell into a local and back, so
    /// that deciding reads it without copying. Borrowing it where it lives would copy it (the
    /// compiler cannot see that nothing writes the cell meanwhile; a copy retains every field),
    /// and swapping an empty request in and out, as this did before, built and destroyed one each
    /// time (about 370 instructions). While `body` runs nothing may touch ``request``: only this
    /// stream's header and DATA callbacks do, and they run inside nghttp2's `mem_recv`, before the
    /// session hands requests over.
    func withRequest<R>(_ body: (borrowing PushRequest) -> R) -> R {
        let taken = requestCell.move()
        requestIsLent = true
        let result = body(taken)
        requestIsLent = false
        requestCell.initialize(to: consume taken)
        return result
    }

    deinit {
        requestCell.deinitialize(count: 1)
        requestCell.deallocate()
    }
}

/// Owns every ``HTTP2Stream`` of one session, open or recycled.
///
/// nghttp2 keeps an unretained pointer to each open stream as its stream user data, so finding a
/// stream in a callback is nghttp2's own lookup, with no Swift dictionary on the request path; the
/// pool's storage is what keeps those streams alive.
final class StreamPool {
    // Every stream the pool keeps (see ``close(_:)``). The arrays and counts below are read and
    // written as each stream opens and closes, while calls into other types are in flight; only
    // the session's event loop touches them and nothing those calls reach holds them, so the
    // run-time exclusivity check is skipped.
    @exclusivity(unchecked) private var streams: [HTTP2Stream] = []
    /// Streams of closed requests, ready for reuse.
    @exclusivity(unchecked) private var idle: [HTTP2Stream] = []
    @exclusivity(unchecked) private(set) var openCount = 0
    /// Enough for the stream concurrency clients commonly run (h2load -m 100, pushy, aioapns); a
    /// burst beyond it allocates, and the extra streams are freed as they close.
    static let idleLimit = 256
    /// The part of an ``HTTP2Stream`` instance that collecting a request writes (its phase and ids,
    /// the request's fields, the RFC 9113 bookkeeping): about the whole object.
    static let prefetchedBytes: UInt = 448

    /// Request storage handed back by decided or closed streams, most recent last: the next stream
    /// takes the buffers touched last, still in cache, instead of its own from a hundred requests
    /// ago. As many as streams are kept: a client may send every stream's HEADERS before any
    /// DATA (h2load and nghttp2-based clients do), so a hundred requests can be arriving at once.
    // Taken from and given back once per request, like the arrays above.
    @exclusivity(unchecked) private var storage: [PushRequest.Storage] = []
    static let storageLimit = idleLimit

    /// A stream bound to `id`, recycled when one is idle.
    func open(id: Int32) -> HTTP2Stream {
        let stream: HTTP2Stream
        if let recycled = idle.popLast() {
            stream = recycled
            // Clients open streams in bursts (a HEADERS frame per stream, back to back): fetch the
            // instance the next open will take while this request is collected. An idle stream
            // was last touched when it closed, usually a whole burst of requests ago.
            if let next = idle.last {
                CAPNSMockShims_prefetch_for_write(Unmanaged.passUnretained(next).toOpaque(), Self.prefetchedBytes)
            }
        } else {
            stream = HTTP2Stream()
            stream.poolIndex = streams.count
            streams.append(stream)
        }
        stream.open(id: id, storage: storage.popLast() ?? PushRequest.Storage())
        openCount += 1
        return stream
    }

    /// Takes back the storage of `stream`'s request, once nothing reads the request any more (it
    /// was decided, or the stream closed).
    func recycleStorage(of stream: HTTP2Stream) {
        let taken = stream.request.takeStorage()
        if taken.hasCapacity, storage.count < Self.storageLimit {
            storage.append(taken)
        }
    }

    /// The streams still open, for a connection that ends (their responses will not go out).
    var openStreams: [HTTP2Stream] { streams.filter { $0.phase != .idle } }

    /// What ``inspect(now:receiving:answering:)`` found.
    struct Inspection: Equatable {
        /// The phase of a stream that stayed in it past its limit, if any.
        var stuck: HTTP2Stream.Phase?
        /// Streams whose answer is held back on purpose (``HTTP2Stream/isExemptFromTimeouts``).
        var exempt = 0
    }

    /// The stuck-stream check, run by the connection's timer every few seconds, never per request:
    /// a stream found in the same phase (under the same id) as at an earlier inspection for longer
    /// than its limit — `receiving` (or `discarding`) for `receiving` nanoseconds, any later phase
    /// for `answering` — is stuck. A stream is first timed at the first inspection that sees its phase, so it is
    /// caught between its limit and its limit plus the inspection interval.
    func inspect(now: UInt64, receiving: UInt64, answering: UInt64) -> Inspection {
        var result = Inspection()
        guard openCount > 0 else { return result }
        for stream in streams where stream.phase != .idle {
            if stream.isExemptFromTimeouts {
                result.exempt += 1
                continue
            }
            if stream.watchedID != stream.id || stream.watchedPhase != stream.phase {
                stream.watchedID = stream.id
                stream.watchedPhase = stream.phase
                stream.watchedSince = now
                continue
            }
            let limit = stream.phase == .receiving || stream.phase == .discarding ? receiving : answering
            if now &- stream.watchedSince >= limit, result.stuck == nil {
                result.stuck = stream.phase
            }
        }
        return result
    }

    /// Returns a closed stream to the pool, or frees it past ``idleLimit`` so that a burst of
    /// streams does not pin memory. Returns the token of a response that did not go out.
    @discardableResult
    func close(_ stream: HTTP2Stream) -> ResponseToken {
        recycleStorage(of: stream)
        let token = stream.close()
        openCount -= 1
        if idle.count < Self.idleLimit {
            idle.append(stream)
        } else {
            let last = streams.removeLast()
            if last !== stream {
                streams[stream.poolIndex] = last
                last.poolIndex = stream.poolIndex
            }
        }
        return token
    }
}

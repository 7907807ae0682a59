import APNSMockCore
internal import CAPNSMockShims

/// One request stream: what it collected, where it is in its life, and the body it answers with.
///
/// Instances are recycled by their session's ``StreamPool``, so a long-lived connection does not
/// allocate a new one, nor new body storage, for every request. Only the session's event loop
/// touches a stream.
final class HTTP2Stream {
    /// Where a stream is in its life. Moves only forward through ``open(id:)``, ``dispatch()``,
    /// ``respond()`` and ``reset()``, back to `idle` through ``close()``; any other move is a bug in
    /// the session, not something a client can cause, and stops the process.
    enum Phase: Equatable {
        /// In the pool, bound to no stream.
        case idle
        /// Its header block and body are arriving.
        case receiving
        /// Complete: waiting to be handed to its API once the read is processed, or handed and
        /// not answered yet (an answer may come late, or never: a fault's delay or `hang`).
        case dispatched
        /// Its response was submitted; the body, if any, is going out.
        case responding
        /// Reset with RST_STREAM (a malformed request, a limit, an API's choice); whatever else
        /// arrives for it is dropped.
        case reset
    }

    @exclusivity(unchecked) private(set) var phase = Phase.idle
    /// The HTTP/2 stream identifier while the stream is not idle.
    @exclusivity(unchecked) private(set) var id: Int32 = 0
    /// Position in the owning pool's storage.
    @exclusivity(unchecked) var poolIndex = 0

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
    /// Header-list bytes so far, counted as RFC 9113 does (name + value + 32 per field).
    @exclusivity(unchecked) var headerListSize = 0
    /// Pseudo-headers and `host` seen so far, and whether a regular field came (RFC 9113 rules).
    @exclusivity(unchecked) var seen = RequestFieldRules.Seen()
    /// For the request's ``RepeatKey``: a bit per field carried, and whether the key can vouch for
    /// the request (not when a field came twice, came in trailers, or was not cached).
    @exclusivity(unchecked) var repeatFields: UInt64 = 0
    @exclusivity(unchecked) var repeatable = true
    /// The `content-length` the request announced.
    @exclusivity(unchecked) var declaredLength: Int?
    /// The header list passed SETTINGS_MAX_HEADER_LIST_SIZE: the rest of it and the body are
    /// dropped, and the request is answered 431.
    @exclusivity(unchecked) var headerListTooLarge = false
    /// Set when the stream is deliberately never answered (a `hang` fault): it is exempt from the
    /// stuck-stream timeout, and its session reports its close to the delegate.
    @exclusivity(unchecked) var isHeld = false
    /// Complete and waiting, with the other requests of the same input, to be handed to the
    /// session's delegate (``HTTP2Session``'s `completed`).
    @exclusivity(unchecked) var awaitsDecision = false
    /// Body being sent by the data provider, and how much of it has gone out.
    @exclusivity(unchecked) private(set) var responseBody: [UInt8] = []
    @exclusivity(unchecked) var responseOffset = 0
    /// Set by whoever holds the stream's answer back for a while on purpose (a fault's delay;
    /// ``isHeld`` counts the same for a stream never answered): while set, the connection's stuck-stream check does not time the stream, and
    /// the connection is not ended for idleness. Cleared when the stream is answered, reset or
    /// reused (docs/architecture.md, "Limits and defences").
    @exclusivity(unchecked) var exemptFromTimeouts = false
    /// The record of the request whose response was submitted and has not gone out yet (0: none),
    /// and whether that record says the response was written: the session tells its delegate when
    /// the response's last frame goes out (a record that said otherwise is corrected) or the
    /// stream closes before (one that said so is corrected).
    @exclusivity(unchecked) var pendingRecord: UInt64 = 0
    @exclusivity(unchecked) var pendingRecordSaysWritten = false
    /// What the stuck-stream check (``StreamPool/inspect(now:receiving:answering:)``) last saw of
    /// this instance, and since when (uptime nanoseconds). Only that check reads or writes these,
    /// every few seconds, so the request path pays nothing for it.
    var watchedID: Int32 = 0
    var watchedPhase = Phase.idle
    var watchedSince: UInt64 = 0

    /// idle → receiving: binds a recycled instance to a new stream, its request collected into
    /// `storage` (see ``PushRequest/Storage``).
    func open(id: Int32, storage: consuming PushRequest.Storage = PushRequest.Storage()) {
        precondition(phase == .idle, "opening a stream that is \(phase)")
        phase = .receiving
        self.id = id
        request.reset(adopting: storage)
        headerListSize = 0
        seen = []
        repeatFields = 0
        repeatable = true
        declaredLength = nil
        headerListTooLarge = false
        isHeld = false
        awaitsDecision = false
        responseBody.removeAll(keepingCapacity: true)
        responseOffset = 0
        exemptFromTimeouts = false
        pendingRecord = 0
    }

    /// receiving → dispatched: the request is complete.
    func dispatch() {
        precondition(phase == .receiving, "dispatching a stream that is \(phase)")
        phase = .dispatched
    }

    /// dispatched → responding, with the body the data provider sends.
    func respond(body: [UInt8]) {
        precondition(phase == .dispatched, "answering a stream that is \(phase)")
        phase = .responding
        responseBody = body
        responseOffset = 0
        exemptFromTimeouts = false
    }

    /// receiving, dispatched or responding → reset.
    func reset() {
        precondition(phase != .idle, "resetting an idle stream")
        phase = .reset
        exemptFromTimeouts = false
    }

    /// Any → idle: the stream closed; its storage waits for reuse.
    func close() {
        phase = .idle
        id = 0
        isHeld = false
        responseBody.removeAll(keepingCapacity: true)
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

    /// Whether this instance is bound to stream `id` and waiting for its answer.
    func awaitsAnswer(id: Int32) -> Bool {
        phase == .dispatched && self.id == id
    }
}

/// Owns every ``HTTP2Stream`` of one session, open or recycled.
///
/// nghttp2 keeps an unretained pointer to each open stream as its stream user data, so finding a
/// stream in a callback is nghttp2's own lookup, with no Swift dictionary on the request path; the
/// pool's storage is what keeps those streams alive.
final class StreamPool {
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
        /// Streams whose answer is held back on purpose (``HTTP2Stream/exemptFromTimeouts``).
        var exempt = 0
    }

    /// The stuck-stream check, run by the connection's timer every few seconds, never per request:
    /// a stream found in the same phase (under the same id) as at an earlier inspection for longer
    /// than its limit — `receiving` for `receiving` nanoseconds, any later phase for `answering` —
    /// is stuck. A stream is first timed at the first inspection that sees its phase, so it is
    /// caught between its limit and its limit plus the inspection interval.
    func inspect(now: UInt64, receiving: UInt64, answering: UInt64) -> Inspection {
        var result = Inspection()
        guard openCount > 0 else { return result }
        for stream in streams where stream.phase != .idle {
            if stream.exemptFromTimeouts || stream.isHeld {
                result.exempt += 1
                continue
            }
            if stream.watchedID != stream.id || stream.watchedPhase != stream.phase {
                stream.watchedID = stream.id
                stream.watchedPhase = stream.phase
                stream.watchedSince = now
                continue
            }
            let limit = stream.phase == .receiving ? receiving : answering
            if now &- stream.watchedSince >= limit, result.stuck == nil {
                result.stuck = stream.phase
            }
        }
        return result
    }

    /// Returns a closed stream to the pool, or frees it past ``idleLimit`` so that a burst of
    /// streams does not pin memory.
    func close(_ stream: HTTP2Stream) {
        recycleStorage(of: stream)
        stream.close()
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
    }
}

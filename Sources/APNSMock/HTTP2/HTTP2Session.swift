internal import CNGHTTP2
internal import CAPNSMockShims
import APNSMockCore
import Glibc

/// Receives complete requests from an ``HTTP2Session``.
protocol HTTP2SessionDelegate: AnyObject {
    /// Called once per request stream, when END_STREAM arrives. The delegate answers through
    /// ``HTTP2Session/submit(_:for:)``, now or later.
    func session(_ session: HTTP2Session, didReceive stream: StreamState)
}

/// Owner of one nghttp2 server session, fed through `nghttp2_session_mem_recv` and drained through
/// `nghttp2_session_mem_send`.
///
/// All nghttp2 callbacks live in this file. They find their session through the `user_data`
/// pointer (unretained: the session outlives every callback, which only run inside `receive` and
/// `send`), never throw, and turn every problem into an nghttp2 return code; a problem confined to
/// one stream returns `NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE`, which resets that stream only.
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

    /// Owns every ``StreamState`` this session has live or pooled. nghttp2 keeps an unretained
    /// pointer to each open stream's state as its stream user data, so finding a stream's state in
    /// a callback is nghttp2's own lookup, with no Swift dictionary on the request path.
    @exclusivity(unchecked) private var states: [StreamState] = []
    /// States of closed streams, ready for reuse (indices into `states` are kept in each state).
    @exclusivity(unchecked) private var idleStates: [StreamState] = []
    /// Enough for the stream concurrency clients commonly run (h2load -m 100, pushy, aioapns); a
    /// burst beyond it allocates, and the extra states are freed as the streams close.
    private static let idleStatesLimit = 256
    @exclusivity(unchecked) private var openStreams = 0
    /// The stream whose request headers are arriving: a header block is never interleaved with
    /// another stream's frames (RFC 9113 §6.10), so the header callbacks that follow a
    /// begin-headers callback find their state here without a look-up.
    @exclusivity(unchecked) private var headerBlockStream: Unmanaged<StreamState>?

    /// Header values for a response are assembled here; nghttp2 copies them on submit.
    private let scratch: UnsafeMutableRawBufferPointer

    init(settings: HTTP2Settings, delegate: any HTTP2SessionDelegate) throws {
        self.settings = settings
        self.delegate = delegate
        scratch = .allocate(byteCount: 128, alignment: 8)
        guard let pool = CAPNSMockPool_create() else {
            scratch.deallocate()
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

        var created: OpaquePointer?
        let rc = nghttp2_session_server_new3(
            &created, callbacks, Unmanaged.passUnretained(self).toOpaque(), option, CAPNSMockPool_mem(pool))
        guard rc == 0, let created else {
            // Every stored property is set by now, so deinit runs and frees scratch and pool.
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
        scratch.deallocate()
        knownValues.deinitialize(count: KnownHeader.allCases.count)
        knownValues.deallocate()
    }

    // MARK: Driving the session

    /// Feeds plaintext received from the client. Returns an error when the connection must end
    /// (nghttp2 has then usually queued a GOAWAY that ``send(_:)`` still delivers).
    func receive(_ bytes: UnsafeRawBufferPointer) -> ProtocolError? {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return nil }
        let rc = nghttp2_session_mem_recv(session, base.assumingMemoryBound(to: UInt8.self), bytes.count)
        return rc < 0 ? ProtocolError(code: rc) : nil
    }

    /// Hands each chunk nghttp2 wants to send to `sink` until nghttp2 has nothing more or `sink`
    /// returns false (the caller's output budget is spent). Returns an error on a fatal failure.
    func send(_ sink: (UnsafeRawBufferPointer) -> Bool) -> ProtocolError? {
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

    var wantsRead: Bool { nghttp2_session_want_read(session) != 0 }
    var wantsWrite: Bool { nghttp2_session_want_write(session) != 0 }
    var openStreamCount: Int { openStreams }

    /// Announces the end of the connection with GOAWAY (NO_ERROR) carrying `{"reason":…}`.
    /// Streams already received are still answered; nghttp2 stops wanting to read once they are.
    func submitGoAway(reason: Reason) {
        let debug = ErrorBody.bytes(for: reason)
        let lastStreamID = nghttp2_session_get_last_proc_stream_id(session)
        _ = debug.withUnsafeBufferPointer { bytes in
            nghttp2_submit_goaway(
                session, UInt8(NGHTTP2_FLAG_NONE.rawValue), lastStreamID,
                NGHTTP2_NO_ERROR.rawValue, bytes.baseAddress, bytes.count)
        }
    }

    /// Changes the advertised MAX_CONCURRENT_STREAMS (APNs raises it once a token is accepted).
    func submitMaxConcurrentStreams(_ value: UInt32) {
        var entry = nghttp2_settings_entry(
            settings_id: Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue), value: value)
        _ = nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), &entry, 1)
    }

    /// Resets one stream (RST_STREAM with `errorCode`).
    func reset(streamID: Int32, errorCode: UInt32 = NGHTTP2_INTERNAL_ERROR.rawValue) {
        _ = nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), streamID, errorCode)
    }

    // MARK: Responses

    private static let statusName: StaticString = ":status"
    private static let apnsIDName: StaticString = "apns-id"
    private static let uniqueIDName: StaticString = "apns-unique-id"
    private static let contentTypeName: StaticString = "content-type"
    private static let jsonType: StaticString = "application/json"

    /// Queues `response` on `stream`. Does nothing if the stream has meanwhile been closed.
    func submit(_ response: APNSResponse, for stream: StreamState) {
        guard stream.streamID != 0, withStream(stream.streamID, { $0 === stream }) == true else { return }
        if let rejection = response.rejection {
            stream.responseBody = ErrorBody.bytes(for: rejection)
            stream.responseOffset = 0
        }
        let base = scratch.baseAddress!.assumingMemoryBound(to: UInt8.self)
        // Layout: [0, 3) status digits, [4, 40) generated apns-id, [40, 76) apns-unique-id.
        let status = max(100, min(999, response.status))
        base[0] = UInt8(ascii: "0") + UInt8(status / 100)
        base[1] = UInt8(ascii: "0") + UInt8(status / 10 % 10)
        base[2] = UInt8(ascii: "0") + UInt8(status % 10)

        switch response.apnsID {
        case .generated(let value):
            value.write(to: base + 4, uppercase: true)
            submit(stream: stream, response: response, apnsID: UnsafeRawBufferPointer(start: base + 4, count: 36))
        case .echoed(var text):
            text.withUTF8 { bytes in
                submit(stream: stream, response: response, apnsID: UnsafeRawBufferPointer(bytes))
            }
        }
    }

    private func submit(stream: StreamState, response: APNSResponse, apnsID: UnsafeRawBufferPointer) {
        let base = scratch.baseAddress!.assumingMemoryBound(to: UInt8.self)
        withUnsafeTemporaryAllocation(of: nghttp2_nv.self, capacity: 4) { headers in
            let noCopyName = UInt8(NGHTTP2_NV_FLAG_NO_COPY_NAME.rawValue)
            let noIndex = UInt8(NGHTTP2_NV_FLAG_NO_INDEX.rawValue)
            var count = 0
            func add(_ name: StaticString, _ value: UnsafePointer<UInt8>, _ length: Int, _ flags: UInt8) {
                headers[count] = nghttp2_nv(
                    name: UnsafeMutablePointer(mutating: name.utf8Start), value: UnsafeMutablePointer(mutating: value),
                    namelen: name.utf8CodeUnitCount, valuelen: length, flags: flags)
                count += 1
            }
            add(Self.statusName, base, 3, noCopyName)
            add(Self.apnsIDName, apnsID.baseAddress!.assumingMemoryBound(to: UInt8.self), apnsID.count, noCopyName | noIndex)
            if let uniqueID = response.uniqueID {
                uniqueID.write(to: base + 40, uppercase: false)
                add(Self.uniqueIDName, base + 40, 36, noCopyName | noIndex)
            }
            if response.rejection != nil {
                add(Self.contentTypeName, Self.jsonType.utf8Start, Self.jsonType.utf8CodeUnitCount, noCopyName)
                var provider = nghttp2_data_provider(source: nghttp2_data_source(ptr: nil), read_callback: readResponseBody)
                _ = nghttp2_submit_response(session, stream.streamID, headers.baseAddress, count, &provider)
            } else {
                _ = nghttp2_submit_response(session, stream.streamID, headers.baseAddress, count, nil)
            }
        }
    }

    // MARK: Stream bookkeeping

    fileprivate func beginStream(_ streamID: Int32) {
        let state: StreamState
        if let idle = idleStates.popLast() {
            state = idle
        } else {
            state = StreamState()
            state.poolIndex = states.count
            states.append(state)
        }
        state.reset(streamID: streamID)
        openStreams += 1
        headerBlockStream = Unmanaged.passUnretained(state)
        nghttp2_session_set_stream_user_data(session, streamID, Unmanaged.passUnretained(state).toOpaque())
    }

    /// The state of an open stream, unretained: `states` owns every state, and a callback that
    /// needs one for longer than `body` (closing a stream, which may drop its state) takes a
    /// strong reference itself.
    private func unmanagedStream(_ streamID: Int32) -> Unmanaged<StreamState>? {
        if let current = headerBlockStream, current._withUnsafeGuaranteedRef({ $0.streamID == streamID }) {
            return current
        }
        guard let pointer = nghttp2_session_get_stream_user_data(session, streamID) else { return nil }
        return Unmanaged<StreamState>.fromOpaque(pointer)
    }

    /// Runs `body` with an open stream's state without retaining it (the header callbacks run
    /// this for every header of every request). `body` must not close streams.
    @inline(__always)
    private func withStream<R>(_ streamID: Int32, _ body: (StreamState) -> R) -> R? {
        unmanagedStream(streamID)?._withUnsafeGuaranteedRef(body)
    }

    fileprivate func stream(_ streamID: Int32) -> StreamState? {
        unmanagedStream(streamID)?.takeUnretainedValue()
    }

    fileprivate func closeStream(_ streamID: Int32) {
        guard let state = stream(streamID) else { return }
        nghttp2_session_set_stream_user_data(session, streamID, nil)
        openStreams -= 1
        if headerBlockStream?.toOpaque() == Unmanaged.passUnretained(state).toOpaque() {
            headerBlockStream = nil
        }
        state.streamID = 0
        if idleStates.count < Self.idleStatesLimit {
            state.responseBody.removeAll(keepingCapacity: true)
            idleStates.append(state)
        } else {
            // Past the pool's size the state is dropped, so a burst of streams does not pin memory.
            let last = states.removeLast()
            if last !== state {
                states[state.poolIndex] = last
                last.poolIndex = state.poolIndex
            }
        }
    }

    fileprivate func header(
        streamID: Int32, name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>, trailer: Bool
    ) -> Bool {
        withStream(streamID) { header(state: $0, name: name, value: value, trailer: trailer) } ?? true
    }

    /// Collects one field, enforcing RFC 9113's request rules (see ``RequestFieldRules``) on the way.
    private func header(
        state: StreamState, name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>, trailer: Bool
    ) -> Bool {
        // A malformed stream's remaining fields are decoded by nghttp2 (HPACK state) and dropped.
        if state.dispatched { return true }
        state.headerListSize += name.count + value.count + 32
        if state.headerListSize > Int(settings.maxHeaderListSize) {
            // nghttp2 resets the stream; nothing of it is answered.
            state.dispatched = true
            return false
        }
        if let known = KnownHeader(name: UnsafeRawBufferPointer(name)) {
            let seen = RequestFieldRules.Seen(known)
            if known.isPseudoHeader {
                // Pseudo-headers: once each, before any regular field, never in trailers.
                guard !trailer, !state.seen.contains(.regular), !state.seen.contains(seen) else {
                    return malformed(state)
                }
                state.seen.insert(seen)
            } else {
                state.seen.insert(.regular)
            }
            var fresh = false
            guard let text = Self.validated(
                &knownValues[known.rawValue], value, fresh: &fresh, { RequestFieldRules.isValid($0, for: known) })
            else {
                return malformed(state)
            }
            // `:path` and `apns-id` change per request in many workloads: they do not move the
            // generation (the memos compare them on their own), but a second one still rules the
            // key out (DuplicateHeaders).
            let perRequest = known == .path || known == .apnsID
            noteRepeat(state, field: known.rawValue, fresh: fresh && !perRequest, trailer: trailer)
            state.seen.formUnion(RequestFieldRules.Seen(known, value: text))
            state.request.set(known, value: text)
        } else {
            if name.first == UInt8(ascii: ":") {
                return malformed(state)  // an unknown pseudo-header
            }
            state.seen.insert(.regular)
            var fresh = false
            guard let (name, role, text, index) = otherHeader(name, value, fresh: &fresh) else {
                return malformed(state)
            }
            if let index {
                noteRepeat(state, field: KnownHeader.allCases.count + index, fresh: fresh, trailer: trailer)
            } else {
                state.repeatable = false
            }
            switch role {
            case .contentLength:
                guard state.declaredLength < 0, let length = RequestFieldRules.contentLength(value) else {
                    return malformed(state)
                }
                state.declaredLength = length
            case .host:
                guard !state.seen.contains(.host) else { return malformed(state) }
                state.seen.insert(.host)
            case .plain, .te, .connectionSpecific, .malformed:
                break
            }
            state.request.addOtherHeader(name: name, value: text)
        }
        return true
    }

    /// Keeps the request's ``RepeatKey`` honest: a value that is not the one last handed out for its
    /// field moves the generation; a field twice, or in trailers, rules the key out.
    private func noteRepeat(_ state: StreamState, field: Int, fresh: Bool, trailer: Bool) {
        if fresh {
            repeatGeneration &+= 1
        }
        let bit: UInt32 = 1 << UInt32(field)
        if trailer || state.repeatFields & bit != 0 {
            state.repeatable = false
        }
        state.repeatFields |= bit
    }

    /// See ``RepeatKey``.
    @exclusivity(unchecked) private var repeatGeneration: UInt64 = 0

    /// Ends a request that breaks RFC 9113's rules: RST_STREAM(PROTOCOL_ERROR), nothing answered.
    /// Returns what the nghttp2 callback returns (0: go on decoding the header block).
    private func malformed(_ state: StreamState) -> Bool {
        state.dispatched = true
        _ = nghttp2_submit_rst_stream(
            session, UInt8(NGHTTP2_FLAG_NONE.rawValue), state.streamID, NGHTTP2_PROTOCOL_ERROR.rawValue)
        return true
    }

    /// The previous value of each known header on this connection. Providers (and load tests)
    /// send the same path, topic and token over and over, so most values are reused instead of
    /// being checked and decoded into a new String for every request.
    /// Fixed storage indexed by `KnownHeader.rawValue` (not an Array, whose every mutation checks
    /// uniqueness).
    private let knownValues: UnsafeMutablePointer<String?> = {
        let values = UnsafeMutablePointer<String?>.allocate(capacity: KnownHeader.allCases.count)
        values.initialize(repeating: nil, count: KnownHeader.allCases.count)
        return values
    }()
    /// Other header names seen on this connection (user-agent, content-length…), each with its
    /// role and last valid value, reused likewise. Only well-formed names are kept.
    @exclusivity(unchecked) private var otherHeaders: [(name: String, role: RequestFieldRules.Role, value: String?)] = []
    private static let otherHeadersLimit = 16

    /// The value as a String if it is valid: the cached one when the bytes repeat it (it was
    /// checked when it was cached), else a new one once `isValid` accepts the bytes.
    private static func validated(
        _ cached: inout String?, _ bytes: UnsafeBufferPointer<UInt8>, fresh: inout Bool,
        _ isValid: (UnsafeBufferPointer<UInt8>) -> Bool
    ) -> String? {
        if let text = cached, Self.equal(text, bytes) {
            return text
        }
        guard isValid(bytes) else { return nil }
        let text = String(decoding: bytes, as: UTF8.self)
        cached = text
        fresh = true
        return text
    }

    /// The name, role and value of a field that is neither a pseudo-header nor a ``KnownHeader``,
    /// and its index in the connection's cache (`nil` past the cache's size); `nil` when the name
    /// or the value breaks the rules. `fresh` is set unless both name and value were the cached ones.
    private func otherHeader(
        _ name: UnsafeBufferPointer<UInt8>, _ value: UnsafeBufferPointer<UInt8>, fresh: inout Bool
    ) -> (name: String, role: RequestFieldRules.Role, value: String, index: Int?)? {
        for index in otherHeaders.indices where Self.equal(otherHeaders[index].name, name) {
            let role = otherHeaders[index].role
            guard let text = Self.validated(
                &otherHeaders[index].value, value, fresh: &fresh, { RequestFieldRules.isValid($0, for: role) })
            else { return nil }
            return (otherHeaders[index].name, role, text, index)
        }
        let role = RequestFieldRules.role(ofName: name)
        guard role != .malformed, role != .connectionSpecific, RequestFieldRules.isValid(value, for: role) else {
            return nil
        }
        fresh = true
        let name = String(decoding: name, as: UTF8.self), text = String(decoding: value, as: UTF8.self)
        guard otherHeaders.count < Self.otherHeadersLimit else {
            return (name, role, text, nil)
        }
        otherHeaders.append((name, role, text))
        return (name, role, text, otherHeaders.count - 1)
    }

    private static func equal(_ text: String, _ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        text.utf8.withContiguousStorageIfAvailable { stored in
            stored.count == bytes.count && memoryEqual(bytes.baseAddress, stored.baseAddress!, stored.count)
        } ?? false
    }

    fileprivate func data(streamID: Int32, bytes: UnsafeRawBufferPointer) {
        withStream(streamID) { state in
            if state.dispatched { return }
            state.request.appendBody(bytes)
            if state.declaredLength >= 0, state.request.bodyLength > state.declaredLength {
                _ = malformed(state)  // more DATA than content-length announced
            }
        }
    }

    /// A complete HEADERS frame arrived: the request's header block (`trailer` false) or its
    /// trailers. Checks what the block as a whole must hold.
    fileprivate func endOfHeaders(_ streamID: Int32, trailer: Bool, endStream: Bool) {
        withStream(streamID) { state in
            if state.dispatched { return }
            if trailer ? !endStream : !RequestFieldRules.isComplete(state.seen) {
                // Trailers must end the stream (§8.1); a request needs its pseudo-headers (§8.3.1).
                _ = malformed(state)
                return
            }
            state.request.repeatKey = state.repeatable && !trailer
                ? RepeatKey(generation: repeatGeneration, fields: state.repeatFields) : nil
        }
    }

    fileprivate func endOfStream(_ streamID: Int32) {
        withStream(streamID) { state in
            guard !state.dispatched else { return }
            if state.declaredLength >= 0, state.request.bodyLength != state.declaredLength {
                _ = malformed(state)  // less DATA than content-length announced
                return
            }
            state.dispatched = true
            delegate.session(self, didReceive: state)
        }
    }

    fileprivate func copyResponseBody(
        streamID: Int32, into buffer: UnsafeMutablePointer<UInt8>, length: Int, flags: UnsafeMutablePointer<UInt32>
    ) -> Int {
        withStream(streamID) { copyResponseBody(state: $0, into: buffer, length: length, flags: flags) }
            ?? Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue)
    }

    private func copyResponseBody(
        state: StreamState, into buffer: UnsafeMutablePointer<UInt8>, length: Int, flags: UnsafeMutablePointer<UInt32>
    ) -> Int {
        let remaining = state.responseBody.count - state.responseOffset
        let count = min(remaining, length)
        state.responseBody.withUnsafeBufferPointer { body in
            buffer.update(from: body.baseAddress! + state.responseOffset, count: count)
        }
        state.responseOffset += count
        if state.responseOffset == state.responseBody.count {
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
            if endStream, type == UInt8(NGHTTP2_HEADERS.rawValue) || type == UInt8(NGHTTP2_DATA.rawValue) {
                // The stream may already be gone (reset for oversized headers); endOfStream checks.
                withOwner(userData) { $0.endOfStream(frame.pointee.hd.stream_id) }
            }
            return 0
        }
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks) { _, streamID, _, userData in
            withOwner(userData) { $0.closeStream(streamID) }
            return 0
        }
    }
}

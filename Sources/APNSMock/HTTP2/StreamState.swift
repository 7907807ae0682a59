import APNSMockCore

/// What one request stream collects while it is open, and the error body it answers with.
///
/// Instances are recycled by their session (see `HTTP2Session.streamPool`) so that a long-lived
/// connection does not allocate a new one, nor new body storage, for every request.
final class StreamState {
    /// 0 while the state is not bound to an open stream.
    @exclusivity(unchecked) var streamID: Int32 = 0
    /// Position in the owning session's `states`.
    @exclusivity(unchecked) var poolIndex = 0
    // Touched several times per header from nghttp2 callbacks on one event loop, never
    // concurrently; static exclusivity holds, so the per-access runtime check is skipped.
    @exclusivity(unchecked) var request = PushRequest()
    /// Header-list bytes so far, counted as RFC 9113 does (name + value + 32 per field).
    @exclusivity(unchecked) var headerListSize = 0
    /// Pseudo-headers and `host` seen so far, and whether a regular field came (RFC 9113 rules).
    @exclusivity(unchecked) var seen = RequestFieldRules.Seen()
    /// For the request's ``RepeatKey``: a bit per field carried, and whether the key can vouch for
    /// the request (not when a field came twice, came in trailers, or was not cached).
    @exclusivity(unchecked) var repeatFields: UInt32 = 0
    @exclusivity(unchecked) var repeatable = true
    /// The `content-length` the request announced, or -1.
    @exclusivity(unchecked) var declaredLength = -1
    /// Set once the request was handed to the responder, or reset as malformed, so that END_STREAM
    /// is acted on once and a malformed request's remaining frames are dropped.
    @exclusivity(unchecked) var dispatched = false
    /// Error body being sent by the data provider, and how much of it has gone out.
    @exclusivity(unchecked) var responseBody: [UInt8] = []
    @exclusivity(unchecked) var responseOffset = 0

    /// Moves the collected request out, leaving an empty one.
    func takeRequest() -> PushRequest {
        var taken = PushRequest()
        swap(&taken, &request)
        return taken
    }

    /// Puts a request taken with ``takeRequest()`` back, so that its storage is reused.
    func restoreRequest(_ returned: consuming PushRequest) {
        request = returned
    }

    /// Readies a recycled instance for a new stream, keeping body capacity.
    func reset(streamID: Int32) {
        self.streamID = streamID
        request.reset()
        headerListSize = 0
        seen = []
        repeatFields = 0
        repeatable = true
        declaredLength = -1
        dispatched = false
        responseBody.removeAll(keepingCapacity: true)
        responseOffset = 0
    }
}

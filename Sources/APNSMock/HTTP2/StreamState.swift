import APNSMockCore

/// What one request stream collects while it is open, and the error body it answers with.
///
/// Instances are recycled by their session (see `HTTP2Session.streamPool`) so that a long-lived
/// connection does not allocate a new one, nor new body storage, for every request.
final class StreamState {
    var streamID: Int32 = 0
    var request = PushRequest()
    /// Header-list bytes so far, counted as RFC 9113 does (name + value + 32 per field).
    var headerListSize = 0
    /// Set once the request was handed to the responder, so END_STREAM is acted on once.
    var dispatched = false
    /// Error body being sent by the data provider, and how much of it has gone out.
    var responseBody: [UInt8] = []
    var responseOffset = 0

    /// Readies a recycled instance for a new stream, keeping body capacity.
    func reset(streamID: Int32) {
        self.streamID = streamID
        var body = request.body
        body.removeAll(keepingCapacity: true)
        request = PushRequest()
        request.body = body
        headerListSize = 0
        dispatched = false
        responseBody.removeAll(keepingCapacity: true)
        responseOffset = 0
    }
}

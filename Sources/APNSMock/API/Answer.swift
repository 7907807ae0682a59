import APNSMockCore

/// What the connection does with a request once it is decided and recorded: answer it (perhaps
/// late), or act on the stream or the connection instead because a fault rule said so.
struct Answer {
    /// What the connection does besides (or instead of) answering.
    enum Action: Equatable {
        /// RST_STREAM(INTERNAL_ERROR) instead of a response.
        case resetStream
        /// The request is refused (RST_STREAM REFUSED_STREAM, so the client may retry it) and the
        /// connection ends with GOAWAY carrying `debugData`.
        case goAway(debugData: [UInt8])
        /// The TCP connection is dropped without TLS close_notify or GOAWAY.
        case close
        /// The stream is never answered; it ends when the client resets it or the connection closes.
        case hang
        /// The TCP connection is reset (RST): no GOAWAY, no TLS close_notify.
        case tcpReset
        /// SETTINGS lowers the connection's MAX_CONCURRENT_STREAMS to `limit`, restored after
        /// `durationMs` when given; the request is still answered.
        case shrinkStreams(limit: UInt32, durationMs: Int?)
        /// PINGs go unanswered for `durationMs`; the request is still answered.
        case ignorePings(durationMs: Int)
    }

    /// A response in its API's terms: laid out for HTTP/2 only when it is submitted (each is an
    /// ``HTTP2Response``), so that deciding and recording pass a small value around.
    enum Response {
        case apns(APNSResponse)
        case broadcast(BroadcastResponse)

        var status: Int {
            switch self {
            case .apns(let response): response.status
            case .broadcast(let response): response.status
            }
        }
    }

    /// `nil` when ``action`` replaces the response (shrink-streams and ignore-pings keep it).
    var response: Response?
    var action: Action?
    /// Answer or act after this many milliseconds, from an event-loop timer.
    var delayMs: Int = 0
    /// The request's record (0: recording is off), whose ``RawRecord/responseWritten`` the
    /// connection corrects when the response does not go out as recorded.
    var recordSeq: UInt64 = 0

    /// What the record says when it is stored: a response answered at once goes out in the same
    /// turn of the connection (the connection corrects it if the stream or connection ends first);
    /// a delayed one has not gone out yet; an action instead of a response writes none.
    var writtenAtOnce: Bool { response != nil && delayMs == 0 }
}

import APNSMockCore

/// What the connection does for one request, as the ``Policy`` stage decided it: the answer
/// (perhaps late), a fault rule's action on the stream or the connection, and a change of the
/// MAX_CONCURRENT_STREAMS the connection advertises. Only the connection carries effects out
/// (``APNSConnection``), after the whole read that completed the request was processed.
///
/// A value of fixed shape rather than a list: a request has at most one answer, one fault action,
/// one delay and one stream-limit change, so an impossible combination cannot be written, and
/// building one allocates nothing. The policy and the recorder work on ``Actions``, which holds
/// no reference and copies as plain bytes; an API joins its response to them once, at the end
/// (copying the response through those stages cost about 700 instructions per request).
struct Effects {
    /// A response in its API's terms: laid out for HTTP/2 only when it is submitted (each is an
    /// ``HTTP2Response``), so that deciding and recording pass a small value around.
    enum Response {
        case apns(APNSResponse)
        case broadcast(BroadcastResponse)
    }

    /// A change of the connection's advertised MAX_CONCURRENT_STREAMS, sent as SETTINGS when the
    /// value differs from the one in force.
    enum StreamLimit: Equatable {
        /// Back to the connection's normal limit: its full limit once a provider token was
        /// accepted, before that `server.streamsBeforeAuthentication`.
        case normal
        /// One stream (`server.shrinkStreamsAfterRejection`, after a rejection).
        case one
    }

    /// Everything but the response: what the ``Policy`` decides and the ``Recorder`` reads.
    struct Actions {
        /// Whether the response goes out; false when a fault action replaces it (shrink-streams and
        /// ignore-pings keep it).
        var answers = true
        /// Whether a fault rule matched the request (its action, delay or answer then applies).
        var faultMatched = false
        /// The matched rule's action, carried out besides (or instead of) answering.
        var fault: FaultRule.Action?
        /// The error body a `goaway` action sends as GOAWAY's debug data: the rule's `respond`,
        /// else Shutdown.
        var goAwayReason: Reason = .shutdown
        /// Answer or act after this many milliseconds, from an event-loop timer.
        var delayMs = 0
        /// The request carried the connection's first accepted provider token: its normal stream
        /// limit becomes the full one (docs/authentication.md).
        var raisesStreamLimit = false
        /// The limit to advertise once answered (`server.shrinkStreamsAfterRejection`).
        var streamLimit: StreamLimit?

        /// Applies a fault rule that matched the request: its delay and its action (an action that
        /// leaves the request unanswered leaves no response). Returns the rejection the rule
        /// answers with instead of the decided response, a 410's timestamp filled in from `now`;
        /// the caller puts it in its API's response. Requests no rule matched never come here.
        mutating func apply(_ rule: FaultRule, now: () -> Int64) -> Rejection? {
            faultMatched = true
            delayMs = rule.delayMs
            fault = rule.action
            if rule.action?.answers == false {
                if case .goaway = rule.action, let reason = rule.respond?.reason { goAwayReason = reason }
                answers = false
                return nil
            }
            guard var rejection = rule.respond else { return nil }
            if rejection.reason.carriesTimestamp, rejection.timestamp == nil { rejection.timestamp = now() }
            return rejection
        }

        /// What the record says when it is stored: a response answered at once on a stream still
        /// open goes out in the same turn of the connection (the connection corrects it if the
        /// stream or connection ends first); a delayed one has not gone out yet; an action instead
        /// of a response writes none; a stream the client closed before the request was decided
        /// takes none.
        func writtenAtOnce(streamOpen: Bool) -> Bool { answers && delayMs == 0 && streamOpen }
    }

    /// The answer; `nil` when a fault action replaces it. A constant: a `var` of optional type is
    /// initialised to `nil` before an initialiser's assignment, which then destroyed that `nil`
    /// through Optional's generic value witness (about 60 instructions per request).
    let response: Response?
    var actions: Actions
    /// The request's record (0: recording is off), whose ``RawRecord/responseWritten`` the
    /// connection corrects when the response does not go out as recorded.
    var recordSeq: UInt64

    /// The effects of `actions`, with `response` when they answer.
    init(_ response: @autoclosure () -> Response, actions: Actions, recordSeq: UInt64) {
        self.response = actions.answers ? response() : nil
        self.actions = actions
        self.recordSeq = recordSeq
    }

    private init(unanswered actions: Actions) {
        response = nil
        self.actions = actions
        recordSeq = 0
    }

    /// A request no route of its listener takes (``ListenerRoutes``; cannot happen with
    /// ``Routes/table``, whose listeners each end with a catch-all route): its stream is reset
    /// with INTERNAL_ERROR, as a `reset` action would; nothing is answered or recorded.
    static var unrouted: Effects {
        var actions = Actions()
        actions.answers = false
        actions.fault = .reset
        return Effects(unanswered: actions)
    }

}

/// The stream a request arrived on, as the stages after deciding see it.
struct RequestStream {
    /// The HTTP/2 stream identifier, for records and logs.
    var id: Int32
    /// False when the client closed the stream (RST_STREAM) in the same read that completed the
    /// request, or a fault ended the connection in that read: the request is still decided and
    /// recorded, and its answer cannot leave.
    var isOpen = true
}

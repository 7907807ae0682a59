import APNSMockCore

/// What the connection does with a request once it is decided and recorded: answer it (perhaps
/// late), or act on the stream or the connection instead because a fault rule said so.
struct Answer {
    init(response: Response?) {
        self.response = response
    }

    /// Applies a fault rule that matched the request: its delay and its action (an action that
    /// leaves the request unanswered leaves no response). Returns the rejection the rule answers
    /// with instead of the decided response, a 410's timestamp filled in from `now`; the caller
    /// puts it in its API's response. Requests no rule matched never come here.
    mutating func apply(_ rule: FaultRule, now: () -> Int64) -> Rejection? {
        delayMs = rule.delayMs
        action = rule.action
        if rule.action?.answers == false {
            if rule.action == .goaway, let reason = rule.respond?.reason { goAwayReason = reason }
            response = nil
            return nil
        }
        guard var rejection = rule.respond else { return nil }
        if rejection.reason.carriesTimestamp, rejection.timestamp == nil { rejection.timestamp = now() }
        return rejection
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
    /// A fault rule's action, which the connection carries out besides (or instead of) answering.
    var action: FaultRule.Action?
    /// The error body a `goaway` action sends as GOAWAY's debug data: the rule's `respond`, else
    /// Shutdown.
    var goAwayReason: Reason = .shutdown
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

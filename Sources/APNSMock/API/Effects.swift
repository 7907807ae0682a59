import APNSMockCore

/// What the connection does for one request, as the ``Pipeline`` settled it: the answer (perhaps
/// late), a fault rule's action on the stream or the connection, and a change of the
/// MAX_CONCURRENT_STREAMS the connection advertises. Only the connection carries effects out
/// (``APNSConnection``), after the whole read that completed the request was processed.
///
/// A value of fixed shape rather than a list: a request has one ``Disposition`` (answered, or a
/// fault action instead), at most one delay and one stream-limit change. The disposition is one
/// enum whose cases carry what they need, and ``Actions``' fields are written only by its own
/// methods, so "answered and reset" or a GOAWAY reason without a GOAWAY cannot be written; the
/// response is present exactly when the disposition answers (``init(_:actions:recordSeq:)``).
/// Building one allocates nothing. The policy and the recorder work on ``Actions``, which holds no
/// reference and copies as plain bytes; the pipeline joins the response to them once, at the end
/// (copying the response through those stages cost about 700 instructions per request).
struct Effects {
    /// A response in its API's terms: laid out for HTTP/2 only when it is submitted (each is an
    /// ``HTTP2Response``), so that deciding and recording pass a small value around.
    enum Response {
        case apns(APNSResponse)
        case broadcast(BroadcastResponse)

        /// The answer's rejection: every answer of status 400 and above carries one, and only those.
        var rejection: Rejection? {
            switch self {
            case .apns(let response): response.rejection
            case .broadcast(let response): response.rejection
            }
        }
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

    /// What happens to the request's stream: answered, or a fault action in the answer's place
    /// (``FaultRule/Disposition``, beside the actions it is made from).
    typealias Disposition = FaultRule.Disposition

    /// Everything but the response: what the ``Policy`` decides and the ``Recorder`` reads. Its
    /// fields are written only by ``apply(_:now:)``, ``settle(rejected:acceptedFirstToken:shrinksStreamsAfterRejection:)``
    /// and ``unrouted``.
    struct Actions {
        /// The answer, or the fault action in its place.
        private(set) var disposition = Disposition.answer
        /// Whether a fault rule matched the request (its action, delay or answer then applies).
        private(set) var faultMatched = false
        /// The matched rule's action as records and statistics name it (`nil`: none, or an
        /// unrouted request's reset).
        private(set) var actionName: FaultRule.Action.Name?
        /// Answer or act after this many milliseconds, from an event-loop timer.
        private(set) var delayMs = 0
        /// The request carried the connection's first accepted provider token: its normal stream
        /// limit becomes the full one (docs/authentication.md).
        private(set) var raisesStreamLimit = false
        /// The limit to advertise once answered (`server.shrinkStreamsAfterRejection`).
        private(set) var streamLimit: StreamLimit?
        /// Nothing is settled yet: a fault rule with `times` matched, and whether it fires waits
        /// for its claim in the shared state (``FaultClaim``); the connection waits for it, then
        /// carries out the effects the request ends with (``ConnectionMemo/awaitingClaim``).
        private(set) var awaitsClaim = false

        /// Whether the response goes out; false when a fault action replaces it (shrink-streams and
        /// ignore-pings keep it).
        var answers: Bool { disposition.answers }

        /// Applies a fault rule that matched the request: its delay and its action (an action that
        /// leaves the request unanswered leaves no response). Returns the rejection the rule
        /// answers with instead of the decided response, a 410's timestamp filled in from `now`;
        /// the caller puts it in its verdict. Requests no rule matched never come here.
        mutating func apply(_ rule: FaultRule, now: () -> Int64) -> Rejection? {
            faultMatched = true
            delayMs = rule.delayMs
            if let action = rule.action {
                disposition = Disposition(action, respond: rule.respond)
                actionName = action.name
                if !disposition.answers { return nil }
            }
            guard var rejection = rule.respond else { return nil }
            if rejection.reason.carriesTimestamp, rejection.timestamp == nil { rejection.timestamp = now() }
            return rejection
        }

        /// The actions of a request whose fault rule waits for its claim: nothing is carried out
        /// until the claim is settled.
        fileprivate var awaitingClaim: Actions {
            var actions = self
            actions.awaitsClaim = true
            return actions
        }

        /// What the final answer does to the stream limit: the connection's first accepted token
        /// lifts it; with `server.shrinkStreamsAfterRejection` an answered rejection lowers it to
        /// one stream, an answered success restores it.
        mutating func settle(rejected: Bool, acceptedFirstToken: Bool, shrinksStreamsAfterRejection: Bool) {
            raisesStreamLimit = acceptedFirstToken
            if shrinksStreamsAfterRejection, answers {
                streamLimit = rejected ? .one : .normal
            }
        }

        /// What the record says when it is stored: a response answered at once on a stream still
        /// open goes out in the same turn of the connection (the connection corrects it if the
        /// stream or connection ends first); a delayed one has not gone out yet; an action instead
        /// of a response writes none; a stream the client closed before the request was decided
        /// takes none.
        func writtenAtOnce(streamOpen: Bool) -> Bool { answers && delayMs == 0 && streamOpen }

        /// A request no route of its listener takes: reset, as a `reset` action would, but no
        /// rule matched and no action is counted.
        static var unrouted: Actions {
            var actions = Actions()
            actions.disposition = .reset
            return actions
        }
    }

    /// The answer; `nil` exactly when the disposition does not answer. A constant: a `var` of
    /// optional type is initialised to `nil` before an initialiser's assignment, which then
    /// destroyed that `nil` through Optional's generic value witness (about 60 instructions per
    /// request).
    let response: Response?
    let actions: Actions
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

    /// A request whose fault rule waits for its claim (``Actions/awaitsClaim``): no answer, no
    /// record yet; the connection finishes it through ``ConnectionMemo/awaitingClaim``.
    static func awaitingClaim(_ actions: Actions) -> Effects { Effects(unanswered: actions.awaitingClaim) }

    /// A request no route of its listener takes (``ListenerRoutes``; cannot happen with
    /// ``Routes/table``, whose listeners each end with a catch-all route): its stream is reset
    /// with INTERNAL_ERROR, as a `reset` action would; nothing is answered or recorded.
    static var unrouted: Effects { Effects(unanswered: .unrouted) }
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

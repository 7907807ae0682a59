/// A rule that makes the mock misbehave on purpose for matching requests: answer with an error,
/// end the connection, or answer late. The configuration's `faults` and the admin API's
/// `POST /v1/faults` share this shape (docs/configuration.md) and these checks.
public struct FaultRule: Sendable, Equatable {
    /// Which requests the rule applies to; every field is optional and an absent one matches
    /// anything.
    public struct Match: Sendable, Equatable {
        /// Canonical (lowercase) device token.
        public var token: String?
        /// The topic; for broadcasts and channel requests, the app's bundle ID.
        public var topic: String?
        public var pushType: PushType?
        /// Device pushes, broadcasts or channel-management requests only.
        public var kind: RecordKind?
        /// Broadcasts and channel requests naming this channel (`apns-channel-id`).
        public var channelId: String?
        /// Requests on the n-th connection since start or the last `/v1/reset` (1-based), of any
        /// listener.
        public var connection: Int?
        /// Requests after the connection has carried this many (so `afterRequests: 9` matches the
        /// tenth request on and later).
        public var afterRequests: Int?

        public init(
            token: String? = nil, topic: String? = nil, pushType: PushType? = nil, kind: RecordKind? = nil,
            channelId: String? = nil, connection: Int? = nil, afterRequests: Int? = nil
        ) {
            self.token = token.map(DeviceToken.canonical)
            self.topic = topic
            self.pushType = pushType
            self.kind = kind
            self.channelId = channelId
            self.connection = connection
            self.afterRequests = afterRequests
        }

        /// Whether a request with these facts matches. A request that lacks a field the rule names
        /// does not match it.
        public func matches(_ request: Facts) -> Bool {
            if let token, request.token.map(DeviceToken.canonical) != token { return false }
            if let topic, request.topic != topic { return false }
            if let pushType, request.pushType != pushType { return false }
            if let kind, request.kind != kind { return false }
            if let channelId, request.channelID != channelId { return false }
            if let connection, request.connection != connection { return false }
            if let afterRequests, request.requestNumber <= afterRequests { return false }
            return true
        }

        /// Whether a device push to `token` (any case) with `topic` and `pushType` matches.
        public func matches(token: String?, topic: String?, pushType: PushType?) -> Bool {
            matches(Facts(token: token, topic: topic, pushType: pushType))
        }
    }

    /// What a rule can match a request on.
    public struct Facts: Sendable {
        // Optionals spelled `Optional<…>`, by the rule in docs/speed-idioms.md: the initialiser
        // below sets them, and a `var` spelled `T?` would get an implicit `nil` that the
        // initialiser stores first and its assignment then destroys, for every request a fault
        // rule is matched against.
        public var token: Optional<String>
        public var topic: Optional<String>
        public var pushType: Optional<PushType>
        public var kind: RecordKind
        public var channelID: Optional<String>
        /// The request's connection, numbered from 1 since start or the last reset.
        public var connection: Int
        /// The request's number on its connection, from 1.
        public var requestNumber: Int

        public init(
            token: String? = nil, topic: String? = nil, pushType: PushType? = nil, kind: RecordKind = .device,
            channelID: String? = nil, connection: Int = 1, requestNumber: Int = 1
        ) {
            self.token = token
            self.topic = topic
            self.pushType = pushType
            self.kind = kind
            self.channelID = channelID
            self.connection = connection
            self.requestNumber = requestNumber
        }
    }

    /// What happens to the stream or the connection instead of (or besides) an answer, each with
    /// its own parameters. The one representation of a fault's action: the configuration and the
    /// admin API decode into it, the policy stage puts it in the request's effects, and the connection
    /// carries it out.
    public enum Action: Sendable, Equatable {
        /// GOAWAY, in one of the forms clients meet from Apple and from proxies (``GoAway``).
        case goaway(GoAway)
        /// RST_STREAM on the request's stream only.
        case reset
        /// Close the TCP connection without a word.
        case close
        /// Never answer the request's stream; the connection's other streams go on.
        case hang
        /// Reset the TCP connection (RST): no GOAWAY, no TLS close_notify.
        case tcpReset
        /// Lower the connection's MAX_CONCURRENT_STREAMS to `maxConcurrentStreams`, restored after
        /// `durationMs` when given (else for the connection's life); the request is answered.
        case shrinkStreams(maxConcurrentStreams: Int, durationMs: Int?)
        /// Leave the connection's PING frames unanswered for `durationMs`; the request is answered.
        case ignorePings(durationMs: Int)

        /// The action's name, as the configuration, the admin API and records spell it.
        public enum Name: String, Sendable, CaseIterable, Codable {
            case goaway
            case reset
            case close
            case hang
            case tcpReset = "tcp-reset"
            case shrinkStreams = "shrink-streams"
            case ignorePings = "ignore-pings"
        }

        public var name: Name {
            switch self {
            case .goaway: .goaway
            case .reset: .reset
            case .close: .close
            case .hang: .hang
            case .tcpReset: .tcpReset
            case .shrinkStreams: .shrinkStreams
            case .ignorePings: .ignorePings
            }
        }

        /// Whether the request still gets its answer (the action is on the connection).
        public var answers: Bool { Disposition(self, respond: nil).answers }

        /// `shrink-streams`' new limit.
        public var maxConcurrentStreams: Int? {
            if case .shrinkStreams(let limit, _) = self { return limit }
            return nil
        }

        /// `shrink-streams`' time until the limit is restored; `ignore-pings`' time PINGs go
        /// unanswered.
        public var durationMs: Int? {
            switch self {
            case .shrinkStreams(_, let duration): duration
            case .ignorePings(let duration): duration
            default: nil
            }
        }
    }

    /// What happens to a request's stream once its rule (if any) applied: it is answered (two
    /// actions act on the connection beside the answer), or one action takes the answer's place.
    /// One case per action, each with what carrying it out needs, so that "answered and reset" or a
    /// GOAWAY reason without a GOAWAY cannot be written. The server's `Effects` carry it, and its
    /// connection carries it out.
    public enum Disposition: Sendable, Equatable {
        /// The response goes out.
        case answer
        /// The response goes out, and the connection's MAX_CONCURRENT_STREAMS drops to
        /// `maxConcurrentStreams`, restored after `durationMs` when given (`shrink-streams`).
        case answerAndShrinkStreams(maxConcurrentStreams: Int, durationMs: Int?)
        /// The response goes out, and the connection's PINGs go unanswered for `durationMs`
        /// (`ignore-pings`).
        case answerAndIgnorePings(durationMs: Int)
        /// RST_STREAM INTERNAL_ERROR instead of the answer (`reset`, and a request no route takes).
        case reset
        /// REFUSED_STREAM on the request's stream, then GOAWAY in `form`; `reason` is its debug
        /// data when the form carries one (the rule's `respond`, else Shutdown).
        case goAway(GoAway, reason: Reason)
        /// The TCP connection closes without a word (`close`).
        case close
        /// The TCP connection is reset (`tcp-reset`).
        case tcpReset
        /// The stream is never answered (`hang`).
        case hang

        /// A matched rule's action; `respond` is the rule's answer, which a GOAWAY carries.
        public init(_ action: Action, respond: Rejection?) {
            switch action {
            case .shrinkStreams(let limit, let durationMs):
                self = .answerAndShrinkStreams(maxConcurrentStreams: limit, durationMs: durationMs)
            case .ignorePings(let durationMs): self = .answerAndIgnorePings(durationMs: durationMs)
            case .reset: self = .reset
            case .goaway(let form): self = .goAway(form, reason: respond?.reason ?? .shutdown)
            case .close: self = .close
            case .tcpReset: self = .tcpReset
            case .hang: self = .hang
            }
        }

        /// Whether the response goes out.
        public var answers: Bool {
            switch self {
            case .answer, .answerAndShrinkStreams, .answerAndIgnorePings: true
            case .reset, .goAway, .close, .tcpReset, .hang: false
            }
        }
    }

    /// The `goaway` action's form: its error code, its debug data, the last stream id it names,
    /// and whether the connection stays open after it.
    public struct GoAway: Sendable, Equatable {
        /// `goawayCode`: the error codes APNs and the proxies in front of it are seen to send.
        public enum Code: String, Sendable, CaseIterable {
            case noError = "NO_ERROR"
            case protocolError = "PROTOCOL_ERROR"
            case internalError = "INTERNAL_ERROR"
            case enhanceYourCalm = "ENHANCE_YOUR_CALM"

            /// RFC 9113 §7's number.
            public var value: UInt32 {
                switch self {
                case .noError: 0x0
                case .protocolError: 0x1
                case .internalError: 0x2
                case .enhanceYourCalm: 0xB
                }
            }
        }

        /// `lastStreamId`: the last stream received (`processed`, RFC 9113's graceful form), or a
        /// lower id, so that streams in flight above it were not processed.
        public enum LastStream: Sendable, Equatable {
            case processed
            case id(Int32)
        }

        public var code: Code
        /// `debugData`: `{"reason":…}` (the rule's `respond` reason, else Shutdown), or nothing.
        public var carriesReason: Bool
        public var lastStream: LastStream
        /// `keepOpen`: the connection is not closed after the GOAWAY; streams the client still
        /// opens are refused (REFUSED_STREAM) until it leaves.
        public var keepOpen: Bool

        public init(code: Code = .noError, carriesReason: Bool = true, lastStream: LastStream = .processed, keepOpen: Bool = false) {
            self.code = code
            self.carriesReason = carriesReason
            self.lastStream = lastStream
            self.keepOpen = keepOpen
        }
    }

    public var match: Match
    /// The error to answer with; `nil` to answer normally (after ``delayMs``) or to act on the
    /// connection.
    public var respond: Rejection?
    public var action: Action?
    /// How long to wait before answering or acting, in milliseconds.
    public var delayMs: Int
    /// How many requests the rule applies to before it expires; `nil` for no limit.
    public var times: Int?
    /// The chance, 0...1, that a matching request is affected.
    public var probability: Double

    public init(
        match: Match = Match(),
        respond: Rejection? = nil,
        action: Action? = nil,
        delayMs: Int = 0,
        times: Int? = nil,
        probability: Double = 1.0
    ) {
        self.match = match
        self.respond = respond
        self.action = action
        self.delayMs = delayMs
        self.times = times
        self.probability = probability
    }

    /// Longest delay a rule may ask for: an hour is already far past any client's timeout.
    public static let maximumDelayMs = 3_600_000

    /// Longest `durationMs`: a day.
    public static let maximumDurationMs = 86_400_000

    /// Decodes and checks a rule from an admin API body. Errors name the field (`respond.reason`)
    /// and have no file. `maxConcurrentStreams` is the server's: a rule may only lower it.
    public static func decode(json: JSONValue, maxConcurrentStreams: Int = Int(Int32.max)) throws(ConfigurationError) -> FaultRule {
        try decode(Field(node: json, path: "", file: nil), maxConcurrentStreams: maxConcurrentStreams)
    }

    static func decode<Node: DocumentNode>(_ field: Field<Node>, maxConcurrentStreams serverMaximum: Int) throws(ConfigurationError) -> FaultRule {
        let fields = try field.mapping(allowing: [
            "match", "respond", "action", "delayMs", "times", "probability", "maxConcurrentStreams", "durationMs",
            "goawayCode", "debugData", "lastStreamId", "keepOpen",
        ])
        var rule = FaultRule()

        if let match = fields.optional("match") {
            let matchFields = try match.mapping(allowing: [
                "token", "topic", "pushType", "kind", "channelId", "connection", "afterRequests",
            ])
            if let connection = matchFields.optional("connection") {
                rule.match.connection = try connection.integer(in: 1...Int(Int32.max))
            }
            if let after = matchFields.optional("afterRequests") {
                rule.match.afterRequests = try after.integer(in: 0...Int(Int32.max))
            }
            if let token = matchFields.optional("token") {
                let value = try token.string()
                guard DeviceToken.isWellFormed(value.utf8, strict: false) else {
                    throw token.error(.invalidValue, "\"\(value)\" is not a well-formed device token")
                }
                rule.match.token = DeviceToken.canonical(value)
            }
            if let topic = matchFields.optional("topic") {
                let value = try topic.string()
                guard HeaderSyntax.isWellFormedTopic(value) else {
                    throw topic.error(.invalidValue, "\"\(value)\" is not a well-formed topic")
                }
                rule.match.topic = value
            }
            if let pushType = matchFields.optional("pushType") {
                rule.match.pushType = try pushType.oneOf(PushType.self)
            }
            if let kind = matchFields.optional("kind") {
                rule.match.kind = try kind.oneOf(RecordKind.self)
            }
            if let channelID = matchFields.optional("channelId") {
                let value = try channelID.string()
                guard ChannelID.isWellFormed(value) else {
                    throw channelID.error(.invalidValue, "\"\(value.prefix(64))\" is not a channel ID (base64)")
                }
                rule.match.channelId = value
            }
        }

        if let respond = fields.optional("respond") {
            rule.respond = try decodeResponse(respond)
        }
        let actionName = try fields.optional("action")?.oneOf(Action.Name.self)
        if let delay = fields.optional("delayMs") {
            rule.delayMs = try delay.integer(in: 0...maximumDelayMs)
        }
        if let times = fields.optional("times") {
            rule.times = try times.integer(in: 1...Int.max)
        }
        if let probability = fields.optional("probability") {
            rule.probability = try probability.number(in: 0...1)
        }

        var streamLimit: Int?
        if let streams = fields.optional("maxConcurrentStreams") {
            guard actionName == .shrinkStreams else {
                throw streams.error(.contradiction, "only the shrink-streams action takes maxConcurrentStreams")
            }
            guard serverMaximum >= 1 else { throw streams.error(.invalidValue, "the server allows no streams") }
            streamLimit = try streams.integer(in: 1...serverMaximum)
        }
        var goAway = GoAway()
        for name in ["goawayCode", "debugData", "lastStreamId", "keepOpen"] {
            if let given = fields.optional(name), actionName != .goaway {
                throw given.error(.contradiction, "only the goaway action takes \(name)")
            }
        }
        if let code = fields.optional("goawayCode") {
            goAway.code = try code.oneOf(GoAway.Code.self)
        }
        if let debugData = fields.optional("debugData") {
            let text = try debugData.string()
            guard text == "reason" || text == "none" else {
                throw debugData.error(.invalidValue, "\"\(text.prefix(64))\" is not reason or none")
            }
            goAway.carriesReason = text == "reason"
        }
        if let lastStream = fields.optional("lastStreamId") {
            if (try? lastStream.string()) == "processed" {
                goAway.lastStream = .processed
            } else {
                // A client stream id: odd, or 0 (no stream processed).
                let id = try lastStream.integer(in: 0...Int(Int32.max))
                guard id == 0 || id & 1 == 1 else {
                    throw lastStream.error(.invalidValue, "\(id) is not a client stream id (0 or odd), nor \"processed\"")
                }
                goAway.lastStream = .id(Int32(id))
            }
        }
        if let keepOpen = fields.optional("keepOpen") {
            goAway.keepOpen = try keepOpen.boolean()
        }
        var durationMs: Int?
        if let duration = fields.optional("durationMs") {
            guard actionName == .shrinkStreams || actionName == .ignorePings else {
                throw duration.error(.contradiction, "only the shrink-streams and ignore-pings actions take durationMs")
            }
            durationMs = try duration.integer(in: 1...maximumDurationMs)
        }

        switch actionName {
        case .reset?: rule.action = .reset
        case .close?: rule.action = .close
        case .hang?: rule.action = .hang
        case .tcpReset?: rule.action = .tcpReset
        case .shrinkStreams?:
            // shrink-streams needs its new limit; the error names the missing field.
            let limit: Int
            if let streamLimit { limit = streamLimit } else {
                limit = try fields.required("maxConcurrentStreams").integer(in: 1...serverMaximum)
            }
            rule.action = .shrinkStreams(maxConcurrentStreams: limit, durationMs: durationMs)
        case .ignorePings?:
            // ignore-pings needs how long PINGs go unanswered.
            let duration: Int
            if let durationMs { duration = durationMs } else {
                duration = try fields.required("durationMs").integer(in: 1...maximumDurationMs)
            }
            rule.action = .ignorePings(durationMs: duration)
        case .goaway?:
            rule.action = .goaway(goAway)
        case nil:
            if rule.respond == nil, rule.delayMs == 0 {
                throw field.error(.missingField, "the rule does nothing: give respond, action or delayMs")
            }
        }
        // Actions that leave the request unanswered take no response; goaway sends it as debug data.
        if let action = rule.action, !action.answers, action.name != .goaway, let respond = fields.optional("respond") {
            throw respond.error(.contradiction, "a \"\(action.name.rawValue)\" action sends no response; remove respond")
        }
        return rule
    }

    /// `{status, reason[, timestamp]}`: the reason decides the status; a status that disagrees with
    /// it is refused rather than sent, since APNs never pairs them differently.
    private static func decodeResponse<Node: DocumentNode>(_ field: Field<Node>) throws(ConfigurationError) -> Rejection {
        let fields = try field.mapping(allowing: ["status", "reason", "timestamp"])
        let reasonField = try fields.required("reason")
        let text = try reasonField.string()
        let reason: Reason
        var spelling = EnvironmentKeyReasonSpelling.documented
        if let known = Reason(rawValue: text) {
            reason = known
        } else if text == EnvironmentKeyReasonSpelling.observed.rawValue {
            reason = .badEnvironmentKeyIdInToken
            spelling = .observed
        } else {
            throw reasonField.error(.invalidValue, "\"\(text)\" is not a reason APNs sends")
        }
        if let statusField = fields.optional("status") {
            let status = try statusField.integer(in: 100...599)
            guard status == reason.status else {
                throw statusField.error(.contradiction, "\(reason.rawValue) is sent with status \(reason.status), not \(status)")
            }
        }
        var timestamp: Int64?
        if let timestampField = fields.optional("timestamp") {
            guard reason.carriesTimestamp else {
                throw timestampField.error(.contradiction, "only 410 reasons carry a timestamp")
            }
            timestamp = Int64(try timestampField.integer(in: 0...Int.max))
        }
        return Rejection(reason, timestamp: timestamp, spelling: spelling)
    }
}

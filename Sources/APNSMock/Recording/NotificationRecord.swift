import APNSMockCore

/// One recorded request as the query API returns it (`GET /v1/notifications`; shape fixed by
/// docs/admin-api.md). Public and `Codable` so that Swift tests (through `APNSMockTesting`) decode the
/// same type the server encodes.
///
/// Additions to the contract's shape: `payloadEncoding` says how `payload` is spelled, `timestamp`
/// is the 410 body's timestamp, and `action` names the fault action applied (any
/// ``FaultRule/Action/Name``); `status` is `null` when that action left the request unanswered (all
/// but `shrink-streams` and `ignore-pings`).
public struct NotificationRecord: Codable, Sendable, Equatable {
    /// How ``payload`` holds the body.
    public enum PayloadEncoding: String, Codable, Sendable, CaseIterable {
        /// The body parsed as JSON and is embedded as JSON.
        case json
        /// Not JSON but valid UTF-8: embedded as a string.
        case text
        /// Neither: embedded as a base64 string.
        case base64
    }

    /// A lint finding (`{"code":"missing-aps","message":"…"}`).
    public struct Finding: Codable, Sendable, Equatable {
        public var code: String
        public var message: String
    }

    public var seq: UInt64
    public var apnsId: String
    public var uniqueId: String?
    /// RFC 3339 with milliseconds, UTC: the wall clock when the request arrived.
    public var receivedAt: String
    /// The mock's time then, when it differs from the wall clock (`POST /v1/clock` moved it);
    /// `nil` otherwise.
    public var mockTime: String?
    /// Canonical (lowercase) token, or `nil` when the path held none.
    public var token: String?
    public var topic: String?
    public var pushType: String?
    public var priority: Int?
    public var expiration: Int64?
    public var collapseId: String?
    public var environment: String
    public var auth: AuthSummary
    /// `nil` for an empty body.
    public var payload: RecordJSON?
    public var payloadEncoding: PayloadEncoding?
    /// Bytes of body received (also when more arrived than the server keeps).
    public var payloadSize: Int
    /// `nil` when a fault action left the request unanswered (`goaway`, `reset`, `close`, `hang`,
    /// `tcp-reset`).
    public var status: Int?
    public var reason: String?
    public var timestamp: Int64?
    public var lint: [Finding]
    public var injected: Bool
    public var action: String?
    public var connectionId: UInt64
    public var streamId: Int32
    /// Request headers (pseudo-headers included) except `authorization`, which is never stored.
    public var headers: [String: String]
    /// `device`, `broadcast` or `channel` (``RecordKind``).
    public var kind: String
    /// Broadcast side: the channel named in `apns-channel-id`, or the one a create made.
    public var channelId: String?
    /// Broadcast side: the response's `apns-request-id`.
    public var requestId: String?
    /// Channel management: `create`, `read`, `delete` or `list`.
    public var operation: String?
    /// Whether the response was handed to the connection's socket (docs/admin-api.md, "The
    /// record"): false while a delayed answer waits, for a request answered by a fault's action
    /// instead of a response, and when the stream or the connection ended before it went out. A
    /// response written can still be lost in flight (a TCP reset before the client read it).
    public var responseWritten: Bool

    enum CodingKeys: String, CodingKey {
        case seq, apnsId, uniqueId, receivedAt, mockTime, token, topic, pushType, priority, expiration, collapseId
        case environment, auth, payload, payloadEncoding, payloadSize, status, reason, timestamp, lint
        case injected, action, connectionId, streamId, headers, kind, channelId, requestId, operation, responseWritten
    }

    /// Writes every key, `null` included: the contract shows absent values as `null`, and scripts
    /// using `jq` can rely on each key being there.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(seq, forKey: .seq)
        try c.encode(apnsId, forKey: .apnsId)
        try c.encode(uniqueId, forKey: .uniqueId)
        try c.encode(receivedAt, forKey: .receivedAt)
        try c.encode(mockTime, forKey: .mockTime)
        try c.encode(token, forKey: .token)
        try c.encode(topic, forKey: .topic)
        try c.encode(pushType, forKey: .pushType)
        try c.encode(priority, forKey: .priority)
        try c.encode(expiration, forKey: .expiration)
        try c.encode(collapseId, forKey: .collapseId)
        try c.encode(environment, forKey: .environment)
        // AuthSummary's own encoding leaves nil fields out; the record spells them null.
        var authFields = c.nestedContainer(keyedBy: AuthSummary.CodingKeys.self, forKey: .auth)
        try auth.encode(into: &authFields, nilAsNull: true)
        try c.encode(payload, forKey: .payload)
        try c.encode(payloadEncoding, forKey: .payloadEncoding)
        try c.encode(payloadSize, forKey: .payloadSize)
        try c.encode(status, forKey: .status)
        try c.encode(reason, forKey: .reason)
        try c.encode(timestamp, forKey: .timestamp)
        try c.encode(lint, forKey: .lint)
        try c.encode(injected, forKey: .injected)
        try c.encode(action, forKey: .action)
        try c.encode(connectionId, forKey: .connectionId)
        try c.encode(streamId, forKey: .streamId)
        try c.encode(headers, forKey: .headers)
        try c.encode(kind, forKey: .kind)
        try c.encode(channelId, forKey: .channelId)
        try c.encode(requestId, forKey: .requestId)
        try c.encode(operation, forKey: .operation)
        try c.encode(responseWritten, forKey: .responseWritten)
    }
}

/// A JSON value that round-trips through `Codable`, for embedding payloads in records.
/// Integers stay integers (a badge of 3 is not read back as 3.0).
public enum RecordJSON: Codable, Sendable, Equatable {
    case null
    case bool(Bool)
    case integer(Int64)
    case double(Double)
    case string(String)
    case array([RecordJSON])
    case object([String: RecordJSON])

    public subscript(key: String) -> RecordJSON? {
        if case .object(let members) = self { return members[key] }
        return nil
    }

    public var stringValue: String? {
        if case .string(let text) = self { return text }
        return nil
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if c.decodeNil() {
            self = .null
        } else if let value = try? c.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? c.decode(Int64.self) {
            self = .integer(value)
        } else if let value = try? c.decode(Double.self) {
            self = .double(value)
        } else if let value = try? c.decode(String.self) {
            self = .string(value)
        } else if let value = try? c.decode([RecordJSON].self) {
            self = .array(value)
        } else {
            self = .object(try c.decode([String: RecordJSON].self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .null: try c.encodeNil()
        case .bool(let value): try c.encode(value)
        case .integer(let value): try c.encode(value)
        case .double(let value): try c.encode(value)
        case .string(let value): try c.encode(value)
        case .array(let value): try c.encode(value)
        case .object(let value): try c.encode(value)
        }
    }

    /// From the core's parse tree. A repeated key keeps its last value, as most JSON readers do
    /// (the lint reports the repetition).
    init(_ value: JSONValue) {
        switch value {
        case .null: self = .null
        case .bool(let flag): self = .bool(flag)
        case .number(let literal):
            if let integer = Int64(literal) {
                self = .integer(integer)
            } else {
                self = .double(Double(literal) ?? 0)
            }
        case .string(let text): self = .string(text)
        case .array(let items): self = .array(items.map(RecordJSON.init))
        case .object(let members):
            var object: [String: RecordJSON] = [:]
            for member in members { object[member.key] = RecordJSON(member.value) }
            self = .object(object)
        }
    }
}

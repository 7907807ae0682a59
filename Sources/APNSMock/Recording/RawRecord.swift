import APNSMockCore
import Foundation

/// What the records of one connection share while its requests repeat themselves: every header but
/// `:path` and `apns-id`, the body, and the verdict's interpreted values, environment and auth.
///
/// A connection keeps its last shape and hands it to each record whose request matches it
/// (``RequestShape/matches(_:accepted:environment:auth:)``), so a load test's millionth identical
/// push costs its record a pointer, not a copy of its headers and payload. Immutable once built.
final class RequestShape: Sendable {
    /// The request without `authorization` (never recorded), `:path` and `apns-id` (kept per
    /// record). Its body and extra headers are its own copies, never the stream's reusable buffers.
    let request: PushRequest
    let interpreted: RawRecord.Interpreted?
    let environment: APNSEnvironment
    let auth: AuthSummary
    let connectionID: UInt64

    /// Kept per record rather than in the shape.
    static let perRecord: KnownHeader.Set = [KnownHeader.Set(.path), KnownHeader.Set(.apnsID)]

    convenience init(
        _ request: consuming PushRequest, accepted: AcceptedPush?, environment: APNSEnvironment, auth: AuthSummary,
        connectionID: UInt64
    ) {
        self.init(
            request,
            interpreted: accepted.map {
                RawRecord.Interpreted(
                    priority: $0.priority, expiration: $0.expiration, pushType: $0.pushType, topic: $0.topic, lint: $0.lint)
            },
            environment: environment, auth: auth, connectionID: connectionID)
    }

    init(
        _ request: consuming PushRequest, interpreted: RawRecord.Interpreted?, environment: APNSEnvironment,
        auth: AuthSummary, connectionID: UInt64
    ) {
        var kept = request
        for header in KnownHeader.allCases where !header.isRecorded || Self.perRecord.contains(header) {
            kept[header] = nil
        }
        // Fresh storage: sharing the stream's buffers would make its next request copy them.
        var body: [UInt8] = []
        body.append(contentsOf: kept.body)
        kept.body = body
        kept.otherHeaders = kept.otherHeaders.map { $0 }
        self.request = kept
        self.interpreted = interpreted
        self.environment = environment
        self.auth = auth
        self.connectionID = connectionID
    }

    /// Whether a record of `request` can share this shape. Equal repeat keys vouch for the headers
    /// but the per-request ones (the session hands out the same String objects), of which the shape
    /// keeps `apns-request-id`; without a key, Strings a connection repeats still compare by
    /// identity first. The interpreted values and `auth` are functions of the headers
    /// (`authorization` among them) and body, given the connection.
    func matches(_ request: borrowing PushRequest, accepted: Bool, environment: APNSEnvironment, auth: AuthSummary) -> Bool {
        // `self.request` is read in place each time: a local copy would retain every field.
        guard accepted == (interpreted != nil), environment == self.environment,
              request.bodyLength == self.request.bodyLength, request.body.hasSameBytes(as: self.request.body)
        else { return false }
        if let key = request.repeatKey, key == self.request.repeatKey {
            return request.requestID == self.request.requestID
        }
        var ignored = Self.perRecord
        ignored.insert(KnownHeader.Set(.authorization))
        return request.hasSameKnownHeaders(as: self.request, except: ignored)
            && request.duplicatedHeader == self.request.duplicatedHeader
            && request.hasSameOtherHeaders(as: self.request) && auth == self.auth
    }
}

/// What the request path stores for one request: what is its own (path, ids, verdict) and the
/// ``RequestShape`` it shares with the connection's similar requests, with nothing derived. The
/// JSON payload, the header dictionary, the token parsed from `:path`, the lint of a rejected
/// request and the id strings are built only when the record is queried (``render(validator:)``).
///
/// A record is small (no copy of headers or payload) and packed: the optional ids, status and
/// rejection are held as plain fields and flags rather than Swift optionals and enums with
/// payloads, so a record takes 120 bytes (two cache lines) instead of 176. Every request writes one
/// into the ring, memory the ring last touched `capacity` requests ago, so each line saved is a
/// cache miss saved; a ring of 10 million is 560 MB smaller.
struct RawRecord: Sendable {
    var seq: UInt64 = 0
    /// Milliseconds since the epoch.
    var receivedAt: Int64
    let shape: RequestShape
    /// What a broadcast or a channel-management request adds; `nil` for a device push.
    let broadcast: BroadcastDetails?
    let path: String?
    /// The `apns-id` header as sent (the response's id is ``apnsID``).
    let apnsIDHeader: String?
    /// The response's id when the mock generated it (see ``Flags/echoedID``).
    private let generatedID: UUIDValue
    private let storedUniqueID: UUIDValue
    /// The rejection's timestamp (see ``Flags/hasTimestamp``).
    private let timestamp: Int64
    let streamID: Int32
    /// The response's status; 0 when a fault action replaced the response.
    private let statusCode: UInt16
    private let reason: Reason?
    let action: FaultRule.Action.Name?
    private var flags: Flags
    /// Seconds the mock's clock ran ahead of the wall clock when the request arrived (`/v1/clock`).
    let clockOffset: Int32

    private struct Flags: OptionSet, Sendable {
        let rawValue: UInt8
        static let injected = Flags(rawValue: 1)
        /// The response was handed to the connection's socket (see ``responseWritten``).
        static let responseWritten = Flags(rawValue: 32)
        /// The response echoed the client's id: a device push's `apns-id` header
        /// (``apnsIDHeader``), a broadcast-side request's `apns-request-id` (kept in the shape).
        static let echoedID = Flags(rawValue: 2)
        static let hasUniqueID = Flags(rawValue: 4)
        static let hasTimestamp = Flags(rawValue: 8)
        static let observedSpelling = Flags(rawValue: 16)
    }

    /// A record of the broadcast side: which kind, which channel, which operation.
    final class BroadcastDetails: Sendable {
        let kind: RecordKind
        /// The app named in the path: the record's topic.
        let bundleID: String?
        /// The channel the request named in `apns-channel-id`, or the one it created.
        let channelID: String?
        let operation: ChannelOperation?

        init(kind: RecordKind, bundleID: String?, channelID: String?, operation: ChannelOperation?) {
            self.kind = kind
            self.bundleID = bundleID
            self.channelID = channelID
            self.operation = operation
        }
    }

    /// The accepted push's interpreted values that the headers alone do not give.
    struct Interpreted: Sendable {
        var priority: Int
        var expiration: Int64?
        var pushType: PushType
        var topic: String
        var lint: [LintFinding]
    }

    init(
        seq: UInt64 = 0, receivedAt: Int64, shape: RequestShape, path: String?, apnsIDHeader: String?, apnsID: APNSResponse.RequestID,
        uniqueID: UUIDValue?, status: Int?, rejection: Rejection?, injected: Bool, action: FaultRule.Action.Name?,
        streamID: Int32, broadcast: BroadcastDetails? = nil, responseWritten: Bool = false, clockOffset: Int64 = 0
    ) {
        var flags: Flags = injected ? [.injected] : []
        if responseWritten { flags.insert(.responseWritten) }
        self.clockOffset = Int32(clamping: clockOffset)
        self.seq = seq
        self.receivedAt = receivedAt
        self.shape = shape
        self.broadcast = broadcast
        self.path = path
        self.apnsIDHeader = apnsIDHeader
        switch apnsID {
        case .echoed(let text):
            // Echoed ids are kept once, where the request carried them.
            assert(text == Self.echoSource(broadcast: broadcast, apnsIDHeader: apnsIDHeader, shape: shape),
                   "an echoed id is the request's")
            flags.insert(.echoedID)
            generatedID = UUIDValue(high: 0, low: 0)
        case .generated(let value):
            generatedID = value
        }
        if uniqueID != nil { flags.insert(.hasUniqueID) }
        storedUniqueID = uniqueID ?? UUIDValue(high: 0, low: 0)
        statusCode = UInt16(clamping: status ?? 0)
        reason = rejection?.reason
        if rejection?.timestamp != nil { flags.insert(.hasTimestamp) }
        timestamp = rejection?.timestamp ?? 0
        if rejection?.environmentKeySpelling == .observed { flags.insert(.observedSpelling) }
        self.action = action
        self.streamID = streamID
        self.flags = flags
    }

    /// The response's id: the client's, echoed, or the one generated for it.
    var apnsID: APNSResponse.RequestID {
        guard flags.contains(.echoedID) else { return .generated(generatedID) }
        return .echoed(Self.echoSource(broadcast: broadcast, apnsIDHeader: apnsIDHeader, shape: shape) ?? "")
    }

    /// The header an echoed id came from: a device push's `apns-id`, a broadcast-side request's
    /// `apns-request-id` (which the shape keeps).
    private static func echoSource(broadcast: BroadcastDetails?, apnsIDHeader: String?, shape: RequestShape) -> String? {
        broadcast == nil ? apnsIDHeader : shape.request.requestID
    }

    var uniqueID: UUIDValue? { flags.contains(.hasUniqueID) ? storedUniqueID : nil }

    /// `nil` when a fault action replaced the response.
    var status: Int? { statusCode == 0 ? nil : Int(statusCode) }

    var rejection: Rejection? {
        reason.map {
            Rejection(
                $0, timestamp: flags.contains(.hasTimestamp) ? timestamp : nil,
                spelling: flags.contains(.observedSpelling) ? .observed : .documented)
        }
    }

    var injected: Bool { flags.contains(.injected) }

    /// Whether the response was handed to the connection's socket: its last frame (HEADERS with
    /// END_STREAM, or the body's last DATA) was produced and written out. False while a delayed
    /// answer waits, for a request answered by an action instead of a response, and when the
    /// stream or the connection ended before the response went out.
    var responseWritten: Bool {
        get { flags.contains(.responseWritten) }
        set { if newValue { flags.insert(.responseWritten) } else { flags.remove(.responseWritten) } }
    }

    /// The request as received, without `authorization`.
    var request: PushRequest {
        var request = shape.request
        request.path = path
        request.apnsID = apnsIDHeader
        return request
    }

    var interpreted: Interpreted? { shape.interpreted }
    var environment: APNSEnvironment { shape.environment }
    var auth: AuthSummary { shape.auth }
    var connectionID: UInt64 { shape.connectionID }

    /// Accepted: answered with a success (200, or 201/204 for channel management) by the mock's
    /// own rules or after an injected delay only. Everything else counts as rejected, the 431 of an
    /// oversized header list (no reason) among it.
    var isAccepted: Bool {
        guard let status, rejection == nil else { return false }
        return status < 400
    }

    var reasonText: String? { rejection?.wireReason }

    var kind: RecordKind { broadcast?.kind ?? .device }

    /// The response's id: `apns-id` of a device push (generated uppercase), `apns-request-id` on
    /// the broadcast side (generated lowercase).
    var apnsIDText: String { apnsID.text(uppercase: broadcast == nil) }

    /// The canonical token from `:path`.
    var token: String? {
        guard let path, case .token(let token) = HeaderSyntax.devicePath(path) else { return nil }
        return DeviceToken.canonical(String(token))
    }

    var topic: String? { interpreted?.topic ?? broadcast?.bundleID ?? shape.request.topic }
    var pushType: String? { interpreted.map { $0.pushType.rawValue } ?? shape.request.pushType }

    /// Builds the public record: the expensive parts happen here, at query time.
    func render(validator: Validator) -> NotificationRecord {
        let request = self.request
        // A channel-management body is not a notification payload: no payload lint for it.
        var lint = interpreted?.lint ?? (kind == .channel ? [] : validator.lint(request))
        lint += LintFinding.providerToken(auth)
        lint += LintFinding.authentication(auth, pushType: interpreted?.pushType ?? shape.request.pushType.flatMap(PushType.init(headerValue:)))
        var headers: [String: String] = [:]
        for header in KnownHeader.allCases where header.isRecorded {
            if let value = request[header] { headers[header.name] = value }
        }
        for (name, value) in request.otherHeaders {
            headers[name] = value
        }
        let (payload, encoding) = Self.payload(request.body)
        return NotificationRecord(
            seq: seq,
            apnsId: apnsIDText,
            uniqueId: uniqueID?.text(uppercase: false),
            receivedAt: Timestamp.rfc3339(milliseconds: receivedAt),
            mockTime: clockOffset == 0 ? nil : Timestamp.rfc3339(milliseconds: receivedAt + Int64(clockOffset) * 1000),
            token: token,
            topic: topic,
            pushType: pushType,
            priority: interpreted?.priority ?? request.priority.flatMap { Int($0) },
            expiration: interpreted?.expiration ?? request.expiration.flatMap { Int64($0) },
            collapseId: request.collapseID,
            environment: environment.rawValue,
            auth: auth,
            payload: payload,
            payloadEncoding: encoding,
            payloadSize: request.bodyLength,
            status: status,
            reason: rejection?.wireReason,
            timestamp: rejection?.timestamp,
            lint: lint.map { NotificationRecord.Finding(code: $0.code.rawValue, message: $0.message) },
            injected: injected,
            action: action?.rawValue,
            connectionId: connectionID,
            streamId: streamID,
            headers: headers,
            kind: kind.rawValue,
            channelId: broadcast?.channelID,
            requestId: broadcast == nil ? nil : apnsIDText,
            operation: broadcast?.operation?.rawValue,
            responseWritten: responseWritten)
    }

    private static func payload(_ body: [UInt8]) -> (RecordJSON?, NotificationRecord.PayloadEncoding?) {
        guard !body.isEmpty else { return (nil, nil) }
        if let tree = try? JSONValue.parse(body) {
            return (RecordJSON(tree), .json)
        }
        if let text = String(validating: body, as: UTF8.self) {
            return (.string(text), .text)
        }
        return (.string(Data(body).base64EncodedString()), .base64)
    }
}

/// The query API's filters (docs/admin-api.md): every field optional; all given ones must match.
public struct RecordFilter: Sendable, Equatable {
    public enum Outcome: String, Sendable, CaseIterable {
        case accepted, rejected, all
    }

    public var token: String?
    public var topic: String?
    public var pushType: String?
    public var apnsId: String?
    public var collapseId: String?
    public var outcome: Outcome = .accepted
    public var reason: String?
    /// `device`, `broadcast` or `channel`; `nil` for every kind.
    public var kind: String?
    public var channelId: String?
    /// Only records of this team (their `auth.teamId`): `?team=`, or a call scoped to the team.
    public var team: String?

    public init(
        token: String? = nil, topic: String? = nil, pushType: String? = nil, apnsId: String? = nil,
        collapseId: String? = nil, outcome: Outcome = .accepted, reason: String? = nil, kind: String? = nil,
        channelId: String? = nil, team: String? = nil
    ) {
        self.team = team
        self.kind = kind
        self.channelId = channelId
        self.token = token.map(DeviceToken.canonical)
        self.topic = topic
        self.pushType = pushType
        self.apnsId = apnsId
        self.collapseId = collapseId
        self.outcome = outcome
        self.reason = reason
    }

    func matches(_ record: RawRecord) -> Bool {
        switch outcome {
        case .accepted: if !record.isAccepted { return false }
        case .rejected: if record.isAccepted { return false }
        case .all: break
        }
        if let reason, record.reasonText != reason { return false }
        if let kind, record.kind.rawValue != kind { return false }
        if let channelId, record.broadcast?.channelID != channelId { return false }
        if let team, record.shape.auth.teamId != team { return false }
        // apns-id compared case-insensitively: generated ids are uppercase, clients often send lowercase.
        if let apnsId, record.apnsIDText.lowercased() != apnsId.lowercased() { return false }
        guard topic != nil || pushType != nil || collapseId != nil || token != nil else { return true }
        if let topic, record.topic != topic { return false }
        if let pushType, record.pushType != pushType { return false }
        if let collapseId, record.shape.request.collapseID != collapseId { return false }
        if let token, record.token != token { return false }
        return true
    }
}

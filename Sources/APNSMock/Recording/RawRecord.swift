import APNSMockCore
import Foundation

/// What the request path stores for one request: the request and the verdict, with
/// nothing derived. The JSON payload, the header dictionary, the token parsed from `:path`, the
/// lint of a rejected request and the id strings are built only when the record is queried
/// (``render(validator:)``).
///
/// The request is kept as the connection collected it: its header Strings are shared (a value a
/// connection repeats is one String for all its records), and body and extra headers are shared
/// with the previous record when they repeat, copied once when they change. The connection's own
/// reusable buffers are never shared with a record, so recycling them costs no reallocation.
struct RawRecord: Sendable {
    var seq: UInt64 = 0
    /// Milliseconds since the epoch.
    var receivedAt: Int64
    /// The body, then each header as `name NUL value NUL` (HTTP/2 field values cannot hold NUL).
    /// `authorization` is never stored.
    /// The request as received, without its `authorization` (never recorded). Its Strings are the
    /// connection's own (a repeated value is one shared String), and the body and extra headers are
    /// shared with the previous record of the connection when they repeat (see
    /// ``Responder/recordable(_:state:)``), so a record usually costs no copy of them.
    let request: PushRequest
    var interpreted: Interpreted?
    var environment: APNSEnvironment
    var auth: AuthSummary
    var apnsID: APNSResponse.RequestID
    var uniqueID: UUIDValue?
    /// `nil` when a fault action replaced the response.
    var status: Int?
    var rejection: Rejection?
    var injected: Bool
    var action: FaultRule.Action?
    var connectionID: UInt64
    var streamID: Int32

    /// The accepted push's interpreted values that the headers alone do not give.
    struct Interpreted: Sendable {
        var priority: Int
        var expiration: Int64?
        var pushType: PushType
        var topic: String
        var lint: [LintFinding]
    }

    init(
        receivedAt: Int64, request: PushRequest, accepted: AcceptedPush?, environment: APNSEnvironment,
        auth: AuthSummary, apnsID: APNSResponse.RequestID, uniqueID: UUIDValue?, status: Int?,
        rejection: Rejection?, injected: Bool, action: FaultRule.Action?, connectionID: UInt64, streamID: Int32
    ) {
        self.receivedAt = receivedAt
        self.request = request
        self.interpreted = accepted.map {
            Interpreted(priority: $0.priority, expiration: $0.expiration, pushType: $0.pushType, topic: $0.topic, lint: $0.lint)
        }
        self.environment = environment
        self.auth = auth
        self.apnsID = apnsID
        self.uniqueID = uniqueID
        self.status = status
        self.rejection = rejection
        self.injected = injected
        self.action = action
        self.connectionID = connectionID
        self.streamID = streamID
    }

    /// Accepted: answered 200 by the mock's own rules or an injected 200 (a fault with only a
    /// delay). Everything else counts as rejected.
    var isAccepted: Bool { status == 200 }

    var reasonText: String? { rejection?.wireReason }

    var apnsIDText: String {
        switch apnsID {
        case .echoed(let text): return text
        case .generated(let value): return value.text(uppercase: true)
        }
    }

    /// The canonical token from `:path`.
    static func token(_ request: PushRequest) -> String? {
        guard let path = request.path, case .token(let token) = HeaderSyntax.devicePath(path) else { return nil }
        return DeviceToken.canonical(String(token))
    }

    func topic(_ request: PushRequest) -> String? { interpreted?.topic ?? request.topic }
    func pushType(_ request: PushRequest) -> String? { interpreted.map { $0.pushType.rawValue } ?? request.pushType }

    /// Builds the public record: the expensive parts happen here, at query time.
    func render(validator: Validator) -> NotificationRecord {
        let request = self.request
        let lint = interpreted?.lint ?? validator.lint(request)
        var headers: [String: String] = [:]
        func put(_ header: KnownHeader, _ value: String?) {
            if let value { headers[header.name] = value }
        }
        put(.method, request.method)
        put(.scheme, request.scheme)
        put(.path, request.path)
        put(.authority, request.authority)
        put(.apnsID, request.apnsID)
        put(.expiration, request.expiration)
        put(.priority, request.priority)
        put(.topic, request.topic)
        put(.collapseID, request.collapseID)
        put(.pushType, request.pushType)
        for (name, value) in request.otherHeaders {
            headers[name] = value
        }
        let (payload, encoding) = Self.payload(request.body)
        return NotificationRecord(
            seq: seq,
            apnsId: apnsIDText,
            uniqueId: uniqueID?.text(uppercase: false),
            receivedAt: Timestamp.rfc3339(milliseconds: receivedAt),
            token: Self.token(request),
            topic: topic(request),
            pushType: pushType(request),
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
            headers: headers)
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

/// The query API's filters (interface.md): every field optional; all given ones must match.
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

    public init(
        token: String? = nil, topic: String? = nil, pushType: String? = nil, apnsId: String? = nil,
        collapseId: String? = nil, outcome: Outcome = .accepted, reason: String? = nil
    ) {
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
        // apns-id compared case-insensitively: generated ids are uppercase, clients often send lowercase.
        if let apnsId, record.apnsIDText.lowercased() != apnsId.lowercased() { return false }
        guard topic != nil || pushType != nil || collapseId != nil || token != nil else { return true }
        let request = record.request
        if let topic, record.topic(request) != topic { return false }
        if let pushType, record.pushType(request) != pushType { return false }
        if let collapseId, request.collapseID != collapseId { return false }
        if let token, RawRecord.token(request) != token { return false }
        return true
    }
}

import APNSMockCore
import Foundation

/// What the request path stores for one request: the request as received and the verdict, with
/// nothing derived. The JSON payload, the header dictionary, the token parsed from `:path`, the
/// lint of a rejected request and the id strings are built only when the record is queried
/// (``render()``), so recording costs the request path a clock read, one allocation and the
/// retains of strings the connection already has.
struct RawRecord: Sendable {
    var seq: UInt64 = 0
    /// Milliseconds since the epoch.
    var receivedAt: Int64
    /// The request with `authorization` removed (never stored).
    var request: PushRequest
    /// Set when the validator accepted the request (carries the interpreted headers and lint).
    var accepted: AcceptedPush?
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

    /// Accepted: answered 200 by the mock's own rules or an injected 200 (a fault with only a
    /// delay). Everything else counts as rejected.
    var isAccepted: Bool { status == 200 }

    /// The canonical token, from the accepted push or else from `:path`.
    var token: String? {
        if let accepted { return DeviceToken.canonical(accepted.token) }
        guard let path = request.path, case .token(let token) = HeaderSyntax.devicePath(path) else { return nil }
        return DeviceToken.canonical(String(token))
    }

    var topic: String? { accepted?.topic ?? request.topic }
    var pushType: String? { accepted.map { $0.pushType.rawValue } ?? request.pushType }
    var reasonText: String? { rejection?.wireReason }

    var apnsIDText: String {
        switch apnsID {
        case .echoed(let text): return text
        case .generated(let value): return value.text(uppercase: true)
        }
    }

    /// Builds the public record: the expensive parts happen here, at query time.
    func render(validator: Validator) -> NotificationRecord {
        let lint = accepted?.lint ?? validator.lint(request)
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
        for (name, value) in request.otherHeaders where name != "authorization" {
            headers[name] = value
        }
        let (payload, encoding) = Self.payload(request.body)
        return NotificationRecord(
            seq: seq,
            apnsId: apnsIDText,
            uniqueId: uniqueID?.text(uppercase: false),
            receivedAt: Timestamp.rfc3339(milliseconds: receivedAt),
            token: token,
            topic: topic,
            pushType: pushType,
            priority: accepted?.priority ?? request.priority.flatMap { Int($0) },
            expiration: accepted?.expiration ?? request.expiration.flatMap { Int64($0) },
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
        if let topic, record.topic != topic { return false }
        if let pushType, record.pushType != pushType { return false }
        if let collapseId, record.request.collapseID != collapseId { return false }
        // apns-id compared case-insensitively: generated ids are uppercase, clients often send lowercase.
        if let apnsId, record.apnsIDText.lowercased() != apnsId.lowercased() { return false }
        if let token, record.token != token { return false }
        return true
    }
}

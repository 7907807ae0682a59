import APNSMockCore
import Foundation

/// What the request path stores for one request: the request's bytes and the verdict, with
/// nothing derived. The JSON payload, the header dictionary, the token parsed from `:path`, the
/// lint of a rejected request and the id strings are built only when the record is queried
/// (``render(validator:)``).
///
/// Every header and the body are packed into one byte array (one exact-size allocation and a few
/// copies) rather than keeping the request's strings and arrays: holding those would cost a
/// retain and a release per field and make the connection reallocate its reused body and header
/// buffers for its next request (measured: that version cost ~17% of throughput, this one less).
struct RawRecord: Sendable {
    var seq: UInt64 = 0
    /// Milliseconds since the epoch.
    var receivedAt: Int64
    /// The body, then each header as `name NUL value NUL` (HTTP/2 field values cannot hold NUL).
    /// `authorization` is never stored.
    var packed: [UInt8]
    var bodyCount: Int
    /// Bytes of body received (more than kept when over every limit).
    var bodyLength: Int
    /// What the validator interpreted, when it accepted the request.
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
        self.packed = Self.pack(request)
        self.bodyCount = request.body.count
        self.bodyLength = request.bodyLength
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

    private static let knownNames: [[UInt8]] = KnownHeader.allCases.map { Array($0.name.utf8) }

    private static func pack(_ request: PushRequest) -> [UInt8] {
        var packed: [UInt8] = []
        packed.reserveCapacity(request.body.count + 320)
        packed.append(contentsOf: request.body)
        // Appending a String's UTF8View element by element was 9% of all request time in a
        // profile; native strings are contiguous, so copy their bytes in one go.
        func bytes(_ text: String) {
            let copied: Void? = text.utf8.withContiguousStorageIfAvailable { packed.append(contentsOf: $0) }
            if copied == nil { packed.append(contentsOf: Array(text.utf8)) }
        }
        func field(_ name: [UInt8], _ value: String?) {
            guard let value else { return }
            packed.append(contentsOf: name)
            packed.append(0)
            bytes(value)
            packed.append(0)
        }
        field(knownNames[KnownHeader.method.rawValue], request.method)
        field(knownNames[KnownHeader.scheme.rawValue], request.scheme)
        field(knownNames[KnownHeader.path.rawValue], request.path)
        field(knownNames[KnownHeader.authority.rawValue], request.authority)
        field(knownNames[KnownHeader.apnsID.rawValue], request.apnsID)
        field(knownNames[KnownHeader.expiration.rawValue], request.expiration)
        field(knownNames[KnownHeader.priority.rawValue], request.priority)
        field(knownNames[KnownHeader.topic.rawValue], request.topic)
        field(knownNames[KnownHeader.collapseID.rawValue], request.collapseID)
        field(knownNames[KnownHeader.pushType.rawValue], request.pushType)
        for (name, value) in request.otherHeaders where name != "authorization" {
            bytes(name)
            packed.append(0)
            bytes(value)
            packed.append(0)
        }
        return packed
    }

    /// The request as received (minus `authorization`), unpacked: for queries only.
    var request: PushRequest {
        var unpacked = PushRequest()
        unpacked.body = Array(packed[..<bodyCount])
        unpacked.bodyLength = bodyLength
        var fields = packed[bodyCount...].split(separator: 0, omittingEmptySubsequences: false)
        if fields.last?.isEmpty == true { fields.removeLast() }
        var index = fields.startIndex
        while index + 1 < fields.endIndex {
            unpacked.setHeader(
                name: String(decoding: fields[index], as: UTF8.self), value: String(decoding: fields[index + 1], as: UTF8.self))
            index += 2
        }
        return unpacked
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
            payloadSize: bodyLength,
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

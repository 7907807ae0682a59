/// One HTTP/2 request to an APNs endpoint (a device push, a broadcast, a channel-management
/// request) as the engine collected it from a stream.
///
/// The engine copies header bytes into this value inside nghttp2's header callback and appends
/// DATA to ``body``. Values are kept exactly as sent; interpreting them is the deciding code's job,
/// so that deciding stays separate from collecting. The fields APNs interprets are described once,
/// by ``KnownHeader``: each has a stored property here, reached through ``subscript(_:)``, and
/// everything that walks the headers (reset, memo keys, record shapes, rendering) iterates
/// `KnownHeader.allCases`.
public struct PushRequest: Sendable {
    // One stored property per ``KnownHeader`` case, in its order; ``subscript(_:)`` maps them.
    public var method: String?
    public var scheme: String?
    public var path: String?
    public var authority: String?
    public var authorization: String?
    public var apnsID: String?
    public var expiration: String?
    public var priority: String?
    public var topic: String?
    public var collapseID: String?
    public var pushType: String?
    public var channelID: String?
    public var requestID: String?

    /// The first header name that arrived more than once (→ DuplicateHeaders), if any.
    public var duplicatedHeader: String?
    /// Every other header, in arrival order, for the record. Bounded by the connection's header
    /// list size limit.
    public var otherHeaders: [(name: String, value: String)] = []
    /// The request body, kept up to ``bodyLimit`` bytes; ``bodyLength`` counts every byte received.
    public var body: [UInt8] = []
    public var bodyLength: Int = 0
    /// Set by the engine when it can vouch for this request's header values (see ``RepeatKey``);
    /// `nil` otherwise, and then only comparing the values tells.
    public var repeatKey: RepeatKey?

    /// Bytes of body kept; anything longer is over every payload limit and is only counted. One byte
    /// past the largest limit, so that the lint of a just-too-large payload still sees all of it.
    public static let bodyLimit = PushType.largestPayloadLimit + 1

    public init() {}

    /// The value of a known header. Adding a ``KnownHeader`` case makes this switch (and the
    /// enum's name switch) fail to compile until the header has its property.
    public subscript(_ header: KnownHeader) -> String? {
        get {
            switch header {
            case .method: method
            case .scheme: scheme
            case .path: path
            case .authority: authority
            case .authorization: authorization
            case .apnsID: apnsID
            case .expiration: expiration
            case .priority: priority
            case .topic: topic
            case .collapseID: collapseID
            case .pushType: pushType
            case .channelID: channelID
            case .requestID: requestID
            }
        }
        // Yields the field itself, so that a header callback writes one field in place rather than
        // through a copy of the whole request.
        _modify {
            switch header {
            case .method: yield &method
            case .scheme: yield &scheme
            case .path: yield &path
            case .authority: yield &authority
            case .authorization: yield &authorization
            case .apnsID: yield &apnsID
            case .expiration: yield &expiration
            case .priority: yield &priority
            case .topic: yield &topic
            case .collapseID: yield &collapseID
            case .pushType: yield &pushType
            case .channelID: yield &channelID
            case .requestID: yield &requestID
            }
        }
    }

    /// Records one header. Known APNs headers go to their field; a second occurrence of a known
    /// header marks the request as carrying duplicate headers.
    public mutating func setHeader(name: String, value: String) {
        var name = name
        let known = name.withUTF8 { KnownHeader(name: UnsafeRawBufferPointer($0)) }
        if let known {
            set(known, value: value)
        } else {
            addOtherHeader(name: name, value: value)
        }
    }

    /// Records a header the engine already identified (see ``KnownHeader/init(name:)``), so that
    /// the hot path never builds a String for a header name. `value` is taken, not copied: the
    /// engine hands over its reference, and the field keeps it without another retain.
    public mutating func set(_ header: KnownHeader, value: consuming String) {
        if !Self.assign(value, to: &self[header]), duplicatedHeader == nil {
            duplicatedHeader = header.name
        }
    }

    /// Stores `value` in an empty field; false when the field already had one.
    private static func assign(_ value: consuming String, to field: inout String?) -> Bool {
        guard field == nil else { return false }
        field = consume value
        return true
    }

    /// Records a header APNs does not interpret (kept for the record); an unknown `apns-` header
    /// sent twice still counts as DuplicateHeaders.
    public mutating func addOtherHeader(name: consuming String, value: consuming String) {
        // The first byte rules out most names (user-agent, content-length…) before the prefix test.
        if duplicatedHeader == nil, name.utf8.first == UInt8(ascii: "a"), name.utf8.starts(with: "apns-".utf8),
           otherHeaders.contains(where: { $0.name == name }) {
            duplicatedHeader = name
        }
        otherHeaders.append((consume name, consume value))
    }

    /// Whether every known header but the `except` ones has the same value in both requests.
    /// Strings compare by identity first, so values a connection reuses compare in a word.
    public func hasSameKnownHeaders(as other: PushRequest, except ignored: KnownHeader.Set = []) -> Bool {
        for header in KnownHeader.allCases where !ignored.contains(header) && self[header] != other[header] {
            return false
        }
        return true
    }

    /// Whether the ``KnownHeader/perRequest`` headers have the same values in both requests: what
    /// equal ``RepeatKey``s leave to compare. Written out because it runs for every request of a
    /// repeating workload; a test holds it to `KnownHeader.perRequest`.
    @inline(__always)
    public func hasSamePerRequestHeaders(as other: PushRequest) -> Bool {
        path == other.path && apnsID == other.apnsID && requestID == other.requestID
    }

    /// Whether the headers APNs does not interpret are the same, in the same order.
    public func hasSameOtherHeaders(as other: PushRequest) -> Bool {
        guard otherHeaders.count == other.otherHeaders.count else { return false }
        for index in otherHeaders.indices
        where otherHeaders[index].name != other.otherHeaders[index].name
            || otherHeaders[index].value != other.otherHeaders[index].value {
            return false
        }
        return true
    }

    /// Empties the request for reuse by the next stream, keeping the storage of ``body`` and
    /// ``otherHeaders`` so that a long-lived connection does not allocate them per request.
    public mutating func reset() {
        reset(adopting: takeStorage())
    }

    /// Empties the request for reuse by the next stream, with `storage` (taken from an earlier
    /// request by ``takeStorage()``) as its body and other headers' storage.
    public mutating func reset(adopting storage: consuming Storage) {
        // Field by field (a test holds this to `KnownHeader.allCases`): assigning a fresh request
        // instead, or looping over the subscript, cost measurably more on the request path.
        method = nil
        scheme = nil
        path = nil
        authority = nil
        authorization = nil
        apnsID = nil
        expiration = nil
        priority = nil
        topic = nil
        collapseID = nil
        pushType = nil
        channelID = nil
        requestID = nil
        duplicatedHeader = nil
        body = storage.body
        otherHeaders = storage.otherHeaders
        bodyLength = 0
        repeatKey = nil
    }

    /// The storage of a request's variable-length parts (body, other headers), emptied with its
    /// capacity kept. A connection moves it from a request it has decided to the next one it
    /// collects, so that a few buffers, recently touched, serve all of its streams.
    public struct Storage: Sendable {
        fileprivate var body: [UInt8] = []
        fileprivate var otherHeaders: [(name: String, value: String)] = []

        public init() {}

        /// Whether it holds buffers worth keeping (a fresh request's arrays hold none).
        public var hasCapacity: Bool { body.capacity > 0 || otherHeaders.capacity > 0 }
    }

    /// Moves ``body`` and ``otherHeaders``' storage out, emptied, leaving the request empty ones.
    public mutating func takeStorage() -> Storage {
        var storage = Storage()
        swap(&storage.body, &body)
        swap(&storage.otherHeaders, &otherHeaders)
        if !storage.body.isEmpty { storage.body.removeAll(keepingCapacity: true) }
        // Popped one by one, not `removeAll(keepingCapacity:)`, which runs the unspecialised
        // generic `replaceSubrange` (evidence: about 300 instructions for a request's two or three
        // headers, Swift 6.3). Keep the loop while that is so; the instruction gate notices.
        while storage.otherHeaders.popLast() != nil {}
        bodyLength = 0
        return storage
    }

    /// Appends received DATA, keeping at most ``bodyLimit`` bytes.
    public mutating func appendBody(_ bytes: UnsafeRawBufferPointer) {
        bodyLength += bytes.count
        let room = Self.bodyLimit - body.count
        if room > 0 {
            body.append(contentsOf: bytes.prefix(room))
        }
    }
}

/// Two requests of one connection with equal keys carry the same header values, each the same
/// String object, with the possible exception of the ``KnownHeader/isPerRequest`` ones (`:path`,
/// `apns-id`, `apns-request-id`), which change per request in many workloads and are compared on
/// their own.
///
/// The engine keeps a generation per connection that moves whenever a header value it hands out
/// is not the one it handed out last for that field; a key is that generation at the end of the
/// request's header block and the set of fields the request carried. Per-connection memos (the
/// validator's, the recorder's) compare keys instead of every header.
public struct RepeatKey: Equatable, Sendable {
    public var generation: UInt64
    /// A bit per field carried: ``KnownHeader`` cases first, then the connection's cached other
    /// header names (see ``fieldCapacity``).
    public var fields: UInt64

    /// How many distinct fields a key can describe.
    public static let fieldCapacity = UInt64.bitWidth

    public init(generation: UInt64, fields: UInt64) {
        self.generation = generation
        self.fields = fields
    }
}

/// The request headers APNs interprets, identified from raw name bytes without building a String.
///
/// This is the one list of them: a new header is a new case here (its name below, its property
/// in ``PushRequest``; the compiler points at both), and the request fields, their reset, the
/// validation memo's key and the record's shape follow from it.
public enum KnownHeader: Int, CaseIterable, Sendable, Hashable {
    case method, scheme, path, authority, authorization
    case apnsID, expiration, priority, topic, collapseID, pushType
    case channelID, requestID

    /// The header's name as HTTP/2 carries it (lowercase).
    public var name: String { String(describing: staticName) }

    public var staticName: StaticString {
        switch self {
        case .method: ":method"
        case .scheme: ":scheme"
        case .path: ":path"
        case .authority: ":authority"
        case .authorization: "authorization"
        case .apnsID: "apns-id"
        case .expiration: "apns-expiration"
        case .priority: "apns-priority"
        case .topic: "apns-topic"
        case .collapseID: "apns-collapse-id"
        case .pushType: "apns-push-type"
        case .channelID: "apns-channel-id"
        case .requestID: "apns-request-id"
        }
    }

    /// `:method`, `:scheme`, `:path`, `:authority`.
    public var isPseudoHeader: Bool {
        staticName.utf8Start.pointee == UInt8(ascii: ":")
    }

    /// Headers whose value commonly changes from one request to the next (an id, the device token
    /// in the path): they do not move the connection's repeat generation (``RepeatKey``) and are
    /// compared on their own.
    public var isPerRequest: Bool {
        switch self {
        case .path, .apnsID, .requestID: true
        default: false
        }
    }

    /// Whether a record keeps the value: everything but the credentials.
    public var isRecorded: Bool { self != .authorization }

    /// A set of known headers as one word.
    public struct Set: OptionSet, Sendable {
        public var rawValue: UInt32
        public init(rawValue: UInt32) { self.rawValue = rawValue }
        public init(_ header: KnownHeader) { rawValue = 1 << UInt32(header.rawValue) }

        public func contains(_ header: KnownHeader) -> Bool { rawValue & (1 << UInt32(header.rawValue)) != 0 }
    }

    /// The known headers that are compared request by request rather than vouched for by a
    /// ``RepeatKey``.
    public static let perRequest: Set = allCases.filter(\.isPerRequest).reduce(into: []) { $0.insert(Set($1)) }

    /// The known header named by `name` (HTTP/2 names are lowercase; nghttp2 rejects others), or
    /// `nil` for any other header.
    ///
    /// Runs for every field of every request, so it dispatches on the length first and compares
    /// the bytes of at most two names; the cases per length are written out (a test holds them to
    /// `allCases`): a table look-up showed up in profiles at several times the cost of this.
    public init?(name: UnsafeRawBufferPointer) {
        func named(_ candidate: KnownHeader) -> Bool {
            name.hasSameBytes(as: candidate.staticName)
        }
        let match: KnownHeader?
        switch name.count {
        case 5: match = named(.path) ? .path : nil
        case 7: match = named(.method) ? .method : named(.scheme) ? .scheme : named(.apnsID) ? .apnsID : nil
        case 10: match = named(.authority) ? .authority : named(.topic) ? .topic : nil
        case 13: match = named(.authorization) ? .authorization : named(.priority) ? .priority : nil
        case 14: match = named(.pushType) ? .pushType : nil
        case 15:
            match = named(.expiration) ? .expiration : named(.channelID) ? .channelID : named(.requestID) ? .requestID : nil
        case 16: match = named(.collapseID) ? .collapseID : nil
        default: match = nil
        }
        guard let match else { return nil }
        self = match
    }
}

/// The parts of one HTTP/2 request that APNs looks at, as the engine collected them from a stream.
///
/// The engine copies header bytes into this value inside nghttp2's header callback (see
/// ``setHeader(name:value:)``) and appends DATA to ``body``. Values are kept exactly as sent;
/// interpreting them is the validator's job, so that deciding stays separate from collecting.
public struct PushRequest: Sendable {
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
    /// the hot path never builds a String for a header name.
    public mutating func set(_ header: KnownHeader, value: String) {
        func assign(_ field: inout String?) {
            if field == nil {
                field = value
            } else if duplicatedHeader == nil {
                duplicatedHeader = header.name
            }
        }
        switch header {
        case .method: assign(&method)
        case .scheme: assign(&scheme)
        case .path: assign(&path)
        case .authority: assign(&authority)
        case .authorization: assign(&authorization)
        case .apnsID: assign(&apnsID)
        case .expiration: assign(&expiration)
        case .priority: assign(&priority)
        case .topic: assign(&topic)
        case .collapseID: assign(&collapseID)
        case .pushType: assign(&pushType)
        }
    }

    /// Records a header APNs does not interpret (kept for the record); an unknown `apns-` header
    /// sent twice still counts as DuplicateHeaders.
    public mutating func addOtherHeader(name: String, value: String) {
        // The first byte rules out most names (user-agent, content-length…) before the prefix test.
        if duplicatedHeader == nil, name.utf8.first == UInt8(ascii: "a"), name.utf8.starts(with: "apns-".utf8),
           otherHeaders.contains(where: { $0.name == name }) {
            duplicatedHeader = name
        }
        otherHeaders.append((name, value))
    }

    /// Empties the request for reuse by the next stream, keeping the storage of ``body`` and
    /// ``otherHeaders`` so that a long-lived connection does not allocate them per request.
    public mutating func reset() {
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
        duplicatedHeader = nil
        otherHeaders.removeAll(keepingCapacity: true)
        body.removeAll(keepingCapacity: true)
        bodyLength = 0
        repeatKey = nil
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
/// String object, with the possible exception of `:path` and `apns-id` (which change per
/// request in many workloads and are compared on their own).
///
/// The engine keeps a generation per connection that moves whenever a header value it hands out
/// is not the one it handed out last for that field; a key is that generation at the end of the
/// request's header block and the set of fields the request carried. Per-connection memos (the
/// validator's, the recorder's) compare keys instead of every header.
public struct RepeatKey: Equatable, Sendable {
    public var generation: UInt64
    public var fields: UInt32

    public init(generation: UInt64, fields: UInt32) {
        self.generation = generation
        self.fields = fields
    }
}

/// The request headers APNs interprets, identified from raw name bytes without building a String.
public enum KnownHeader: Int, CaseIterable, Sendable {
    case method, scheme, path, authority, authorization
    case apnsID, expiration, priority, topic, collapseID, pushType

    /// The header's name as HTTP/2 carries it (lowercase).
    public var name: String { String(describing: staticName) }

    private var staticName: StaticString {
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
        }
    }

    /// The known header named by `name` (HTTP/2 names are lowercase; nghttp2 rejects others), or
    /// `nil` for any other header.
    public init?(name: UnsafeRawBufferPointer) {
        func named(_ candidate: KnownHeader) -> Bool {
            // Lengths are equal (dispatched below), so only the bytes are compared.
            memoryEqual(name.baseAddress?.assumingMemoryBound(to: UInt8.self), candidate.staticName.utf8Start, name.count)
        }
        // Dispatch on length first: at most three comparisons, no allocation.
        let match: KnownHeader?
        switch name.count {
        case 5: match = named(.path) ? .path : nil
        case 7: match = named(.method) ? .method : named(.scheme) ? .scheme : named(.apnsID) ? .apnsID : nil
        case 10: match = named(.authority) ? .authority : named(.topic) ? .topic : nil
        case 13: match = named(.authorization) ? .authorization : named(.priority) ? .priority : nil
        case 14: match = named(.pushType) ? .pushType : nil
        case 15: match = named(.expiration) ? .expiration : nil
        case 16: match = named(.collapseID) ? .collapseID : nil
        default: match = nil
        }
        guard let match else { return nil }
        self = match
    }
}

/// The parts of one HTTP/2 request that APNs looks at, as the engine collected them from a stream.
///
/// The engine copies header bytes into this value inside nghttp2's header callback (see
/// ``setHeader(name:value:)``) and appends DATA to ``body``. Values are kept exactly as sent;
/// interpreting them is the validator's job, so that deciding stays separate from collecting.
public struct PushRequest: Sendable {
    public var method: String?
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

    /// Bytes of body kept; anything longer is over every payload limit and is only counted. One byte
    /// past the largest limit, so that the lint of a just-too-large payload still sees all of it.
    public static let bodyLimit = PushType.largestPayloadLimit + 1

    public init() {}

    /// Records one header. Known APNs headers go to their field; a second occurrence of a known
    /// header marks the request as carrying duplicate headers.
    public mutating func setHeader(name: String, value: String) {
        func assign(_ field: inout String?) {
            if field == nil {
                field = value
            } else if duplicatedHeader == nil {
                duplicatedHeader = name
            }
        }
        switch name {
        case HeaderName.method: assign(&method)
        case HeaderName.path: assign(&path)
        case HeaderName.authority: assign(&authority)
        case HeaderName.authorization: assign(&authorization)
        case HeaderName.apnsID: assign(&apnsID)
        case HeaderName.apnsExpiration: assign(&expiration)
        case HeaderName.apnsPriority: assign(&priority)
        case HeaderName.apnsTopic: assign(&topic)
        case HeaderName.apnsCollapseID: assign(&collapseID)
        case HeaderName.apnsPushType: assign(&pushType)
        default:
            if duplicatedHeader == nil, name.hasPrefix("apns-"),
               otherHeaders.contains(where: { $0.name == name }) {
                duplicatedHeader = name
            }
            otherHeaders.append((name, value))
        }
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

/// RFC 9113 §7 error codes, for RST_STREAM and GOAWAY.
struct HTTP2ErrorCode: RawRepresentable, Equatable, Sendable, CustomStringConvertible {
    var rawValue: UInt32

    static let noError = HTTP2ErrorCode(rawValue: 0x0)
    static let protocolError = HTTP2ErrorCode(rawValue: 0x1)
    static let internalError = HTTP2ErrorCode(rawValue: 0x2)
    static let flowControlError = HTTP2ErrorCode(rawValue: 0x3)
    static let streamClosed = HTTP2ErrorCode(rawValue: 0x5)
    static let frameSizeError = HTTP2ErrorCode(rawValue: 0x6)
    /// The stream was not processed: the client may retry it (on this or another connection).
    static let refusedStream = HTTP2ErrorCode(rawValue: 0x7)
    static let cancel = HTTP2ErrorCode(rawValue: 0x8)
    static let enhanceYourCalm = HTTP2ErrorCode(rawValue: 0xB)

    var description: String {
        switch self {
        case .noError: "NO_ERROR"
        case .protocolError: "PROTOCOL_ERROR"
        case .internalError: "INTERNAL_ERROR"
        case .flowControlError: "FLOW_CONTROL_ERROR"
        case .streamClosed: "STREAM_CLOSED"
        case .frameSizeError: "FRAME_SIZE_ERROR"
        case .refusedStream: "REFUSED_STREAM"
        case .cancel: "CANCEL"
        case .enhanceYourCalm: "ENHANCE_YOUR_CALM"
        default: "0x" + String(rawValue, radix: 16)
        }
    }
}

/// A response as HTTP/2 sees it: a status, a few header fields and a body. What the fields mean is
/// the API's business (``DeviceAPI`` and the other APIs build them); the session only lays them
/// out for nghttp2 (``ResponseHeaderBlock``).
///
/// Built without allocating on the request path: header names are static strings, generated
/// UUIDs stay 128-bit values until they are written into the session's scratch buffer, and the
/// fields sit in a fixed number of inline slots.
struct HTTP2Response: Sendable {
    /// A header value in the form that is cheapest to carry until it is written out.
    enum Value: Sendable, Equatable {
        /// A value the API holds as a String (an echoed `apns-id`, a channel ID).
        case text(String)
        /// A UUID written as 8-4-4-4-12 hex digits in the given case.
        case uuid(UUIDValue, uppercase: Bool)
        /// A constant such as `application/json`.
        case literal(StaticString)

        static func == (a: Value, b: Value) -> Bool {
            switch (a, b) {
            case (.text(let x), .text(let y)): x == y
            case (.uuid(let x, let p), .uuid(let y, let q)): x == y && p == q
            case (.literal(let x), .literal(let y)): x.description == y.description
            default: false
            }
        }

        /// The value as text, for logs and records.
        var text: String {
            switch self {
            case .text(let text): text
            case .uuid(let value, let uppercase): value.text(uppercase: uppercase)
            case .literal(let literal): literal.description
            }
        }
    }

    struct Field: Sendable {
        var name: StaticString
        var value: Value
        /// Whether HPACK should index it: values that never repeat (generated ids) are not indexed.
        var indexed: Bool
    }

    /// How many fields a response can carry (besides `:status`).
    static let fieldCapacity = 5

    var status: Int
    private var slots: (Field?, Field?, Field?, Field?, Field?) = (nil, nil, nil, nil, nil)
    private(set) var fieldCount = 0
    /// Empty when the response has no body (then HEADERS carries END_STREAM).
    var body: [UInt8]

    init(status: Int, body: [UInt8] = []) {
        self.status = status
        self.body = body
    }

    /// Adds a field; past ``fieldCapacity`` the field is dropped (a programming error the tests
    /// catch: every API's responses are covered).
    mutating func add(_ name: StaticString, _ value: Value, indexed: Bool = true) {
        let field = Field(name: name, value: value, indexed: indexed)
        switch fieldCount {
        case 0: slots.0 = field
        case 1: slots.1 = field
        case 2: slots.2 = field
        case 3: slots.3 = field
        case 4: slots.4 = field
        default:
            assertionFailure("more than \(Self.fieldCapacity) response fields")
            return
        }
        fieldCount += 1
    }

    func field(at index: Int) -> Field? {
        switch index {
        case 0: slots.0
        case 1: slots.1
        case 2: slots.2
        case 3: slots.3
        case 4: slots.4
        default: nil
        }
    }

    /// The value of the first field named `name`.
    func value(of name: String) -> Value? {
        for index in 0..<fieldCount {
            if let field = field(at: index), field.name.description == name { return field.value }
        }
        return nil
    }
}

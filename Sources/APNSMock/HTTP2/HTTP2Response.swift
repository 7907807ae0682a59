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
/// the API's business: each API's response type conforms (``APNSResponse``, ``BroadcastResponse``)
/// and writes its own fields; the session lays them out for nghttp2 (``ResponseHeaderBlock``).
///
/// Answering costs no allocation on the request path: the session asks the response to write its
/// fields straight into the header block's scratch space (header names are static strings,
/// generated UUIDs are formatted in place), with no intermediate list of fields.
protocol HTTP2Response {
    var status: Int { get }
    /// Empty when the response has no body (then HEADERS carries END_STREAM).
    var body: [UInt8] { get }
    /// Writes the fields besides `:status`, at most ``ResponseFields/capacity`` of them.
    func writeFields(into fields: inout ResponseFields)
}

/// 431 Request Header Fields Too Large (RFC 6585), for a request whose header list passed the
/// SETTINGS_MAX_HEADER_LIST_SIZE the connection announced (``HTTP2SessionDelegate/session(_:didReceiveOversized:)``): HTTP's own answer, which clients report
/// as such (APNs has no reason for it, so the body has no `reason` either: a client does not take
/// it for one of Apple's). Its body says what was too large, for the person reading it.
struct HeaderListTooLarge: HTTP2Response {
    static let status = 431
    let limit: UInt32
    var status: Int { Self.status }
    var body: [UInt8] {
        Array(#"{"error":"the request's header list is larger than the SETTINGS_MAX_HEADER_LIST_SIZE this connection announced","maxHeaderListSize":\#(limit)}"#.utf8)
    }

    func writeFields(into fields: inout ResponseFields) {
        fields.add("content-type", literal: "application/json")
    }
}

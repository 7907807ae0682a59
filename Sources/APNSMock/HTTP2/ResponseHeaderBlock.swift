internal import CNGHTTP2

/// Lays an ``HTTP2Response``'s status and fields out as nghttp2 name/value pairs and hands them to
/// nghttp2, which copies the values.
///
/// Contract: ``withHeaders(for:_:)`` calls `body` with `nghttp2_nv` entries that are valid only
/// during the call. Names are static strings that nghttp2 is told not to copy; values (status
/// digits, UUIDs as hex, text) are written into a scratch buffer this block owns, so a response
/// costs no allocation. A value that does not fit (no response of the mock's APIs comes near) gets
/// a buffer of its own, freed after the call.
///
/// HPACK: a field whose value never repeats (a generated `apns-id`, `apns-unique-id`) is sent
/// never-indexed, but its *name* is worth indexing: without an entry of that name in the dynamic
/// table, nghttp2 Huffman-encodes the name into every response. So the first response of a session
/// that carries such a field sends it with incremental indexing (``NamePriming``); later ones then
/// refer to the name by its index and send only the value. Priming repeats every
/// ``NamePriming/interval`` responses, in case the entry was evicted (a client that shrinks the
/// table gets literal names, as before).
final class ResponseHeaderBlock {
    private let scratch: UnsafeMutableBufferPointer<UInt8>
    private let headers: UnsafeMutableBufferPointer<nghttp2_nv>
    private var priming = NamePriming()

    /// Bytes of values a response can carry before they overflow into separate buffers.
    static let scratchCapacity = 512

    init() {
        scratch = .allocate(capacity: Self.scratchCapacity)
        headers = .allocate(capacity: ResponseFields.capacity + 1)
    }

    deinit {
        scratch.deallocate()
        headers.deallocate()
    }

    private static let statusName: StaticString = ":status"

    func withHeaders<Response: HTTP2Response, R>(
        for response: borrowing Response, _ body: (UnsafePointer<nghttp2_nv>, Int) -> R
    ) -> R {
        priming.responses &+= 1
        var fields = ResponseFields(headers: headers, scratch: scratch, priming: priming)
        defer { priming = fields.priming }
        let status = max(100, min(999, response.status))
        fields.add(Self.statusName, digits: status, indexed: true)
        response.writeFields(into: &fields)
        return body(UnsafePointer(headers.baseAddress!), fields.count)
    }
}

/// Where an ``HTTP2Response`` writes its header fields: each becomes an `nghttp2_nv` at once, its
/// value written into the ``ResponseHeaderBlock``'s scratch buffer. Valid only inside
/// ``ResponseHeaderBlock/withHeaders(for:_:)``.
struct ResponseFields: ~Copyable {
    /// Fields a response can carry besides `:status`; past it a field is dropped (a programming
    /// error the tests catch: every API's responses are covered).
    static let capacity = 7

    private let headers: UnsafeMutableBufferPointer<nghttp2_nv>
    private let scratch: UnsafeMutableBufferPointer<UInt8>
    private(set) var count = 0
    private var used = 0
    fileprivate var priming: NamePriming
    /// Values that did not fit in the scratch buffer.
    private var overflow: [UnsafeMutableBufferPointer<UInt8>] = []

    fileprivate init(
        headers: UnsafeMutableBufferPointer<nghttp2_nv>, scratch: UnsafeMutableBufferPointer<UInt8>, priming: NamePriming
    ) {
        self.headers = headers
        self.scratch = scratch
        self.priming = priming
    }

    deinit {
        for buffer in overflow { buffer.deallocate() }
    }

    /// A constant value, such as `application/json`, passed from its static storage.
    mutating func add(_ name: StaticString, literal: StaticString, indexed: Bool = true) {
        append(name, literal.utf8Start, literal.utf8CodeUnitCount, indexed: indexed)
    }

    /// A UUID as 8-4-4-4-12 hex digits in the given case.
    mutating func add(_ name: StaticString, uuid: UUIDValue, uppercase: Bool, indexed: Bool) {
        let destination = space(UUIDValue.textLength)
        uuid.write(to: destination, uppercase: uppercase)
        append(name, destination, UUIDValue.textLength, indexed: indexed)
    }

    /// A value the API holds as a String (an echoed id, a channel ID).
    mutating func add(_ name: StaticString, text: String, indexed: Bool) {
        var text = text
        text.withUTF8 { bytes in
            let destination = space(bytes.count)
            if let source = bytes.baseAddress {
                destination.update(from: source, count: bytes.count)
            }
            append(name, destination, bytes.count, indexed: indexed)
        }
    }

    /// A number from 0 to 999 as three digits (the status).
    fileprivate mutating func add(_ name: StaticString, digits value: Int, indexed: Bool) {
        let destination = space(3)
        destination[0] = UInt8(ascii: "0") + UInt8(value / 100)
        destination[1] = UInt8(ascii: "0") + UInt8(value / 10 % 10)
        destination[2] = UInt8(ascii: "0") + UInt8(value % 10)
        append(name, destination, 3, indexed: indexed)
    }

    /// Room for `length` bytes of value: in the scratch buffer, or a buffer of its own.
    private mutating func space(_ length: Int) -> UnsafeMutablePointer<UInt8> {
        if used + length <= scratch.count {
            defer { used += length }
            return scratch.baseAddress! + used
        }
        let buffer = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: max(length, 1))
        overflow.append(buffer)
        return buffer.baseAddress!
    }

    private mutating func append(_ name: StaticString, _ value: UnsafePointer<UInt8>, _ length: Int, indexed: Bool) {
        guard count <= Self.capacity else {
            assertionFailure("more than \(Self.capacity) response fields")
            return
        }
        let noCopyName = UInt8(NGHTTP2_NV_FLAG_NO_COPY_NAME.rawValue)
        let flags = indexed || priming.primes(name)
            ? noCopyName : noCopyName | UInt8(NGHTTP2_NV_FLAG_NO_INDEX.rawValue)
        headers[count] = nghttp2_nv(
            name: UnsafeMutablePointer(mutating: name.utf8Start), value: UnsafeMutablePointer(mutating: value),
            namelen: name.utf8CodeUnitCount, valuelen: length, flags: flags)
        count += 1
    }
}

/// Which never-indexed field names a session has put in the client's HPACK dynamic table, and when
/// (see ``ResponseHeaderBlock``). Names are the APIs' static strings, told apart by address; a
/// response has few such fields and the mock's APIs few such names, so a handful of slots serve
/// (a name beyond them is simply never primed).
struct NamePriming {
    /// Responses between primings of one name: rare enough to cost nothing, often enough that an
    /// evicted entry comes back.
    static let interval = 4096

    /// Responses this session has laid out.
    var responses = 0
    /// A primed name's address and the response that primed it; empty slots have no name.
    private typealias Slot = (name: UnsafeRawPointer?, primedAt: Int)
    private var slots: (Slot, Slot, Slot, Slot) = ((nil, 0), (nil, 0), (nil, 0), (nil, 0))

    /// Whether this response should send the never-indexed field `name` with indexing: its first
    /// time in the session, and again once ``interval`` responses have passed.
    mutating func primes(_ name: StaticString) -> Bool {
        let address = UnsafeRawPointer(name.utf8Start)
        let responses = responses
        return withUnsafeMutableBytes(of: &slots) { raw in
            let slots = raw.bindMemory(to: Slot.self)
            for index in slots.indices {
                guard let held = slots[index].name else {
                    slots[index] = (address, responses)
                    return true
                }
                if held == address {
                    guard responses &- slots[index].primedAt >= Self.interval else { return false }
                    slots[index].primedAt = responses
                    return true
                }
            }
            return false
        }
    }
}

internal import CNGHTTP2

/// Lays an ``HTTP2Response``'s status and fields out as nghttp2 name/value pairs and hands them to
/// nghttp2, which copies the values.
///
/// Contract: ``withHeaders(for:_:)`` calls `body` with `nghttp2_nv` entries that are valid only
/// during the call. Names are static strings that nghttp2 is told not to copy; values (status
/// digits, UUIDs as hex, text) are written into a scratch buffer this block owns, which grows when
/// a response needs more than it has (it never shrinks), so a response costs no allocation.
final class ResponseHeaderBlock {
    private var scratch: UnsafeMutableRawBufferPointer

    init() {
        scratch = .allocate(byteCount: 256, alignment: 8)
    }

    deinit {
        scratch.deallocate()
    }

    private static let statusName: StaticString = ":status"

    private static func length(of value: HTTP2Response.Value) -> Int {
        switch value {
        case .literal: 0  // passed from its static storage
        case .uuid: UUIDValue.textLength
        case .text(let text): text.utf8.count
        }
    }

    func withHeaders<R>(for response: HTTP2Response, _ body: (UnsafePointer<nghttp2_nv>, Int) -> R) -> R {
        var needed = 3
        for index in 0..<response.fieldCount {
            if let field = response.field(at: index) { needed += Self.length(of: field.value) }
        }
        if needed > scratch.count {
            scratch.deallocate()
            scratch = .allocate(byteCount: needed, alignment: 8)
        }
        let base = scratch.baseAddress!.assumingMemoryBound(to: UInt8.self)
        return withUnsafeTemporaryAllocation(of: nghttp2_nv.self, capacity: HTTP2Response.fieldCapacity + 1) { headers in
            let noCopyName = UInt8(NGHTTP2_NV_FLAG_NO_COPY_NAME.rawValue)
            let noIndex = UInt8(NGHTTP2_NV_FLAG_NO_INDEX.rawValue)
            var count = 0
            func add(_ name: StaticString, _ value: UnsafePointer<UInt8>, _ length: Int, _ flags: UInt8) {
                headers[count] = nghttp2_nv(
                    name: UnsafeMutablePointer(mutating: name.utf8Start), value: UnsafeMutablePointer(mutating: value),
                    namelen: name.utf8CodeUnitCount, valuelen: length, flags: flags)
                count += 1
            }
            let status = max(100, min(999, response.status))
            base[0] = UInt8(ascii: "0") + UInt8(status / 100)
            base[1] = UInt8(ascii: "0") + UInt8(status / 10 % 10)
            base[2] = UInt8(ascii: "0") + UInt8(status % 10)
            add(Self.statusName, base, 3, noCopyName)
            var used = 3
            for index in 0..<response.fieldCount {
                guard let field = response.field(at: index) else { continue }
                let flags = field.indexed ? noCopyName : noCopyName | noIndex
                switch field.value {
                case .literal(let literal):
                    add(field.name, literal.utf8Start, literal.utf8CodeUnitCount, flags)
                case .uuid(let value, let uppercase):
                    value.write(to: base + used, uppercase: uppercase)
                    add(field.name, base + used, UUIDValue.textLength, flags)
                    used += UUIDValue.textLength
                case .text(let text):
                    let destination = base + used
                    let length = text.utf8.withContiguousStorageIfAvailable { bytes -> Int in
                        guard let source = bytes.baseAddress else { return 0 }
                        destination.update(from: source, count: bytes.count)
                        return bytes.count
                    } ?? {
                        var written = 0
                        for byte in text.utf8 {
                            destination[written] = byte
                            written += 1
                        }
                        return written
                    }()
                    add(field.name, base + used, length, flags)
                    used += length
                }
            }
            return body(UnsafePointer(headers.baseAddress!), count)
        }
    }
}

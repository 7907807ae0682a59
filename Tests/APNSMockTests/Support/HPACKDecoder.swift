import CNGHTTP2

/// Decodes the server's HPACK header blocks in sans-I/O tests, with nghttp2's own inflater (one per
/// connection, as HPACK state is per connection).
final class HPACKDecoder {
    private var inflater: OpaquePointer?

    init() {
        nghttp2_hd_inflate_new(&inflater)
    }

    deinit {
        nghttp2_hd_inflate_del(inflater)
    }

    /// The fields of one complete header block, in order; `nil` when the block does not decode.
    func decode(_ block: [UInt8]) -> [(name: String, value: String)]? {
        var fields: [(name: String, value: String)] = []
        var offset = 0
        while true {
            var nv = nghttp2_nv()
            var flags: Int32 = 0
            let consumed = block.withUnsafeBufferPointer { bytes -> Int in
                nghttp2_hd_inflate_hd2(
                    inflater, &nv, &flags, bytes.baseAddress.map { $0 + offset }, bytes.count - offset, 1)
            }
            guard consumed >= 0 else { return nil }
            offset += consumed
            if flags & Int32(NGHTTP2_HD_INFLATE_EMIT.rawValue) != 0 {
                fields.append((
                    String(decoding: UnsafeBufferPointer(start: nv.name, count: nv.namelen), as: UTF8.self),
                    String(decoding: UnsafeBufferPointer(start: nv.value, count: nv.valuelen), as: UTF8.self)))
            }
            if flags & Int32(NGHTTP2_HD_INFLATE_FINAL.rawValue) != 0 {
                nghttp2_hd_inflate_end_headers(inflater)
                return fields
            }
            if consumed == 0, flags & Int32(NGHTTP2_HD_INFLATE_EMIT.rawValue) == 0 { return nil }
        }
    }
}

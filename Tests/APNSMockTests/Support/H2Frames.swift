/// Hand-made HTTP/2 frames for hostile and edge-case tests. Headers are HPACK "literal without
/// indexing, new name" with no Huffman coding, which every decoder must accept and which lets a
/// test send anything (duplicates, oversized lists, odd names).
enum H2 {
    static let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)

    enum FrameType: UInt8 {
        case data = 0, headers = 1, priority = 2, rstStream = 3, settings = 4, pushPromise = 5
        case ping = 6, goaway = 7, windowUpdate = 8, continuation = 9
    }

    static let endStream: UInt8 = 0x1
    static let endHeaders: UInt8 = 0x4
    static let ack: UInt8 = 0x1

    static func frame(_ type: FrameType, flags: UInt8 = 0, stream: UInt32 = 0, payload: [UInt8] = []) -> [UInt8] {
        let length = payload.count
        return [UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF), type.rawValue, flags]
            + be32(stream & 0x7FFF_FFFF) + payload
    }

    static func settings(_ entries: [(UInt16, UInt32)] = []) -> [UInt8] {
        frame(.settings, payload: entries.flatMap { [UInt8($0.0 >> 8), UInt8($0.0 & 0xFF)] + be32($0.1) })
    }

    static func headerBlock(_ fields: [(String, String)]) -> [UInt8] {
        var block: [UInt8] = []
        for (name, value) in fields {
            block.append(0x00)
            block += hpackString(Array(name.utf8))
            block += hpackString(Array(value.utf8))
        }
        return block
    }

    static func headers(stream: UInt32, _ fields: [(String, String)], endStream: Bool) -> [UInt8] {
        frame(.headers, flags: endHeaders | (endStream ? H2.endStream : 0), stream: stream, payload: headerBlock(fields))
    }

    static func data(stream: UInt32, _ bytes: [UInt8], endStream: Bool) -> [UInt8] {
        frame(.data, flags: endStream ? H2.endStream : 0, stream: stream, payload: bytes)
    }

    static let padded: UInt8 = 0x8
    static let priorityFlag: UInt8 = 0x20

    /// HEADERS with the optional fields real stacks use: PRIORITY (netty sets it on every request:
    /// exclusive bit clear, stream 0, weight 16), PADDED with `padding` zero bytes, and the block cut
    /// into one HEADERS and CONTINUATION frames of `fragment` bytes each when given.
    static func headers(
        stream: UInt32, _ fields: [(String, String)], endStream: Bool, priority: Bool, padding: Int? = nil,
        fragment: Int? = nil
    ) -> [UInt8] {
        let block = headerBlock(fields)
        let firstCount = fragment.map { min($0, block.count) } ?? block.count
        var payload: [UInt8] = []
        var flags: UInt8 = endStream ? H2.endStream : 0
        if let padding {
            flags |= padded
            payload.append(UInt8(padding))
        }
        if priority {
            flags |= priorityFlag
            payload += be32(0) + [15]
        }
        payload += block[..<firstCount]
        if let padding { payload += [UInt8](repeating: 0, count: padding) }
        if firstCount == block.count { flags |= endHeaders }
        var bytes = frame(.headers, flags: flags, stream: stream, payload: payload)
        var offset = firstCount
        while offset < block.count {
            let end = min(offset + (fragment ?? block.count), block.count)
            bytes += frame(.continuation, flags: end == block.count ? endHeaders : 0, stream: stream, payload: Array(block[offset..<end]))
            offset = end
        }
        return bytes
    }

    /// DATA padded with `padding` zero bytes.
    static func data(stream: UInt32, _ bytes: [UInt8], endStream: Bool, padding: Int) -> [UInt8] {
        frame(.data, flags: (endStream ? H2.endStream : 0) | padded, stream: stream,
              payload: [UInt8(padding)] + bytes + [UInt8](repeating: 0, count: padding))
    }

    /// A POST to `/3/device/<token>` as a client would send it, with the harness's demo provider
    /// token unless `authorization` is `nil`.
    static func request(
        stream: UInt32, token: String, authorization: String? = Curl.demoAuthorization, extra: [(String, String)] = [],
        body: [UInt8]
    ) -> [UInt8] {
        let fields = [(":method", "POST"), (":scheme", "https"), (":path", "/3/device/\(token)"),
                      (":authority", "localhost"), ("apns-topic", "com.example.app")]
            + (authorization.map { [("authorization", $0)] } ?? []) + extra
        return headers(stream: stream, fields, endStream: body.isEmpty) + (body.isEmpty ? [] : data(stream: stream, body, endStream: true))
    }

    private static func hpackString(_ bytes: [UInt8]) -> [UInt8] {
        // Integer with a 7-bit prefix, H bit clear.
        var out: [UInt8] = []
        var length = bytes.count
        if length < 127 {
            out.append(UInt8(length))
        } else {
            out.append(127)
            length -= 127
            while length >= 128 {
                out.append(UInt8(length & 0x7F) | 0x80)
                length >>= 7
            }
            out.append(UInt8(length))
        }
        return out + bytes
    }

    static func be32(_ value: UInt32) -> [UInt8] {
        [UInt8(value >> 24 & 0xFF), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)]
    }

    struct Frame: Equatable {
        var type: UInt8
        var flags: UInt8
        var stream: UInt32
        var payload: [UInt8]

        /// For GOAWAY: the error code and the debug data as text.
        var goaway: (lastStream: UInt32, errorCode: UInt32, debug: String)? {
            guard type == FrameType.goaway.rawValue, payload.count >= 8 else { return nil }
            return (readBE32(payload, 0) & 0x7FFF_FFFF, readBE32(payload, 4), String(decoding: payload[8...], as: UTF8.self))
        }

        /// For RST_STREAM: the error code.
        var rstErrorCode: UInt32? {
            guard type == FrameType.rstStream.rawValue, payload.count == 4 else { return nil }
            return readBE32(payload, 0)
        }
    }

    /// Splits received bytes into frames (a trailing partial frame is ignored).
    static func parse(_ bytes: [UInt8]) -> [Frame] {
        var frames: [Frame] = []
        var offset = 0
        while bytes.count - offset >= 9 {
            let length = Int(bytes[offset]) << 16 | Int(bytes[offset + 1]) << 8 | Int(bytes[offset + 2])
            guard bytes.count - offset - 9 >= length else { break }
            frames.append(Frame(
                type: bytes[offset + 3], flags: bytes[offset + 4],
                stream: readBE32(bytes, offset + 5) & 0x7FFF_FFFF,
                payload: Array(bytes[(offset + 9)..<(offset + 9 + length)])))
            offset += 9 + length
        }
        return frames
    }

    static func readBE32(_ bytes: [UInt8], _ offset: Int) -> UInt32 {
        UInt32(bytes[offset]) << 24 | UInt32(bytes[offset + 1]) << 16 | UInt32(bytes[offset + 2]) << 8 | UInt32(bytes[offset + 3])
    }
}

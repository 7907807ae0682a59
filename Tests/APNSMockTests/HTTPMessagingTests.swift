import APNSMock
import APNSMockTesting
import Testing

/// RFC 9113 §8 request rules (pseudo-headers, field syntax, connection-specific fields,
/// content-length, trailers), each broken on stream 1 of a connection whose stream 3 is a normal
/// request. A malformed request gets RST_STREAM(PROTOCOL_ERROR) and nothing else on its stream, as
/// nghttp2's own HTTP messaging checks answer it; the connection goes on.
@Suite("HTTP/2 request rules", .timeLimit(.minutes(2)))
struct HTTPMessagingTests {
    static let method = (":method", "POST"), scheme = (":scheme", "https")
    static let path = (":path", "/3/device/\(Pushes.token)"), authority = (":authority", "localhost")
    static let topic = ("apns-topic", "com.example.app"), authorization = ("authorization", Curl.demoAuthorization ?? "")
    static let fields = [method, scheme, path, authority, topic, authorization]

    enum Outcome: Equatable {
        /// RST_STREAM with PROTOCOL_ERROR, no response.
        case reset
        /// A response with :status 200.
        case accepted
    }

    struct Case: CustomTestStringConvertible, Sendable {
        var name: String
        /// Frames for stream 1.
        var frames: @Sendable () -> [UInt8]
        var outcome: Outcome
        var testDescription: String { name }

        init(_ name: String, _ outcome: Outcome, fields: [(String, String)], body: [UInt8] = Pushes.body) {
            self.name = name
            self.outcome = outcome
            self.frames = { H2.headers(stream: 1, fields, endStream: false) + H2.data(stream: 1, body, endStream: true) }
        }

        init(_ name: String, _ outcome: Outcome, frames: @escaping @Sendable () -> [UInt8]) {
            self.name = name
            self.outcome = outcome
            self.frames = frames
        }
    }

    static let cases: [Case] = [
        Case("uppercase field name", .reset, fields: fields + [("X-Upper", "1")]),
        Case("unknown pseudo-header", .reset, fields: [method, scheme, path, authority, (":foo", "bar"), topic, authorization]),
        Case("pseudo-header after a regular field", .reset, fields: [method, scheme, path, topic, authority, authorization]),
        Case("duplicate :path", .reset, fields: [method, scheme, path, path, authority, topic, authorization]),
        Case("duplicate :method", .reset, fields: [method, method, scheme, path, authority, topic, authorization]),
        Case("missing :method", .reset, fields: [scheme, path, authority, topic, authorization]),
        Case("missing :scheme", .reset, fields: [method, path, authority, topic, authorization]),
        Case("missing :path", .reset, fields: [method, scheme, authority, topic, authorization]),
        Case("neither :authority nor host", .reset, fields: [method, scheme, path, topic, authorization]),
        Case("empty :path", .reset, fields: [method, scheme, (":path", ""), authority, topic, authorization]),
        Case(":path not from the root", .reset, fields: [method, scheme, (":path", "3/device/\(Pushes.token)"), authority, topic, authorization]),
        Case(":path * on a POST", .reset, fields: [method, scheme, (":path", "*"), authority, topic, authorization]),
        Case(":path with a space", .reset, fields: [method, scheme, (":path", "/3/device/ab cd"), authority, topic, authorization]),
        Case(":method that is not a token", .reset, fields: [(":method", "PO ST"), scheme, path, authority, topic, authorization]),
        Case(":authority with a space", .reset, fields: [method, scheme, path, (":authority", "local host"), topic, authorization]),
        Case("connection field", .reset, fields: fields + [("connection", "keep-alive")]),
        Case("keep-alive field", .reset, fields: fields + [("keep-alive", "5")]),
        Case("transfer-encoding field", .reset, fields: fields + [("transfer-encoding", "chunked")]),
        Case("upgrade field", .reset, fields: fields + [("upgrade", "h2c")]),
        Case("te other than trailers", .reset, fields: fields + [("te", "gzip")]),
        Case("content-length shorter than the body", .reset, fields: fields + [("content-length", "10")]),
        Case("content-length longer than the body", .reset, fields: fields + [("content-length", "100")]),
        Case("content-length not a number", .reset, fields: fields + [("content-length", "abc")]),
        Case("content-length twice", .reset, fields: fields + [("content-length", "25"), ("content-length", "25")]),
        Case("control character in a field value", .reset, fields: fields + [("x-bad", "a\u{1}b")]),
        Case("leading space in a field value", .reset, fields: fields + [("x-space", " a")]),
        Case("trailing tab in a field value", .reset, fields: fields + [("x-space", "a\t")]),
        Case("field name that is not a token", .reset, fields: fields + [("x-b@d", "1")]),
        Case("control character in a known field", .reset, fields: fields + [("apns-push-type", "alert\u{1}")]),
        Case("trailers without END_STREAM", .reset) {
            H2.headers(stream: 1, fields, endStream: false) + H2.data(stream: 1, Pushes.body, endStream: false)
                + H2.headers(stream: 1, [("x-trailer", "1")], endStream: false)
        },
        Case("pseudo-header in trailers", .reset) {
            H2.headers(stream: 1, fields, endStream: false) + H2.data(stream: 1, Pushes.body, endStream: false)
                + H2.headers(stream: 1, [(":path", "/")], endStream: true)
        },

        Case("te: trailers", .accepted, fields: fields + [("te", "trailers")]),
        Case("matching content-length", .accepted, fields: fields + [("content-length", "\(Pushes.body.count)")]),
        Case("host instead of :authority", .accepted, fields: [method, scheme, path, ("host", "localhost"), topic, authorization]),
        Case("trailers with END_STREAM", .accepted) {
            H2.headers(stream: 1, fields, endStream: false) + H2.data(stream: 1, Pushes.body, endStream: false)
                + H2.headers(stream: 1, [("x-trailer", "1")], endStream: true)
        },
    ]

    @Test(arguments: cases)
    func requestRule(_ rule: Case) async throws {
        try await MockHarness.withRunningMock(configure: { $0.http2.streamsBeforeAuthentication = 10 }) { mock in
            let client = try await RawClient.connect(port: mock.apnsPort, security: .tls(caPath: mock.caPath, alpn: ["h2"]))
            let normal = H2.request(stream: 3, token: Pushes.token, body: Pushes.body)
            try await client.send(H2.preface + H2.settings() + rule.frames() + normal)
            let received = await client.waitUntil { bytes in
                let frames = H2.parse(bytes)
                return frames.contains { $0.type == H2.FrameType.headers.rawValue && $0.stream == 3 }
                    && frames.contains { ($0.type == H2.FrameType.headers.rawValue || $0.rstErrorCode != nil) && $0.stream == 1 }
            }
            let frames = H2.parse(received)
            let first = frames.filter { $0.stream == 1 }
            switch rule.outcome {
            case .reset:
                #expect(first.compactMap(\.rstErrorCode) == [1], "RST_STREAM(PROTOCOL_ERROR) on stream 1")
                #expect(!first.contains { $0.type == H2.FrameType.headers.rawValue }, "no response on stream 1")
            case .accepted:
                #expect(first.first { $0.type == H2.FrameType.headers.rawValue }?.payload.first == 0x88, ":status 200 on stream 1")
                #expect(first.compactMap(\.rstErrorCode).isEmpty)
            }
            #expect(frames.first { $0.type == H2.FrameType.headers.rawValue && $0.stream == 3 }?.payload.first == 0x88)
            #expect(!frames.contains { $0.type == H2.FrameType.goaway.rawValue })
            await client.close()
        }
    }

    /// The session vouches for repeated header values with a repeat key; a request that repeats the
    /// previous one but sends `apns-id` twice must still be judged DuplicateHeaders, and the next
    /// clean repeat accepted again.
    @Test func duplicateMessageIDAmongRepeatedRequests() async throws {
        try await MockHarness.withRunningMock(configure: { $0.http2.streamsBeforeAuthentication = 10 }) { mock in
            let client = try await RawClient.connect(port: mock.apnsPort, security: .tls(caPath: mock.caPath, alpn: ["h2"]))
            let id = ("apns-id", "8A1B2C3D-0000-4000-8000-00000000ABCD")
            let other = ("apns-id", "8A1B2C3D-0000-4000-8000-00000000ABCE")
            let streams: [(UInt32, [(String, String)], UInt8)] = [
                (1, Self.fields + [id], 0x88),  // :status 200
                (3, Self.fields + [id, other], 0x8C),  // :status 400 (DuplicateHeaders)
                (5, Self.fields + [id], 0x88),
                (7, Self.fields + [other, id], 0x8C),
            ]
            try await client.send(H2.preface + H2.settings() + streams.flatMap { stream, fields, _ in
                H2.headers(stream: stream, fields, endStream: false) + H2.data(stream: stream, Pushes.body, endStream: true)
            })
            let received = await client.waitUntil { bytes in
                H2.parse(bytes).filter { $0.type == H2.FrameType.headers.rawValue }.count == streams.count
            }
            let frames = H2.parse(received)
            for (stream, _, status) in streams {
                #expect(frames.first { $0.type == H2.FrameType.headers.rawValue && $0.stream == stream }?.payload.first == status,
                        "stream \(stream)")
            }
            await client.close()
        }
    }
}

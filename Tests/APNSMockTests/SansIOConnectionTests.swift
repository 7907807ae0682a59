@testable import APNSMock
import APNSMockCore
import APNSMockTesting
import Logging
import NIOCore
import Testing

/// ``APNSConnection`` driven with bytes alone, no sockets: TLS records in, TLS records out, with a
/// TLS client in memory (``EmbeddedTLSClient``). What a request meets after its bytes arrive —
/// routing, deciding, the policy, the record and the answer — is the server's own code.
@Suite("Sans-I/O connection")
struct SansIOConnectionTests {
    struct Mock {
        var state: MockState
        var routes: Routes
        var material: TestCertificates
        let context: TLSContext

        init(configure: (inout ServerConfiguration) -> Void = { _ in }) throws {
            material = try MockHarness.sharedCertificates()
            context = try TLSContext(
                certificateChainPath: material.serverCertificatePath, privateKeyPath: material.serverKeyPath,
                clientCAPath: material.caPath)
            var configuration = ServerConfiguration()
            configuration.teams = [try MockHarness.demoTeam()]
            configure(&configuration)
            state = MockState(configuration: configuration, tokenKeys: try TokenKeys.load(configuration.teams))
            routes = Routes(
                configuration: configuration, state: state,
                logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }))
        }

        func connection(_ role: ListenerRole = .apns, id: UInt64 = 1) throws -> APNSConnection {
            try APNSConnection(
                id: id, tlsContext: context, settings: HTTP2Settings(), routes: routes.serving(role),
                logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }))
        }

        /// A connection with TLS up and the HTTP/2 prefaces exchanged.
        func client(
            _ role: ListenerRole = .apns, serverName: String = "localhost", delivery: EmbeddedTLSClient.Delivery = .asWritten
        ) throws -> EmbeddedTLSClient {
            let client = try EmbeddedTLSClient(
                to: try connection(role), caPath: material.caPath, serverName: serverName, delivery: delivery)
            client.send(H2.preface + H2.settings())
            return client
        }

        var records: [RawRecord] { (1...max(1, state.records.lastSeq)).compactMap { state.records.record($0) } }
    }

    static let authorization = "bearer " + ((try? MockHarness.demoToken()) ?? "")

    static func request(
        stream: UInt32, method: String = "POST", path: String, authority: String = "localhost",
        extra: [(String, String)] = [], body: String = #"{"aps":{"alert":"hi"}}"#
    ) -> [UInt8] {
        let fields = [(":method", method), (":scheme", "https"), (":path", path), (":authority", authority),
                      ("authorization", authorization)] + extra
        return H2.headers(stream: stream, fields, endStream: body.isEmpty)
            + (body.isEmpty ? [] : H2.data(stream: stream, Array(body.utf8), endStream: true))
    }

    /// The `:status` and the other fields of the response on `stream`.
    static func response(_ client: EmbeddedTLSClient, stream: UInt32) -> [String: String]? {
        let decoder = HPACKDecoder()
        var found: [String: String]?
        for frame in client.frames where frame.type == H2.FrameType.headers.rawValue {
            let fields = decoder.decode(frame.payload) ?? []
            if frame.stream == stream {
                found = Dictionary(fields.map { ($0.name, $0.value) }, uniquingKeysWith: { first, _ in first })
            }
        }
        return found
    }

    @Test func malformedHandshakeRecordEndsTheConnectionWithAnAlert() throws {
        let connection = try Mock().connection()
        // A TLS handshake record whose message is of an unknown type.
        let garbage: [UInt8] = [0x16, 0x03, 0x01, 0x00, 0x05, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]
        connection.receive(ByteBuffer(bytes: garbage))
        #expect(connection.isFinished)
        var output = ByteBuffer()
        connection.produceOutput(into: &output, budget: 1 << 16)
        // A TLS alert record: content type 21.
        #expect(output.readableBytesView.first == 21)
    }

    @Test func partialClientHelloWaitsForMore() throws {
        let connection = try Mock().connection()
        let partial: [UInt8] = [0x16, 0x03, 0x01, 0x00, 0x80]
        connection.receive(ByteBuffer(bytes: partial))
        #expect(!connection.isFinished)
        #expect(!connection.isHandshakeComplete)
    }

    /// A device push goes through the whole pipeline: decided in the environment the SNI names,
    /// answered 200 with the sandbox's `apns-unique-id`, recorded as written.
    @Test func devicePushIsDecidedAnsweredAndRecorded() throws {
        let mock = try Mock()
        let client = try mock.client(serverName: "api.sandbox.push.apple.com")
        client.send(Self.request(
            stream: 1, path: "/3/device/\(Pushes.token)", authority: "api.sandbox.push.apple.com",
            extra: [("apns-topic", "com.example.app")]))
        let response = try #require(Self.response(client, stream: 1))
        #expect(response[":status"] == "200")
        #expect(response["apns-unique-id"] != nil)
        let record = try #require(mock.records.last)
        #expect(record.kind == .device)
        #expect(record.status == 200)
        #expect(record.path == "/3/device/\(Pushes.token)")
        #expect(record.responseWritten)
        #expect(record.apnsID.text == response["apns-id"])
    }

    /// OpenSSL reads the client's ciphertext straight from each read's buffer (the transport BIO):
    /// a record split over many reads, or many records in one read, arrive whole and in order,
    /// from the handshake on.
    @Test(arguments: [
        EmbeddedTLSClient.Delivery.pieces(1), .pieces(5), .pieces(1000), .coalesced, .asWritten,
    ])
    func ciphertextInAnyReadSizesReachesTheSession(delivery: EmbeddedTLSClient.Delivery) throws {
        let mock = try Mock()
        let client = try mock.client(serverName: "api.sandbox.push.apple.com", delivery: delivery)
        func request(_ stream: UInt32) -> [UInt8] {
            Self.request(
                stream: stream, path: "/3/device/\(Pushes.token)", authority: "api.sandbox.push.apple.com",
                extra: [("apns-topic", "com.example.app")], body: #"{"aps":{"alert":"\#(stream)"}}"#)
        }
        // One stream until a token is accepted; then four at once, each in its own record.
        client.send(request(1))
        client.send(records: stride(from: UInt32(3), through: 9, by: 2).map(request))
        for stream in stride(from: UInt32(1), through: 9, by: 2) {
            #expect(Self.response(client, stream: stream)?[":status"] == "200", "stream \(stream)")
        }
        #expect(mock.records.map(\.streamID) == [1, 3, 5, 7, 9])
    }

    /// HPACK: a generated `apns-id` never repeats and is sent never-indexed, but its name goes into
    /// the client's dynamic table with the session's first response, so later responses refer to
    /// it by index instead of Huffman-encoding the name again. Every response still decodes with
    /// its own ids.
    @Test func responseIDNamesAreIndexedOnceThenReferredTo() throws {
        let mock = try Mock()
        let client = try mock.client(serverName: "api.sandbox.push.apple.com")
        for stream in stride(from: UInt32(1), through: 5, by: 2) {
            client.send(Self.request(
                stream: stream, path: "/3/device/\(Pushes.token)", authority: "api.sandbox.push.apple.com",
                extra: [("apns-topic", "com.example.app")]))
        }
        let blocks = client.frames.filter { $0.type == H2.FrameType.headers.rawValue }.map(\.payload)
        try #require(blocks.count == 3)
        // Each block: `:status: 200` (static index 8), then `apns-id`, then `apns-unique-id`.
        #expect(blocks.allSatisfy { $0.first == 0x88 })
        // First: literal with incremental indexing, new name (0x40).
        #expect(blocks[0].dropFirst().first == 0x40)
        // Later: literal never indexed (0001xxxx) with a name index from the dynamic table (> 15,
        // so the 4-bit prefix is full: 0x1F), not a new name (0x10).
        #expect(blocks[1].dropFirst().first == 0x1F)
        #expect(blocks[2].dropFirst().first == 0x1F)
        #expect(blocks[2].count < blocks[0].count)
        var ids: Set<String> = []
        for stream in stride(from: UInt32(1), through: 5, by: 2) {
            let response = try #require(Self.response(client, stream: stream))
            #expect(response[":status"] == "200")
            ids.insert(try #require(response["apns-id"]))
            ids.insert(try #require(response["apns-unique-id"]))
        }
        #expect(ids.count == 6)
    }

    /// The routing table: each listener's requests reach the API its routes name.
    @Test(arguments: [
        // On the APNs listener, broadcasts by their path prefix, everything else to the device API
        // (which answers unknown paths 404 BadPath, as APNs does).
        (ListenerRole.apns, "POST", "/4/broadcasts/apps/com.example.app", RecordKind.broadcast, "400"),
        (ListenerRole.apns, "POST", "/1/apps/com.example.app/channels", RecordKind.device, "404"),
        (ListenerRole.apns, "POST", "/nowhere", RecordKind.device, "404"),
        // A channel-management listener sends every path to its environment's channel API.
        (ListenerRole.channelManagement(.sandbox), "GET", "/1/apps/com.example.app/all-channels", RecordKind.channel, "200"),
        (ListenerRole.channelManagement(.production), "POST", "/3/device/\(Pushes.token)", RecordKind.channel, "404"),
    ])
    func requestsReachTheirListenersAPI(
        role: ListenerRole, method: String, path: String, kind: RecordKind, status: String
    ) throws {
        let mock = try Mock()
        let client = try mock.client(role)
        client.send(Self.request(
            stream: 1, method: method, path: path, extra: [("apns-topic", "com.example.app")],
            body: method == "GET" ? "" : "{}"))
        #expect(Self.response(client, stream: 1)?[":status"] == status)
        let record = try #require(mock.records.last)
        #expect(record.kind == kind)
        #expect(record.path == path)
    }

    /// Every listener role has a catch-all route, so no request goes unrouted.
    @Test func everyListenerHasACatchAllRoute() throws {
        let routes = try Mock().routes
        for role in ListenerRole.allCases {
            let listener = routes.serving(role)
            #expect(listener.routes.last.map { if case .otherwise = $0.path { true } else { false } } == true, "\(role)")
            #expect(listener.routeIndex(for: nil) != nil)
        }
    }

    /// A request is decided after the read that completed it: a client that resets the stream in
    /// the same read still finds the request recorded, as unanswered, and a stream opened after
    /// the reset in that read (which may reuse the closed stream's storage) is its own request.
    @Test func requestResetInTheSameReadIsRecordedAsNotWritten() throws {
        let mock = try Mock()
        let client = try mock.client()
        let other = String(repeating: "cd", count: 32)
        let cancel = H2.frame(.rstStream, stream: 1, payload: H2.be32(8))
        client.send(
            Self.request(stream: 1, path: "/3/device/\(Pushes.token)", extra: [("apns-topic", "com.example.app")]) + cancel
                + Self.request(stream: 3, path: "/3/device/\(other)", extra: [("apns-topic", "com.example.app")]))
        #expect(Self.response(client, stream: 1) == nil)
        #expect(Self.response(client, stream: 3)?[":status"] == "200")
        let records = mock.records
        #expect(records.map(\.streamID) == [1, 3])
        #expect(records.map(\.path) == ["/3/device/\(Pushes.token)", "/3/device/\(other)"])
        #expect(records.map(\.status) == [200, 200], "decided as any other request")
        #expect(records.map(\.responseWritten) == [false, true], "the first answer never left")
    }

    /// Many requests completed in one read are decided in order, each on its own stream, and the
    /// first accepted token lifts the one-stream limit with a SETTINGS frame.
    @Test func requestsOfOneReadAreDecidedInOrder() throws {
        let mock = try Mock()
        let client = try mock.client()
        client.send(Self.request(stream: 1, path: "/3/device/\(Pushes.token)", extra: [("apns-topic", "com.example.app")]))
        let settings = client.frames.filter { $0.type == H2.FrameType.settings.rawValue && $0.flags & H2.ack == 0 }
        #expect(settings.count == 2, "the initial SETTINGS, then the raised limit")
        let streams: [UInt32] = [3, 5, 7, 9]
        client.send(streams.flatMap {
            Self.request(stream: $0, path: "/3/device/\(Pushes.token)", extra: [("apns-topic", "com.example.app")])
        })
        #expect(streams.map { Self.response(client, stream: $0)?[":status"] } == ["200", "200", "200", "200"])
        #expect(mock.records.map(\.streamID) == [1, 3, 5, 7, 9])
        #expect(mock.records.allSatisfy { $0.responseWritten })
    }

    /// A `close` fault ends the connection in the middle of a read: the requests after it in that
    /// read are decided and recorded, and their records say no answer left.
    @Test func requestsAfterAClosingFaultInTheSameReadAreRecordedAsNotWritten() throws {
        let mock = try Mock()
        let closing = String(repeating: "cd", count: 32)
        _ = mock.state.faults.add(FaultRule(match: FaultRule.Match(token: closing), action: .close))
        let client = try mock.client()
        client.send(Self.request(stream: 1, path: "/3/device/\(Pushes.token)", extra: [("apns-topic", "com.example.app")]))
        client.send(
            Self.request(stream: 3, path: "/3/device/\(closing)", extra: [("apns-topic", "com.example.app")])
                + Self.request(stream: 5, path: "/3/device/\(Pushes.token)", extra: [("apns-topic", "com.example.app")]))
        #expect(Self.response(client, stream: 3) == nil)
        #expect(Self.response(client, stream: 5) == nil)
        let records = mock.records
        #expect(records.map(\.streamID) == [1, 3, 5])
        #expect(records.map(\.action) == [nil, .close, nil])
        #expect(records.map(\.status) == [200, nil, 200])
        #expect(records.map(\.responseWritten) == [true, false, false])
    }

    /// A header list past SETTINGS_MAX_HEADER_LIST_SIZE is answered 431 and recorded as the route of
    /// its `:path` would record it: kind and path, status 431 and no reason (HTTP's own answer),
    /// counted as rejected; the request after it in the same read is answered as usual.
    @Test func oversizedHeaderListIsRecordedAs431() throws {
        let mock = try Mock()
        let client = try mock.client()
        let filler = [("x-filler", String(repeating: "x", count: 9000))]
        client.send(Self.request(stream: 1, path: "/3/device/\(Pushes.token)", extra: [("apns-topic", "com.example.app")]))
        client.send(
            Self.request(stream: 3, path: "/4/broadcasts/apps/com.example.app", extra: filler)
                + Self.request(stream: 5, path: "/3/device/\(Pushes.token)", extra: [("apns-topic", "com.example.app")] + filler)
                + Self.request(stream: 7, path: "/3/device/\(Pushes.token)", extra: [("apns-topic", "com.example.app")]))
        #expect([3, 5, 7].map { Self.response(client, stream: $0)?[":status"] } == ["431", "431", "200"])
        let records = mock.records
        #expect(records.map(\.streamID) == [1, 3, 5, 7])
        #expect(records.map(\.status) == [200, 431, 431, 200])
        #expect(records.map(\.kind) == [.device, .broadcast, .device, .device])
        let device = "/3/device/\(Pushes.token)"
        #expect(records.map(\.path) == [device, "/4/broadcasts/apps/com.example.app", device, device])
        #expect(records[1].rejection == nil && records[2].rejection == nil)
        #expect(records.map(\.isAccepted) == [true, false, false, true])
        #expect(records.allSatisfy { $0.responseWritten })
        #expect(records[2].request.otherHeaders.isEmpty, "the field past the limit is not kept")
        #expect(records[2].request.topic == "com.example.app", "the fields before it are")
        let statistics = mock.state.statistics.snapshot(openConnections: 0, totalConnections: 1, records: mock.state.records)
        #expect(statistics.byStatus["431"] == 2)
        #expect(statistics.accepted == 2 && statistics.rejected == 2)
    }
}

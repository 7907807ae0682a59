@testable import APNSMock
import APNSMockCore
import Testing

/// The HTTP/2 layer driven with frames and no TLS, socket or API (sans-I/O): bytes into
/// ``HTTP2Session``, requests out to a delegate, responses in, bytes out.
@Suite("HTTP/2 session without TLS")
struct HTTP2SessionTests {
    /// A response with the fields a test gives it.
    struct TestResponse: HTTP2Response {
        var status: Int
        var body: [UInt8] = []
        var uuids: [(name: StaticString, value: UUIDValue)] = []
        var literals: [(name: StaticString, value: StaticString)] = []
        var texts: [(name: StaticString, value: String)] = []

        func writeFields(into fields: inout ResponseFields) {
            for (name, value) in uuids { fields.add(name, uuid: value, uppercase: true, indexed: false) }
            for (name, value) in literals { fields.add(name, literal: value) }
            for (name, value) in texts { fields.add(name, text: value, indexed: false) }
        }
    }

    /// Receives the session's requests and answers them as a test says.
    final class Harness: HTTP2SessionDelegate {
        struct Received {
            var stream: HTTP2Stream
            var id: Int32
            var request: PushRequest
        }

        var session: HTTP2Session!
        var received: [Received] = []
        /// Answers each request at once with this response; `nil` leaves requests unanswered.
        var autoAnswer: TestResponse? = TestResponse(status: 200)
        private let decoder = HPACKDecoder()
        /// Each response's decoded header fields, by stream.
        var responses: [UInt32: [(name: String, value: String)]] = [:]
        var frames: [H2.Frame] = []

        init(settings: HTTP2Settings = HTTP2Settings()) throws {
            session = try HTTP2Session(settings: settings, delegate: self)
        }

        func session(_ session: HTTP2Session, didReceive stream: HTTP2Stream) {
            received.append(Received(stream: stream, id: stream.id, request: stream.request))
            if let autoAnswer {
                session.submit(autoAnswer, on: stream, id: stream.id)
            }
        }

        /// Held streams that closed.
        var closedHeld: [Int32] = []
        /// The tokens of responses that went out, and of those that will not.
        var finished: [UInt64] = []
        var abandoned: [UInt64] = []

        func session(_ session: HTTP2Session, responseFinished token: ResponseToken) {
            finished.append(token.rawValue)
        }

        func session(_ session: HTTP2Session, responseAbandoned token: ResponseToken) {
            abandoned.append(token.rawValue)
        }

        func session(_ session: HTTP2Session, heldStreamClosed id: Int32) {
            closedHeld.append(id)
        }

        /// Feeds bytes, then collects everything the session wants to send.
        @discardableResult
        func exchange(_ bytes: [UInt8]) -> [H2.Frame] {
            let error = bytes.withUnsafeBytes { session.receive($0) }
            #expect(error == nil, "\(String(describing: error))")
            return drain()
        }

        @discardableResult
        func drain() -> [H2.Frame] {
            var output: [UInt8] = []
            _ = session.send { chunk in
                output += chunk
                return true
            }
            let new = H2.parse(output)
            for frame in new where frame.type == H2.FrameType.headers.rawValue {
                responses[frame.stream] = decoder.decode(frame.payload)
            }
            frames += new
            return new
        }

        func status(of stream: UInt32) -> String? {
            responses[stream]?.first { $0.name == ":status" }?.value
        }
    }

    static func request(_ stream: UInt32, path: String = "/3/device/abcd", extra: [(String, String)] = [], body: String = "{}")
        -> [UInt8]
    {
        H2.headers(
            stream: stream,
            [(":method", "POST"), (":scheme", "https"), (":path", path), (":authority", "localhost")] + extra,
            endStream: false)
            + H2.data(stream: stream, Array(body.utf8), endStream: true)
    }

    @Test func collectsARequestAndAnswersIt() throws {
        let harness = try Harness()
        let first = harness.exchange(H2.preface + H2.settings())
        #expect(first.first?.type == H2.FrameType.settings.rawValue)
        var response = TestResponse(status: 400, body: Array(#"{"reason":"BadTopic"}"#.utf8))
        response.uuids.append(("apns-id", UUIDValue(high: 0x0123_4567_89AB_4CDE, low: 0x8123_4567_89AB_CDEF)))
        response.literals.append(("content-type", "application/json"))
        harness.autoAnswer = response
        let frames = harness.exchange(Self.request(1, extra: [("apns-topic", "com.example.app"), ("user-agent", "t/1")], body: "{\"aps\":{}}"))

        let received = try #require(harness.received.first)
        #expect(received.id == 1)
        #expect(received.request.method == "POST")
        #expect(received.request.path == "/3/device/abcd")
        #expect(received.request.topic == "com.example.app")
        #expect(received.request.otherHeaders.map(\.name) == ["user-agent"])
        #expect(received.request.body == Array("{\"aps\":{}}".utf8))
        #expect(harness.status(of: 1) == "400")
        #expect(harness.responses[1]?.first { $0.name == "apns-id" }?.value == "01234567-89AB-4CDE-8123-456789ABCDEF")
        #expect(harness.responses[1]?.first { $0.name == "content-type" }?.value == "application/json")
        let data = frames.filter { $0.type == H2.FrameType.data.rawValue && $0.stream == 1 }
        #expect(data.flatMap(\.payload) == Array(#"{"reason":"BadTopic"}"#.utf8))
        #expect(data.last.map { $0.flags & H2.endStream != 0 } == true)
    }

    /// Values past the header block's scratch space get buffers of their own and arrive intact.
    @Test func longResponseValuesArriveWhole() throws {
        let harness = try Harness()
        harness.exchange(H2.preface + H2.settings())
        let values = (0..<3).map { String(repeating: Character(UnicodeScalar(UInt8(ascii: "a") + $0)), count: 300) }
        var response = TestResponse(status: 200)
        response.texts = [("x-one", values[0]), ("x-two", values[1]), ("x-three", values[2])]
        response.uuids.append(("apns-id", UUIDValue(high: 0x0123_4567_89AB_4CDE, low: 0x8123_4567_89AB_CDEF)))
        harness.autoAnswer = response
        harness.exchange(Self.request(1))
        let fields = try #require(harness.responses[1])
        #expect(fields.map(\.name) == [":status", "apns-id", "x-one", "x-two", "x-three"])
        #expect(fields.dropFirst(2).map(\.value) == values)
        #expect(fields[1].value == "01234567-89AB-4CDE-8123-456789ABCDEF")
    }

    /// A malformed request is reset with PROTOCOL_ERROR and never reaches the delegate; the next
    /// request on the same connection is served.
    @Test(arguments: [
        [(":method", "POST"), (":scheme", "https"), (":authority", "x")],  // no :path
        [(":method", "POST"), (":scheme", "https"), (":path", "/"), (":authority", "x"), ("Upper", "1")],
        [(":method", "POST"), (":scheme", "https"), (":path", "/"), (":authority", "x"), ("connection", "close")],
        [(":method", "POST"), (":scheme", "https"), (":path", "/"), (":authority", "x"), (":bogus", "1")],
    ])
    func malformedRequestIsResetAlone(_ fields: [(String, String)]) throws {
        let harness = try Harness()
        harness.exchange(H2.preface + H2.settings())
        let frames = harness.exchange(H2.headers(stream: 1, fields, endStream: true) + Self.request(3))
        #expect(frames.contains { $0.stream == 1 && $0.rstErrorCode == HTTP2ErrorCode.protocolError.rawValue })
        #expect(harness.received.map(\.id) == [3])
        #expect(harness.status(of: 3) == "200")
    }

    /// A header list past SETTINGS_MAX_HEADER_LIST_SIZE is answered 431 once the request ends
    /// (RFC 6585: "too large" in HTTP's own words), never handed to an API; other streams go on.
    @Test func oversizedHeaderListIsAnswered431() throws {
        let harness = try Harness(settings: HTTP2Settings())
        harness.exchange(H2.preface + H2.settings())
        let big = [("x-big", String(repeating: "a", count: 9000))]
        let frames = harness.exchange(Self.request(1, extra: big) + Self.request(3))
        #expect(!frames.contains { $0.type == H2.FrameType.rstStream.rawValue })
        #expect(harness.status(of: 1) == "431")
        #expect(harness.received.map(\.id) == [3])
        #expect(harness.status(of: 3) == "200")
        let body = frames.filter { $0.stream == 1 && $0.type == H2.FrameType.data.rawValue }.flatMap(\.payload)
        #expect(String(decoding: body, as: UTF8.self).contains("\"maxHeaderListSize\":8000"))
    }

    /// Requests that repeat every header value get equal repeat keys; one changed value moves the
    /// generation; the per-request headers (`:path`, `apns-id`) do not.
    @Test func repeatKeysFollowTheValues() throws {
        let harness = try Harness()
        harness.exchange(H2.preface + H2.settings())
        let topic = [("apns-topic", "com.example.app")]
        harness.exchange(Self.request(1, extra: topic))
        harness.exchange(Self.request(3, path: "/3/device/ef01", extra: topic))
        harness.exchange(Self.request(5, extra: [("apns-topic", "com.example.other")]))
        harness.exchange(Self.request(7, extra: topic + [("apns-topic", "com.example.app")]))
        let keys = harness.received.map(\.request.repeatKey)
        #expect(keys[0] != nil && keys[0] == keys[1])
        #expect(keys[2] != nil && keys[2] != keys[1])
        #expect(keys[3] == nil)  // a field twice rules the key out
        #expect(harness.received[3].request.duplicatedHeader == "apns-topic")
    }

    /// An answer for a stream the client reset meanwhile is dropped, and a recycled stream does
    /// not take an answer meant for its previous request.
    @Test func lateAnswersFindTheirStreamGone() throws {
        let harness = try Harness()
        harness.autoAnswer = nil
        harness.exchange(H2.preface + H2.settings())
        harness.exchange(Self.request(1))
        let held = try #require(harness.received.first)
        #expect(held.stream.phase == .dispatched)
        harness.exchange(H2.frame(.rstStream, stream: 1, payload: H2.be32(HTTP2ErrorCode.cancel.rawValue)))
        #expect(held.stream.phase == .idle)
        harness.exchange(Self.request(3))
        // The pool hands the same instance to the next stream.
        #expect(harness.received[1].stream === held.stream)
        #expect(harness.session.submit(TestResponse(status: 200), on: held.stream, id: 1) == false)
        #expect(harness.session.submit(TestResponse(status: 200), on: held.stream, id: 3))
        harness.drain()
        #expect(harness.status(of: 3) == "200")
        #expect(harness.status(of: 1) == nil)
    }

    /// PINGs are acknowledged with their data unless withheld; a held stream's close is reported.
    @Test func pingsAndHeldStreams() throws {
        let harness = try Harness()
        harness.exchange(H2.preface + H2.settings())
        let data: [UInt8] = [1, 2, 3, 4, 5, 6, 7, 8]
        let acks = harness.exchange(H2.frame(.ping, payload: data)).filter { $0.type == H2.FrameType.ping.rawValue }
        #expect(acks.map(\.flags) == [H2.ack])
        #expect(acks.first?.payload == data)
        harness.session.answersPings = false
        #expect(harness.exchange(H2.frame(.ping, payload: data)).filter { $0.type == H2.FrameType.ping.rawValue }.isEmpty)
        harness.session.answersPings = true

        harness.autoAnswer = nil
        harness.exchange(Self.request(1))
        let held = try #require(harness.received.first)
        harness.session.hold(held.stream, id: held.id)
        #expect(held.stream.isHeld)
        harness.exchange(H2.frame(.rstStream, stream: 1, payload: H2.be32(HTTP2ErrorCode.cancel.rawValue)))
        #expect(harness.closedHeld == [1])
        #expect(!held.stream.isHeld)
    }

    /// A response's token comes back once: when its last frame goes out, or when its stream
    /// closes (or the connection ends) before; never from inside nghttp2.
    @Test func responseTokensComeBackOnce() throws {
        let harness = try Harness()
        harness.autoAnswer = nil
        harness.exchange(H2.preface + H2.settings())
        harness.exchange(Self.request(1) + Self.request(3) + Self.request(5))
        let streams = harness.received.map(\.stream)
        #expect(harness.session.submit(TestResponse(status: 200), on: streams[0], id: 1, token: ResponseToken(rawValue: 10)))
        #expect(harness.session.submit(
            TestResponse(status: 400, body: Array(#"{"reason":"BadTopic"}"#.utf8)), on: streams[1], id: 3,
            token: ResponseToken(rawValue: 30)))
        #expect(harness.finished.isEmpty, "nothing went out yet")
        harness.drain()
        #expect(harness.finished == [10, 30])
        #expect(harness.session.submit(TestResponse(status: 200, body: [1]), on: streams[2], id: 5, token: ResponseToken(rawValue: 50)))
        // The client resets stream 5 before the answer went out.
        harness.exchange(H2.frame(.rstStream, stream: 5, payload: H2.be32(HTTP2ErrorCode.cancel.rawValue)))
        #expect(harness.abandoned == [50])
        harness.drain()
        #expect(harness.finished == [10, 30] && harness.abandoned == [50])

        harness.exchange(Self.request(7))
        let last = try #require(harness.received.last)
        harness.session.submit(TestResponse(status: 200), on: last.stream, id: 7, token: ResponseToken(rawValue: 70))
        harness.session.abandonPendingResponses()
        #expect(harness.abandoned == [50, 70])
        harness.session.abandonPendingResponses()
        #expect(harness.abandoned == [50, 70], "told once")
    }

    /// A stream whose answer is delayed on purpose, or held for good, is not timed as stuck.
    @Test func delayedAndHeldAnswersAreNotTimed() throws {
        let harness = try Harness()
        harness.autoAnswer = nil
        harness.exchange(H2.preface + H2.settings())
        harness.exchange(Self.request(1) + Self.request(3) + Self.request(5))
        let received = harness.received
        harness.session.delayAnswer(on: received[0].stream, id: 1)
        harness.session.hold(received[1].stream, id: 3)
        #expect(harness.session.inspectStreams(now: 0, receiving: 10, answering: 10) == StreamPool.Inspection(stuck: nil, exempt: 2))
        let later = harness.session.inspectStreams(now: 100, receiving: 10, answering: 10)
        #expect(later == StreamPool.Inspection(stuck: .dispatched, exempt: 2), "stream 5 waits unexempted")
        // A delayed answer still goes out.
        #expect(harness.session.submit(TestResponse(status: 200), on: received[0].stream, id: 1))
        harness.drain()
        #expect(harness.status(of: 1) == "200")
    }

    @Test func goAwayCarriesItsDebugData() throws {
        let harness = try Harness()
        harness.exchange(H2.preface + H2.settings() + Self.request(1))
        harness.session.submitGoAway(debugData: Array(#"{"reason":"Shutdown"}"#.utf8))
        let goaway = try #require(harness.drain().compactMap(\.goaway).first)
        #expect(goaway.lastStream == 1)
        #expect(goaway.errorCode == HTTP2ErrorCode.noError.rawValue)
        #expect(goaway.debug == #"{"reason":"Shutdown"}"#)
    }

    /// Requests that complete above a GOAWAY's last stream id were not processed: they are refused
    /// and never handed over (the client resends them elsewhere); once the GOAWAY went out, DATA of
    /// streams above it is ignored, not taken for DATA on a closed stream; with `refusesNewStreams`
    /// a new stream is refused rather than silently ignored.
    @Test func streamsAboveTheGoAwayAreRefusedNotDecided() throws {
        let harness = try Harness()
        harness.exchange(H2.preface + H2.settings() + Self.request(1))
        // Stream 3's HEADERS arrives before the GOAWAY is submitted, its body after it.
        let three = Self.request(3)
        let headersEnd = three.count - H2.data(stream: 3, Array("{}".utf8), endStream: true).count
        harness.exchange(Array(three[..<headersEnd]))
        let last = harness.session.submitGoAway(debugData: [], lastStreamID: 1)
        #expect(last == 1)
        var frames = harness.exchange(Array(three[headersEnd...]))
        #expect(harness.received.map(\.id) == [1])
        // Not answered: nghttp2 closes the streams above the last stream id once the GOAWAY is out.
        #expect(!Self.hasResponse(frames, stream: 3))
        #expect(frames.compactMap(\.goaway).first?.lastStream == 1)
        // After the GOAWAY went out: a new stream and its DATA are ignored, no connection error.
        frames = harness.exchange(Self.request(5))
        #expect(!frames.contains { $0.stream == 5 })
        #expect(harness.received.map(\.id) == [1])
        // Refused instead, when the connection stays open after its GOAWAY.
        harness.session.refusesNewStreams = true
        frames = harness.exchange(Self.request(7))
        #expect(frames.first { $0.stream == 7 }?.rstErrorCode == HTTP2ErrorCode.refusedStream.rawValue)
        #expect(frames.compactMap(\.goaway).isEmpty)
        #expect(harness.received.map(\.id) == [1])
    }

    static func hasResponse(_ frames: [H2.Frame], stream: UInt32) -> Bool {
        frames.contains { $0.type == H2.FrameType.headers.rawValue && $0.stream == stream }
    }

    /// Feeds bytes the session must refuse as a connection error; returns the GOAWAY it sent.
    /// nghttp2 reports some connection errors as a failed read, others only by queueing the
    /// GOAWAY; either way the session then wants neither to read nor to write.
    func expectConnectionError(_ harness: Harness, _ bytes: [UInt8]) -> H2.Frame? {
        _ = bytes.withUnsafeBytes { harness.session.receive($0) }
        let goaway = harness.drain().first { $0.goaway != nil }
        #expect(goaway != nil, "the session accepted bytes it must refuse")
        #expect(!harness.session.wantsRead && !harness.session.wantsWrite)
        return goaway
    }

    /// DATA past the advertised window in one burst (the client did not wait for WINDOW_UPDATE):
    /// FLOW_CONTROL_ERROR (RFC 9113 §6.9.1). The window is credited only when the update goes out:
    /// nghttp2's automatic updates would credit it as soon as one is queued, mid-read, and accept this.
    @Test func dataBeyondTheWindowIsAFlowControlError() throws {
        let harness = try Harness()
        harness.exchange(H2.preface + H2.settings())
        var burst = H2.headers(stream: 1, [(":method", "POST"), (":scheme", "https"), (":path", "/3/device/abcd"), (":authority", "x")], endStream: false)
        for _ in 0..<5 {
            burst += H2.data(stream: 1, [UInt8](repeating: 0x61, count: 16_384), endStream: false)
        }
        let goaway = try #require(expectConnectionError(harness, burst)?.goaway)
        #expect(goaway.errorCode == HTTP2ErrorCode.flowControlError.rawValue)
    }

    /// A large body sent as flow control allows (waiting for WINDOW_UPDATE) still arrives whole.
    @Test func bodyWithinTheWindowsArrivesWhole() throws {
        let harness = try Harness()
        harness.exchange(H2.preface + H2.settings())
        var sent = H2.headers(stream: 1, [(":method", "POST"), (":scheme", "https"), (":path", "/3/device/abcd"), (":authority", "x")], endStream: false)
        var credit = (connection: 65_535, stream: 65_535)
        var remaining = 200_000
        var updates = 0
        while remaining > 0 {
            let size = min(16_384, remaining, credit.connection, credit.stream)
            #expect(size > 0, "the server stopped crediting the window")
            guard size > 0 else { return }
            sent += H2.data(stream: 1, [UInt8](repeating: 0x61, count: size), endStream: remaining == size)
            credit.connection -= size
            credit.stream -= size
            remaining -= size
            for frame in harness.exchange(sent) where frame.type == H2.FrameType.windowUpdate.rawValue {
                let increment = Int(H2.readBE32(frame.payload, 0) & 0x7FFF_FFFF)
                if frame.stream == 0 { credit.connection += increment } else { credit.stream += increment }
                updates += 1
            }
            sent = []
        }
        #expect(updates >= 4)
        #expect(harness.received.first?.request.bodyLength == 200_000)
        #expect(harness.status(of: 1) == "200")
    }

    /// HEADERS again on a stream that was answered and closed: STREAM_CLOSED; on a lower id the
    /// client skipped: PROTOCOL_ERROR (RFC 9113 §5.1, §5.1.1). nghttp2 (closed streams not kept)
    /// ignored both.
    @Test func headersOnAClosedStreamIsStreamClosed() throws {
        let harness = try Harness()
        harness.exchange(H2.preface + H2.settings() + Self.request(1))
        #expect(harness.status(of: 1) == "200")
        let goaway = try #require(expectConnectionError(harness, Self.request(1))?.goaway)
        #expect(goaway.errorCode == HTTP2ErrorCode.streamClosed.rawValue)
        #expect(harness.received.count == 1)
    }

    /// DATA on a stream that the client ended and that was answered and closed: a STREAM_CLOSED
    /// connection error every time (RFC 9113 §5.1, §6.1), as nghttpd answers it — nghttp2 forgets
    /// closed streams here and ignored it. The session names the rule it ended the connection by.
    @Test func dataOnAClosedStreamIsStreamClosed() throws {
        let harness = try Harness()
        harness.exchange(H2.preface + H2.settings() + Self.request(1))
        #expect(harness.status(of: 1) == "200")
        let goaway = try #require(expectConnectionError(harness, H2.data(stream: 1, Array("{}".utf8), endStream: true))?.goaway)
        #expect(goaway.errorCode == HTTP2ErrorCode.streamClosed.rawValue)
        #expect(harness.session.deliberateEnd?.reason == "DATA on closed stream 1")
    }

    /// The same when the input arrives in pieces that split frame headers (and the preface) across
    /// reads: the scan ahead of nghttp2 carries a partial frame header over to the next chunk, and
    /// still lets a request whose frames are split the same way through.
    @Test func dataOnAClosedStreamIsFoundAcrossSplitFrameHeaders() throws {
        for piece in [1, 4, 7, 10] {
            let harness = try Harness()
            let opening = H2.preface + H2.settings() + Self.request(1)
            for start in stride(from: 0, to: opening.count, by: piece) {
                let chunk = Array(opening[start..<min(start + piece, opening.count)])
                let error = chunk.withUnsafeBytes { harness.session.receive($0) }
                #expect(error == nil, "piece \(piece): \(String(describing: error))")
            }
            harness.drain()
            #expect(harness.status(of: 1) == "200", "piece \(piece)")
            let late = H2.data(stream: 1, Array("{}".utf8), endStream: true)
            var ended: HTTP2Session.ProtocolError?
            for start in stride(from: 0, to: late.count, by: piece) where ended == nil {
                let chunk = Array(late[start..<min(start + piece, late.count)])
                ended = chunk.withUnsafeBytes { harness.session.receive($0) }
            }
            #expect(ended != nil, "piece \(piece): DATA on a closed stream was let through")
            #expect(harness.drain().first { $0.goaway != nil }?.goaway?.errorCode == HTTP2ErrorCode.streamClosed.rawValue)
            #expect(harness.session.deliberateEnd?.reason == "DATA on closed stream 1")
        }
    }

    /// How real stacks frame a request: netty (pushy) sets PRIORITY on every HEADERS frame; some
    /// stacks pad; long header blocks go on in CONTINUATION; DATA may be padded.
    enum RequestShape: String, CaseIterable, CustomTestStringConvertible {
        case plain, priority, padded, priorityAndPadding, continuation, priorityAndContinuation, paddedData

        var testDescription: String { rawValue }

        func bytes(_ stream: UInt32) -> [UInt8] {
            let fields = [(":method", "POST"), (":scheme", "https"), (":path", "/3/device/abcd"), (":authority", "localhost"),
                          ("apns-topic", "com.example.app"), ("apns-push-type", "alert")]
            let body = Array(#"{"aps":{"alert":"hi"}}"#.utf8)
            switch self {
            case .plain:
                return H2.headers(stream: stream, fields, endStream: false) + H2.data(stream: stream, body, endStream: true)
            case .priority:
                return H2.headers(stream: stream, fields, endStream: false, priority: true) + H2.data(stream: stream, body, endStream: true)
            case .padded:
                return H2.headers(stream: stream, fields, endStream: false, priority: false, padding: 6)
                    + H2.data(stream: stream, body, endStream: true)
            case .priorityAndPadding:
                return H2.headers(stream: stream, fields, endStream: false, priority: true, padding: 3)
                    + H2.data(stream: stream, body, endStream: true, padding: 2)
            case .continuation:
                return H2.headers(stream: stream, fields, endStream: false, priority: false, fragment: 33)
                    + H2.data(stream: stream, body, endStream: true)
            case .priorityAndContinuation:
                return H2.headers(stream: stream, fields, endStream: false, priority: true, padding: 1, fragment: 40)
                    + H2.data(stream: stream, body, endStream: true)
            case .paddedData:
                return H2.headers(stream: stream, fields, endStream: false)
                    + H2.data(stream: stream, body, endStream: true, padding: 5)
            }
        }
    }

    /// A valid request is answered the same however its bytes are cut: at every byte offset into
    /// two reads (a TLS record boundary can fall anywhere, and pushy's HEADERS with PRIORITY cut
    /// after its frame header was once taken for DATA on a closed stream), one read per byte, and
    /// many requests coalesced into one read.
    @Test(arguments: RequestShape.allCases)
    func requestsCutAnywhereAreAnswered(_ shape: RequestShape) throws {
        // Stream 1 first, whole, so that stream 3 is judged against a session that has seen one.
        let second = shape.bytes(3)
        func expectAnswered(_ harness: Harness, _ label: String) {
            let frames = harness.drain()
            #expect(!harness.frames.contains { $0.goaway != nil }, "\(label): \(frames.compactMap(\.goaway))")
            #expect(harness.status(of: 1) == "200" && harness.status(of: 3) == "200", "\(label)")
            #expect(harness.received.map(\.request.body) == [Array(#"{"aps":{"alert":"hi"}}"#.utf8), Array(#"{"aps":{"alert":"hi"}}"#.utf8)], "\(label)")
        }
        for cut in 1..<second.count {
            let harness = try Harness()
            harness.exchange(H2.preface + H2.settings() + shape.bytes(1))
            for piece in [Array(second[..<cut]), Array(second[cut...])] {
                let error = piece.withUnsafeBytes { harness.session.receive($0) }
                #expect(error == nil, "cut at \(cut): \(String(describing: error))")
            }
            expectAnswered(harness, "cut at \(cut) of \(second.count)")
        }
        // Every request of the connection, the preface included, one byte per read.
        let harness = try Harness()
        for byte in H2.preface + H2.settings() + shape.bytes(1) + second {
            let error = [byte].withUnsafeBytes { harness.session.receive($0) }
            #expect(error == nil, "byte by byte: \(String(describing: error))")
        }
        expectAnswered(harness, "byte by byte")

        // Fifty requests in one read, then fifty more cut in the middle of the 25th.
        let coalesced = try Harness()
        coalesced.exchange(H2.preface + H2.settings() + stride(from: UInt32(1), through: 99, by: 2).flatMap { shape.bytes($0) })
        let more = stride(from: UInt32(101), through: 199, by: 2).flatMap { shape.bytes($0) }
        let middle = shape.bytes(101).count * 24 + 11
        coalesced.exchange(Array(more[..<middle]))
        coalesced.exchange(Array(more[middle...]))
        #expect(!coalesced.frames.contains { $0.goaway != nil })
        #expect(stride(from: UInt32(1), through: 199, by: 2).allSatisfy { coalesced.status(of: $0) == "200" })
    }

    /// DATA on a closed stream is still found when a stream with PRIORITY opens in the same read
    /// (the scanner's suspicion is confirmed after nghttp2 read the frames before it).
    @Test func dataOnAClosedStreamIsFoundBehindAPriorityHeaders() throws {
        let harness = try Harness()
        harness.exchange(H2.preface + H2.settings() + RequestShape.priority.bytes(1))
        #expect(harness.status(of: 1) == "200")
        let opening = RequestShape.priority.bytes(3)
        let late = opening + H2.data(stream: 1, Array("{}".utf8), endStream: true)
        let error = late.withUnsafeBytes { harness.session.receive($0) }
        #expect(error != nil)
        #expect(harness.drain().first { $0.goaway != nil }?.goaway?.errorCode == HTTP2ErrorCode.streamClosed.rawValue)
        #expect(harness.session.deliberateEnd?.reason == "DATA on closed stream 1")
    }

    /// DATA still in flight for a stream this side reset (a refused stream, a malformed one) is
    /// ignored (RFC 9113 §5.1): a client that opened a hundred streams before it read SETTINGS
    /// sends their bodies after the resets.
    @Test func dataOnAStreamResetHereIsIgnored() throws {
        let harness = try Harness(settings: HTTP2Settings(maxConcurrentStreams: 1))
        harness.exchange(H2.preface + H2.settings())
        var burst: [UInt8] = []
        for stream in stride(from: UInt32(1), through: 201, by: 2) {
            burst += H2.headers(
                stream: stream, [(":method", "POST"), (":scheme", "https"), (":path", "/3/device/abcd"), (":authority", "x")],
                endStream: false)
        }
        for stream in stride(from: UInt32(1), through: 201, by: 2) {
            burst += H2.data(stream: stream, Array("{}".utf8), endStream: true)
        }
        let frames = harness.exchange(burst)
        #expect(!frames.contains { $0.goaway != nil })
        #expect(frames.filter { $0.rstErrorCode == HTTP2ErrorCode.refusedStream.rawValue }.count == 100)
        #expect(harness.status(of: 1) == "200")
    }

    @Test func headersOnASkippedLowerStreamIsProtocolError() throws {
        let harness = try Harness()
        harness.exchange(H2.preface + H2.settings() + Self.request(7))
        let goaway = try #require(expectConnectionError(harness, Self.request(3))?.goaway)
        #expect(goaway.errorCode == HTTP2ErrorCode.protocolError.rawValue)
        #expect(harness.received.map(\.id) == [7])
    }

    /// A stream this side reset may still see the client's frames in flight: they are ignored and
    /// the connection carries on (RFC 9113 §5.1).
    @Test func lateHeadersOnAStreamResetHereAreIgnored() throws {
        let harness = try Harness()
        harness.exchange(H2.preface + H2.settings())
        // Malformed (no :path): reset with PROTOCOL_ERROR; then its "trailers" arrive.
        harness.exchange(H2.headers(stream: 1, [(":method", "POST"), (":scheme", "https"), (":authority", "x")], endStream: false))
        let frames = harness.exchange(H2.headers(stream: 1, [("x-trailer", "1")], endStream: true) + Self.request(3))
        #expect(!frames.contains { $0.goaway != nil })
        #expect(harness.status(of: 3) == "200")
    }

    /// Bytes that are not HTTP/2 end the connection with an error (and nghttp2's GOAWAY).
    @Test func garbageIsAConnectionError() throws {
        let harness = try Harness()
        let error = Array("GET / HTTP/1.1\r\n\r\n".utf8).withUnsafeBytes { harness.session.receive($0) }
        #expect(error != nil)
    }
}

/// A stream's phases: forward only, back to idle on close.
@Suite("HTTP/2 stream phases")
struct HTTP2StreamTests {
    @Test func aStreamGoesThroughItsPhases() {
        let stream = HTTP2Stream()
        #expect(stream.phase == .idle)
        stream.open(id: 5)
        #expect(stream.phase == .receiving && stream.id == 5)
        #expect(!stream.awaitsAnswer(id: 5))
        stream.complete()
        #expect(stream.phase == .complete && !stream.awaitsAnswer(id: 5))
        stream.dispatch()
        #expect(stream.awaitsAnswer(id: 5))
        #expect(!stream.awaitsAnswer(id: 7))
        stream.respond(body: [1, 2, 3])
        #expect(stream.phase == .responding && stream.responseBody == [1, 2, 3])
        stream.close()
        #expect(stream.phase == .idle && stream.id == 0 && stream.responseBody.isEmpty)
    }

    /// A response's token is given back once, whichever comes first: its last frame going out, a
    /// reset or the close.
    @Test func aResponseTokenIsGivenBackOnce() {
        let stream = HTTP2Stream()
        let token = ResponseToken(rawValue: 42)
        for ending in 0..<3 {
            stream.open(id: 1)
            stream.complete()
            stream.dispatch()
            stream.respond(body: [1, 2, 3], token: token)
            switch ending {
            case 0: #expect(stream.responseSent() == token && stream.phase == .answered)
            case 1: #expect(stream.reset() == token)
            default: #expect(stream.close() == token)
            }
            #expect(stream.responseSent() == .none)
            #expect(stream.close() == .none)
        }
    }

    /// A header list past the limit moves the stream to discarding: nothing more is collected.
    @Test func anOversizedHeaderListIsDiscarded() {
        let stream = HTTP2Stream()
        stream.open(id: 1)
        #expect(stream.countField(size: 60, limit: 100))
        #expect(!stream.countField(size: 60, limit: 100))
        #expect(stream.phase == .discarding && !stream.collects && stream.headerListSize == 120)
        stream.complete()
        #expect(stream.phase == .complete)
    }

    @Test(arguments: [0, 1, 2])
    func anyLivePhaseCanBeReset(_ steps: Int) {
        let stream = HTTP2Stream()
        stream.open(id: 1)
        if steps > 0 {
            stream.complete()
            stream.dispatch()
        }
        if steps > 1 { stream.respond(body: []) }
        stream.reset()
        #expect(stream.phase == .reset)
        #expect(!stream.awaitsAnswer(id: 1))
        stream.close()
        #expect(stream.phase == .idle)
    }

    /// A decided request's buffers, emptied, serve the next stream opened (whichever instance it is).
    @Test func decidedRequestsHandTheirBuffersOn() {
        let pool = StreamPool()
        let first = pool.open(id: 1)
        let payload = [UInt8](repeating: 7, count: 300)
        payload.withUnsafeBytes { first.request.appendBody($0) }
        first.request.addOtherHeader(name: "user-agent", value: "t/1")
        let capacity = first.request.body.capacity
        pool.recycleStorage(of: first)
        #expect(first.request.body.isEmpty && first.request.otherHeaders.isEmpty && first.request.bodyLength == 0)
        let second = pool.open(id: 3)
        #expect(second !== first)
        #expect(second.request.body.isEmpty && second.request.body.capacity == capacity)
        #expect(second.request.otherHeaders.isEmpty && second.request.otherHeaders.capacity > 0)
        payload.withUnsafeBytes { second.request.appendBody($0) }
        #expect(second.request.body == payload && second.request.bodyLength == 300)
    }

    @Test func reopenedStreamForgetsItsRequest() {
        let pool = StreamPool()
        let first = pool.open(id: 1)
        first.request.set(.topic, value: "com.example.app")
        first.declaredLength = 3
        pool.close(first)
        let second = pool.open(id: 3)
        #expect(second === first)
        #expect(second.request.topic == nil && second.declaredLength == nil && pool.openCount == 1)
    }
}

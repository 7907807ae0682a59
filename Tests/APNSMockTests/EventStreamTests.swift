@testable import APNSMock
import APNSMockCore
import APNSMockTesting
import Foundation
import Testing

/// One Server-Sent Event.
struct SSEEvent: Sendable, Equatable {
    var id: String?
    var event = "message"
    var data = ""

    var record: NotificationRecord? { try? JSONDecoder().decode(NotificationRecord.self, from: Data(data.utf8)) }

    /// The complete events of an event-stream body (comments skipped; a trailing partial event
    /// left out).
    static func parse(_ text: String) -> [SSEEvent] {
        var events: [SSEEvent] = []
        var blocks = text.components(separatedBy: "\n\n")
        blocks.removeLast()  // incomplete, or empty after the last blank line
        for block in blocks {
            var event = SSEEvent()
            var data: [String] = []
            for line in block.split(separator: "\n", omittingEmptySubsequences: false) where !line.hasPrefix(":") {
                let parts = line.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
                var value = parts.count > 1 ? String(parts[1]) : ""
                if value.hasPrefix(" ") { value.removeFirst() }
                switch parts[0] {
                case "id": event.id = value
                case "event": event.event = value
                case "data": data.append(value)
                default: break
                }
            }
            guard !data.isEmpty else { continue }
            event.data = data.joined(separator: "\n")
            events.append(event)
        }
        return events
    }

    /// The head and the events of a raw HTTP/1.1 response with a chunked body (complete chunks).
    static func parse(http bytes: [UInt8]) -> (head: String, events: [SSEEvent]) {
        let separator: [UInt8] = Array("\r\n\r\n".utf8)
        guard let end = bytes.firstRange(of: separator) else { return (String(decoding: bytes, as: UTF8.self), []) }
        let head = String(decoding: bytes[..<end.lowerBound], as: UTF8.self)
        var body: [UInt8] = []
        var index = end.upperBound
        while let lineEnd = bytes[index...].firstRange(of: Array("\r\n".utf8)) {
            guard let size = Int(String(decoding: bytes[index..<lineEnd.lowerBound], as: UTF8.self), radix: 16), size > 0,
                  lineEnd.upperBound + size <= bytes.count
            else { break }
            body += bytes[lineEnd.upperBound..<lineEnd.upperBound + size]
            index = lineEnd.upperBound + size + 2
            if index > bytes.count { break }
        }
        return (head, parse(String(decoding: body, as: UTF8.self)))
    }
}

/// `GET /v1/events` over real HTTP against the in-process mock: filters, resumption, a stalled
/// subscriber under load, limits, bad parameters, shutdown; and the other endpoints behind the
/// inbox page (`.apns`, `/v1/reasons`, `/`).
@Suite("Event stream and the inbox endpoints", .timeLimit(.minutes(3)))
struct EventStreamTests {
    static func push(
        _ mock: RunningMock, token: String = Pushes.token, headers: [String: String] = ["apns-topic": "com.example.app"],
        body: String = #"{"aps":{"alert":"hello"}}"#
    ) async throws -> CurlResponse {
        try await Curl.send(url: "\(mock.baseURL)/3/device/\(token)", caPath: mock.caPath, headers: headers, body: Data(body.utf8))
    }

    /// Reads `/v1/events` with curl until the stream ends (give a `limit`) or `maxTime` passes (generous:
    /// with the whole suite running, the pushes a stream waits for can take tens of seconds).
    static func stream(_ mock: RunningMock, _ query: String, headers: [String] = [], maxTime: Int = 90) async throws -> [SSEEvent] {
        var arguments = ["-sN", "--max-time", String(maxTime)]
        for header in headers { arguments += ["-H", header] }
        arguments.append("\(mock.adminURL)/v1/events?\(query)")
        let output = try await ExternalTool.run("curl", arguments, timeout: Double(maxTime + 10))
        return SSEEvent.parse(output.text)
    }

    /// An admin GET through curl, for the status, headers and body.
    static func adminGet(_ mock: RunningMock, _ path: String, headers: [String] = []) async throws -> CurlResponse {
        var arguments = ["-sS", "-i", "--max-time", "10"]
        for header in headers { arguments += ["-H", header] }
        arguments.append("\(mock.adminURL)\(path)")
        let output = try await ExternalTool.run("curl", arguments)
        return try Curl.parse(output.stdout)
    }

    // MARK: Filters and resumption

    @Test func streamsTheRecordsTheFilterMatches() async throws {
        try await MockHarness.withRunningMock { mock in
            async let mine = Self.stream(mock, "token=\(Pushes.token)&outcome=all&since=0&limit=2")
            async let missingTopic = Self.stream(mock, "reason=MissingTopic&since=0&limit=1")
            async let accepted = Self.stream(mock, "since=0&limit=2")
            #expect(try await Self.push(mock, token: Pushes.otherToken).status == 200)
            #expect(try await Self.push(mock).status == 200)
            #expect(try await Self.push(mock, headers: [:]).status == 400)

            let events = try await mine
            #expect(events.map(\.event) == ["message", "message"])
            let records = events.compactMap(\.record)
            #expect(records.map(\.token) == [Pushes.token, Pushes.token])
            #expect(records.map(\.status) == [200, 400])
            #expect(events.map(\.id) == records.map { String($0.seq) })
            #expect(records.first?.payload?["aps"]?["alert"] == .string("hello"))

            let rejected = try await missingTopic.compactMap(\.record)
            #expect(rejected.map(\.reason) == ["MissingTopic"])
            let both = try await accepted.compactMap(\.record)
            #expect(both.map(\.token) == [Pushes.otherToken, Pushes.token])
        }
    }

    @Test func resumesFromLastEventIDOrSince() async throws {
        try await MockHarness.withRunningMock { mock in
            for _ in 0..<3 { _ = try await Self.push(mock) }
            let fromHeader = try await Self.stream(mock, "limit=2", headers: ["Last-Event-ID: 1"])
            #expect(fromHeader.map(\.id) == ["2", "3"])
            let fromSince = try await Self.stream(mock, "since=2&limit=1")
            #expect(fromSince.map(\.id) == ["3"])
            // A reconnecting EventSource sends Last-Event-ID with the URL it started with.
            let headerWins = try await Self.stream(mock, "since=0&limit=1", headers: ["Last-Event-ID: 2"])
            #expect(headerWins.map(\.id) == ["3"])

            // Without either: only what is stored from now on.
            let live = try await EventSubscribers.subscribe(mock, "limit=1")
            _ = try await Self.push(mock, token: Pushes.otherToken)
            let received = await live.waitUntil(timeout: .seconds(60)) { SSEEvent.parse(http: $0).events.count == 1 }
            let events = SSEEvent.parse(http: received).events
            #expect(events.map(\.id) == ["4"])
            #expect(events.first?.record?.token == Pushes.otherToken)
            await live.close()
        }
    }

    @Test func maxRateSkipsWhatIsOverTheRate() async throws {
        try await MockHarness.withRunningMock { mock in
            for _ in 0..<5 { _ = try await Self.push(mock) }
            // A replay of five records at one a second: the first goes, the rest are skipped, and
            // the skip is reported at once.
            let client = try await EventSubscribers.subscribe(mock, "since=0&maxRate=1")
            let received = await client.waitUntil(timeout: .seconds(30)) { bytes in
                SSEEvent.parse(http: bytes).events.contains { $0.event == "skipped" }
            }
            await client.close()
            let events = SSEEvent.parse(http: received).events
            #expect(events.filter { $0.event == "message" }.map(\.id) == ["1"])
            #expect(events.filter { $0.event == "skipped" }.compactMap { EventSubscribers.skippedCount($0) }.reduce(0, +) == 4)
        }
    }

    // MARK: Limits and lifetime

    @Test func streamsPastTheLimitGet503() async throws {
        try await MockHarness.withRunningMock { mock in
            var clients: [RawClient] = []
            for _ in 0..<64 { clients.append(try await EventSubscribers.subscribe(mock, "")) }
            #expect(clients.allSatisfy { String(decoding: $0.received, as: UTF8.self).hasPrefix("HTTP/1.1 200") })
            let refused = try await mock.admin.request("GET", "/v1/events")
            #expect(refused.status == 503)
            #expect(refused.error?.hasPrefix("events:") == true)
            for client in clients { await client.close() }
        }
    }

    @Test func streamsEndWhenTheMockShutsDown() async throws {
        var client: RawClient?
        var stopping = ContinuousClock.now
        try await MockHarness.withRunningMock { mock in
            client = try await EventSubscribers.subscribe(mock, "outcome=all")
            stopping = ContinuousClock.now
        }
        // The shutdown does not wait for the stream, nor for its 15-second keep-alive (on an idle
        // machine it takes well under a second; 10 s leaves room for a loaded one).
        #expect(ContinuousClock.now - stopping < .seconds(10))
        let (received, closed, _) = try #require(await client?.waitForClose(timeout: .seconds(5)))
        #expect(closed)
        // The chunked body ends properly ("0\r\n\r\n"), it is not cut off.
        #expect(String(decoding: received, as: UTF8.self).hasSuffix("0\r\n\r\n"))
    }

    @Test func waitersAnswerAtOnceOnShutdown() async throws {
        var stopping = ContinuousClock.now
        var waiter: RawClient?
        try await MockHarness.withRunningMock { mock in
            let client = try await RawClient.connect(port: mock.adminPort, security: .plaintext)
            try await client.send(Array("GET /v1/notifications/wait?timeout=120 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8))
            try await Task.sleep(for: .milliseconds(200))
            waiter = client
            stopping = ContinuousClock.now
        }
        // Not the 120 s the waiter asked for: it answered with what it had (nothing: 408). Well
        // under a second on an idle machine; a loaded one has reached the harness's 5 s grace.
        #expect(ContinuousClock.now - stopping < .seconds(10))
        let answer = String(decoding: waiter?.received ?? [], as: UTF8.self)
        #expect(answer.hasPrefix("HTTP/1.1 408"))
    }

    // MARK: Bad input

    @Test(arguments: [
        ("colour=red", "colour"), ("outcome=maybe", "outcome"), ("since=-1", "since"), ("limit=0", "limit"),
        ("maxRate=0", "maxRate"), ("maxRate=fast", "maxRate"), ("reason=Nope", "reason"), ("count=3", "count"),
    ])
    func badParametersAre400NamingTheField(_ query: String, _ field: String) async throws {
        try await MockHarness.withRunningMock { mock in
            let response = try await Self.adminGet(mock, "/v1/events?\(query)")
            #expect(response.status == 400)
            let error = try JSONDecoder().decode([String: String].self, from: response.body)["error"]
            #expect(error?.hasPrefix(field + ":") == true, "\(error ?? "no error")")
        }
    }

    @Test func badLastEventIDIs400() async throws {
        try await MockHarness.withRunningMock { mock in
            let response = try await Self.adminGet(mock, "/v1/events", headers: ["Last-Event-ID: yesterday"])
            #expect(response.status == 400)
            #expect(String(decoding: response.body, as: UTF8.self).contains("Last-Event-ID:"))
        }
    }

    // MARK: .apns export

    @Test func exportsAPayloadForTheSimulator() async throws {
        try await MockHarness.withRunningMock { mock in
            _ = try await Self.push(
                mock, headers: ["apns-topic": "com.example.app.voip", "apns-push-type": "voip"],
                body: #"{"aps":{"alert":"ring"},"caller":"A \"quoted\" name","n":1.50}"#)
            let response = try await Self.adminGet(mock, "/v1/notifications/1.apns")
            #expect(response.status == 200)
            #expect(response.headers["content-disposition"] == #"attachment; filename="apns-mock-1.apns""#)
            let object = try #require(try JSONSerialization.jsonObject(with: response.body) as? [String: Any])
            #expect(object["Simulator Target Bundle"] as? String == "com.example.app")
            #expect(object["caller"] as? String == #"A "quoted" name"#)
            #expect((object["aps"] as? [String: Any])?["alert"] as? String == "ring")
            // Numbers are kept as they were written.
            #expect(String(decoding: response.body, as: UTF8.self).contains("1.50"))
        }
    }

    @Test func exportRefusesWhatItCannotExport() async throws {
        try await MockHarness.withRunningMock { mock in
            _ = try await Self.push(mock, body: #"["not","an","object"]"#)
            let notObject = try await mock.admin.request("GET", "/v1/notifications/1.apns")
            #expect(notObject.status == 422)
            #expect(notObject.error?.hasPrefix("payload:") == true)
            let unknown = try await mock.admin.request("GET", "/v1/notifications/99.apns")
            #expect(unknown.status == 404)
            #expect(unknown.error?.hasPrefix("seq:") == true)
            #expect(unknown.error?.contains("99") == true)
            for bad in ["abc", "0", "-1", "18446744073709551616"] {
                let malformed = try await mock.admin.request("GET", "/v1/notifications/\(bad).apns")
                #expect(malformed.status == 400)
                #expect(malformed.error?.hasPrefix("seq:") == true)
            }
        }
    }

    @Test(arguments: [
        ("com.example.app", "alert", "com.example.app"),
        ("com.example.app.voip", "voip", "com.example.app"),
        ("com.example.app.push-type.liveactivity", "liveactivity", "com.example.app"),
        ("com.example.app.push-type.widgets", nil, "com.example.app"),
        ("com.example.app.voip-ptt", "pushtotalk", "com.example.app"),
        ("com.example.app", "voip", "com.example.app"),
    ] as [(String, String?, String)])
    func bundleIDDropsThePushTypeSuffix(_ topic: String, _ pushType: String?, _ bundle: String) {
        #expect(AdminAPI.bundleID(topic: topic, pushType: pushType) == bundle)
    }

    // MARK: Reasons and the page

    @Test func reasonsListEveryReasonWithItsExplanation() async throws {
        try await MockHarness.withRunningMock { mock in
            let list = try await mock.admin.request("GET", "/v1/reasons").decode(ReasonList.self)
            #expect(list.reasons.map(\.reason) == Reason.allCases.map(\.rawValue))
            #expect(list.reasons.allSatisfy { !$0.explanation.isEmpty && $0.status >= 400 })
            #expect(list.reasons.first { $0.reason == "Unregistered" }?.status == 410)
        }
    }

    /// docs/admin-api.md lists the same explanations as the Reason table serves.
    @Test func docsListTheSameExplanations() throws {
        let docs = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("docs/admin-api.md")
        let text = try String(contentsOf: docs, encoding: .utf8)
        for reason in Reason.allCases {
            #expect(text.contains("| `\(reason.rawValue)` | \(reason.status) | \(reason.explanation) |"), "\(reason.rawValue)")
        }
    }

    @Test func pageIsServedWithAStrictPolicy() async throws {
        try await MockHarness.withRunningMock { mock in
            let page = try await Self.adminGet(mock, "/")
            #expect(page.status == 200)
            #expect(page.headers["content-type"] == "text/html; charset=utf-8")
            let policy = try #require(page.headers["content-security-policy"])
            #expect(policy.contains("default-src 'none'"))
            #expect(!policy.contains("unsafe-inline"))
            let html = String(decoding: page.body, as: UTF8.self)
            #expect(html.contains("<title>apns-mock inbox</title>"))
            #expect(!html.contains("__NONCE__"))
            #expect(!html.contains("innerHTML"))
        }
    }

    @Test func pageAndStreamHonourTheAdminToken() async throws {
        try await MockHarness.withRunningMock(configure: { $0.admin.token = "s3cret" }) { mock in
            // The page holds no data: a browser gets it with the 401 and it asks for the token.
            let page = try await Self.adminGet(mock, "/")
            #expect(page.status == 401)
            #expect(String(decoding: page.body, as: UTF8.self).contains("<title>apns-mock inbox</title>"))
            let events = try await Self.adminGet(mock, "/v1/events?limit=1")
            #expect(events.status == 401)
            #expect(String(decoding: events.body, as: UTF8.self).hasPrefix(#"{"error":"authorization:"#))
            // No token in the URL is taken either.
            let inURL = try await Self.adminGet(mock, "/v1/events?access_token=s3cret")
            #expect(inURL.status == 401)
            let authorized = try await Self.adminGet(mock, "/", headers: ["Authorization: Bearer s3cret"])
            #expect(authorized.status == 200)
            _ = try await Self.push(mock)
            let stream = try await Self.stream(mock, "since=0&limit=1", headers: ["Authorization: Bearer s3cret"])
            #expect(stream.map(\.id) == ["1"])
        }
    }
}

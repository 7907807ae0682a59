@testable import APNSMock
import APNSMockCore
import APNSMockTesting
import Foundation
import Testing

/// Both listeners end to end: pushes over TLS and HTTP/2 (curl or hand-made frames), then the
/// admin API over HTTP/1.1 through ``AdminClient``, asserting decoded JSON.
@Suite("Recording and the admin API", .timeLimit(.minutes(2)))
struct AdminAPITests {
    // MARK: Recording and queries

    /// Records number connections as fault rules do: since start or the last reset, from 1, so
    /// a rule's `match.connection` and a record's `connectionId` name the same connection.
    @Test func recordsAndFaultRulesNumberConnectionsAlike() async throws {
        try await MockHarness.withRunningMock { mock in
            let url = "\(mock.baseURL)/3/device/\(Pushes.token)"
            for _ in 0..<3 { _ = try await Curl.send(url: url, caPath: mock.caPath) }
            let before = try await mock.admin.notifications().notifications.map(\.connectionId)
            #expect(before == [1, 2, 3])
            try await mock.admin.reset()
            try await mock.admin.addFault(json: #"{"match":{"connection":2},"respond":{"reason":"ServiceUnavailable"}}"#)
                .expect([201])
            var statuses: [Int] = []
            for _ in 0..<3 { statuses.append(try await Curl.send(url: url, caPath: mock.caPath).status) }
            #expect(statuses == [200, 503, 200])
            let after = try await mock.admin.notifications(RecordQuery(outcome: .all)).notifications
            #expect(after.map(\.connectionId) == [1, 2, 3])
            #expect(after.first { $0.connectionId == 2 }?.reason == "ServiceUnavailable")
        }
    }

    @Test func recordsAcceptedAndRejectedRequests() async throws {
        try await MockHarness.withRunningMock { mock in
            let accepted = try await Pushes.push(mock, headers: ["apns-topic": "com.example.app", "apns-collapse-id": "c1"])
            #expect(accepted.status == 200)
            let rejected = try await Pushes.push(mock, token: "zz")
            #expect(rejected.status == 400)

            let page = try await mock.admin.notifications()
            #expect(page.notifications.count == 1)
            let record = try #require(page.notifications.first)
            #expect(record.status == 200)
            #expect(record.token == Pushes.token)
            #expect(record.topic == "com.example.app")
            #expect(record.pushType == "alert")
            #expect(record.priority == 10)
            #expect(record.collapseId == "c1")
            #expect(record.environment == "sandbox")
            #expect(record.apnsId == accepted.headers["apns-id"])
            #expect(record.uniqueId == accepted.headers["apns-unique-id"])
            #expect(record.payload?["aps"]?["alert"] == .string("hello"))
            #expect(record.payloadEncoding == .json)
            #expect(record.payloadSize == 25)
            #expect(record.injected == false)
            #expect(record.lint.isEmpty)
            // Curl.send signs with the demo key by default.
            let demoToken = try MockHarness.demoToken()
            #expect(record.auth == AuthSummary(
                method: .token, teamId: "DEMOTEAM01", keyId: "DEMOKEY001", iatForm: .integer,
                iat: ProviderToken.parse(authorization: "bearer " + demoToken)?.issuedAt,
                tokenId: ES256.fingerprint(demoToken.utf8), signatureForm: .jose))
            #expect(record.streamId == 1)
            #expect(record.headers["apns-topic"] == "com.example.app")
            #expect(record.headers[":method"] == "POST")
            #expect(record.headers["authorization"] == nil)
            // Every record up to the cursor was looked at, the rejected one included.
            #expect(page.next == record.seq + 1)

            let rejectedPage = try await mock.admin.notifications(RecordQuery(outcome: .rejected))
            let rejectedRecord = try #require(rejectedPage.notifications.first)
            #expect(rejectedPage.notifications.count == 1)
            #expect(rejectedRecord.status == 400)
            #expect(rejectedRecord.reason == "BadDeviceToken")
            #expect(rejectedRecord.token == "zz")
            #expect(rejectedRecord.seq > record.seq)

            let byReason = try await mock.admin.notifications(RecordQuery(reason: "BadDeviceToken"))
            #expect(byReason.notifications.map(\.seq) == [rejectedRecord.seq])

            let all = try await mock.admin.notifications(RecordQuery(outcome: .all))
            #expect(all.notifications.map(\.seq) == [record.seq, rejectedRecord.seq])
            let later = try await mock.admin.notifications(RecordQuery(outcome: .all, since: record.seq))
            #expect(later.notifications.map(\.seq) == [rejectedRecord.seq])
            let limited = try await mock.admin.notifications(RecordQuery(outcome: .all, limit: 1))
            #expect(limited.notifications.map(\.seq) == [record.seq])
            #expect(limited.next == record.seq)
            let byToken = try await mock.admin.notifications(RecordQuery(token: Pushes.otherToken, outcome: .all))
            #expect(byToken.notifications.isEmpty)
            let byApnsID = try await mock.admin.notifications(RecordQuery(apnsId: record.apnsId.lowercased()))
            #expect(byApnsID.notifications.map(\.seq) == [record.seq])

            let stats = try await mock.admin.stats()
            #expect(stats.requests == 2)
            #expect(stats.accepted == 1)
            #expect(stats.rejected == 1)
            #expect(stats.byReason["BadDeviceToken"] == 1)
            #expect(stats.byStatus["200"] == 1)
            #expect(stats.connections.total == 2)

            try await mock.admin.deleteNotifications()
            let empty = try await mock.admin.notifications(RecordQuery(outcome: .all))
            #expect(empty.notifications.isEmpty)
            // The cursor survives a delete: seq keeps counting.
            _ = try await Pushes.push(mock)
            let after = try await mock.admin.notifications()
            #expect(after.notifications.first.map(\.seq) == rejectedRecord.seq + 1)
        }
    }

    /// Records of one connection share what repeats (RequestShape); each must still show its own
    /// payload, headers, token and ids when its neighbours differ.
    @Test func recordsOfOneConnectionKeepTheirOwnContent() async throws {
        try await MockHarness.withRunningMock(configure: { $0.http2.streamsBeforeAuthentication = 10 }) { mock in
            let client = try await RawClient.connect(port: mock.apnsPort, security: .tls(caPath: mock.caPath, alpn: ["h2"]))
            let one = Array(#"{"aps":{"alert":"one"}}"#.utf8), two = Array(#"{"aps":{"alert":"two"}}"#.utf8)
            let apnsID = "8A1B2C3D-0000-4000-8000-00000000ABCD"
            let requests: [(stream: UInt32, token: String, extra: [(String, String)], body: [UInt8])] = [
                (1, Pushes.token, [], one),
                (3, Pushes.token, [], one),
                (5, Pushes.token, [], two),
                (7, Pushes.token, [("apns-collapse-id", "k1")], two),
                (9, Pushes.otherToken, [("apns-collapse-id", "k1")], two),
                (11, Pushes.otherToken, [("apns-priority", "5")], two),
                (13, Pushes.otherToken, [("apns-priority", "5"), ("apns-id", apnsID)], two),
            ]
            try await client.send(
                H2.preface + H2.settings()
                    + requests.flatMap { H2.request(stream: $0.stream, token: $0.token, extra: $0.extra, body: $0.body) })
            _ = await client.waitUntil { bytes in
                H2.parse(bytes).filter { $0.type == H2.FrameType.headers.rawValue }.count == requests.count
            }
            await client.close()

            let page = try await mock.admin.notifications(RecordQuery(outcome: .all))
            let records = page.notifications.sorted { $0.streamId < $1.streamId }
            try #require(records.count == requests.count)
            for (record, sent) in zip(records, requests) {
                #expect(record.streamId == Int32(sent.stream))
                #expect(record.status == 200)
                #expect(record.token == sent.token)
                #expect(record.payload?["aps"]?["alert"] == .string(sent.body == one ? "one" : "two"))
                #expect(record.collapseId == sent.extra.first { $0.0 == "apns-collapse-id" }?.1)
                #expect(record.priority == (sent.extra.contains { $0.0 == "apns-priority" } ? 5 : 10))
                #expect(record.headers["apns-priority"] == sent.extra.first { $0.0 == "apns-priority" }?.1)
                #expect(record.headers[":path"] == "/3/device/\(sent.token)")
                #expect(record.headers["authorization"] == nil)
            }
            #expect(records.last?.apnsId == apnsID)
            #expect(records.last?.headers["apns-id"] == apnsID)
            #expect(records.dropLast().allSatisfy { $0.headers["apns-id"] == nil && $0.apnsId != apnsID })
            #expect(Set(records.map(\.connectionId)).count == 1)
        }
    }

    @Test func nonJSONPayloadIsKeptAsTextWithLint() async throws {
        try await MockHarness.withRunningMock { mock in
            _ = try await Curl.send(
                url: "\(mock.baseURL)/3/device/\(Pushes.token)", caPath: mock.caPath, body: Data("not json".utf8))
            let record = try #require(try await mock.admin.notifications(RecordQuery(outcome: .all)).notifications.first)
            #expect(record.payload == .string("not json"))
            #expect(record.payloadEncoding == .text)
            #expect(record.lint.map(\.code).contains("invalid-json"))
        }
    }

    @Test func capacityEvictsTheOldestAndCountsIt() async throws {
        try await MockHarness.withRunningMock(configure: { $0.recordingCapacity = 2 }) { mock in
            for _ in 0..<3 { _ = try await Pushes.push(mock) }
            let page = try await mock.admin.notifications()
            #expect(page.notifications.map(\.seq) == [2, 3])
            let stats = try await mock.admin.stats()
            #expect(stats.recording.evictions == 1)
            #expect(stats.recording.records == 2)
        }
    }

    /// A cursor at the very end of UInt64 once made `since + 1` trap and took the whole process
    /// down; any cursor past the last record now finds nothing and the server goes on serving.
    @Test func cursorPastTheEndFindsNothingAndKeepsServing() async throws {
        try await MockHarness.withRunningMock { mock in
            _ = try await Pushes.push(mock)
            let last = UInt64.max
            let page = try await mock.admin.notifications(RecordQuery(outcome: .all, since: last))
            #expect(page.notifications.isEmpty)
            #expect(page.next == last)
            #expect(page.more == false)
            let (waited, timedOut) = try await mock.admin.wait(RecordQuery(since: last), count: 1, timeout: 0.2)
            #expect(timedOut)
            #expect(waited.notifications.isEmpty)
            #expect(try await Pushes.push(mock).status == 200)
            #expect(try await mock.admin.notifications().notifications.count == 2)
        }
    }

    /// A query gives at most a page of records; `next` and `more` lead to the rest.
    @Test func queriesArePagedWithACursor() async throws {
        try await MockHarness.withRunningMock { mock in
            for _ in 0..<3 { _ = try await Pushes.push(mock) }
            let first = try await mock.admin.notifications(RecordQuery(limit: 2))
            #expect(first.notifications.map(\.seq) == [1, 2])
            #expect(first.more)
            let second = try await mock.admin.notifications(RecordQuery(since: first.next, limit: 2))
            #expect(second.notifications.map(\.seq) == [3])
            #expect(second.more == false)
        }
    }

    // MARK: Wait-for

    @Test func waitAnswersWhenThePushArrives() async throws {
        try await MockHarness.withRunningMock { mock in
            // A generous timeout: the three curl pushes below take 20 s and more when the whole suite
            // runs at once on two cores; the waiters answer as soon as their records are there.
            async let waited = mock.admin.wait(RecordQuery(token: Pushes.token), count: 2, timeout: 90)
            // Several waiters at once, each woken by the append.
            async let others = withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<5 {
                    group.addTask { try await mock.admin.wait(RecordQuery(), count: 1, timeout: 90).page.notifications.count }
                }
                return try await group.reduce(0, +)
            }
            _ = try await Pushes.push(mock, token: Pushes.otherToken)
            _ = try await Pushes.push(mock)
            _ = try await Pushes.push(mock)
            let (page, timedOut) = try await waited
            #expect(!timedOut)
            #expect(page.notifications.count == 2)
            #expect(page.notifications.allSatisfy { $0.token == Pushes.token })
            #expect(try await others == 5)
        }
    }

    @Test func waitTimesOutWith408AndWhatMatched() async throws {
        try await MockHarness.withRunningMock { mock in
            _ = try await Pushes.push(mock)
            let (page, timedOut) = try await mock.admin.wait(RecordQuery(), count: 2, timeout: 0.3)
            #expect(timedOut)
            #expect(page.notifications.count == 1)
        }
    }

    // MARK: Devices and reset

    @Test func unregisteredDeviceGets410UntilReset() async throws {
        try await MockHarness.withRunningMock { mock in
            let added = try await mock.admin.request(
                "POST", "/v1/devices", body: Data(#"{"token":"\#(Pushes.token)","topic":"com.example.app"}"#.utf8))
            #expect(added.status == 201)
            let unregistered = try await mock.admin.request(
                "POST", "/v1/devices/\(Pushes.token)/unregister",
                body: Data(#"{"timestamp":1700000000000,"reason":"ExpiredToken"}"#.utf8))
            #expect(unregistered.status == 200)
            let response = try await Pushes.push(mock)
            #expect(response.status == 410)
            #expect(response.error == CurlResponse.ErrorBody(reason: "ExpiredToken", timestamp: 1_700_000_000_000))

            let devices = try await mock.admin.devices()
            #expect(devices.devices.map(\.token) == [Pushes.token])
            #expect(devices.devices.first?.reason == "ExpiredToken")

            try await mock.admin.reset()
            #expect(try await mock.admin.devices().devices.isEmpty)
            #expect(try await mock.admin.notifications(RecordQuery(outcome: .all)).notifications.isEmpty)
            #expect(try await Pushes.push(mock).status == 200)

            let removed = try await mock.admin.request("DELETE", "/v1/devices/\(Pushes.token)")
            #expect(removed.status == 404)
        }
    }

    // MARK: Bad requests change nothing

    @Test(arguments: [
        ("POST", "/v1/faults", #"{"respond":{"reason":"NoSuchReason"}}"#, "respond.reason"),
        ("POST", "/v1/faults", #"{"respond":{"reason":"BadDeviceToken"},"colour":1}"#, "colour"),
        ("POST", "/v1/faults", #"{"delayMs":"soon"}"#, "delayMs"),
        ("POST", "/v1/faults", #"{"respond": "#, "body"),
        ("POST", "/v1/devices", #"{"token":"xyz"}"#, "token"),
        ("POST", "/v1/devices/abababababababababababababababababababababababababababababababab/unregister", #"{"reason":"Gone"}"#, "reason"),
        // Unknown fields are refused even when null (schemathesis found `{"": null}` accepted).
        ("POST", "/v1/devices/abababababababababababababababababababababababababababababababab/unregister", #"{"colour":null}"#, "colour"),
        ("POST", "/v1/devices/abababababababababababababababababababababababababababababababab/unregister", #"{"":null}"#, #""""#),
        ("GET", "/v1/notifications?colour=red", "", "colour"),
        ("GET", "/v1/notifications?outcome=maybe", "", "outcome"),
        ("GET", "/v1/notifications/wait?timeout=soon", "", "timeout"),
        ("GET", "/v1/notifications/wait?timeout=nan", "", "timeout"),
        ("GET", "/v1/notifications/wait?timeout=1e400", "", "timeout"),
        ("GET", "/v1/notifications?since=-1", "", "since"),
        ("GET", "/v1/notifications?since=18446744073709551616", "", "since"),
        ("GET", "/v1/notifications?limit=999999999", "", "limit"),
        ("GET", "/v1/notifications?limit=0", "", "limit"),
        ("GET", "/v1/notifications?limit=99999999999999999999999", "", "limit"),
        ("GET", "/v1/notifications/wait?count=1000000000000", "", "count"),
        ("GET", "/v1/notifications/wait?count=-3", "", "count"),
    ])
    func badRequestsAre400AndChangeNothing(_ method: String, _ pathAndQuery: String, _ body: String, _ field: String) async throws {
        try await MockHarness.withRunningMock { mock in
            let parts = pathAndQuery.split(separator: "?", maxSplits: 1).map(String.init)
            let query = parts.count > 1
                ? parts[1].split(separator: "&").map { pair -> (String, String) in
                    let kv = pair.split(separator: "=", maxSplits: 1).map(String.init)
                    return (kv[0], kv.count > 1 ? kv[1] : "")
                }
                : []
            let response = try await mock.admin.request(
                method, parts[0], query: query, body: body.isEmpty ? nil : Data(body.utf8))
            #expect(response.status == 400)
            let error = try #require(response.error)
            #expect(error.hasPrefix(field))
            let faults = try await mock.admin.faults()
            #expect(faults.faults.isEmpty)
            let devices = try await mock.admin.devices()
            #expect(devices.devices.isEmpty)
        }
    }

    @Test func adminTokenIsRequiredWhenConfigured() async throws {
        try await MockHarness.withRunningMock(configure: { $0.admin.token = "s3cret" }) { mock in
            let unauthorized = try await mock.admin.request("GET", "/v1/stats")
            #expect(unauthorized.status == 401)
            #expect(unauthorized.error?.hasPrefix("authorization") == true)
            let authorized = try await AdminClient(baseURL: mock.adminURL, token: "s3cret").request("GET", "/v1/stats")
            #expect(authorized.status == 200)
        }
    }

    @Test func healthzAndMetrics() async throws {
        try await MockHarness.withRunningMock { mock in
            #expect(try await mock.admin.request("GET", "/healthz").status == 200)
            _ = try await Pushes.push(mock)
            _ = try await Pushes.push(mock, token: "zz")
            let metrics = try await mock.admin.request("GET", "/metrics")
            #expect(metrics.status == 200)
            let samples = Self.prometheusSamples(String(decoding: metrics.body, as: UTF8.self))
            #expect(samples[#"apns_requests_total{status="200",reason=""}"#] == 1)
            #expect(samples[#"apns_requests_total{status="400",reason="BadDeviceToken"}"#] == 1)
            #expect(samples["apns_recording_evictions_total"] == 0)
            #expect(samples["apns_open_connections"] != nil)
        }
    }

    /// `name{labels} value` lines of Prometheus text, comments skipped.
    static func prometheusSamples(_ text: String) -> [String: Double] {
        var samples: [String: Double] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else { continue }
            samples[String(line[..<space])] = value
        }
        return samples
    }
}

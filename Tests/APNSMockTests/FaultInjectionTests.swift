import APNSMock
import APNSMockCore
import APNSMockTesting
import Foundation
import Testing

/// Fault rules end to end: added through the admin API (or the configuration), observed by an
/// HTTP/2 client, and marked `injected` in the record.
@Suite("Fault injection", .timeLimit(.minutes(2)))
struct FaultInjectionTests {

    @Test func respondsWithTheRuleReasonTimesThenExpires() async throws {
        try await MockHarness.withRunningMock { mock in
            let added = try await mock.admin.addFault(
                json: #"{"match":{"token":"\#(Pushes.token)"},"respond":{"status":503,"reason":"ServiceUnavailable"},"times":1}"#)
            #expect(added.status == 201)
            let first = try await Pushes.push(mock)
            #expect(first.status == 503)
            #expect(first.reason == "ServiceUnavailable")
            #expect(first.headers["apns-id"] != nil)
            let second = try await Pushes.push(mock)
            #expect(second.status == 200)

            let records = try await mock.admin.notifications(RecordQuery(outcome: .all)).notifications
            #expect(records.map(\.status) == [503, 200])
            #expect(records.map(\.injected) == [true, false])
            #expect(records.first?.reason == "ServiceUnavailable")
            let faults = try await mock.admin.faults()
            #expect(faults.faults.isEmpty)
        }
    }

    @Test func unregisteredReasonCarriesATimestamp() async throws {
        try await MockHarness.withRunningMock { mock in
            try await mock.admin.addFault(json: #"{"match":{"topic":"com.example.app"},"respond":{"reason":"Unregistered"}}"#)
            let before = Int64(Date().timeIntervalSince1970 * 1000)
            let response = try await Pushes.push(mock)
            #expect(response.status == 410)
            let error = try #require(response.error)
            #expect(error.reason == "Unregistered")
            #expect(try #require(error.timestamp) >= before - 1000)
        }
    }

    @Test func nonMatchingAndZeroProbabilityRulesDoNothing() async throws {
        try await MockHarness.withRunningMock { mock in
            try await mock.admin.addFault(json: #"{"match":{"pushType":"voip"},"respond":{"reason":"InternalServerError"}}"#)
            try await mock.admin.addFault(json: #"{"respond":{"reason":"InternalServerError"},"probability":0}"#)
            #expect(try await Pushes.push(mock).status == 200)
            let faults = try await mock.admin.faults()
            #expect(faults.faults.map(\.applied) == [0, 0])
            #expect(faults.faults.map(\.id) == ["1", "2"])
            #expect(try await mock.admin.request("DELETE", "/v1/faults/1").status == 204)
            #expect(try await mock.admin.request("DELETE", "/v1/faults/1").status == 404)
        }
    }

    @Test func seededProbabilityIsReproducible() async throws {
        func run() async throws -> [Int] {
            try await MockHarness.withRunningMock(configure: {
                $0.faultSeed = 42
                $0.faults = [FaultRule(respond: Rejection(.tooManyRequests), probability: 0.5)]
            }) { mock in
                var statuses: [Int] = []
                for _ in 0..<8 { statuses.append(try await Pushes.push(mock).status) }
                return statuses
            }
        }
        let first = try await run()
        #expect(try await run() == first)
        #expect(Set(first).isSubset(of: [200, 429]))
    }

    @Test func delayAnswersLateWithoutBlocking() async throws {
        try await MockHarness.withRunningMock(configure: { $0.threads = 1 }) { mock in
            try await mock.admin.addFault(json: #"{"match":{"token":"\#(Pushes.token)"},"delayMs":3000}"#)
            let clock = ContinuousClock()
            let start = clock.now
            async let slow = Pushes.push(mock)
            // Another token on the same single event loop is answered meanwhile.
            let fast = try await Pushes.push(mock, token: Pushes.otherToken)
            let fastDone = clock.now - start
            #expect(fast.status == 200)
            #expect(try await slow.status == 200)
            let slowDone = clock.now - start
            #expect(slowDone >= .milliseconds(3000))
            #expect(fastDone < slowDone)
            let record = try #require(try await mock.admin.notifications(RecordQuery(token: Pushes.token)).notifications.first)
            #expect(record.injected)
        }
    }

    @Test func resetActionSendsRSTStream() async throws {
        try await MockHarness.withRunningMock { mock in
            try await mock.admin.addFault(json: #"{"action":"reset"}"#)
            let client = try await RawClient.connect(port: mock.apnsPort, security: .tls(caPath: mock.caPath, alpn: ["h2"]))
            try await client.send(H2.preface + H2.settings() + H2.request(stream: 1, token: Pushes.token, body: Pushes.body))
            let received = await client.waitUntil { bytes in H2.parse(bytes).contains { $0.rstErrorCode != nil } }
            let reset = try #require(H2.parse(received).first { $0.rstErrorCode != nil })
            #expect(reset.stream == 1)
            #expect(reset.rstErrorCode == 2)  // INTERNAL_ERROR
            await client.close()
            let record = try #require(try await mock.admin.notifications(RecordQuery(outcome: .all)).notifications.first)
            #expect(record.action == "reset")
            #expect(record.status == nil)
            #expect(record.injected)
        }
    }

    @Test func goawayActionCarriesTheReason() async throws {
        try await MockHarness.withRunningMock { mock in
            try await mock.admin.addFault(json: #"{"action":"goaway","respond":{"reason":"InternalServerError"}}"#)
            let client = try await RawClient.connect(port: mock.apnsPort, security: .tls(caPath: mock.caPath, alpn: ["h2"]))
            try await client.send(H2.preface + H2.settings() + H2.request(stream: 1, token: Pushes.token, body: Pushes.body))
            let outcome = await client.waitForClose()
            let frames = H2.parse(outcome.received)
            let goaway = try #require(frames.compactMap(\.goaway).first)
            #expect(goaway.errorCode == 0)
            let debug = try JSONDecoder().decode([String: String].self, from: Data(goaway.debug.utf8))
            #expect(debug == ["reason": "InternalServerError"])
            #expect(frames.first { $0.stream == 1 }?.rstErrorCode == 7)  // REFUSED_STREAM: safe to retry
            #expect(outcome.closed)
        }
    }

    @Test func closeActionDropsTheConnection() async throws {
        try await MockHarness.withRunningMock { mock in
            try await mock.admin.addFault(json: #"{"action":"close"}"#)
            let client = try await RawClient.connect(port: mock.apnsPort, security: .tls(caPath: mock.caPath, alpn: ["h2"]))
            try await client.send(H2.preface + H2.settings() + H2.request(stream: 1, token: Pushes.token, body: Pushes.body))
            let outcome = await client.waitForClose()
            #expect(outcome.closed)
            let frames = H2.parse(outcome.received)
            #expect(!frames.contains { $0.stream == 1 })
            #expect(!frames.contains { $0.goaway != nil })
        }
    }
}

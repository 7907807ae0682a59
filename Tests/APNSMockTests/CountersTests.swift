@testable import APNSMock
import APNSMockCore
import APNSMockTesting
import Foundation
import Testing

/// Every counter agrees with the records it summarises: `/v1/stats`, `/metrics` and the record
/// listing, after a run that mixes what a user meets (pushes accepted and rejected, a channel
/// created and deleted, fault actions that answer and one that does not), and again after a reset.
@Suite("Counters agree with records", .timeLimit(.minutes(2)))
struct CountersTests {
    /// `apns_requests_total` by status, from `/metrics`.
    static func metricTotals(_ mock: RunningMock) async throws -> [String: Double] {
        let text = String(decoding: try await mock.admin.request("GET", "/metrics").body, as: UTF8.self)
        var totals: [String: Double] = [:]
        for line in text.split(separator: "\n") where line.hasPrefix("apns_requests_total{") {
            guard let statusStart = line.range(of: "status=\""), let value = line.split(separator: " ").last.flatMap({ Double($0) })
            else { continue }
            let status = line[statusStart.upperBound...].prefix { $0 != "\"" }
            totals[String(status), default: 0] += value
        }
        return totals.filter { $0.value > 0 }
    }

    @Test func statsMetricsAndRecordsAgreeAfterAMixedRun() async throws {
        try await MockHarness.withRunningMock { mock in
            // Accepted and rejected pushes.
            for _ in 0..<3 { #expect(try await Pushes.push(mock).status == 200) }
            #expect(try await Pushes.push(mock, token: "not-a-token").status == 400)
            #expect(try await Pushes.push(mock, headers: ["apns-topic": "com.example.other"]).status == 400)
            // A channel created (201) and deleted (204).
            let channel = try await BroadcastTests.create(mock)
            let deleted = try await BroadcastTests.manage(mock, "DELETE", headers: ["apns-channel-id": channel])
            #expect(deleted.status == 204)
            // Fault actions that still answer (200), and one that does not (reset).
            try await mock.admin.addFault(
                json: #"{"match":{"token":"\#(Pushes.otherToken)"},"action":"shrink-streams","maxConcurrentStreams":5,"times":1}"#
            ).expect([201])
            #expect(try await Pushes.push(mock, token: Pushes.otherToken).status == 200)
            try await mock.admin.addFault(
                json: #"{"match":{"token":"\#(Pushes.otherToken)"},"action":"ignore-pings","durationMs":50,"times":1}"#
            ).expect([201])
            #expect(try await Pushes.push(mock, token: Pushes.otherToken).status == 200)
            try await mock.admin.addFault(json: #"{"match":{"token":"\#(Pushes.otherToken)"},"action":"reset","times":1}"#).expect([201])
            _ = try? await Pushes.push(mock, token: Pushes.otherToken)

            let all = try await mock.admin.notifications(RecordQuery(outcome: .all, limit: 1000)).notifications
            let accepted = try await mock.admin.notifications(RecordQuery(outcome: .accepted, limit: 1000)).notifications
            let rejected = try await mock.admin.notifications(RecordQuery(outcome: .rejected, limit: 1000)).notifications
            let stats = try await mock.admin.stats()
            #expect(stats.requests == all.count)
            #expect(stats.accepted == accepted.count)
            #expect(stats.rejected == rejected.count)
            #expect(stats.accepted == 3 + 2 + 2)  // pushes, channel create and delete, the answered actions
            var byStatus: [String: Int] = [:]
            for record in all { if let status = record.status { byStatus[String(status), default: 0] += 1 } }
            #expect(stats.byStatus == byStatus)
            #expect(stats.byStatus["201"] == 1 && stats.byStatus["204"] == 1)
            #expect(stats.byAction == ["shrink-streams": 1, "ignore-pings": 1, "reset": 1])

            // /metrics counts the same since start: answered requests by status, the rest "none".
            var metrics = try await Self.metricTotals(mock)
            var expected = byStatus.mapValues(Double.init)
            expected["none"] = Double(all.filter { $0.status == nil }.count)
            #expect(metrics == expected)

            // A reset starts /v1/stats and the records again; /metrics goes on since start.
            try await mock.admin.reset()
            let after = try await mock.admin.stats()
            #expect(after.requests == 0 && after.accepted == 0 && after.rejected == 0 && after.byStatus.isEmpty)
            #expect(after.sinceStart.requests == all.count)
            #expect(try await mock.admin.notifications(RecordQuery(outcome: .all)).notifications.isEmpty)
            metrics = try await Self.metricTotals(mock)
            #expect(metrics == expected)

            // DELETE /v1/notifications (the inbox's Clear) does the same for the counts.
            #expect(try await Pushes.push(mock).status == 200)
            #expect(try await mock.admin.stats().accepted == 1)
            try await mock.admin.request("DELETE", "/v1/notifications").expect([204])
            #expect(try await mock.admin.stats().requests == 0)
        }
    }
}

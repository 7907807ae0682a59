@testable import APNSMock
import APNSMockCore
import APNSMockTesting
import Foundation
import Testing

/// Streams refused with RST_STREAM REFUSED_STREAM are no records, and a client that does not retry
/// them (node-apn) loses those pushes: the mock counts them by cause (`/v1/stats`, `/metrics`),
/// tells live event streams, and logs them.
@Suite("Refused streams", .timeLimit(.minutes(2)))
struct RefusedStreamTests {

    /// Opens `/v1/events` with curl, runs `body` once the stream is open, and returns what the stream
    /// carried once it told of refused streams (or after 10 s).
    static func watchEvents(_ mock: some MockEndpoints, _ body: () async throws -> Void) async throws -> String {
        let directory = try Unprivileged.temporaryDirectory("events")
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("events.txt").path
        func read() -> String { (try? String(contentsOfFile: file, encoding: .utf8)) ?? "" }
        func waitFor(_ text: String) async throws {
            let deadline = ContinuousClock.now + .seconds(10)
            while !read().contains(text), ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(20))
            }
        }
        return try await ExternalTool.runningInBackground("curl", ["-sN", "-o", file, "\(mock.adminURL)/v1/events"]) {
            try await waitFor(": apns-mock events")
            try await body()
            try await waitFor("event: refused-streams")
            return read()
        }
    }

    static func notices(_ text: String) throws -> [RefusedStreamsNotice] {
        var notices: [RefusedStreamsNotice] = []
        for block in text.components(separatedBy: "\n\n") where block.hasPrefix("event: refused-streams\n") {
            let data = block.dropFirst("event: refused-streams\ndata: ".count)
            notices.append(try JSONDecoder().decode(RefusedStreamsNotice.self, from: Data(data.utf8)))
        }
        return notices
    }

    /// node-apn opens its streams before it reads SETTINGS; on a cold token connection all but the
    /// first are refused.
    @Test func refusedBeforeAuthenticationAreCountedAndTold() async throws {
        try await ServerProcess.withRunning { mock in
            let devices = (1...4).map { String(repeating: String(format: "%02x", $0), count: 32) }
            let output = try await Self.watchEvents(mock) {
                let report = try await ClientDriver(client: .node, scenario: "batch", auth: .token, devices: devices).run(against: mock)
                #expect(report.results.filter { $0.rstCode == 7 }.count == 3)
            }
            let notices = try Self.notices(output)
            #expect(notices.reduce(0) { $0 + $1.count } == 3, "\(output)")
            #expect(notices.allSatisfy { $0.cause == .beforeAuthentication && $0.limit == 1 })

            let stats = try await mock.admin.stats()
            #expect(stats.refusedStreams == Statistics.RefusedStreams(total: 3, beforeAuthentication: 3, overLimit: 0, afterGoAway: 0))
            let metrics = try await mock.admin.request("GET", "/metrics")
            let text = String(decoding: metrics.body, as: UTF8.self)
            #expect(text.contains(#"apns_refused_streams_total{cause="before_authentication"} 3"#), "\(text)")
            #expect(text.contains(#"apns_refused_streams_total{cause="over_limit"} 0"#), "\(text)")
            // None of them is a record.
            let records = try await mock.admin.notifications(RecordQuery(outcome: .all)).notifications
            #expect(records.count == 1)
            // The log names the cause and what to do.
            #expect(mock.log.contains("refused streams"))
            #expect(mock.log.contains("cause=beforeAuthentication"))
        }
    }

    /// A connection whose limit was lowered (`shrink-streams`) refuses the streams a client
    /// opens past it before reading the new SETTINGS: over the limit.
    @Test func refusedOverTheLimitAreCountedApart() async throws {
        try await MockHarness.withRunningMock(configure: H2Connections.configure) { mock in
            let first = String(repeating: "e1", count: 32), other = String(repeating: "e2", count: 32)
            try await mock.admin.addFault(
                json: #"{"match":{"token":"\#(first)"},"action":"shrink-streams","maxConcurrentStreams":1,"times":1}"#
            ).expect([201])
            let client = try await H2Connections.connect(mock)
            // The first request is answered and lowers the limit to one (this client never
            // acknowledges SETTINGS, so the limit holds); of the three streams opened in one write
            // after it, one fits, and the two past the limit are refused.
            try await client.send(H2.request(stream: 1, token: first, body: Pushes.body))
            _ = await client.waitUntil { H2.parse($0).contains { $0.type == H2.FrameType.headers.rawValue && $0.stream == 1 } }
            try await client.send(
                H2.request(stream: 3, token: other, body: Pushes.body)
                    + H2.request(stream: 5, token: other, body: Pushes.body)
                    + H2.request(stream: 7, token: other, body: Pushes.body))
            let received = await client.waitUntil {
                H2.parse($0).filter { $0.type == H2.FrameType.rstStream.rawValue }.count >= 2
            }
            let resets = H2.parse(received).filter { $0.type == H2.FrameType.rstStream.rawValue }
            #expect(resets.map(\.stream) == [5, 7])
            #expect(resets.allSatisfy { $0.payload == H2.be32(7) }, "REFUSED_STREAM")
            await client.close()
            let stats = try await mock.admin.stats()
            #expect(stats.refusedStreams == Statistics.RefusedStreams(total: 2, beforeAuthentication: 0, overLimit: 2, afterGoAway: 0))
        }
    }
}

import APNSMock
import APNSMockCore
import APNSMockTesting
import Foundation
import Testing

/// A burst written the way pushy writes on Netty (scripts/clients/netty_burst_driver.py): PRIORITY
/// on every HEADERS frame, batches flushed in one write each, so that TLS records cut frames at
/// every offset. The mock used to end such connections with GOAWAY STREAM_CLOSED ("DATA on closed
/// stream") when a HEADERS frame's PRIORITY field began a read. Every push is answered 200, no
/// GOAWAY, and the records and counters equal what the client saw.
@Suite("A Netty-style burst", .timeLimit(.minutes(3)))
struct NettyBurstTests {
    static let pushes = 20_000

    struct Report: Decodable {
        var sent: Int
        var answered: Int
        var statuses: [String: Int]
        var refused: Int
        var failed: Int
        var goaway: [String: RecordJSON]?
        var seconds: Double
    }

    @Test func twentyThousandPushesLoseNothing() async throws {
        try await ServerProcess.withRunning { server in
            let python = ClientDriver.repository.appendingPathComponent(".venv/bin/python").path
            guard FileManager.default.isExecutableFile(atPath: python) else {
                Issue.record("no .venv: run scripts/setup")
                return
            }
            let material = server.certificates
            let output = try await ExternalTool.run(python, [
                ClientDriver.clients.appendingPathComponent("netty_burst_driver.py").path,
                "--port", "\(server.apnsPort)", "--ca", server.caPath,
                "--key", material.tokenKeyPath(material.tokenKeys[0]), "--team", ClientDriver.teamID, "--key-id", ClientDriver.keyID,
                "--device", Pushes.token, "--count", "\(Self.pushes)", "--timeout", "150",
            ], timeout: 170)
            #expect(output.exitCode == 0, "\(output.stderr)")
            let report = try JSONDecoder().decode(Report.self, from: output.stdout)
            #expect(report.goaway == nil, "the mock sent GOAWAY: \(String(describing: report.goaway))")
            #expect(report.answered == Self.pushes && report.failed == 0, "\(output.text)")
            #expect(report.statuses == ["200": Self.pushes])

            let stats = try await server.admin.stats()
            #expect(stats.accepted == report.statuses["200"])
            #expect(stats.requests == report.answered)
            #expect(stats.goaways.total == 0)
            #expect(stats.recording.records == Self.pushes)
            #expect(stats.recording.lastSeq == UInt64(Self.pushes))
            let accepted = try await server.admin.notifications(RecordQuery(outcome: .accepted, limit: 1000))
            #expect(accepted.notifications.count == 1000 && accepted.more)
        }
    }
}

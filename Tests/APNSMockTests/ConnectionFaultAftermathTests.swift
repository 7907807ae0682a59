@testable import APNSMock
import APNSMockCore
import APNSMockTesting
import Foundation
import Testing

/// Every connection-level action, many times over, against the mock run as its own process: once
/// the clients are gone, the process is idle (no timer left behind by a held stream, a shrunk
/// limit's restore or a PING window), its resident memory is back within bounds, and a new
/// connection gets 200.
@Suite("Connection faults leave nothing behind", .timeLimit(.minutes(2)))
struct ConnectionFaultAftermathTests {
    @Test func connectionFaultsLeaveNothingRunning() async throws {
        let yaml = "server: { streamsBeforeAuthentication: 100 }\n"
        try await ServerProcess.withRunning(yaml: yaml) { server in
            let before = server.residentKiB
            let admin = server.admin
            try await admin.addFault(json: #"{"match":{"token":"\#(Pushes.token)"},"action":"hang"}"#).expect([201])
            try await admin.addFault(json: #"{"match":{"connection":2},"action":"tcp-reset"}"#).expect([201])
            try await admin.addFault(
                json: #"{"match":{"connection":3},"action":"shrink-streams","maxConcurrentStreams":1,"durationMs":300}"#).expect([201])
            try await admin.addFault(json: #"{"match":{"connection":4},"action":"ignore-pings","durationMs":300}"#).expect([201])

            // Connection 1: 200 streams held, then the client goes away without resetting them.
            let holder = try await Hostile.tlsClient(server)
            try await holder.send(H2.preface + H2.settings())
            for batch in 0..<2 {
                let streams = (0..<100).map { UInt32(1 + 2 * (batch * 100 + $0)) }
                try await holder.send(streams.flatMap { H2.request(stream: $0, token: Pushes.token, body: Pushes.body) })
            }
            // Connections 2 to 4: a reset, a shrunk limit, withheld PING acknowledgements.
            var others: [RawClient] = []
            for _ in 2...4 {
                let client = try await Hostile.tlsClient(server)
                try await client.send(H2.preface + H2.settings() + H2.request(stream: 1, token: Pushes.otherToken, body: Pushes.body))
                try? await client.send(H2.frame(.ping, payload: Array(repeating: 7, count: 8)))
                others.append(client)
            }
            // Records arrive for every request; the held ones say `hang`.
            let held = try await admin.wait(RecordQuery(token: Pushes.token, outcome: .all, limit: 1000), count: 200, timeout: 30)
            #expect(!held.timedOut)
            #expect(held.page.notifications.allSatisfy { $0.action == "hang" })
            let actions = try await admin.wait(RecordQuery(token: Pushes.otherToken, outcome: .all), count: 3, timeout: 30)
            #expect(Set(actions.page.notifications.compactMap(\.action)) == ["tcp-reset", "shrink-streams", "ignore-pings"])
            try await Task.sleep(for: .milliseconds(500))  // past both durationMs
            await holder.close()
            for client in others { await client.close() }

            try await Task.sleep(for: .seconds(1))
            let cpu = try await server.cpuUse(over: .seconds(2))
            #expect(cpu < 0.1, "the idle process used \(cpu) s of CPU in 2 s after the faults")
            try await admin.request("DELETE", "/v1/faults").expect([204])
            try await Hostile.expectHealthy(server, residentBefore: before)
        }
    }
}

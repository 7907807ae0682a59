@testable import APNSMock
import APNSMockCore
import APNSMockTesting
import Foundation
import SystemPackage
import Testing

/// Logging never holds up an answer: log lines leave the event loops through a bounded queue, and
/// a reader that does not keep up costs dropped (and counted) lines, not stalled connections.
@Suite("Logging never blocks a request", .timeLimit(.minutes(3)))
struct LoggingTests {
    /// stderr is a pipe nobody reads (a harness's `Popen(stderr=PIPE)` read only at the end): its
    /// 64 KB fill within a few hundred lines. At debug level every rejection is a line; after
    /// 10,000 of them a new connection still gets its push answered at once, and the lines that
    /// found the queue full are counted in `/metrics`.
    @Test func anUnreadPipeForStderrStallsNothing() async throws {
        let pipe = try FileDescriptor.pipe()
        defer { try? pipe.readEnd.close() }
        // h2load opens its streams before it reads SETTINGS, and no push here is accepted: let them in.
        let yaml = "server: { streamsBeforeAuthentication: 1000 }\n"
        try await ServerProcess.withRunning(yaml: yaml, arguments: ["--log-level", "debug"], errorOutput: pipe.writeEnd) { server in
            // A push's time on a new connection before: the bound after is relative to it, since a
            // loaded machine (the whole suite at once) is slow for both; a stalled listener never answers.
            var started = ContinuousClock.now
            _ = try await Curl.send(url: "\(server.baseURL)/3/device/\(Pushes.token)", caPath: server.caPath)
            let before = ContinuousClock.now - started
            let rejected = try await H2Load.push(10_000, to: server.baseURL, token: "not-a-token", clients: 4, streams: 100)
            #expect(rejected.text.contains("status codes: 0 2xx, 0 3xx, 10000 4xx"), "\(rejected.text)")

            started = ContinuousClock.now
            let response = try await Curl.send(url: "\(server.baseURL)/3/device/\(Pushes.token)", caPath: server.caPath)
            let elapsed = ContinuousClock.now - started
            #expect(response.status == 200)
            #expect(elapsed < max(.seconds(5), before * 4), "a push on a new connection took \(elapsed), \(before) before")

            let stats = try await server.admin.stats()
            #expect(stats.byReason["BadDeviceToken"] == 10_000, "\(stats)")
            let metrics = String(decoding: try await server.admin.request("GET", "/metrics").body, as: UTF8.self)
            let dropped = metrics.split(separator: "\n").first { $0.hasPrefix("apns_log_lines_dropped_total") }
            let count = dropped.flatMap { Double($0.split(separator: " ").last ?? "") } ?? 0
            #expect(count > 0, "the log queue never filled: \(String(describing: dropped))")
            #expect(server.isAlive)
        }
    }

    /// At the default level a rejection is not a line of its own: one summary line per interval
    /// says how many were rejected and why.
    @Test func rejectionsAreSummarisedAtInfoLevel() async throws {
        try await ServerProcess.withRunning(yaml: "server: { streamsBeforeAuthentication: 1000 }\n", arguments: ["--log-level", "info"]) { server in
            let rejected = try await H2Load.push(500, to: server.baseURL, token: "not-a-token", clients: 1, streams: 50)
            #expect(rejected.text.contains("status codes: 0 2xx, 0 3xx, 500 4xx"), "\(rejected.text)")
            #expect(!server.log.contains("rejected request"), "a rejection was logged one by one at info level")
            // SIGTERM: the last summary is written on shutdown.
            kill(server.pid, SIGTERM)
            let deadline = ContinuousClock.now + .seconds(10)
            while server.isAlive, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
            let summary = server.log.split(separator: "\n").first { $0.contains("rejected requests") }
            #expect(summary?.contains("count=500") == true, "\(server.log.suffix(2000))")
            #expect(summary?.contains("BadDeviceToken=500") == true)
        }
    }
}

/// A clean shutdown with an answer held past the grace period: `/v1/health` answers 503
/// `stopping` while the connections drain (the admin listener closes last), and no task is
/// scheduled on an event loop that has shut down (SwiftNIO warns, and will crash, on that).
@Suite("Shutdown", .timeLimit(.minutes(2)))
struct ShutdownTests {
    @Test func healthSaysStoppingAndNothingIsScheduledOnAStoppedLoop() async throws {
        let yaml = "server: { shutdownGracePeriod: 2 }\nfaults: [{ action: hang }]\n"
        try await ServerProcess.withRunning(yaml: yaml) { server in
            let client = try await Hostile.tlsClient(server)
            try await client.send(H2.preface + H2.settings() + H2.request(stream: 1, token: Pushes.token, body: Pushes.body))
            _ = try await server.admin.wait(RecordQuery(outcome: .all), count: 1, timeout: 10)
            kill(server.pid, SIGTERM)
            var statuses: [String] = []
            let deadline = ContinuousClock.now + .seconds(15)
            while server.isAlive, ContinuousClock.now < deadline {
                if let health = try? await server.admin.request("GET", "/v1/health") {
                    statuses.append("\(health.status) \(String(decoding: health.body, as: UTF8.self).contains("stopping") ? "stopping" : "")")
                }
                try await Task.sleep(for: .milliseconds(100))
            }
            #expect(statuses.contains("503 stopping"), "health during the shutdown: \(statuses)")
            #expect(!server.isAlive)
            #expect(!server.log.contains("Cannot schedule tasks"), "\(server.log.suffix(1500))")
            #expect(server.log.contains("grace period over"))
            await client.close()
        }
    }
}

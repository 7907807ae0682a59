@testable import APNSMock
import APNSMockCore
import APNSMockTesting
import Foundation
import NIOCore
import Testing

/// The listeners' defences: connection limits, accept back-off when descriptors run
/// out, the admin listener's timeouts, and memory given back after bursts of connections.
@Suite("Listener defences", .timeLimit(.minutes(2)))
struct HostileListenerTests {
    // MARK: Connection limits

    /// Past server.maxConnections a new connection is closed at once (reset) and the refusal is
    /// logged; once connections close, new ones are served.
    @Test func connectionLimitRefusesNewConnectionsAtOnce() async throws {
        try await ServerProcess.withRunning(yaml: "server: { maxConnections: 8 }\n") { mock in
            let before = mock.residentKiB
            var held: [RawClient] = []
            for _ in 0..<8 {
                held.append(try await RawClient.connect(port: mock.apnsPort, security: .plaintext))
            }
            // Counted once the mock's process accepted them: under the whole suite, with other
            // tests' load generators running, that may take seconds.
            let deadline = ContinuousClock.now + .seconds(30)
            var open = 0
            while open < 8, ContinuousClock.now < deadline {
                open = try await mock.admin.stats().connections.open
                if open < 8 { try await Task.sleep(for: .milliseconds(50)) }
            }
            #expect(open == 8)
            for _ in 0..<4 {
                // The reset may come before the client finished connecting; either way it is closed.
                guard let refused = try? await RawClient.connect(port: mock.apnsPort, security: .plaintext) else { continue }
                // Closed as soon as it is accepted; the wait is long because under the whole suite
                // the mock's process may not be scheduled for seconds. A kept connection stays open.
                let outcome = await refused.waitForClose(timeout: .seconds(10))
                #expect(outcome.closed, "a connection past the limit was kept open")
            }
            // The mock writes its log off the listener's thread: under the whole suite the line may
            // come a moment after the refusals.
            let logged = ContinuousClock.now + .seconds(15)
            while !mock.log.contains("setting=server.maxConnections"), ContinuousClock.now < logged {
                try await Task.sleep(for: .milliseconds(100))
            }
            #expect(mock.log.contains("connection limit reached"))
            #expect(mock.log.contains("limit=8"))
            #expect(mock.log.contains("setting=server.maxConnections"))
            for client in held { await client.close() }
            try await Task.sleep(for: .milliseconds(200))
            try await Hostile.expectHealthy(mock, residentBefore: before)
        }
    }

    // MARK: The admin listener

    static let adminTimeouts = "admin: { requestTimeout: 1, idleTimeout: 1, responseTimeout: 1 }\n"

    /// Slowloris on the admin listener: headers sent a byte at a time, a body that never comes,
    /// a connection that sends nothing. Each is closed by its timeout.
    @Test func adminListenerClosesSlowAndIdleConnections() async throws {
        try await ServerProcess.withRunning(yaml: Self.adminTimeouts) { mock in
            let before = mock.residentKiB
            let idle = try await RawClient.connect(port: mock.adminPort, security: .plaintext)
            let noBody = try await RawClient.connect(port: mock.adminPort, security: .plaintext)
            // On a loaded machine the idle timeout (1 s) may already have closed it.
            try? await noBody.send(Array("POST /v1/faults HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"match\"".utf8))
            let slow = try await RawClient.connect(port: mock.adminPort, security: .plaintext)
            let started = ContinuousClock.now
            var sent = 0
            let head = Array("GET /v1/stats HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ".utf8) + [UInt8](repeating: 0x61, count: 100)
            while sent < head.count, ContinuousClock.now - started < .seconds(6) {
                guard (try? await slow.send([head[sent]])) != nil else { break }
                sent += 1
                try await Task.sleep(for: .milliseconds(200))
            }
            for (name, client) in [("idle", idle), ("body never sent", noBody), ("slow headers", slow)] {
                let outcome = await client.waitForClose(timeout: .seconds(5))
                #expect(outcome.closed, "the admin listener kept a connection open: \(name)")
            }
            #expect(ContinuousClock.now - started < .seconds(8))
            let stats = try await mock.admin.request("GET", "/v1/stats")
            #expect(stats.status == 200)
            try await Hostile.expectHealthy(mock, residentBefore: before)
        }
    }

    /// An event stream outlives admin.responseTimeout and admin.idleTimeout (1 s each here): it is
    /// not timed, and goes on delivering records.
    @Test func eventStreamOutlivesTheAdminTimeouts() async throws {
        try await ServerProcess.withRunning(yaml: Self.adminTimeouts) { mock in
            let stream = try await EventSubscribers.subscribe(adminPort: mock.adminPort, "outcome=all")
            let quiet = await stream.waitForClose(timeout: .seconds(3))
            #expect(!quiet.closed, "the event stream was closed by a timeout")
            let response = try await Curl.send(url: "\(mock.baseURL)/3/device/\(Pushes.token)", caPath: mock.caPath)
            #expect(response.status == 200)
            let received = await stream.waitUntil(timeout: .seconds(10)) { String(decoding: $0, as: UTF8.self).contains("\ndata: {") }
            #expect(String(decoding: received, as: UTF8.self).contains("\ndata: {"))
            await stream.close()
        }
    }

    /// A client that asks for a large page of records and never reads it: admin.responseTimeout
    /// after the response's head the connection is closed and the buffered answer freed.
    @Test func adminResponseNobodyReadsIsCutOff() async throws {
        let yaml = "server: { streamsBeforeAuthentication: 100 }\n" + Self.adminTimeouts
        try await ServerProcess.withRunning(yaml: yaml) { mock in
            // 3 KB payloads: a page of 10,000 records is over 30 MB, more than the socket buffers
            // on both sides can hold, however far the kernel grows them.
            let alert = String(repeating: "a record to be listed ", count: 140)
            let load = try await H2Load.push(10000, to: mock.baseURL, token: Pushes.token, payload: #"{"aps":{"alert":"\#(alert)"}}"#)
            #expect(load.allSucceeded(10000), "\(load.text.suffix(400))")
            let before = mock.residentKiB
            let reader = try await RawClient.connect(port: mock.adminPort, security: .plaintext, receiveBuffer: 16384)
            try await reader.stopReading()
            try await reader.send(Array("GET /v1/notifications?limit=10000 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8))
            // Some 40 MB of JSON, built whole before its head goes out (seconds, on a loaded
            // machine); a second after the head the connection is closed. Read again well after
            // that: what was buffered arrives, then the close; a server still waiting would send
            // the whole page and keep the connection open for the next request.
            try await Task.sleep(for: .seconds(12))
            try await reader.resumeReading()
            let outcome = await reader.waitForClose(timeout: .seconds(15))
            #expect(outcome.closed, "the admin listener kept writing to a client that reads nothing")
            // The page was cut short: fewer body bytes than its content-length.
            let text = String(decoding: outcome.received, as: UTF8.self)
            let parts = text.components(separatedBy: "\r\n\r\n")
            let length = parts.first?.split(separator: "\r\n")
                .first { $0.lowercased().hasPrefix("content-length:") }
                .flatMap { Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) }
            let body = outcome.received.count - (parts.first?.utf8.count ?? 0) - 4
            #expect(length != nil && body < length!, "the whole page (\(body) of \(length ?? -1) bytes) was sent")
            await reader.close()
            // The page (some 40 MB of JSON) was built whole before it went out; once it is
            // dropped, its memory is handed back to the system (MemoryReturn), a second later.
            try await Task.sleep(for: .seconds(2))
            try await Hostile.expectHealthy(mock, residentBefore: before, allowanceMiB: 40)
        }
    }

    /// Past admin.maxConnections a new admin connection is closed at once.
    @Test func adminConnectionLimit() async throws {
        try await ServerProcess.withRunning(yaml: "admin: { maxConnections: 4 }\n") { mock in
            let before = mock.residentKiB
            var held: [RawClient] = []
            for _ in 0..<4 {
                held.append(try await RawClient.connect(port: mock.adminPort, security: .plaintext))
            }
            try await Task.sleep(for: .milliseconds(300))
            if let refused = try? await RawClient.connect(port: mock.adminPort, security: .plaintext) {
                let outcome = await refused.waitForClose(timeout: .seconds(3))
                #expect(outcome.closed)
            }
            for client in held { await client.close() }
            try await Task.sleep(for: .milliseconds(300))
            let stats = try await mock.admin.request("GET", "/v1/stats")
            #expect(stats.status == 200)
            try await Hostile.expectHealthy(mock, residentBefore: before)
        }
    }

    // MARK: Out of descriptors, in a process of its own

    /// The APNs listener out of file descriptors (the process's limit lowered under it): accept
    /// fails with EMFILE. The listener pauses instead of retrying at once, which spun a core, and
    /// logs it; once descriptors are free again it serves.
    @Test func apnsListenerBacksOffWhenOutOfDescriptors() async throws {
        try await ServerProcess.withRunning(yaml: "server: { handshakeTimeout: 600 }\n") { server in
            let residentBefore = server.residentKiB
            let lowered = try await server.setDescriptorLimit(64)
            #expect(lowered.exitCode == 0, "\(lowered.stderr)")
            var clients: [RawClient] = []
            for _ in 0..<150 {
                clients.append(try await RawClient.connect(port: server.apnsPort, security: .plaintext))
            }
            try await Task.sleep(for: .seconds(1))
            let cpu = try await server.cpuUse(over: .seconds(3))
            #expect(cpu < 0.5, "the process used \(cpu) s of CPU in 3 s while out of descriptors")
            #expect(server.log.contains("accept failed: pausing the listener"))
            for client in clients { await client.close() }
            let raised = try await server.setDescriptorLimit(4096)
            #expect(raised.exitCode == 0, "\(raised.stderr)")
            try await Task.sleep(for: .milliseconds(500))
            let response = try await Curl.send(url: "\(server.baseURL)/3/device/\(Pushes.token)", caPath: server.certificates.caPath)
            #expect(response.status == 200)
            #expect(server.isAlive)
            #expect(server.residentKiB <= residentBefore + Hostile.residentAllowanceMiB * 1024)
        }
    }

    /// A flood of idle connections to the admin listener in a process with few descriptors: the
    /// connection limit (lowered at start to fit the descriptor limit) refuses what is past it,
    /// the idle timeout frees the rest, and the admin API answers while the flood is still held.
    @Test func adminFloodCannotExhaustDescriptors() async throws {
        try await ServerProcess.withRunning(yaml: "admin: { idleTimeout: 2 }\n", descriptorLimit: 160) { server in
            #expect(server.log.contains("lowered the connection limits"))
            let residentBefore = server.residentKiB
            var flood: [RawClient] = []
            for _ in 0..<300 {
                guard let client = try? await RawClient.connect(port: server.adminPort, security: .plaintext) else { break }
                flood.append(client)
            }
            var healthy = false
            let deadline = ContinuousClock.now + .seconds(15)
            while !healthy, ContinuousClock.now < deadline {
                let output = try await ExternalTool.run("curl", ["-s", "-m", "2", "\(server.adminURL)/healthz"])
                healthy = output.text.contains("ok")
                if !healthy { try await Task.sleep(for: .milliseconds(500)) }
            }
            #expect(healthy, "the admin API did not answer while idle connections were held")
            #expect(server.isAlive)
            #expect(server.openDescriptors < 160)
            for client in flood { await client.close() }
            let response = try await Curl.send(url: "\(server.baseURL)/3/device/\(Pushes.token)", caPath: server.certificates.caPath)
            #expect(response.status == 200)
            #expect(server.residentKiB <= residentBefore + Hostile.residentAllowanceMiB * 1024)
        }
    }

    // MARK: Memory after bursts

    /// Bursts of 1,500 concurrent connections, in a process of its own: resident memory comes
    /// back to within 32 MiB of where it was before them. Without giving the allocator's freed
    /// pages back (malloc_trim after a burst), it stayed some 100 MiB higher.
    @Test func residentMemoryReturnsAfterConnectionBursts() async throws {
        let yaml = "server: { streamsBeforeAuthentication: 10 }\nrecording: { capacity: 1000 }\n"
        try await ServerProcess.withRunning(yaml: yaml) { server in
            func burst() async throws {
                let load = try await H2Load.push(
                    3000, to: "https://127.0.0.1:\(server.apnsPort)", token: Pushes.token, payload: String(decoding: Pushes.body, as: UTF8.self),
                    clients: 1500, streams: 2, threads: 2)
                #expect(load.all2xx(3000), "\(load.text.suffix(600))")
            }
            // Warm up what a first request initialises, then measure.
            let warm = try await Curl.send(url: "\(server.baseURL)/3/device/\(Pushes.token)", caPath: server.certificates.caPath)
            #expect(warm.status == 200)
            let before = server.residentKiB
            var peak = before
            for _ in 0..<4 {
                try await burst()
                peak = max(peak, server.residentKiB)
            }
            // Connections close, then memory is given back a second or more later (at most one
            // trim per ten seconds).
            var after = server.residentKiB
            let deadline = ContinuousClock.now + .seconds(25)
            while after > before + 32 * 1024, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(500))
                after = server.residentKiB
            }
            #expect(
                after <= before + 32 * 1024,
                "resident \(after / 1024) MiB after four bursts (peak \(peak / 1024) MiB), \(before / 1024) MiB before")
            #expect(server.isAlive)
        }
    }
}

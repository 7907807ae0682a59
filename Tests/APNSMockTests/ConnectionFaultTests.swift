@testable import APNSMock
import APNSMockCore
import APNSMockTesting
import Foundation
import Testing

/// Connection-level faults seen from real clients over TLS (docs/admin-api.md, "Testing your
/// client's error handling"): a stream that is never answered, a TCP reset, a shrinking stream
/// limit, unanswered PINGs, and faults aimed at one connection's n-th request. After each, the
/// server still serves a new connection.
@Suite("Connection-level faults", .timeLimit(.minutes(2)))
struct ConnectionFaultTests {
    @Test func hangLeavesOneStreamUnansweredWhileOthersAreServed() async throws {
        try await MockHarness.withRunningMock(configure: H2Connections.configure) { mock in
            try await mock.admin.addFault(json: #"{"match":{"token":"\#(Pushes.token)"},"action":"hang"}"#).expect([201])
            let client = try await H2Connections.connect(mock)
            try await client.send(
                H2.request(stream: 1, token: Pushes.token, body: Pushes.body) + H2.request(stream: 3, token: Pushes.otherToken, body: Pushes.body))
            let answered = await client.waitUntil { Hostile.hasResponse(H2.parse($0), stream: 3) }
            #expect(Hostile.hasResponse(H2.parse(answered), stream: 3))
            // Stream 1 stays unanswered: nothing arrives for it while the client waits.
            let later = await client.waitUntil(timeout: .milliseconds(700)) { bytes in H2.parse(bytes).contains { $0.stream == 1 } }
            #expect(!H2.parse(later).contains { $0.stream == 1 })
            // A client with a timeout gives up on it (RST_STREAM CANCEL); the connection goes on.
            try await client.send(H2.frame(.rstStream, stream: 1, payload: H2.be32(8)) + H2.request(stream: 5, token: Pushes.otherToken, body: Pushes.body))
            let after = await client.waitUntil { Hostile.hasResponse(H2.parse($0), stream: 5) }
            #expect(Hostile.hasResponse(H2.parse(after), stream: 5))
            await client.close()

            // curl with a timeout sees no response at all.
            let curl = try await ExternalTool.run("curl", [
                "-sS", "--http2", "--cacert", mock.caPath, "--max-time", "1", "-H", "apns-topic: com.example.app",
                "-H", "authorization: \(Curl.demoAuthorization ?? "")", "-d", "{}", "\(mock.baseURL)/3/device/\(Pushes.token)",
            ])
            #expect(curl.exitCode == 28)  // operation timed out

            let records = try await mock.admin.notifications(RecordQuery(token: Pushes.token, outcome: .all)).notifications
            #expect(records.map(\.action) == ["hang", "hang"])
            #expect(records.allSatisfy { $0.status == nil && $0.injected })
            try await Hostile.expectStillServing(mock, token: Pushes.otherToken)
        }
    }

    @Test func tcpResetEndsTheConnectionWithoutGoAway() async throws {
        try await MockHarness.withRunningMock(configure: H2Connections.configure) { mock in
            try await mock.admin.addFault(json: #"{"action":"tcp-reset","times":2}"#).expect([201])
            let client = try await H2Connections.connect(mock)
            try await client.send(H2.request(stream: 1, token: Pushes.token, body: Pushes.body))
            let outcome = await client.waitForClose()
            #expect(outcome.closed)
            #expect(outcome.error?.contains("reset") == true, "\(outcome.error ?? "no error")")
            #expect(!H2.parse(outcome.received).contains { $0.goaway != nil || $0.stream == 1 })

            let curl = try await ExternalTool.run("curl", [
                "-sS", "--http2", "--cacert", mock.caPath, "--max-time", "5", "-H", "apns-topic: com.example.app",
                "-H", "authorization: \(Curl.demoAuthorization ?? "")", "-d", "{}", "\(mock.baseURL)/3/device/\(Pushes.token)",
            ])
            #expect(curl.exitCode != 0)
            #expect(curl.stderr.lowercased().contains("reset"), "\(curl.stderr)")
            let records = try await mock.admin.notifications(RecordQuery(outcome: .all)).notifications
            #expect(records.map(\.action) == ["tcp-reset", "tcp-reset"])
            try await Hostile.expectStillServing(mock)
        }
    }

    @Test func shrinkStreamsLowersTheLimitAndRestoresIt() async throws {
        try await MockHarness.withRunningMock(configure: H2Connections.configure) { mock in
            try await mock.admin.addFault(
                json: #"{"action":"shrink-streams","maxConcurrentStreams":1,"durationMs":4000,"times":1}"#).expect([201])
            let client = try await H2Connections.connect(mock)
            try await client.send(H2.request(stream: 1, token: Pushes.token, body: Pushes.body))
            let shrunk = await client.waitUntil { H2Connections.maxConcurrentStreams(in: H2.parse($0)).last == 1 }
            #expect(H2Connections.maxConcurrentStreams(in: H2.parse(shrunk)).last == 1)
            #expect(Hostile.hasResponse(H2.parse(shrunk), stream: 1))  // the request is answered
            // The client acknowledges; a second concurrent stream is then refused.
            let open = H2.headers(
                stream: 3,
                [(":method", "POST"), (":scheme", "https"), (":path", "/3/device/\(Pushes.token)"), (":authority", "localhost"),
                 ("apns-topic", "com.example.app"), ("authorization", Curl.demoAuthorization ?? "")],
                endStream: false)
            try await client.send(H2.frame(.settings, flags: H2.ack) + open + H2.request(stream: 5, token: Pushes.token, body: Pushes.body))
            let refused = await client.waitUntil { bytes in H2.parse(bytes).contains { $0.stream == 5 && $0.rstErrorCode != nil } }
            #expect(H2.parse(refused).first { $0.stream == 5 && $0.rstErrorCode != nil }?.rstErrorCode == HTTP2ErrorCode.refusedStream.rawValue)
            // After durationMs the limit is back. durationMs is long enough that a stalled test
            // process still reads the lowered limit before it is restored.
            let restored = await client.waitUntil(timeout: .seconds(10)) { H2Connections.maxConcurrentStreams(in: H2.parse($0)).last == 1000 }
            #expect(H2Connections.maxConcurrentStreams(in: H2.parse(restored)).suffix(2) == [1, 1000])
            await client.close()
            let record = try #require(try await mock.admin.notifications().notifications.first)
            #expect(record.action == "shrink-streams" && record.status == 200 && record.injected)
            try await Hostile.expectStillServing(mock)
        }
    }

    @Test func ignorePingsWithholdsAcknowledgementsForAWhile() async throws {
        try await MockHarness.withRunningMock(configure: H2Connections.configure) { mock in
            try await mock.admin.addFault(json: #"{"action":"ignore-pings","durationMs":3000,"times":1}"#).expect([201])
            let client = try await H2Connections.connect(mock)
            // The window opens when the request is answered, after this.
            let start = ContinuousClock.now
            try await client.send(H2.request(stream: 1, token: Pushes.token, body: Pushes.body))
            _ = await client.waitUntil { Hostile.hasResponse(H2.parse($0), stream: 1) }
            let first: [UInt8] = [1, 1, 1, 1, 1, 1, 1, 1], second: [UInt8] = [2, 2, 2, 2, 2, 2, 2, 2]
            @Sendable func acks(_ bytes: [UInt8], _ data: [UInt8]) -> Bool {
                H2.parse(bytes).contains { $0.type == H2.FrameType.ping.rawValue && $0.flags == H2.ack && $0.payload == data }
            }
            try await client.send(H2.frame(.ping, payload: first))
            let unanswered = await client.waitUntil(timeout: .milliseconds(500)) { acks($0, first) }
            // A machine so loaded that the window closed before the PING was read cannot tell.
            let withinWindow = ContinuousClock.now - start < .milliseconds(3000)
            if withinWindow {
                #expect(!acks(unanswered, first))
            }
            // Once durationMs has passed, PINGs are answered again.
            try await Task.sleep(until: start + .milliseconds(3200), clock: .continuous)
            try await client.send(H2.frame(.ping, payload: second))
            let answered = await client.waitUntil { acks($0, second) }
            #expect(acks(answered, second))
            if withinWindow {
                #expect(!acks(answered, first), "a PING withheld is never answered late")
            }
            await client.close()
            try await Hostile.expectStillServing(mock)
        }
    }

    /// After a rejection the connection allows one stream, until a request is accepted again.
    @Test func streamLimitFollowsRejectionsWhenConfigured() async throws {
        try await MockHarness.withRunningMock(configure: {
            H2Connections.configure(&$0)
            $0.shrinkStreamsAfterRejection = true
        }) { mock in
            let client = try await H2Connections.connect(mock)
            try await client.send(H2.request(stream: 1, token: "zz", body: Pushes.body))
            let shrunk = await client.waitUntil { H2Connections.maxConcurrentStreams(in: H2.parse($0)).last == 1 }
            #expect(H2Connections.maxConcurrentStreams(in: H2.parse(shrunk)).last == 1)
            try await client.send(H2.frame(.settings, flags: H2.ack) + H2.request(stream: 3, token: Pushes.token, body: Pushes.body))
            let raised = await client.waitUntil { H2Connections.maxConcurrentStreams(in: H2.parse($0)).last == 1000 }
            #expect(H2Connections.maxConcurrentStreams(in: H2.parse(raised)).last == 1000)
            await client.close()
        }
    }

    /// "The second connection's second request gets 503": connections are numbered since start
    /// (or reset), requests per connection.
    @Test func faultsTargetOneConnectionsNthRequest() async throws {
        try await MockHarness.withRunningMock { mock in
            try await mock.admin.addFault(
                json: #"{"match":{"connection":2,"afterRequests":1},"respond":{"reason":"ServiceUnavailable"},"times":1}"#
            ).expect([201])
            let request = ["authorization": Curl.demoAuthorization ?? "", "apns-topic": "com.example.app"]
            let url = "\(mock.baseURL)/3/device/\(Pushes.token)"
            let first = try await Curl.sequence(url: url, caPath: mock.caPath, requests: [request, request])
            let second = try await Curl.sequence(url: url, caPath: mock.caPath, requests: [request, request, request])
            #expect(first.map(\.status) == [200, 200])
            #expect(second.map(\.status) == [200, 503, 200])
            #expect(second.map(\.reason) == [nil, "ServiceUnavailable", nil])
        }
    }

    @Test(arguments: [
        (#"{"action":"explode"}"#, "action"),
        (#"{"action":"shrink-streams"}"#, "maxConcurrentStreams"),
        (#"{"action":"shrink-streams","maxConcurrentStreams":0}"#, "maxConcurrentStreams"),
        (#"{"action":"shrink-streams","maxConcurrentStreams":1001}"#, "maxConcurrentStreams"),
        (#"{"action":"ignore-pings"}"#, "durationMs"),
        (#"{"action":"ignore-pings","durationMs":-5}"#, "durationMs"),
        (#"{"action":"reset","durationMs":5}"#, "durationMs"),
        (#"{"action":"hang","maxConcurrentStreams":5}"#, "maxConcurrentStreams"),
        (#"{"action":"hang","respond":{"reason":"Shutdown"}}"#, "respond"),
        (#"{"match":{"connection":0},"action":"hang"}"#, "match.connection"),
        (#"{"match":{"afterRequests":-1},"action":"hang"}"#, "match.afterRequests"),
    ])
    func badRulesAreRefusedWithTheField(_ body: String, _ field: String) async throws {
        try await MockHarness.withRunningMock { mock in
            let response = try await mock.admin.addFault(json: body)
            #expect(response.status == 400)
            #expect(response.error?.hasPrefix(field) == true, "\(response.error ?? "")")
            #expect(try await mock.admin.faults().faults.isEmpty)
        }
    }
}

/// The TLS trust scenarios `certs init` prepares: what a client that verifies the server sees
/// (docs/configuration.md, `tls.scenario`).
@Suite("TLS trust scenarios", .timeLimit(.minutes(2)))
struct TrustScenarioTests {
    static func serving(_ scenario: Configuration.TLSScenario) -> (inout ServerConfiguration) -> Void {
        { configuration in
            guard let material = try? MockHarness.sharedCertificates() else { return }
            let paths = material.serverPaths(for: scenario)
            configuration.certificatePath = paths.certificate
            configuration.privateKeyPath = paths.key
        }
    }

    static func curl(_ mock: RunningMock, trusting ca: String) async throws -> ExternalTool.Output {
        try await ExternalTool.run("curl", [
            "-sS", "--http2", "--cacert", ca, "--max-time", "10", "-o", "/dev/null", "-w", "%{http_code}",
            "-H", "apns-topic: com.example.app", "-H", "authorization: \(Curl.demoAuthorization ?? "")",
            "-d", #"{"aps":{"alert":"hi"}}"#, "\(mock.baseURL)/3/device/\(String(repeating: "ab", count: 32))",
        ])
    }

    @Test func expiredCertificateIsRefusedByAVerifyingClient() async throws {
        try await MockHarness.withRunningMock(configure: Self.serving(.expired)) { mock in
            let output = try await Self.curl(mock, trusting: mock.caPath)
            #expect(output.exitCode == 60)  // peer certificate cannot be authenticated
            #expect(output.stderr.contains("expired"), "\(output.stderr)")
        }
    }

    @Test func certificateForAnotherHostIsRefused() async throws {
        try await MockHarness.withRunningMock(configure: Self.serving(.wrongHost)) { mock in
            let output = try await Self.curl(mock, trusting: mock.caPath)
            #expect(output.exitCode == 60)
            #expect(output.stderr.contains("subject name"), "\(output.stderr)")
        }
    }

    /// A client that pins the old root fails; one that trusts the new root works.
    @Test func newRootIsTrustedOnlyByClientsThatHaveIt() async throws {
        try await MockHarness.withRunningMock(configure: Self.serving(.newRoot)) { mock in
            let material = try MockHarness.sharedCertificates()
            let old = try await Self.curl(mock, trusting: mock.caPath)
            #expect(old.exitCode == 60)
            let new = try await Self.curl(mock, trusting: material.nextCAPath)
            #expect(new.exitCode == 0, "\(new.stderr)")
            #expect(new.text == "200")
        }
    }

    @Test func scenarioIsAConfigurationSetting() throws {
        #expect(try Configuration.parse(yaml: "tls: { scenario: new-root }", file: "t.yaml").tls.scenario == .newRoot)
        do {
            _ = try Configuration.parse(yaml: "tls: { scenario: broken }", file: "t.yaml")
            Issue.record("accepted an unknown scenario")
        } catch {
            #expect(error.description.contains("tls.scenario"), "\(error.description)")
        }
    }

    @Test func standardCertificateStillWorks() async throws {
        try await MockHarness.withRunningMock { mock in
            let output = try await Self.curl(mock, trusting: mock.caPath)
            #expect(output.text == "200")
        }
    }
}

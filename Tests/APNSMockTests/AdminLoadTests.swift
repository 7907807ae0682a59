@testable import APNSMock
import APNSMockCore
import APNSMockTesting
import Foundation
import Logging
import NIOCore
import Testing

/// Many `/v1/notifications/wait` waiters that no record matches cost the request path and the
/// admin API nothing: a record only wakes the waiters it can match (a waker that woke every waiter
/// for every append would take seconds of both cores for 2,000 waiters and a 20,000-push burst).
///
/// The heavy tests of the admin side (this one and the stalled event-stream subscriber) run one at
/// a time: each measures the process it shares with the mock.
@Suite("Load on the admin listener", .serialized, .timeLimit(.minutes(3)))
struct AdminLoadTests {
    /// The measurements go to standard error, for the report of a run.
    static let logger = Logger(label: "waiter-cost", factory: { StreamLogHandler.standardError(label: $0) })

    /// Process CPU time (user + system) in seconds: the mock runs in this process.
    static func cpuSeconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
            + Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
    }

    /// Opens `count` plain HTTP/1.1 connections to the admin listener, each waiting (300 s, the longest) for a
    /// record of its own token, which no push will carry.
    static func openWaiters(_ count: Int, adminPort: Int) async throws -> [RawClient] {
        // A hundred connects at a time: the admin listener's accept backlog is not the subject here.
        try await withThrowingTaskGroup(of: (Int, RawClient).self) { group in
            var opened: [(Int, RawClient)] = []
            for index in 0..<count {
                if index >= 100, let next = try await group.next() { opened.append(next) }
                group.addTask {
                    let client = try await RawClient.connect(port: adminPort, security: .plaintext)
                    let token = String(format: "%064x", index + 1)
                    try await client.send(Array(
                        "GET /v1/notifications/wait?token=\(token)&timeout=300 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8))
                    return (index, client)
                }
            }
            for try await client in group { opened.append(client) }
            return opened.sorted { $0.0 < $1.0 }.map(\.1)
        }
    }

    @Test func twoThousandUnmatchedWaitersDoNotSlowABurst() async throws {
        try await MockHarness.withRunningMock(configure: { $0.http2.streamsBeforeAuthentication = 1000 }) { mock in
            let records = mock.listener.records
            let waiters = try await Self.openWaiters(2000, adminPort: mock.adminPort)
            defer { Task { for waiter in waiters { await waiter.close() } } }
            // Every waiter has sent its request; wait until the admin listener parked them all.
            let parked = ContinuousClock.now
            while records.subscriberCount < 2000, ContinuousClock.now - parked < .seconds(30) {
                try await Task.sleep(for: .milliseconds(50))
            }
            #expect(records.subscriberCount == 2000)

            let cpuBefore = Self.cpuSeconds()
            let started = ContinuousClock.now
            let load = try await H2Load.push(20000, to: mock.baseURL, token: Pushes.token, payload: #"{"aps":{"alert":"burst"}}"#, timeout: 90)
            #expect(load.allSucceeded(20000), "\(load.text) \(load.output.stderr)")
            let statsStarted = ContinuousClock.now
            let stats = try await mock.admin.stats()
            let statsTook = ContinuousClock.now - statsStarted
            // Whatever the waiters still cost after the burst shows up here too.
            let settle = ContinuousClock.now
            _ = try await mock.admin.notifications(RecordQuery(limit: 1))
            let queryTook = ContinuousClock.now - settle
            let elapsed = ContinuousClock.now - started
            let cpu = Self.cpuSeconds() - cpuBefore
            #expect(stats.accepted == 20000)
            Self.logger.info(
                "2000 unmatched waiters, 20000-push burst: \(elapsed) wall, \(cpu) s CPU of this process, /v1/stats took \(statsTook), a query \(queryTook)")
            // No waiter was even looked at: the index finds none for these records.
            #expect(records.dispatchCounts.checked == 0)
            #expect(records.dispatchCounts.handed == 0)
            // Alone, this takes about 1 s of CPU (TLS, HTTP/2, recording) and /v1/stats a few
            // milliseconds; the bounds leave room for other suites running at the same time.
            #expect(statsTook < .seconds(3))
            #expect(queryTook < .seconds(3))
            #expect(elapsed < .seconds(60))

            // The waiters still work: the first one's token gets a push and its waiter answers.
            let first = String(format: "%064x", 1)
            _ = try await Curl.send(url: "\(mock.baseURL)/3/device/\(first)", caPath: mock.caPath)
            let answer = String(decoding: await waiters[0].waitUntil(timeout: .seconds(60)) { bytes in
                String(decoding: bytes, as: UTF8.self).contains("\"notifications\"")
            }, as: UTF8.self)
            #expect(answer.hasPrefix("HTTP/1.1 200"))
            #expect(answer.contains(first))
            #expect(records.dispatchCounts.handed == 1)
            // The others are still waiting.
            #expect(waiters.dropFirst().allSatisfy { $0.received.isEmpty })
        }
    }

    /// A subscriber that reads nothing while thousands of records arrive: the mock's memory stays
    /// flat (the stream buffers at most its 1024 records), the pushes are not slowed, and when the
    /// subscriber reads again every record is either delivered or counted as skipped. The mock runs
    /// as its own process, so that its resident memory is not the test process's, which the suites
    /// running beside this one move by tens of MB.
    @Test func stalledSubscriberSkipsInsteadOfGrowing() async throws {
        let yaml = "server: { streamsBeforeAuthentication: 1000 }\nrecording: { capacity: 5000 }\n"
        try await ServerProcess.withRunning(yaml: yaml) { mock in
            let body = #"{"aps":{"alert":{"title":"load","body":"\#(String(repeating: "x", count: 1500))"}}}"#
            func burst(_ count: Int) async throws {
                let load = try await H2Load.push(count, to: mock.baseURL, token: Pushes.token, payload: body, clients: 2)
                #expect(load.allSucceeded(count), "\(load.text)")
            }
            // Fill the ring and warm the allocator first, so that what grows later is the stream's.
            try await burst(10000)
            let stalled = try await EventSubscribers.subscribe(adminPort: mock.adminPort, "outcome=all")
            try await stalled.stopReading()
            let before = mock.residentKiB * 1024
            let started = ContinuousClock.now
            try await burst(30000)
            let burstTook = ContinuousClock.now - started
            let after = mock.residentKiB * 1024
            // 30,000 records of ~2 KB JSON would be 60 MB if the stream kept them.
            #expect(after - before < 25 << 20, "RSS grew from \(before >> 20) MB to \(after >> 20) MB")
            #expect(burstTook < .seconds(60))

            try await stalled.resumeReading()
            let accounted: @Sendable ([UInt8]) -> Int = { bytes in
                let events = SSEEvent.parse(http: bytes).events
                let skipped = events.filter { $0.event == "skipped" }.compactMap { EventSubscribers.skippedCount($0) }.reduce(0, +)
                return events.filter { $0.event == "message" }.count + skipped
            }
            _ = await stalled.waitUntil(timeout: .seconds(60)) { accounted($0) >= 30000 }
            // Once it has caught up, the stream goes on with the next record.
            let last = try await Curl.send(url: "\(mock.baseURL)/3/device/\(Pushes.otherToken)", caPath: mock.caPath)
            #expect(last.status == 200)
            let received = await stalled.waitUntil(timeout: .seconds(60)) { accounted($0) >= 30001 }
            await stalled.close()
            let events = SSEEvent.parse(http: received).events
            let delivered = events.filter { $0.event == "message" }
            let skips = events.filter { $0.event == "skipped" }
            let skipped = skips.compactMap { EventSubscribers.skippedCount($0) }.reduce(0, +)
            #expect(skipped > 0)
            #expect(delivered.count + skipped == 30001, "delivered \(delivered.count), skipped \(skipped)")
            Self.logger.info(
                "stalled subscriber, 30000-push burst: RSS \(before >> 20) MB before, \(after >> 20) MB after, burst \(burstTook); then \(delivered.count) records delivered, \(skipped) skipped in \(skips.count) reports")
            #expect(delivered.last?.record?.token == Pushes.otherToken)
            // Delivered records come in seq order.
            let seqs = delivered.compactMap { $0.id.flatMap(UInt64.init) }
            #expect(seqs == seqs.sorted())
        }
    }
}

extension AdminLoadTests {
    /// A ring far smaller than a burst: records the ring evicts before the dispatcher reads them
    /// are counted as skipped on the event stream, so every record of the burst is either
    /// delivered or counted.
    @Test func recordsEvictedBeforeDispatchAreCountedAsSkipped() async throws {
        try await MockHarness.withRunningMock(configure: {
            $0.http2.streamsBeforeAuthentication = 1000
            $0.recordingCapacity = 8
        }) { mock in
            let stream = try await EventSubscribers.subscribe(mock, "outcome=all")
            let load = try await H2Load.push(
                20000, to: mock.baseURL, token: Pushes.token, payload: #"{"aps":{"alert":"evicted before dispatch"}}"#, clients: 4)
            #expect(load.allSucceeded(20000), "\(load.text)")
            let accounted: @Sendable ([UInt8]) -> Int = { bytes in
                let events = SSEEvent.parse(http: bytes).events
                let skipped = events.filter { $0.event == "skipped" }.compactMap { EventSubscribers.skippedCount($0) }.reduce(0, +)
                return events.filter { $0.event == "message" }.count + skipped
            }
            let received = await stream.waitUntil(timeout: .seconds(60)) { accounted($0) >= 20000 }
            await stream.close()
            #expect(accounted(received) == 20000)
            let events = SSEEvent.parse(http: received).events
            // Skip reports name seqs in order, none twice: the counts add up to the burst exactly.
            let delivered = events.filter { $0.event == "message" }.compactMap { $0.id.flatMap(UInt64.init) }
            #expect(delivered == delivered.sorted())
            #expect(Set(delivered).count == delivered.count)
        }
    }
}

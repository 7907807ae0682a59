@testable import APNSMock
import APNSMockCore
import APNSMockTesting
import Logging
import NIOCore
import NIOEmbedded
import NIOPosix
import Synchronization
import Testing

/// A shared state whose fault claims the test decides: it grants each key's firings until `times`
/// were granted (counted under a lock, as the database's conditional update would), or answers
/// `nil` (the database unreachable), or holds every claim until ``release()``. Records go nowhere.
final class FakeSharedState: SharedStateEngine {
    enum Mode: Sendable {
        /// Answers at once, granting while firings are left.
        case grant
        /// Answers `nil` at once.
        case unreachable
        /// Answers when the test calls ``release()``, granting then.
        case hold
        /// Answers a millisecond later, on the loop it was given, granting then.
        case later
    }

    private struct Counts {
        var mode: Mode
        var granted: [String: Int] = [:]
        var claims: [String] = []
        var held: [(key: String, times: Int, promise: EventLoopPromise<Bool?>)] = []
    }

    private let counts: Mutex<Counts>
    let queueCapacity = 10_000

    init(_ mode: Mode = .grant) {
        counts = Mutex(Counts(mode: mode))
    }

    func clearRecords(team: String?) {}
    func tokenExpired(team: String, tokenId: String, offset: Int64) {}
    func channelCreated(_ channel: BroadcastChannel) {}
    func channelDeleted(_ channel: BroadcastChannel) {}

    func claimFault(key: String, times: Int, on loop: any EventLoop) -> EventLoopFuture<Bool?> {
        let promise = loop.makePromise(of: Bool?.self)
        let answer: Bool?? = counts.withLock { counts in
            counts.claims.append(key)
            switch counts.mode {
            case .grant: return .some(Self.grant(key, times: times, in: &counts))
            case .unreachable: return .some(nil)
            case .hold:
                counts.held.append((key, times, promise))
                return nil
            case .later:
                return nil
            }
        }
        if case .later = counts.withLock({ $0.mode }) {
            loop.scheduleTask(in: .milliseconds(1)) {
                promise.succeed(self.counts.withLock { Self.grant(key, times: times, in: &$0) })
            }
        }
        if let answer { promise.succeed(answer) }
        return promise.futureResult
    }

    /// Claims one firing of `key` at once, as ``claimFault(key:times:on:)`` does in `grant` mode.
    func claim(_ key: String, times: Int) -> Bool {
        counts.withLock { counts in
            counts.claims.append(key)
            return Self.grant(key, times: times, in: &counts)
        }
    }

    private static func grant(_ key: String, times: Int, in counts: inout Counts) -> Bool {
        guard counts.granted[key, default: 0] < times else { return false }
        counts.granted[key, default: 0] += 1
        return true
    }

    /// Answers every held claim, in the order they came, granting while firings are left.
    func release() {
        let answers = counts.withLock { counts in
            let held = counts.held
            counts.held = []
            return held.map { ($0.promise, Self.grant($0.key, times: $0.times, in: &counts)) }
        }
        for (promise, granted) in answers { promise.succeed(granted) }
    }

    var claims: [String] { counts.withLock { $0.claims } }
    var heldCount: Int { counts.withLock { $0.held.count } }
}

/// A rule with `times` fires exactly `times` times across replicas when the mock has a shared
/// state: each firing waits for a claim (``FaultClaim``), and the request for the answer.
@Suite("Fault claims")
struct FaultClaimTests {
    static let rule = FaultRule(
        match: .init(token: Pushes.token), respond: Rejection(.serviceUnavailable), times: 2)

    /// The records of a mock with a shared state: this process's queue (``MockState/recording``).
    static func records(_ state: MockState) -> [RawRecord] {
        (1...max(1, state.recording.lastSeq)).compactMap { state.recording.record($0) }
    }

    // MARK: The store

    @Test func keysNameTheScopeTheLogEntryAndTheRule() throws {
        let store = FaultStore([])
        store.add(FaultRule())
        SharedReplay.$entry.withValue(42) { _ = store.add(Self.rule) }
        var claim: FaultClaim?
        let facts = FaultRule.Facts(token: Pushes.token, topic: nil, pushType: nil, connection: 1, requestNumber: 1)
        // The unlimited rule is older, but the claimed one is filed under the token: the oldest
        // candidate wins, and that is the first rule.
        #expect(store.apply(facts, claimScope: "*", claim: &claim) == FaultRule())
        #expect(claim == nil)
        store.removeAll()
        SharedReplay.$entry.withValue(42) { _ = store.add(Self.rule) }
        #expect(store.apply(facts, claimScope: "*", claim: &claim) == Self.rule)
        #expect(claim?.key == "*/42/3")
        // A reset restarts the ids: the log entry that added it tells the new rule 1 from the old
        // (every replica applies the same entries; a count of resets would differ on a replica
        // that replayed a log compacted at a reset).
        SharedReplay.$entry.withValue(50) { store.reset() }
        SharedReplay.$entry.withValue(51) { _ = store.add(Self.rule) }
        claim = nil
        #expect(store.apply(facts, claimScope: "*", claim: &claim) == Self.rule)
        #expect(claim?.key == "*/51/1")
        // Not counted while the claim waits.
        #expect(store.entries.map(\.remaining) == [2])
        #expect(store.entries.map(\.applied) == [0])
    }

    @Test func aSettledClaimCountsHereAndADeniedOneRemovesTheRule() throws {
        let store = FaultStore([Self.rule])
        let facts = FaultRule.Facts(token: Pushes.token, topic: nil, pushType: nil, connection: 1, requestNumber: 1)
        func claim() throws -> FaultClaim {
            var claim: FaultClaim?
            _ = store.apply(facts, claimScope: "*", claim: &claim)
            return try #require(claim)
        }
        let first = try claim()
        #expect(store.settle(first, granted: true))
        #expect(store.entries.map(\.remaining) == [1] && store.entries.map(\.applied) == [1])
        // Another replica took the last firing.
        #expect(!store.settle(try claim(), granted: false))
        #expect(store.count == 0)
        // Granted for a rule gone since: the shared state counted the firing, so it fires.
        #expect(store.settle(first, granted: true))
        // Unanswered for a rule gone since: nothing here says it may fire.
        #expect(!store.settle(first, granted: nil))
    }

    @Test func unansweredClaimsCountDownHere() throws {
        let store = FaultStore([Self.rule])
        let facts = FaultRule.Facts(token: Pushes.token, topic: nil, pushType: nil, connection: 1, requestNumber: 1)
        var fired = 0
        for _ in 0..<4 {
            var claim: FaultClaim?
            guard store.apply(facts, claimScope: "*", claim: &claim) != nil, let claim else { continue }
            if store.settle(claim, granted: nil) { fired += 1 }
        }
        #expect(fired == 2 && store.count == 0)
    }

    // MARK: The pipeline

    @Test func theRequestWaitsForItsClaimAndIsRecordedOnceSettled() throws {
        let engine = FakeSharedState()
        var mock = try PipelineHarness(shared: engine)
        _ = mock.state.faults.add(Self.rule)
        let effects = mock.run(PipelineHarness.devicePush())
        #expect(effects.actions.awaitsClaim && effects.response == nil && effects.recordSeq == 0)
        #expect(mock.state.recording.lastSeq == 0, "not recorded before it is settled")
        #expect(mock.connection.faultClaim == nil)
        let taken = mock.connection.awaitingClaim.take()
        let awaiting = try #require(taken)
        #expect(awaiting.key == "*/0/1" && awaiting.times == 2)
        let settled = awaiting.finish(true, RequestStream(id: 1), &mock.connection)
        #expect(!settled.actions.awaitsClaim)
        #expect(settled.response?.rejection?.reason == .serviceUnavailable)
        let record = try #require(Self.records(mock.state).last)
        #expect(settled.recordSeq == record.seq)
        #expect(record.status == 503 && record.injected && record.responseWritten)
        #expect(record.path == "/3/device/\(Pushes.token)")
        #expect(mock.state.faults.entries.map(\.applied) == [1])
    }

    @Test func aDeniedClaimAnswersTheVerdictsOwnAnswer() throws {
        var mock = try PipelineHarness(shared: FakeSharedState())
        _ = mock.state.faults.add(Self.rule)
        _ = mock.run(PipelineHarness.devicePush())
        let taken = mock.connection.awaitingClaim.take()
        let awaiting = try #require(taken)
        let settled = awaiting.finish(false, RequestStream(id: 1), &mock.connection)
        #expect(settled.response?.status == 200)
        let record = try #require(Self.records(mock.state).last)
        #expect(record.status == 200 && !record.injected && record.responseWritten)
        // Every firing was claimed elsewhere: the rule is gone here too.
        #expect(mock.state.faults.count == 0)
        #expect(!mock.run(PipelineHarness.devicePush()).actions.awaitsClaim)
    }

    @Test func anUnansweredClaimFallsBackToCountingHere() throws {
        var mock = try PipelineHarness(shared: FakeSharedState(.unreachable))
        _ = mock.state.faults.add(Self.rule)
        var statuses: [Int?] = []
        for _ in 0..<3 {
            let effects = mock.run(PipelineHarness.devicePush())
            if let awaiting = mock.connection.awaitingClaim.take() {
                statuses.append(awaiting.finish(nil, RequestStream(id: 1), &mock.connection).response?.status)
            } else {
                statuses.append(effects.response?.status)
            }
        }
        #expect(statuses == [503, 503, 200])
        #expect(Self.records(mock.state).map(\.injected) == [true, true, false])
    }

    @Test func aStreamClosedWhileItsClaimWaitsIsRecordedUnwritten() throws {
        var mock = try PipelineHarness(shared: FakeSharedState())
        _ = mock.state.faults.add(Self.rule)
        _ = mock.run(PipelineHarness.devicePush(), stream: RequestStream(id: 5))
        let taken = mock.connection.awaitingClaim.take()
        let awaiting = try #require(taken)
        _ = awaiting.finish(true, RequestStream(id: 5, isOpen: false), &mock.connection)
        let record = try #require(Self.records(mock.state).last)
        #expect(record.status == 503 && record.injected && !record.responseWritten && record.streamID == 5)
    }

    @Test func aTeamsRuleIsClaimedUnderItsTeam() throws {
        var mock = try PipelineHarness(shared: FakeSharedState())
        let team = try MockHarness.demoTeam().teamId
        let space = try #require(mock.state.teams.space(team))
        _ = space.faults.add(Self.rule)
        _ = mock.run(PipelineHarness.devicePush())
        let taken = mock.connection.awaitingClaim.take()
        let awaiting = try #require(taken)
        #expect(awaiting.key == "\(team)/0/1")
        #expect(awaiting.finish(true, RequestStream(id: 1), &mock.connection).response?.status == 503)
        #expect(space.faults.entries.map(\.applied) == [1])
    }

    @Test func rulesWithoutTimesAndInMemoryRulesAreNotClaimed() throws {
        var shared = try PipelineHarness(shared: FakeSharedState())
        _ = shared.state.faults.add(FaultRule(match: .init(token: Pushes.token), respond: Rejection(.serviceUnavailable)))
        let unlimited = shared.run(PipelineHarness.devicePush())
        #expect(!unlimited.actions.awaitsClaim && unlimited.response?.status == 503)
        var memory = try PipelineHarness()
        _ = memory.state.faults.add(Self.rule)
        let limited = memory.run(PipelineHarness.devicePush())
        #expect(!limited.actions.awaitsClaim && limited.response?.status == 503)
        #expect(memory.connection.awaitingClaim == nil)
    }

    /// Many connections on many threads, one shared state: the rule fires exactly twice, and the
    /// records say which requests it fired on.
    @Test func aRuleFiresExactlyTimesUnderConcurrentRequests() async throws {
        let engine = FakeSharedState()
        let mock = try PipelineHarness(shared: engine)
        _ = mock.state.faults.add(Self.rule)
        let state = mock.state, routes = mock.routes.serving(.apns), context = mock.context
        let statuses = await withTaskGroup(of: [Int].self) { group in
            for _ in 0..<8 {
                group.addTask {
                    var connection = ConnectionMemo(state: state)
                    var statuses: [Int] = []
                    for _ in 0..<50 {
                        connection.requestCount &+= 1
                        connection.readMilliseconds = nil
                        var effects = routes.answer(
                            PipelineHarness.devicePush(), stream: RequestStream(id: 1), context: context,
                            connection: &connection)
                        if let awaiting = connection.awaitingClaim.take() {
                            let granted = engine.claim(awaiting.key, times: awaiting.times)
                            effects = awaiting.finish(granted, RequestStream(id: 1), &connection)
                        }
                        statuses.append(effects.response?.status ?? 0)
                    }
                    return statuses
                }
            }
            return await group.reduce(into: []) { $0 += $1 }
        }
        #expect(statuses.count == 400)
        #expect(statuses.filter { $0 == 503 }.count == 2)
        #expect(statuses.filter { $0 == 200 }.count == 398)
        let records = Self.records(mock.state)
        #expect(records.count == 400)
        #expect(records.filter(\.injected).map(\.status) == [503, 503])
        #expect(mock.state.faults.count == 0)
    }

    // MARK: The connection

    /// A connection driven sans I/O (``EmbeddedTLSClient``) whose mock has `engine` as its shared
    /// state, and whose claims are answered on an embedded event loop.
    struct Connection {
        let mock: SansIOConnectionTests.Mock
        let connection: APNSConnection
        let client: EmbeddedTLSClient
        let loop = EmbeddedEventLoop()

        init(_ engine: FakeSharedState, deliverable: @escaping () -> Bool = { true }) throws {
            var mock = try SansIOConnectionTests.Mock()
            var configuration = ServerConfiguration()
            configuration.teams = [try MockHarness.demoTeam()]
            mock.state = MockState(
                configuration: configuration, parts: .inMemory(configuration),
                tokenKeys: try TokenKeys.load(configuration.teams), shared: engine)
            mock.routes = Routes(
                configuration: configuration, state: mock.state,
                logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }))
            self.mock = mock
            connection = try mock.connection()
            let loop = loop
            let connection = connection
            connection.claimWaiter = { claim, then in
                claim(loop).assumeIsolated().whenComplete { result in
                    then((try? result.get()) ?? nil, deliverable())
                }
            }
            client = try EmbeddedTLSClient(to: connection, caPath: mock.material.caPath)
            client.send(H2.preface + H2.settings())
            // A push to another device: its accepted token lifts the one-stream limit.
            client.send(Self.push(stream: 1, token: String(repeating: "cd", count: 32)))
        }

        static func push(stream: UInt32, token: String = Pushes.token) -> [UInt8] {
            SansIOConnectionTests.request(stream: stream, path: "/3/device/\(token)", extra: [("apns-topic", "com.example.app")])
        }

        func status(_ stream: UInt32) -> String? {
            SansIOConnectionTests.response(client, stream: stream)?[":status"]
        }

        var records: [RawRecord] { FaultClaimTests.records(mock.state) }

        /// Answers the claims `engine` holds, and moves what the connection then sends.
        func release(_ engine: FakeSharedState) {
            engine.release()
            loop.run()
            client.pump()
        }
    }

    @Test func aConnectionHoldsTheAnswersUntilTheClaimsAreAnswered() throws {
        let engine = FakeSharedState(.hold)
        let test = try Connection(engine)
        _ = test.mock.state.faults.add(Self.rule)
        let streams: [UInt32] = [3, 5, 7, 9, 11]
        test.client.send(streams.flatMap { Connection.push(stream: $0) })
        #expect(engine.heldCount == 5)
        #expect(streams.allSatisfy { test.status($0) == nil }, "no answer before the claims are answered")
        #expect(test.records.count == 1, "only the first push is recorded")
        test.release(engine)
        #expect(streams.map { test.status($0) } == ["503", "503", "200", "200", "200"])
        let records = test.records.dropFirst()
        #expect(records.map(\.status) == [503, 503, 200, 200, 200])
        #expect(records.map(\.injected) == [true, true, false, false, false])
        #expect(records.map(\.responseWritten) == [true, true, true, true, true])
        #expect(test.mock.state.faults.count == 0)
    }

    @Test func aStreamResetWhileItsClaimWaitsLeavesATruthfulRecord() throws {
        let engine = FakeSharedState(.hold)
        let test = try Connection(engine)
        _ = test.mock.state.faults.add(Self.rule)
        test.client.send(Connection.push(stream: 3))
        #expect(engine.heldCount == 1)
        // RST_STREAM CANCEL from the client.
        test.client.send(H2.frame(.rstStream, stream: 3, payload: H2.be32(8)))
        test.release(engine)
        #expect(test.status(3) == nil)
        let record = try #require(test.records.last)
        #expect(record.streamID == 3 && record.status == 503 && record.injected && !record.responseWritten)
        // The claim was granted: the rule fired once here.
        #expect(test.mock.state.faults.entries.map(\.remaining) == [1])
    }

    @Test func aConnectionEndedWhileItsClaimWaitsLeavesATruthfulRecord() throws {
        let engine = FakeSharedState(.hold)
        let closing = Mutex(false)
        let test = try Connection(engine, deliverable: { closing.withLock { !$0 } })
        _ = test.mock.state.faults.add(Self.rule)
        test.client.send(Connection.push(stream: 3))
        closing.withLock { $0 = true }
        test.release(engine)
        #expect(test.status(3) == nil)
        let record = try #require(test.records.last)
        #expect(record.streamID == 3 && record.status == 503 && !record.responseWritten)
    }

    @Test func aConnectionWithoutAWaiterCountsDownHere() throws {
        let engine = FakeSharedState(.hold)
        let test = try Connection(engine)
        test.connection.claimWaiter = nil
        _ = test.mock.state.faults.add(Self.rule)
        test.client.send([3, 5, 7].flatMap { Connection.push(stream: $0) })
        #expect(engine.heldCount == 0)
        #expect([3, 5, 7].map { test.status($0) } == ["503", "503", "200"])
        #expect(test.records.dropFirst().map(\.responseWritten) == [true, true, true])
    }

    /// The channel handler's side, on real sockets and event loops: h2load's connections on two
    /// threads, claims answered a millisecond later on each connection's loop.
    @Test(.timeLimit(.minutes(1)))
    func aRuleFiresExactlyTimesUnderLoadThroughTheChannelHandler() async throws {
        let engine = FakeSharedState(.later)
        var configuration = try MockHarness.configuration()
        // h2load opens its streams before the first token is accepted, and retries none refused.
        configuration.http2.streamsBeforeAuthentication = 100
        let state = MockState(
            configuration: configuration, parts: .inMemory(configuration),
            tokenKeys: try TokenKeys.load(configuration.teams), shared: engine)
        _ = state.faults.add(Self.rule)
        let logger = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
        let routes = Routes(configuration: configuration, state: state, logger: logger).serving(.apns)
        let tls = try TLSContext(
            certificateChainPath: configuration.certificatePath, privateKeyPath: configuration.privateKeyPath,
            clientCAPath: configuration.clientCAPath)
        let timeouts = ConnectionTimeouts(configuration), settings = configuration.http2
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 2)
        let listener = try await ServerBootstrap(group: group)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let id = state.connections.opened(limit: .max) ?? 0
                    let connection = try APNSConnection(
                        id: id, tlsContext: tls, settings: settings, routes: routes, logger: logger)
                    try channel.pipeline.syncOperations.addHandler(
                        APNSChannelHandler(connection: connection, timeouts: timeouts, logger: logger))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        let port = try #require(listener.localAddress?.port)
        let run = try await H2Load.push(
            400, to: "https://localhost:\(port)", token: Pushes.token, clients: 4, streams: 20, threads: 2, timeout: 50)
        try await listener.close()
        try await group.shutdownGracefully()
        // h2load counts only 2xx answers as succeeded.
        #expect(run.text.contains("400 done, 398 succeeded, 2 failed, 0 errored"), "\(run.text)")
        #expect(run.text.contains("398 2xx") && run.text.contains("2 5xx"), "\(run.text)")
        let records = Self.records(state)
        #expect(records.count == 400)
        #expect(records.filter(\.injected).map(\.status) == [503, 503])
        #expect(records.filter(\.responseWritten).count == 400)
        #expect(engine.claims.count >= 2 && state.faults.count == 0)
    }
}

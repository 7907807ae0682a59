import APNSMock
import Foundation
import Histogram
import Logging
import NIOCore
import NIOHPACK
import NIOPosix
import NIOSSL
import Synchronization

/// Signs the provider token and signs it again before it gets old, so that runs longer than
/// an hour keep working (APNs refuses a token older than an hour; it refuses one renewed more
/// often than every 20 minutes too).
final class ProviderTokenSource: Sendable {
    static let renewalAge = 50 * 60

    private let pem: String
    private let teamID: String
    private let keyID: String
    private let current: Mutex<(header: String, issuedAt: Int)>

    init(pem: String, teamID: String, keyID: String, now: Int = Int(Date().timeIntervalSince1970)) throws {
        self.pem = pem
        self.teamID = teamID
        self.keyID = keyID
        let token = try ProviderTokenSigner.token(keyPEM: pem, teamID: teamID, keyID: keyID, issuedAt: now)
        current = Mutex(("bearer " + token, now))
    }

    /// The `authorization` header value.
    func authorization() -> String {
        current.withLock { current in
            let now = Int(Date().timeIntervalSince1970)
            if now - current.issuedAt >= Self.renewalAge,
               let token = try? ProviderTokenSigner.token(keyPEM: pem, teamID: teamID, keyID: keyID, issuedAt: now) {
                current = ("bearer " + token, now)
            }
            return current.header
        }
    }
}

/// Builds the push with index `i` of a run: the device is chosen round-robin, everything else is
/// the same for every push.
struct PushFactory: Sendable {
    var paths: [String]
    var authority: String
    var token: ProviderTokenSource?
    /// `apns-*` headers, in order.
    var headers: [(String, String)]
    var body: ByteBuffer

    func push(_ index: Int) -> OutgoingPush {
        var fields = HPACKHeaders()
        fields.reserveCapacity(5 + headers.count)
        fields.add(name: ":method", value: "POST")
        fields.add(name: ":scheme", value: "https")
        fields.add(name: ":path", value: paths[index % paths.count])
        fields.add(name: ":authority", value: authority)
        if let token {
            fields.add(name: "authorization", value: token.authorization())
        }
        for (name, value) in headers {
            fields.add(name: name, value: value)
        }
        return OutgoingPush(headers: fields, body: body)
    }
}

/// The pushes of a run, shared by every connection: each takes the next index until all are
/// taken.
final class SendBudget: Sendable {
    let total: Int
    private let taken = Atomic<Int>(0)
    /// Pushes answered or given up on.
    let finished = Atomic<Int>(0)
    /// Set when the run gave up waiting (`--timeout`): nothing more is sent.
    let timedOut = Atomic<Bool>(false)

    init(total: Int) {
        self.total = total
    }

    func take() -> Int? {
        guard !timedOut.load(ordering: .relaxed) else { return nil }
        let index = taken.wrappingAdd(1, ordering: .relaxed).oldValue
        return index < total ? index : nil
    }

    var untaken: Int { max(0, total - taken.load(ordering: .relaxed)) }
}

/// What a run saw: per push when asked to keep them, else counts and latencies.
struct SendTally: Sendable {
    /// Latency of answered pushes, in microseconds.
    var latency = Histogram<UInt64>(highestTrackableValue: 3_600_000_000, numberOfSignificantValueDigits: .three)
    /// `200`, `400 BadDeviceToken`, `no response: …` → count.
    var outcomes: [String: Int] = [:]
    var answered = 0
    var rejected = 0
    var failed = 0
    /// (index, outcome) of every push, when the run keeps them.
    var details: [(Int, PushOutcome)] = []

    mutating func record(_ index: Int, _ outcome: PushOutcome, microseconds: UInt64, keep: Bool) {
        switch outcome {
        case .response(let response):
            answered += 1
            if response.status != 200 { rejected += 1 }
            _ = latency.record(max(1, microseconds))
            outcomes[Self.key(response), default: 0] += 1
        case .failed(let failure):
            failed += 1
            outcomes["no response: \(failure.description)", default: 0] += 1
        }
        if keep { details.append((index, outcome)) }
    }

    mutating func add(_ other: SendTally) {
        latency.add(other.latency)
        outcomes.merge(other.outcomes, uniquingKeysWith: +)
        answered += other.answered
        rejected += other.rejected
        failed += other.failed
        details += other.details
    }

    static func key(_ response: ProviderAnswer) -> String {
        if let reason = response.reason { return "\(response.status) \(reason)" }
        return "\(response.status)"
    }
}

/// A push refused before the server looked at it, to be sent again.
struct Retry: Sendable {
    var index: Int
    var attempts: Int
    /// Why the last try failed; `nil` before the first.
    var failure: PushFailure?
}

/// The pushes one connection sends: up to `slots` streams at once, the first alone (until the
/// server has seen a valid token it allows one stream, as APNs does). Lives on the connection's
/// event loop.
final class Lane {
    static let maximumAttempts = 3

    private let connection: ProviderConnection
    private let budget: SendBudget
    private let factory: PushFactory
    private let slots: Int
    private let keepDetails: Bool
    private var retries: [Retry]
    private var tally = SendTally()
    private var inFlight = 0
    private var warmedUp = false
    private var closed = false
    private let done: EventLoopPromise<(SendTally, [Retry])>

    init(connection: ProviderConnection, budget: SendBudget, factory: PushFactory, slots: Int, retries: [Retry], keepDetails: Bool) {
        self.connection = connection
        self.budget = budget
        self.factory = factory
        self.slots = slots
        self.retries = retries
        self.keepDetails = keepDetails
        done = connection.eventLoop.makePromise()
    }

    /// Sends until the budget is used up or the connection ends; the tally of what it sent and
    /// the pushes to send again on another connection.
    func run() -> EventLoopFuture<(SendTally, [Retry])> {
        connection.channel.closeFuture.assumeIsolated().whenComplete { [self] _ in
            closed = true
        }
        fill()
        return done.futureResult
    }

    private func fill() {
        let limit = warmedUp ? slots : 1
        while !closed, connection.channel.isActive, !connection.isGoingAway, inFlight < limit, let next = nextPush() {
            send(next)
        }
        if inFlight == 0 {
            done.succeed((tally, retries))
        }
    }

    private func nextPush() -> Retry? {
        if !retries.isEmpty, !budget.timedOut.load(ordering: .relaxed) {
            return retries.removeFirst()
        }
        return budget.take().map { Retry(index: $0, attempts: 0, failure: nil) }
    }

    private func send(_ item: Retry) {
        inFlight += 1
        let started = NIODeadline.now()
        let completion = connection.eventLoop.makePromise(of: PushOutcome.self)
        connection.send(factory.push(item.index), completion: completion)
        completion.futureResult.assumeIsolated().whenSuccess { [self] outcome in
            inFlight -= 1
            complete(item, outcome, started: started)
            fill()
        }
    }

    private func complete(_ item: Retry, _ outcome: PushOutcome, started: NIODeadline) {
        var outcome = outcome
        if case .failed(var failure) = outcome {
            if budget.timedOut.load(ordering: .relaxed) {
                failure = PushFailure(kind: .timedOut, description: "timed out")
                outcome = .failed(failure)
            } else if failure.kind == .refused, item.attempts + 1 < Self.maximumAttempts {
                retries.append(Retry(index: item.index, attempts: item.attempts + 1, failure: failure))
                return
            }
        } else {
            warmedUp = true
        }
        let elapsed = (NIODeadline.now() - started).nanoseconds / 1000
        tally.record(item.index, outcome, microseconds: UInt64(max(0, elapsed)), keep: keepDetails)
        budget.finished.wrappingAdd(1, ordering: .relaxed)
    }
}

/// How a run is shaped.
struct SendJob: Sendable {
    var target: SendTarget
    var tls: NIOSSLContext
    var factory: PushFactory
    var count: Int
    var concurrency: Int
    var connections: Int
    var timeout: TimeAmount
    var keepDetails: Bool
    var progress: Bool
}

struct SendResult: Sendable {
    var tally: SendTally
    var seconds: Double
    /// Pushes never sent: the run timed out, or every connection of their lane failed.
    var unsent: Int
    var timedOut: Bool
}

enum SendRunner {
    /// Runs `job`. Throws ``ConnectFailure`` when a first connection cannot be made.
    static func run(_ job: SendJob, logger: Logger) async throws -> SendResult {
        let budget = SendBudget(total: job.count)
        let group = MultiThreadedEventLoopGroup.singleton
        let live = LiveConnections()
        let clock = ContinuousClock()
        let start = clock.now

        let tally = try await withThrowingTaskGroup(of: SendTally?.self) { tasks in
            tasks.addTask {
                await monitor(budget: budget, timeout: job.timeout, progress: job.progress, live: live)
                return nil
            }
            for lane in 0..<job.connections {
                let slots = job.concurrency / job.connections + (lane < job.concurrency % job.connections ? 1 : 0)
                tasks.addTask {
                    try await runLane(job, slots: slots, budget: budget, group: group, live: live, logger: logger)
                }
            }
            var total = SendTally()
            var lanesLeft = job.connections
            do {
                while lanesLeft > 0, let next = try await tasks.next() {
                    guard let lane = next else { continue }
                    total.add(lane)
                    lanesLeft -= 1
                }
            } catch {
                budget.timedOut.store(true, ordering: .relaxed)
                live.closeAll()
                tasks.cancelAll()
                throw error
            }
            tasks.cancelAll()
            return total
        }
        let elapsed = clock.now - start
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        if job.progress { Progress.clear() }
        return SendResult(
            tally: tally, seconds: seconds, unsent: job.count - tally.answered - tally.failed,
            timedOut: budget.timedOut.load(ordering: .relaxed))
    }

    /// One connection's share of the run: reconnects when the server closes the connection,
    /// gives up after three connections in a row that got nothing answered.
    private static func runLane(
        _ job: SendJob, slots: Int, budget: SendBudget, group: any EventLoopGroup,
        live: LiveConnections, logger: Logger
    ) async throws -> SendTally {
        var tally = SendTally()
        var retries: [Retry] = []
        var fruitless = 0
        var first = true
        while !budget.timedOut.load(ordering: .relaxed), !retries.isEmpty || budget.untaken > 0 {
            let connection: ProviderConnection
            do {
                connection = try await ProviderConnection.connect(to: job.target, tls: job.tls, group: group, timeout: job.timeout)
            } catch {
                if first { throw error }
                logger.warning("\(error.description)")
                break
            }
            first = false
            logger.debug("connected to \(job.target.dialDescription)")
            live.add(connection)
            let keep = job.keepDetails
            let carried = retries
            let (part, left) = try await connection.eventLoop.flatSubmit {
                Lane(connection: connection, budget: budget, factory: job.factory, slots: slots, retries: carried, keepDetails: keep).run()
            }.get()
            connection.close()
            live.remove(connection)
            let answered = part.answered
            tally.add(part)
            retries = left
            if !retries.isEmpty || budget.untaken > 0 {
                logger.debug("connection to \(job.target.dialDescription) ended; \(retries.count) pushes to send again")
            }
            fruitless = answered == 0 ? fruitless + 1 : 0
            if fruitless >= 3 { break }
        }
        for retry in retries {
            let failure = retry.failure ?? PushFailure(kind: .other, description: "not sent")
            tally.record(retry.index, .failed(failure), microseconds: 0, keep: job.keepDetails)
            budget.finished.wrappingAdd(1, ordering: .relaxed)
        }
        return tally
    }

    /// Every 100 ms: redraws the progress bar and gives up when nothing was answered for
    /// `timeout` (closing the connections ends the pushes in flight).
    private static func monitor(
        budget: SendBudget, timeout: TimeAmount, progress: Bool, live: LiveConnections
    ) async {
        let clock = ContinuousClock()
        let start = clock.now
        var lastChange = start
        var lastFinished = -1
        let limit = Duration.nanoseconds(timeout.nanoseconds)
        while !Task.isCancelled {
            try? await Task.sleep(for: .milliseconds(100))
            if Task.isCancelled { break }
            let finished = budget.finished.load(ordering: .relaxed)
            let now = clock.now
            if finished != lastFinished {
                lastFinished = finished
                lastChange = now
            } else if now - lastChange >= limit, !budget.timedOut.load(ordering: .relaxed) {
                budget.timedOut.store(true, ordering: .relaxed)
                live.closeAll()
            }
            if progress {
                Progress.draw(done: finished, total: budget.total, elapsed: now - start)
            }
        }
    }
}

/// The progress bar on standard error (drawn only when it is a terminal).
enum Progress {
    static var isTerminal: Bool { isatty(STDERR_FILENO) == 1 }

    static func draw(done: Int, total: Int, elapsed: Duration) {
        let width = 30
        let fraction = total == 0 ? 1 : Double(done) / Double(total)
        let filled = min(width, Int(fraction * Double(width)))
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        let rate = seconds > 0 ? Double(done) / seconds : 0
        let bar = String(repeating: "#", count: filled) + String(repeating: "-", count: width - filled)
        let line = "\r\u{1B}[2K[\(bar)] \(done)/\(total) \(Int(fraction * 100))% \(Int(rate)) req/s"
        FileHandle.standardError.write(Data(line.utf8))
    }

    static func clear() {
        FileHandle.standardError.write(Data("\r\u{1B}[2K".utf8))
    }
}

/// The run's open connections, so that a timeout or a failure can close them all.
final class LiveConnections: Sendable {
    private let connections = Mutex<[ObjectIdentifier: ProviderConnection]>([:])

    func add(_ connection: ProviderConnection) {
        connections.withLock { $0[ObjectIdentifier(connection)] = connection }
    }

    func remove(_ connection: ProviderConnection) {
        connections.withLock { _ = $0.removeValue(forKey: ObjectIdentifier(connection)) }
    }

    func closeAll() {
        for connection in connections.withLock({ Array($0.values) }) { connection.close() }
    }
}

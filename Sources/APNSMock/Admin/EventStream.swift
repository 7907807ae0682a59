import APNSMockCore
import Foundation
import Hummingbird
import NIOCore
import Synchronization

/// `GET /v1/events`: every new record as a Server-Sent Event, as it is stored (docs/admin-api.md,
/// "Event stream").
///
/// Each stream holds a ``Subscription`` of the record store in buffer mode: the store's dispatcher
/// hands it the records its filter matches, at most ``bufferSize`` waiting to be written; what
/// arrives while the buffer is full is skipped and counted, and the stream says so with an
/// `event: skipped`. So a subscriber that reads slowly or not at all costs the request path
/// nothing, and the server at most ``bufferSize`` records per stream, for at most
/// ``maximumStreams`` streams.
final class EventStreams: Sendable {
    /// Records waiting to be written per stream; more are skipped (and reported).
    static let bufferSize = 1024

    /// A stream with `maxRate` writes at most a hundredth of it per 10 ms turn, so it buffers
    /// little more than that (at least 64, for bursts): under load the dispatcher then counts the
    /// surplus as skipped instead of copying records the writer would drop.
    static func bufferSize(maxRate: Int?) -> Int {
        guard let maxRate else { return bufferSize }
        return min(bufferSize, max(64, maxRate / 100))
    }
    /// Streams open at once; one more gets 503.
    static let maximumStreams = 64
    /// A comment line is sent after this long without an event, so that proxies and browsers keep
    /// an idle stream open (and a client that went away is noticed).
    static let keepAliveInterval: Duration = .seconds(15)
    /// A pending skip is reported at most this often while records keep being skipped.
    static let skipReportInterval: Duration = .milliseconds(250)
    /// Records per query while the stream replays what the ring holds after the resume point.
    static let replayPage = 256
    /// The parameters `/v1/events` takes beside ``RecordQuery``'s.
    static let extraParameters: Set<String> = ["maxRate"]
    /// The highest `maxRate`.
    static let maximumRate = 1_000_000

    private let open = Atomic<Int>(0)

    /// Streams open now.
    var count: Int { open.load(ordering: .relaxed) }

    /// Takes one of the ``maximumStreams`` places; false when all are taken.
    func reserve() -> Bool {
        open.increment(below: Self.maximumStreams)
    }

    func release() {
        open.subtract(1, ordering: .acquiringAndReleasing)
    }
}

/// One stream's settings, parsed from its request.
struct EventStreamRequest: Sendable {
    var filter: RecordFilter
    /// Records after this `seq` are sent (those still in the ring first); `nil`: only new ones.
    var resumeAfter: UInt64?
    /// The stream ends after this many records.
    var limit: Int?
    /// At most this many records a second; the rest are skipped.
    var maxRate: Int?

    /// The request's parameters, or the message of a 400 naming the bad one.
    static func parse(parameters: [String: String], lastEventID: String?) -> Result<Self, AdminError> {
        let query: RecordQuery
        do {
            query = try RecordQuery(parameters: parameters, extra: EventStreams.extraParameters)
        } catch {
            return .failure(AdminError(error.message))
        }
        var request = EventStreamRequest(filter: query.filter, resumeAfter: query.since, limit: query.limit)
        if let text = parameters["maxRate"] {
            guard let rate = Int(text), (1...EventStreams.maximumRate).contains(rate) else {
                return .failure(AdminError("maxRate: expected records per second, an integer from 1 to \(EventStreams.maximumRate)"))
            }
            request.maxRate = rate
        }
        // A reconnecting EventSource sends the last id it saw; it wins over the URL's `since`,
        // which still holds where the first connection started.
        if let lastEventID, !lastEventID.isEmpty {
            guard let seq = UInt64(lastEventID) else {
                return .failure(AdminError("Last-Event-ID: expected a seq (an integer from 0 to \(UInt64.max))"))
            }
            request.resumeAfter = seq
        }
        return .success(request)
    }
}

/// Writes one stream: the replay, then live records, skips and keep-alives, until the client goes
/// away, the `limit` is reached or the server shuts down.
struct EventStreamWriter: Sendable {
    let records: RecordStore
    let validator: Validator
    let request: EventStreamRequest

    func run(_ writer: inout any ResponseBodyWriter) async throws {
        let subscription = Subscription(filter: request.filter, mode: .buffer(EventStreams.bufferSize(maxRate: request.maxRate)))
        let since = request.resumeAfter ?? records.lastSeq
        let threshold = records.subscribe(subscription, after: since)
        defer { records.unsubscribe(subscription) }
        // A client that goes away ends the stream now, not at the next write.
        let peer = AdminPeer.current
        peer?.whenGone { subscription.wake() }
        defer { peer?.whenGone(nil) }
        var state = State(limit: request.limit, maxRate: request.maxRate)

        // Opens the stream at once, so that a client knows it is subscribed; `retry` is how long
        // an EventSource waits before it reconnects.
        try await writer.write(ByteBuffer(string: ": apns-mock events\nretry: 2000\n\n"))

        var cursor = since
        var tries = 0
        while cursor < threshold, !state.done {
            let (found, next) = records.query(
                since: cursor, filter: request.filter, limit: EventStreams.replayPage, through: threshold)
            if next == cursor {
                // Only a DELETE in progress stops a replay short (records up to the threshold were
                // stored); it is over in microseconds.
                tries += 1
                if tries > 100 { break }
                await Task.yield()
                continue
            }
            cursor = next
            try await write(found, skipped: nil, state: &state, to: &writer)
        }

        while !state.done {
            // Checked each turn: a close that came while a batch was written has no wake left.
            if peer?.isGone == true { return }
            var deadline = ContinuousClock.now + EventStreams.keepAliveInterval
            if state.pendingSkip != nil {
                deadline = min(deadline, state.lastSkipReport + EventStreams.skipReportInterval)
            }
            await subscription.waitUntilReady(deadline: deadline)
            if peer?.isGone == true { return }
            let batch = subscription.take()
            if !batch.notices.isEmpty {
                var buffer = ByteBuffer()
                for notice in batch.notices {
                    let (event, data): (String, Data?)
                    switch notice {
                    case .refusedStreams(let refused): (event, data) = ("refused-streams", try? AdminAPI.encoder.encode(refused))
                    case .goAway(let goAway): (event, data) = ("goaway", try? AdminAPI.encoder.encode(goAway))
                    }
                    buffer.writeString("event: \(event)\ndata: ")
                    buffer.writeBytes(data ?? Data("null".utf8))
                    buffer.writeString("\n\n")
                }
                try await writer.write(buffer)
            }
            if batch.records.isEmpty, batch.skipped == 0, !batch.closed {
                if let skip = state.pendingSkip, ContinuousClock.now - state.lastSkipReport >= EventStreams.skipReportInterval {
                    try await writer.write(Self.skippedEvent(skip, state: &state))
                } else if ContinuousClock.now >= deadline {
                    try await writer.write(ByteBuffer(string: ": keep-alive\n\n"))
                }
                continue
            }
            let skipped = batch.skipped > 0 ? Skip(count: batch.skipped, first: batch.firstSkipped, last: batch.lastSkipped) : nil
            try await write(batch.records, skipped: skipped, state: &state, to: &writer)
            if batch.closed { break }
            if let wait = state.rateWait() {
                try? await Task.sleep(for: wait)
            }
        }
        if let skip = state.pendingSkip {
            try await writer.write(Self.skippedEvent(skip, state: &state))
        }
        try await writer.finish(nil)
    }

    /// Records skipped since the last report.
    struct Skip {
        var count: Int
        var first: UInt64
        var last: UInt64

        mutating func add(_ other: Skip) {
            if count == 0 { first = other.first }
            count += other.count
            last = other.last
        }
    }

    private struct State {
        var sent = 0
        let limit: Int?
        let maxRate: Int?
        /// The rate limit's allowance (a token bucket of one second).
        var allowance: Double
        var refilled = ContinuousClock.now
        var pendingSkip: Skip?
        var lastSkipReport = ContinuousClock.now - EventStreams.skipReportInterval

        init(limit: Int?, maxRate: Int?) {
            self.limit = limit
            self.maxRate = maxRate
            allowance = Double(maxRate ?? 0)
        }

        var done: Bool { limit.map { sent >= $0 } ?? false }

        /// How many of `available` records the rate limit lets through now.
        mutating func admit(_ available: Int) -> Int {
            guard let maxRate else { return available }
            let now = ContinuousClock.now
            let elapsed = now - refilled
            refilled = now
            let (seconds, attoseconds) = elapsed.components
            allowance = min(Double(maxRate), allowance + (Double(seconds) + Double(attoseconds) * 1e-18) * Double(maxRate))
            let admitted = min(available, Int(allowance))
            allowance -= Double(admitted)
            return admitted
        }

        /// With the allowance used up, how long until the next record may go: waiting then lets
        /// the buffer take the burst (and count what overflows) instead of waking per record.
        func rateWait() -> Duration? {
            guard let maxRate, allowance < 1 else { return nil }
            return .milliseconds(max(10, min(1000, 1000 / maxRate)))
        }

        mutating func skip(_ skip: Skip) {
            if pendingSkip == nil { pendingSkip = skip } else { pendingSkip?.add(skip) }
        }
    }

    /// Writes `found` (up to the limit and the rate) as events, then the skip report when one is
    /// due. Records are rendered and encoded here, on the stream's own task.
    private func write(
        _ found: [RawRecord], skipped: Skip?, state: inout State, to writer: inout any ResponseBodyWriter
    ) async throws {
        var toSend = found
        if let limit = state.limit, toSend.count > limit - state.sent {
            toSend.removeLast(toSend.count - (limit - state.sent))
        }
        let admitted = state.admit(toSend.count)
        if admitted < toSend.count {
            let dropped = toSend[admitted...]
            state.skip(Skip(count: dropped.count, first: dropped.first?.seq ?? 0, last: dropped.last?.seq ?? 0))
            toSend.removeLast(toSend.count - admitted)
        }
        if let skipped { state.skip(skipped) }
        var buffer = ByteBuffer()
        for record in toSend {
            let data = (try? AdminAPI.encoder.encode(record.render(validator: validator))) ?? Data("null".utf8)
            buffer.writeString("id: \(record.seq)\ndata: ")
            buffer.writeBytes(data)
            buffer.writeString("\n\n")
            state.sent += 1
            if buffer.readableBytes >= 256 << 10 {
                try await writer.write(buffer)
                buffer.clear()
            }
        }
        if let skip = state.pendingSkip,
           ContinuousClock.now - state.lastSkipReport >= EventStreams.skipReportInterval || state.done {
            buffer.writeImmutableBuffer(Self.skippedEvent(skip, state: &state))
        }
        if buffer.readableBytes > 0 {
            try await writer.write(buffer)
        }
    }

    /// `event: skipped` with how many records were skipped and the first and last `seq` among
    /// them (they may still be in the ring: `GET /v1/notifications?since=<firstSeq - 1>`).
    private static func skippedEvent(_ skip: Skip, state: inout State) -> ByteBuffer {
        state.pendingSkip = nil
        state.lastSkipReport = ContinuousClock.now
        return ByteBuffer(
            string: "event: skipped\ndata: {\"skipped\":\(skip.count),\"firstSeq\":\(skip.first),\"lastSeq\":\(skip.last)}\n\n")
    }
}

import Synchronization

/// One party waiting for records: a `/v1/notifications/wait` request (``Mode/collect(_:)``) or an
/// event stream (``Mode/buffer(_:)``). The dispatcher hands it matching records; its owner takes
/// them. Both ends only touch this object's own lock.
final class Subscription: Sendable {
    enum Mode: Sendable {
        /// Keep the first `n` records handed over; ready once there are as many as ``expect(_:)``
        /// asks for.
        case collect(Int)
        /// Keep at most `n` records until taken; records arriving while it is full are skipped
        /// (counted, with the first and last `seq` skipped). Ready as soon as anything arrived.
        case buffer(Int)
    }

    /// What ``take()`` returns: the records in `seq` order and what was skipped since last time.
    struct Batch: Sendable {
        var records: [RawRecord] = []
        var skipped = 0
        var firstSkipped: UInt64 = 0
        var lastSkipped: UInt64 = 0
        var closed = false
        /// What happened besides records (event streams only), at most ``Subscription/noticeLimit``.
        var notices: [ConnectionNotice] = []
    }

    /// Notices kept for one stream between two takes; more are dropped (a stream that does not
    /// read loses them, as it loses records).
    static let noticeLimit = 32

    private struct State {
        var batch = Batch()
        var expected: Int
        var waiting: CheckedContinuation<Void, Never>?
        var wakeRequested = false
    }

    let filter: RecordFilter
    let mode: Mode
    private let state: Mutex<State>

    init(filter: RecordFilter, mode: Mode) {
        self.filter = filter
        self.mode = mode
        let expected: Int
        switch mode {
        case .collect(let count): expected = count
        case .buffer: expected = 1
        }
        state = Mutex(State(expected: max(1, expected)))
    }

    private var limit: Int {
        switch mode {
        case .collect(let count), .buffer(let count): return count
        }
    }

    private static func isReady(_ state: State) -> Bool {
        state.batch.closed || state.wakeRequested || state.batch.records.count >= state.expected
            || state.batch.skipped > 0 || !state.batch.notices.isEmpty
    }

    /// From a connection (through ``RecordStore/publish(_:)``): something event streams tell.
    func notify(_ notice: ConnectionNotice) {
        guard case .buffer = mode else { return }
        if let team = filter.team, notice.team != team { return }
        state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard !state.batch.closed, state.batch.notices.count < Self.noticeLimit else { return nil }
            state.batch.notices.append(notice)
            return state.waiting.take()
        }?.resume()
    }

    /// From the dispatcher: one matching record.
    func offer(_ record: RawRecord) {
        let limit = self.limit
        let waiting = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard !state.batch.closed else { return nil }
            if state.batch.records.count < limit {
                state.batch.records.append(record)
            } else if case .buffer = mode {
                // Seqs evicted before dispatch may have been counted first, out of order with
                // this batch's records: the report's range covers both.
                state.batch.firstSkipped = state.batch.skipped == 0 ? record.seq : min(state.batch.firstSkipped, record.seq)
                state.batch.skipped += 1
                state.batch.lastSkipped = max(state.batch.lastSkipped, record.seq)
            } else {
                return nil
            }
            return Self.isReady(state) ? state.waiting.take() : nil
        }
        waiting?.resume()
    }

    /// Records it may have matched but will never be handed (evicted before the dispatcher read
    /// them): an event stream counts them as skipped; a collecting wait has nothing to count.
    func skip(count: Int, first: UInt64, last: UInt64) {
        guard case .buffer = mode, count > 0 else { return }
        let waiting = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard !state.batch.closed else { return nil }
            state.batch.firstSkipped = state.batch.skipped == 0 ? first : min(state.batch.firstSkipped, first)
            state.batch.skipped += count
            state.batch.lastSkipped = max(state.batch.lastSkipped, last)
            return state.waiting.take()
        }
        waiting?.resume()
    }

    /// A collecting subscription is ready once it holds `count` records.
    func expect(_ count: Int) {
        state.withLock { $0.expected = max(1, count) }
    }

    /// Ends it: its owner's wait returns and ``take()`` says `closed`.
    func close() {
        state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.batch.closed = true
            return state.waiting.take()
        }?.resume()
    }

    /// Makes a pending ``waitUntilReady(deadline:)`` return now.
    func wake() {
        state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.wakeRequested = true
            return state.waiting.take()
        }?.resume()
    }

    /// What arrived since the last take (records, skips); the subscription goes on.
    func take() -> Batch {
        state.withLock { state in
            var taken = Batch(closed: state.batch.closed)
            swap(&taken.records, &state.batch.records)
            swap(&taken.notices, &state.batch.notices)
            taken.skipped = state.batch.skipped
            taken.firstSkipped = state.batch.firstSkipped
            taken.lastSkipped = state.batch.lastSkipped
            state.batch.skipped = 0
            state.batch.firstSkipped = 0
            state.batch.lastSkipped = 0
            state.wakeRequested = false
            return taken
        }
    }

    /// Suspends until the subscription is ready (see ``Mode``), closed, woken, the deadline passes
    /// or the task is cancelled.
    func waitUntilReady(deadline: ContinuousClock.Instant) async {
        guard ContinuousClock.now < deadline else { return }
        // Cancelled below once the wait is over: only a sleep that ran its course wakes.
        let timer = Task { [weak self] in
            guard (try? await Task.sleep(until: deadline, clock: .continuous)) != nil else { return }
            self?.wake()
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { state -> Bool in
                    if Self.isReady(state) { return true }
                    state.waiting = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            self.wake()
        }
        timer.cancel()
    }
}

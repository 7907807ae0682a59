import APNSMockCore
internal import CAPNSMockShims
import Synchronization

/// The bounded record of every request, written by all event loops and read by the admin API.
///
/// No global lock on the request path: a record's `seq` comes from one atomic counter, and the
/// record goes into ring slot `(seq - 1) % capacity`. Slots are spread over ``stripeCount`` stripes
/// (slot `i` lives in stripe `i % stripeCount`), each behind its own `Mutex` held only to swap one
/// record in and the evicted one out. Two writers therefore contend only when their consecutive `seq`s land on the same
/// stripe at the same moment, and eviction stays exact: slot reuse *is* eviction of the record
/// `capacity` older, so the ring never holds more than `capacity` records and always drops the
/// oldest.
///
/// Readers walk `seq` numbers rather than slots, so `since` costs nothing to skip and a query reads
/// only the records it looks at. `DELETE` does not reset `seq` (cursors stay valid): it raises
/// ``clearedThrough`` and empties the slots.
///
/// Whoever waits for records to come (`/v1/notifications/wait` and `/v1/events`) holds a
/// ``Subscription``; one dispatcher task reads each new record once and hands it only to the
/// subscriptions whose filter it matches (``SubscriptionIndex``), so the cost of a record does not
/// grow with subscriptions it does not concern. The request path loads one atomic while nobody
/// subscribes, and otherwise pokes the dispatcher (``Subscriptions/recordsArrived()``), never
/// waiting for it.
final class RecordStore: Sendable {
    /// 0 turns recording off (for benchmarks): ``append(_:)`` returns at once.
    let capacity: Int
    private let stripes: [Stripe]
    private let stripeCount: Int
    /// Last `seq` handed out.
    private let head = Atomic<UInt64>(0)
    /// Records with `seq` up to this were deleted.
    private let cleared = Atomic<UInt64>(0)
    private let evictionCount = Atomic<UInt64>(0)
    /// Waiters and event streams, and the dispatcher that serves them.
    private let subscriptions = Subscriptions()

    /// Records are held by value in their slots: appending moves the record in and the evicted
    /// one out under the stripe's lock, so a record costs no allocation of its own, and the evicted
    /// record is destroyed after the lock is released.
    private final class Stripe: Sendable {
        let slots: Mutex<Slots>
        let size: Int
        /// Where the stripe's records and tags start, for prefetching a slot ahead of its store
        /// without the lock: replaced (under the lock) only when ``removeAll()`` swaps the storage,
        /// and a prefetch of a stale address is harmless (a hint, it never faults).
        let elementBase: Atomic<UInt>
        let tagBase: Atomic<UInt>

        init(size: Int) {
            self.size = size
            let slots = Slots(size: size)
            let (element, tag) = slots.addresses(at: 0)
            elementBase = Atomic(element)
            tagBase = Atomic(tag)
            self.slots = Mutex(slots)
        }
    }

    /// A stripe's records in fixed storage, tagged with their `seq` (0: empty), so that checking a
    /// slot reads one word. Allocated whole up front; only ever touched under its stripe's lock.
    private struct Slots: ~Copyable {
        private var storage: TaggedSlots<RawRecord>

        init(size: Int) {
            storage = TaggedSlots(count: size)
        }

        /// Builds the record for `seq` at `position` and returns the record it displaces; or, when a
        /// writer `capacity` records later got there first, leaves the slot alone and returns the
        /// built record itself, already evicted.
        mutating func store(seq: UInt64, at position: Int, _ make: @Sendable (UInt64) -> RawRecord) -> RawRecord? {
            if storage.tag(at: position) > seq {
                return make(seq)
            }
            return storage.store(tag: seq, at: position) { make(seq) }
        }

        func record(_ seq: UInt64, at position: Int) -> RawRecord? {
            storage.element(at: position, taggedAs: seq)
        }

        mutating func modify(_ seq: UInt64, at position: Int, _ body: (inout RawRecord) -> Void) -> Bool {
            storage.modify(at: position, taggedAs: seq, body)
        }

        func addresses(at position: Int) -> (element: UInt, tag: UInt) {
            storage.addresses(at: position)
        }
    }

    init(capacity: Int, stripes: Int = 16) {
        self.capacity = max(0, capacity)
        self.stripeCount = max(1, min(stripes, max(1, capacity)))
        let stripeSize = (self.capacity + self.stripeCount - 1) / self.stripeCount
        self.stripes = (0..<self.stripeCount).map { _ in Stripe(size: stripeSize) }
    }

    var isEnabled: Bool { capacity > 0 }
    var evictions: UInt64 { evictionCount.load(ordering: .relaxed) }
    var lastSeq: UInt64 { head.load(ordering: .acquiring) }
    var clearedThrough: UInt64 { cleared.load(ordering: .acquiring) }

    /// Records currently held.
    var count: Int {
        let last = lastSeq
        return Int(last - max(clearedThrough, oldestKept(last: last) - 1))
    }

    /// The oldest `seq` the ring can still hold once `last` was handed out (`last + 1` when
    /// recording is off: none).
    private func oldestKept(last: UInt64) -> UInt64 {
        capacity == 0 ? last + 1 : (last > UInt64(capacity) ? last - UInt64(capacity) + 1 : 1)
    }

    /// Whether `seq` (handed out) is recent enough to be in the ring, stored or about to be.
    private func isWithinRing(_ seq: UInt64) -> Bool {
        lastSeq - seq < UInt64(capacity)
    }

    /// Stores the record `make` builds for the `seq` it is given, and tells the dispatcher when
    /// anyone subscribes. The record is built in its slot, never copied. `make` runs under a stripe
    /// lock and must only build the value.
    @inline(__always)
    @discardableResult
    func append(_ make: @Sendable (UInt64) -> RawRecord) -> UInt64 {
        guard capacity > 0 else { return 0 }
        let seq = head.add(1, ordering: .relaxed).newValue
        prefetchSlot(of: seq + Self.prefetchDistance)
        let slot = Int((seq - 1) % UInt64(capacity))
        let displaced = stripes[slot % stripeCount].slots.withLock { slots in
            slots.store(seq: seq, at: slot / stripeCount, make)
        }
        // The displaced record (or this one, if it came too late) is destroyed here, unlocked.
        if let displacedSeq = displaced?.seq, displacedSeq > clearedThrough {
            evictionCount.add(1, ordering: .relaxed)
        }
        // The one atomic load while nobody waits. Sequentially consistent (a plain load on x86) so
        // that it is ordered after the store above against a first subscription's registration:
        // either this load sees the subscription, or the dispatcher's first scan sees the record.
        if subscriptions.isActive {
            subscriptions.recordsArrived()
        }
        return seq
    }

    /// Tells every event stream `notice` (refused streams are not records, so only live streams hear
    /// of them; `/v1/stats` counts them). Costs nothing while nobody subscribes.
    func publish(_ notice: RefusedStreamsNotice) {
        if subscriptions.isActive {
            subscriptions.broadcast(notice)
        }
    }

    /// Whether the response of the record `seq` left the mock, when that turned out otherwise than
    /// the record said when it was stored (a connection that ended before an answer went out, a
    /// delayed answer that did go out). Off the hot path: it takes the slot's stripe lock. Records
    /// already handed to waiters and event streams keep what they said then; a record evicted
    /// meanwhile is left alone.
    func setResponseWritten(_ written: Bool, seq: UInt64) {
        guard capacity > 0, seq > 0, isWithinRing(seq) else { return }
        let slot = Int((seq - 1) % UInt64(capacity))
        _ = stripes[slot % stripeCount].slots.withLock { slots in
            slots.modify(seq, at: slot / stripeCount) { $0.responseWritten = written }
        }
    }

    /// How many records ahead ``append(_:)`` prefetches the slot it will store into.
    static let prefetchDistance: UInt64 = 2

    /// Brings the ring slot of `seq` (and its tag) into cache before its record is stored. The
    /// ring is far larger than the caches and each slot is last touched `capacity` records
    /// earlier, so without this every store waits for memory (the record it evicts is read, the
    /// new one written, in the same cache lines).
    @inline(__always)
    private func prefetchSlot(of seq: UInt64) {
        let slot = Int((seq - 1) % UInt64(capacity))
        let stripe = stripes[slot % stripeCount]
        let position = UInt(slot / stripeCount)
        let element = stripe.elementBase.load(ordering: .relaxed) &+ position &* UInt(MemoryLayout<RawRecord>.stride)
        let tag = stripe.tagBase.load(ordering: .relaxed) &+ position &* UInt(MemoryLayout<UInt64>.stride)
        CAPNSMockShims_prefetch_for_write(UnsafeRawPointer(bitPattern: element), UInt(MemoryLayout<RawRecord>.size))
        CAPNSMockShims_prefetch_for_write(UnsafeRawPointer(bitPattern: tag), 8)
    }

    private func read(_ seq: UInt64) -> RawRecord? {
        let slot = Int((seq - 1) % UInt64(capacity))
        let position = slot / stripeCount
        return stripes[slot % stripeCount].slots.withLock { slots in
            slots.record(seq, at: position)
        }
    }

    /// The record `seq` while the ring holds it (not evicted, not cleared, already stored).
    func record(_ seq: UInt64) -> RawRecord? {
        guard capacity > 0, seq >= 1, seq <= lastSeq, seq > clearedThrough else { return nil }
        return read(seq)
    }

    /// Records after `since` that match `filter`, oldest first, at most `limit`, none after
    /// `through`; and `next`, the cursor to pass as `since` to continue (every record up to it has
    /// been looked at).
    ///
    /// `since` comes from outside (a query parameter): any value is safe, including one past
    /// ``lastSeq`` or `UInt64.max`, which finds nothing and keeps the cursor where it is.
    func query(
        since: UInt64, filter: RecordFilter, limit: Int, through: UInt64 = .max
    ) -> (records: [RawRecord], next: UInt64) {
        let last = min(lastSeq, through)
        guard capacity > 0, since < last, limit > 0 else { return ([], since) }
        var seq = max(since + 1, clearedThrough + 1, oldestKept(last: last))
        var next = max(since, seq - 1)
        var found: [RawRecord] = []
        while seq <= last, found.count < limit {
            if let record = read(seq) {
                if filter.matches(record) { found.append(record) }
            } else {
                if isWithinRing(seq), seq > clearedThrough {
                    // Handed out but not yet stored: stop here so the cursor does not skip it.
                    break
                }
            }
            next = seq
            seq += 1
        }
        return (found, next)
    }

    /// Forgets every record; `seq` keeps counting.
    func removeAll() {
        for stripe in stripes {
            // The old records are released after the lock is.
            let old = stripe.slots.withLock { slots -> Slots in
                var old = Slots(size: stripe.size)
                swap(&old, &slots)
                let (element, tag) = slots.addresses(at: 0)
                stripe.elementBase.store(element, ordering: .relaxed)
                stripe.tagBase.store(tag, ordering: .relaxed)
                return old
            }
            _ = consume old
        }
        // Only now: a writer that took its seq before this point may have stored into storage
        // just dropped, and its seq must count as cleared, or queries would wait for it.
        cleared.store(lastSeq, ordering: .releasing)
        // A dispatcher that stopped at a slot emptied above looks again.
        subscriptions.recordsArrived()
    }

    // MARK: Waiting for records

    /// Waits until `count` records after `since` match, or `timeout` passes. Records already in
    /// the ring are found by a query; later ones are handed over by the dispatcher, which wakes
    /// this waiter only for a record that matches it (no polling, no rescans).
    func wait(
        since: UInt64, filter: RecordFilter, count: Int, timeout: Duration
    ) async -> (records: [RawRecord], next: UInt64, complete: Bool) {
        let deadline = ContinuousClock.now + timeout
        let subscription = Subscription(filter: filter, mode: .collect(count))
        let threshold = subscribe(subscription, after: since)
        let (found, cursor, caughtUp) = await replay(since: since, through: threshold, filter: filter, limit: count)
        guard found.count < count, caughtUp else {
            _ = unsubscribe(subscription)
            return (found, cursor, found.count >= count)
        }
        subscription.expect(count - found.count)
        await subscription.waitUntilReady(deadline: deadline)
        let dispatchedThrough = unsubscribe(subscription)
        let handed = subscription.take()
        let all = found + handed.records.prefix(count - found.count)
        if all.count >= count, let last = all.last {
            return (all, last.seq, true)
        }
        // Every record up to what the dispatcher had handed out was looked at for this waiter.
        return (all, max(threshold, dispatchedThrough), false)
    }

    /// Registers `subscription` for the records after `since`; returns the threshold: records after
    /// it are handed to the subscription as they are dispatched, and the caller finds those in
    /// `(since, threshold]`, already stored, with ``replay(since:through:filter:limit:)``.
    func subscribe(_ subscription: Subscription, after since: UInt64) -> UInt64 {
        subscriptions.add(subscription, after: since, start: { await self.dispatch() })
    }

    /// Removes `subscription`; returns how far records had been dispatched.
    @discardableResult
    func unsubscribe(_ subscription: Subscription) -> UInt64 {
        subscriptions.remove(subscription)
    }

    /// Subscriptions now and to come.
    var subscriberCount: Int { subscriptions.count }

    /// How often the dispatcher checked a record against a subscription's filter, and how many
    /// records it handed over: what waiting costs, for tests (a subscription no record matches
    /// should cost neither).
    var dispatchCounts: (checked: Int, handed: Int) { subscriptions.counts }

    /// Ends every subscription (server shutdown): waiters answer with what they have, event
    /// streams end; later subscriptions end at once.
    func closeSubscriptions() {
        subscriptions.close()
    }

    /// The records in `(since, through]` that match, at most `limit`: what a new subscription finds
    /// already stored. `caughtUp` is false only when the ring kept changing under it (a `DELETE`
    /// in progress) for longer than a few tries.
    func replay(
        since: UInt64, through: UInt64, filter: RecordFilter, limit: Int
    ) async -> (records: [RawRecord], next: UInt64, caughtUp: Bool) {
        var found: [RawRecord] = []
        var cursor = since
        var tries = 0
        while cursor < through, found.count < limit {
            let (more, next) = query(since: cursor, filter: filter, limit: limit - found.count, through: through)
            found += more
            if next == cursor {
                // Records up to `through` were all stored, so only a DELETE emptying slots right
                // now stops a query short; it is over in microseconds.
                tries += 1
                if tries > 100 { return (found, cursor, false) }
                await Task.yield()
            }
            cursor = next
        }
        return (found, cursor, true)
    }

    /// The dispatcher: while anyone subscribes, reads each new record once, in `seq` order, and
    /// hands it to the subscriptions it matches. Started by the first subscription, it ends when
    /// the last one leaves. A record handed out but not yet stored stops the scan; its writer pokes
    /// the dispatcher once it is stored.
    private func dispatch() async {
        while true {
            subscriptions.beginRound()
            var dispatched = subscriptions.dispatchedThrough
            let startedAt = dispatched
            var batch: [RawRecord] = []
            batch.reserveCapacity(Self.dispatchBatch)
            scanning: while true {
                let last = lastSeq
                guard dispatched < last else { break }
                let oldest = oldestKept(last: last)
                let cleared = clearedThrough
                var seq = max(dispatched + 1, cleared + 1, oldest)
                var reached = max(dispatched, seq - 1)
                // Records the ring evicted before this round could read them (the dispatcher fell
                // more than `capacity` behind): nobody was handed them, and event streams count them
                // as skipped. Records deleted through the admin API are not counted.
                var lost = Lost()
                if oldest > max(dispatched, cleared) + 1 {
                    lost.add(max(dispatched, cleared) + 1...oldest - 1)
                }
                var stoppedAtGap = false
                batch.removeAll(keepingCapacity: true)
                while seq <= last, batch.count < Self.dispatchBatch {
                    if let record = read(seq) {
                        batch.append(record)
                    } else if isWithinRing(seq), seq > clearedThrough {
                        stoppedAtGap = true
                        break
                    } else if seq > clearedThrough {
                        lost.add(seq...seq)
                    }
                    reached = seq
                    seq += 1
                }
                if reached > dispatched {
                    subscriptions.hand(batch, lost: lost, through: reached)
                    dispatched = reached
                }
                batch.removeAll(keepingCapacity: true)
                if stoppedAtGap { break scanning }
            }
            let handedAny = dispatched > startedAt
            if handedAny {
                // Records keep coming under load: let them gather for a moment, so that a round
                // takes hundreds of them, instead of waking the dispatcher for every one.
                try? await Task.sleep(for: Self.roundInterval)
            }
            guard await subscriptions.sleepUntilRecords() else { return }
        }
    }

    /// Records read per dispatch round before they are handed out under the subscriptions' lock.
    static let dispatchBatch = 1024

    /// Sequence numbers a dispatch round passed over because the ring had evicted their records.
    /// Ascending, merged where they touch; empty in every round that kept up (no allocation).
    struct Lost {
        private(set) var ranges: [ClosedRange<UInt64>] = []

        var isEmpty: Bool { ranges.isEmpty }

        mutating func add(_ range: ClosedRange<UInt64>) {
            if let previous = ranges.last, previous.upperBound + 1 == range.lowerBound {
                ranges[ranges.count - 1] = previous.lowerBound...range.upperBound
            } else {
                ranges.append(range)
            }
        }

        /// How many lost seqs lie after `threshold`, and the first and last of them.
        func after(_ threshold: UInt64) -> (count: UInt64, first: UInt64, last: UInt64)? {
            var count: UInt64 = 0
            var first: UInt64 = 0
            for range in ranges where range.upperBound > threshold {
                let lower = max(range.lowerBound, threshold + 1)
                if count == 0 { first = lower }
                count += range.upperBound - lower + 1
            }
            guard count > 0, let last = ranges.last?.upperBound else { return nil }
            return (count, first, last)
        }
    }
    /// The dispatcher's pause after a round that found records: the most it delays a record, and
    /// what bounds its wake-ups under load (at most ~500 rounds a second).
    static let roundInterval: Duration = .milliseconds(2)
}

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
        var notices: [RefusedStreamsNotice] = []
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
    func notify(_ notice: RefusedStreamsNotice) {
        guard case .buffer = mode else { return }
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

/// Every subscription and the dispatcher's place: who is handed which record, and how the request
/// path wakes the dispatcher.
private final class Subscriptions: Sendable {
    private struct State {
        var index = SubscriptionIndex()
        /// Records up to this `seq` have been handed to every subscription they match.
        var dispatchedThrough: UInt64 = 0
        var checked = 0
        var handed = 0
        var dispatcherRunning = false
        var closed = false
    }

    private let state = Mutex(State())
    /// Subscriptions registered: the request path's one load.
    private let active = Atomic<Int>(0)
    /// Set by writers since the dispatcher began its round; the dispatcher's sleep, apart from
    /// `state` so that a writer never waits for a dispatch round to finish.
    private let pending = Atomic<Bool>(false)
    private let sleeping = Mutex<CheckedContinuation<Bool, Never>?>(nil)

    var isActive: Bool { active.load(ordering: .sequentiallyConsistent) != 0 }
    var count: Int { active.load(ordering: .relaxed) }
    var dispatchedThrough: UInt64 { state.withLock { $0.dispatchedThrough } }
    var counts: (checked: Int, handed: Int) { state.withLock { ($0.checked, $0.handed) } }

    /// From a writer: records arrived. Wakes the dispatcher unless a wake is already pending; while
    /// one is (the dispatcher is busy or pausing between rounds), a writer only loads the flag.
    func recordsArrived() {
        guard !pending.load(ordering: .sequentiallyConsistent),
              !pending.exchange(true, ordering: .sequentiallyConsistent)
        else { return }
        sleeping.withLock { $0.take() }?.resume(returning: true)
    }

    /// Files `subscription` for the records after `max(since, dispatchedThrough)`, which it
    /// returns; starts the dispatcher if none runs.
    func add(_ subscription: Subscription, after since: UInt64, start: @escaping @Sendable () async -> Void) -> UInt64 {
        let (startNow, threshold, closed) = state.withLock { state -> (Bool, UInt64, Bool) in
            guard !state.closed else { return (false, since, true) }
            let threshold = max(since, state.dispatchedThrough)
            state.index.insert(subscription, threshold: threshold)
            active.add(1, ordering: .sequentiallyConsistent)
            let startNow = !state.dispatcherRunning
            state.dispatcherRunning = true
            return (startNow, threshold, false)
        }
        if closed {
            subscription.close()
        } else if startNow {
            pending.store(true, ordering: .sequentiallyConsistent)
            Task(operation: start)
        } else {
            // The dispatcher may be asleep with records it has not looked at for anyone.
            recordsArrived()
        }
        return threshold
    }

    func remove(_ subscription: Subscription) -> UInt64 {
        let (through, removed, empty) = state.withLock { state -> (UInt64, Bool, Bool) in
            let removed = state.index.remove(subscription)
            if removed { active.subtract(1, ordering: .sequentiallyConsistent) }
            return (state.dispatchedThrough, removed, state.index.isEmpty)
        }
        // A dispatcher with nobody left to serve ends (it checks when woken).
        if removed, empty { recordsArrived() }
        return through
    }

    /// Hands `notice` to every subscription (event streams keep it; waits ignore it).
    func broadcast(_ notice: RefusedStreamsNotice) {
        let all = state.withLock { $0.index.all }
        for subscription in all { subscription.notify(notice) }
    }

    func close() {
        let all = state.withLock { state -> [Subscription] in
            state.closed = true
            let all = state.index.all
            active.subtract(all.count, ordering: .sequentiallyConsistent)
            state.index = SubscriptionIndex()
            return all
        }
        for subscription in all { subscription.close() }
        recordsArrived()
    }

    /// The dispatcher starts a round: writes from now on wake it again.
    func beginRound() {
        pending.store(false, ordering: .sequentiallyConsistent)
    }

    /// Hands `records` (in `seq` order) to the subscriptions they match, and moves the dispatch
    /// mark to `through`.
    func hand(_ records: [RawRecord], lost: RecordStore.Lost = .init(), through: UInt64) {
        state.withLock { state in
            if !lost.isEmpty { state.index.reportLost(lost) }
            for record in records {
                let (checked, handed) = state.index.offer(record)
                state.checked &+= checked
                state.handed &+= handed
            }
            state.dispatchedThrough = max(state.dispatchedThrough, through)
        }
    }

    /// Sleeps until a writer reports records; false when nobody subscribes any more, and the
    /// dispatcher then ends (the next subscription starts another).
    func sleepUntilRecords() async -> Bool {
        let stop = state.withLock { state -> Bool in
            if state.index.isEmpty {
                state.dispatcherRunning = false
                return true
            }
            return false
        }
        if stop { return false }
        return await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            let resumeNow = sleeping.withLock { sleeping -> Bool in
                if pending.load(ordering: .sequentiallyConsistent) { return true }
                sleeping = continuation
                return false
            }
            if resumeNow { continuation.resume(returning: true) }
        }
    }
}

/// The subscriptions by what a record must carry to match them, so that a record is checked only
/// against subscriptions it may match: each subscription is filed under its most selective filter
/// field (apns-id, channel, token, collapse id, reason, topic, push type), or, without any, under its
/// outcome. A record looks up its own values in each table; ``RecordFilter/matches(_:)`` decides
/// for the few subscriptions found, so fields not indexed here still filter correctly.
private struct SubscriptionIndex {
    struct Entry {
        let subscription: Subscription
        /// Only records after this `seq` are handed over (earlier ones were replayed).
        let threshold: UInt64
    }

    private typealias Table = [String: [ObjectIdentifier: Entry]]

    private enum Key: Hashable {
        case apnsId(String), channelId(String), token(String), collapseId(String), reason(String), topic(String)
        case pushType(String)
        case outcome(RecordFilter.Outcome)
    }

    private var apnsIds: Table = [:]
    private var channelIds: Table = [:]
    private var tokens: Table = [:]
    private var collapseIds: Table = [:]
    private var reasons: Table = [:]
    private var topics: Table = [:]
    private var pushTypes: Table = [:]
    private var byOutcome: [RecordFilter.Outcome: [ObjectIdentifier: Entry]] = [:]
    private var keys: [ObjectIdentifier: Key] = [:]

    var isEmpty: Bool { keys.isEmpty }

    var all: [Subscription] {
        var all: [Subscription] = []
        for table in [apnsIds, channelIds, tokens, collapseIds, reasons, topics, pushTypes] {
            for entries in table.values { all += entries.values.map(\.subscription) }
        }
        for entries in byOutcome.values { all += entries.values.map(\.subscription) }
        return all
    }

    private static func key(_ filter: RecordFilter) -> Key {
        if let value = filter.apnsId { return .apnsId(value.lowercased()) }
        if let value = filter.channelId { return .channelId(value) }
        if let value = filter.token { return .token(value) }
        if let value = filter.collapseId { return .collapseId(value) }
        if let value = filter.reason { return .reason(value) }
        if let value = filter.topic { return .topic(value) }
        if let value = filter.pushType { return .pushType(value) }
        return .outcome(filter.outcome)
    }

    mutating func insert(_ subscription: Subscription, threshold: UInt64) {
        let id = ObjectIdentifier(subscription)
        let key = Self.key(subscription.filter)
        let entry = Entry(subscription: subscription, threshold: threshold)
        keys[id] = key
        switch key {
        case .apnsId(let value): apnsIds[value, default: [:]][id] = entry
        case .channelId(let value): channelIds[value, default: [:]][id] = entry
        case .token(let value): tokens[value, default: [:]][id] = entry
        case .collapseId(let value): collapseIds[value, default: [:]][id] = entry
        case .reason(let value): reasons[value, default: [:]][id] = entry
        case .topic(let value): topics[value, default: [:]][id] = entry
        case .pushType(let value): pushTypes[value, default: [:]][id] = entry
        case .outcome(let value): byOutcome[value, default: [:]][id] = entry
        }
    }

    mutating func remove(_ subscription: Subscription) -> Bool {
        let id = ObjectIdentifier(subscription)
        guard let key = keys.removeValue(forKey: id) else { return false }
        func drop(_ table: inout Table, _ value: String) {
            table[value]?[id] = nil
            if table[value]?.isEmpty == true { table[value] = nil }
        }
        switch key {
        case .apnsId(let value): drop(&apnsIds, value)
        case .channelId(let value): drop(&channelIds, value)
        case .token(let value): drop(&tokens, value)
        case .collapseId(let value): drop(&collapseIds, value)
        case .reason(let value): drop(&reasons, value)
        case .topic(let value): drop(&topics, value)
        case .pushType(let value): drop(&pushTypes, value)
        case .outcome(let value):
            byOutcome[value]?[id] = nil
            if byOutcome[value]?.isEmpty == true { byOutcome[value] = nil }
        }
        return true
    }

    /// Tells every event stream (buffer mode) about records it never saw because the ring evicted
    /// them before the dispatcher read them: they are counted as skipped (those after its threshold).
    func reportLost(_ lost: RecordStore.Lost) {
        for table in [apnsIds, channelIds, tokens, collapseIds, reasons, topics, pushTypes] {
            for entries in table.values { Self.reportLost(lost, to: entries) }
        }
        for entries in byOutcome.values { Self.reportLost(lost, to: entries) }
    }

    private static func reportLost(_ lost: RecordStore.Lost, to entries: [ObjectIdentifier: Entry]) {
        for entry in entries.values {
            // Seqs up to the threshold were the replay's to find.
            guard let missed = lost.after(entry.threshold) else { continue }
            entry.subscription.skip(count: Int(clamping: missed.count), first: missed.first, last: missed.last)
        }
    }

    /// Hands `record` to every subscription it matches; returns how many filters were checked and
    /// how many subscriptions took it. A record's values are worked out only for the tables that
    /// hold subscriptions.
    func offer(_ record: RawRecord) -> (checked: Int, handed: Int) {
        var counts = (checked: 0, handed: 0)
        if !apnsIds.isEmpty { Self.offer(record, to: apnsIds[record.apnsIDText.lowercased()], &counts) }
        if !channelIds.isEmpty, let value = record.broadcast?.channelID {
            Self.offer(record, to: channelIds[value], &counts)
        }
        if !tokens.isEmpty, let token = record.token { Self.offer(record, to: tokens[token], &counts) }
        if !collapseIds.isEmpty, let value = record.shape.request.collapseID { Self.offer(record, to: collapseIds[value], &counts) }
        if !reasons.isEmpty, let value = record.reasonText { Self.offer(record, to: reasons[value], &counts) }
        if !topics.isEmpty, let value = record.topic { Self.offer(record, to: topics[value], &counts) }
        if !pushTypes.isEmpty, let value = record.pushType { Self.offer(record, to: pushTypes[value], &counts) }
        if !byOutcome.isEmpty {
            Self.offer(record, to: byOutcome[.all], &counts)
            Self.offer(record, to: byOutcome[record.isAccepted ? .accepted : .rejected], &counts)
        }
        return counts
    }

    private static func offer(
        _ record: RawRecord, to entries: [ObjectIdentifier: Entry]?, _ counts: inout (checked: Int, handed: Int)
    ) {
        guard let entries else { return }
        for entry in entries.values where record.seq > entry.threshold {
            counts.checked += 1
            if entry.subscription.filter.matches(record) {
                counts.handed += 1
                entry.subscription.offer(record)
            }
        }
    }
}

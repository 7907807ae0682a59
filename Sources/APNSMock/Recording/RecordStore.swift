import APNSMockCore
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
    /// Bumped after each record becomes readable; waiters sleep until it moves.
    private let published = Atomic<UInt64>(0)
    private let waiters = WaiterList()

    /// Records are held by value in their slots: appending moves the record in and the evicted
    /// one out under the stripe's lock, so a record costs no allocation of its own, and the evicted
    /// record is destroyed after the lock is released.
    private final class Stripe: Sendable {
        let slots: Mutex<Slots>
        let size: Int

        init(size: Int) {
            self.size = size
            slots = Mutex(Slots(size: size))
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
        let first = max(clearedThrough, last > UInt64(capacity) ? last - UInt64(capacity) : 0)
        return Int(last - first)
    }

    /// Stores the record `make` builds for the `seq` it is given, and wakes waiters. The record is
    /// built in its slot, never copied. `make` runs under a stripe lock and must only build the
    /// value.
    @inline(__always)
    func append(_ make: @Sendable (UInt64) -> RawRecord) {
        guard capacity > 0 else { return }
        let seq = head.add(1, ordering: .relaxed).newValue
        let slot = Int((seq - 1) % UInt64(capacity))
        let displaced = stripes[slot % stripeCount].slots.withLock { slots in
            slots.store(seq: seq, at: slot / stripeCount, make)
        }
        // The displaced record (or this one, if it came too late) is destroyed here, unlocked.
        if let displacedSeq = displaced?.seq, displacedSeq > clearedThrough {
            evictionCount.add(1, ordering: .relaxed)
        }
        published.add(1, ordering: .releasing)
        if waiters.isEmpty == false {
            waiters.wakeAll()
        }
    }

    private func read(_ seq: UInt64) -> RawRecord? {
        let slot = Int((seq - 1) % UInt64(capacity))
        let position = slot / stripeCount
        return stripes[slot % stripeCount].slots.withLock { slots in
            slots.record(seq, at: position)
        }
    }

    /// Records after `since` that match `filter`, oldest first, at most `limit`; and `next`, the
    /// cursor to pass as `since` to continue (every record up to it has been looked at).
    ///
    /// `since` comes from outside (a query parameter): any value is safe, including one past
    /// ``lastSeq`` or `UInt64.max`, which finds nothing and keeps the cursor where it is.
    func query(since: UInt64, filter: RecordFilter, limit: Int) -> (records: [RawRecord], next: UInt64) {
        let last = lastSeq
        guard capacity > 0, since < last, limit > 0 else { return ([], since) }
        let oldestKept = last > UInt64(capacity) ? last - UInt64(capacity) + 1 : 1
        var seq = max(since + 1, clearedThrough + 1, oldestKept)
        var next = max(since, seq - 1)
        var found: [RawRecord] = []
        while seq <= last, found.count < limit {
            if let record = read(seq) {
                if filter.matches(record) { found.append(record) }
            } else {
                let stillKept = lastSeq - seq < UInt64(capacity)
                if stillKept, seq > clearedThrough {
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
                return old
            }
            _ = consume old
        }
        // Only now: a writer that took its seq before this point may have stored into storage
        // just dropped, and its seq must count as cleared, or queries would wait for it.
        cleared.store(lastSeq, ordering: .releasing)
        published.add(1, ordering: .releasing)
        waiters.wakeAll()
    }

    /// Waits until `count` records after `since` match, or `timeout` passes. Woken by appends (no
    /// polling): each wake scans only the records added since the previous scan.
    func wait(
        since: UInt64, filter: RecordFilter, count: Int, timeout: Duration
    ) async -> (records: [RawRecord], next: UInt64, complete: Bool) {
        let deadline = ContinuousClock.now + timeout
        var cursor = since
        var found: [RawRecord] = []
        while true {
            let generation = published.load(ordering: .acquiring)
            let (more, next) = query(since: cursor, filter: filter, limit: count - found.count)
            found += more
            cursor = next
            if found.count >= count { return (found, cursor, true) }
            if ContinuousClock.now >= deadline || Task.isCancelled { return (found, cursor, false) }
            await waiters.wait(deadline: deadline) {
                self.published.load(ordering: .acquiring) != generation
            }
        }
    }
}

/// Tasks waiting for new records. The request path only loads ``isEmpty``'s atomic unless a
/// waiter exists.
final class WaiterList: Sendable {
    private struct State {
        var nextID = 0
        var waiting: [Int: CheckedContinuation<Void, Never>] = [:]
    }

    private let state = Mutex(State())
    private let waitingCount = Atomic<Int>(0)

    var isEmpty: Bool { waitingCount.load(ordering: .acquiring) == 0 }

    /// Suspends until ``wakeAll()``, the deadline, or cancellation. `alreadyChanged` is checked
    /// under the lock, so a wake between the caller's scan and its registration is not lost.
    func wait(deadline: ContinuousClock.Instant, alreadyChanged: @Sendable () -> Bool) async {
        let id = state.withLock { state -> Int in
            state.nextID += 1
            return state.nextID
        }
        let timer = Task { [weak self] in
            try? await Task.sleep(until: deadline, clock: .continuous)
            self?.resume(id)
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { state -> Bool in
                    if alreadyChanged() { return true }
                    state.waiting[id] = continuation
                    waitingCount.add(1, ordering: .releasing)
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            self.resume(id)
        }
        timer.cancel()
    }

    private func resume(_ id: Int) {
        let continuation = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard let continuation = state.waiting.removeValue(forKey: id) else { return nil }
            waitingCount.subtract(1, ordering: .releasing)
            return continuation
        }
        continuation?.resume()
    }

    func wakeAll() {
        let woken = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            let all = Array(state.waiting.values)
            waitingCount.subtract(all.count, ordering: .releasing)
            state.waiting.removeAll()
            return all
        }
        for continuation in woken { continuation.resume() }
    }
}

import Synchronization

/// Every subscription and the dispatcher's place: who is handed which record, and how the request
/// path wakes the dispatcher.
final class Subscriptions: Sendable {
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
    func broadcast(_ notice: ConnectionNotice) {
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

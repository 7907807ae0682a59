/// Waiting for records (`/v1/notifications/wait`): what the ring already holds is found by a replay,
/// what comes later is handed over by the dispatcher (RecordStore+Dispatch.swift).
extension RecordStore {
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
}

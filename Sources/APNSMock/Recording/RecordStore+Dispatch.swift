/// Subscribing, and the dispatcher that hands each new record to the subscriptions it matches
/// (``Subscriptions`` holds them and the dispatcher's place).
extension RecordStore {
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

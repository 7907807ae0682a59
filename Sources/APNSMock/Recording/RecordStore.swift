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
    private let stripes: [RecordStripe]
    private let stripeCount: Int
    /// Last `seq` handed out.
    private let head = Atomic<UInt64>(0)
    /// Records with `seq` up to this were deleted.
    private let cleared = Atomic<UInt64>(0)
    private let evictionCount = Atomic<UInt64>(0)
    /// Teams whose records up to a sequence number were cleared (their reset, or their removal):
    /// queries skip those records. Looked at only while ``hidesTeams`` is set.
    private let hiddenTeams = Mutex<[String: UInt64]>([:])
    private let hidesTeams = Atomic<Bool>(false)
    /// The sequence numbers of the records those marks hide, ascending, each once (at most the
    /// ring's capacity): ``visibleCount`` subtracts those still in the ring without a pass over it.
    private let hiddenSeqs = Mutex<[UInt64]>([])
    /// Waiters and event streams, and the dispatcher that serves them.
    let subscriptions = Subscriptions()
    /// Per-segment filters that let a selective query skip most of the ring.
    let summaries: SegmentSummaries

    init(capacity: Int, stripes: Int = 16) {
        self.capacity = max(0, capacity)
        self.stripeCount = max(1, min(stripes, max(1, capacity)))
        let stripeSize = (self.capacity + self.stripeCount - 1) / self.stripeCount
        self.stripes = (0..<self.stripeCount).map { _ in RecordStripe(size: stripeSize) }
        self.summaries = SegmentSummaries(capacity: self.capacity)
    }

    var isEnabled: Bool { capacity > 0 }
    var evictions: UInt64 { evictionCount.load(ordering: .relaxed) }
    var lastSeq: UInt64 { head.load(ordering: .acquiring) }
    var clearedThrough: UInt64 { cleared.load(ordering: .acquiring) }

    /// Records currently held.
    var count: Int {
        let last = lastSeq
        return Int(last - goneThrough(last: last))
    }

    /// Every record up to this `seq` is gone from the ring, cleared or evicted, once `last` was
    /// handed out.
    private func goneThrough(last: UInt64) -> UInt64 {
        max(clearedThrough, oldestKept(last: last) - 1)
    }

    /// Records queries find: ``count`` less the hidden records still in the ring (a binary
    /// search; those the ring has passed are forgotten).
    var visibleCount: Int {
        let total = count
        guard hidesTeams.load(ordering: .acquiring) else { return total }
        let floor = goneThrough(last: lastSeq)
        let hidden = hiddenSeqs.withLock { seqs -> Int in
            let passed = Self.countAtMost(floor, in: seqs)
            if passed > 0 { seqs.removeFirst(passed) }
            return seqs.count
        }
        return max(0, total - hidden)
    }

    /// How many of `sorted` (ascending) are at most `value`.
    static func countAtMost(_ value: UInt64, in sorted: [UInt64]) -> Int {
        var low = 0, high = sorted.count
        while low < high {
            let middle = (low + high) / 2
            if sorted[middle] <= value { low = middle + 1 } else { high = middle }
        }
        return low
    }

    /// Records of `team` the ring holds and queries find: one pass over the ring
    /// (`/v1/stats?team=`).
    func count(team: String) -> Int {
        seqs(matching: RecordFilter(outcome: .all, team: team)).count
    }

    /// The `seq` of every record up to `through` that queries find with `filter`, page after page
    /// of ``query(since:filter:limit:through:)``.
    func seqs(matching filter: RecordFilter, through: UInt64 = .max) -> [UInt64] {
        var found: [UInt64] = []
        var since: UInt64 = 0
        while true {
            let (page, next) = query(since: since, filter: filter, limit: RecordQuery.maximumLimit, through: through)
            found += page.map(\.seq)
            guard next > since, next < min(lastSeq, through) else { return found }
            since = next
        }
    }

    /// The oldest `seq` the ring can still hold once `last` was handed out (`last + 1` when
    /// recording is off: none).
    func oldestKept(last: UInt64) -> UInt64 {
        capacity == 0 ? last + 1 : (last > UInt64(capacity) ? last - UInt64(capacity) + 1 : 1)
    }

    /// Whether `seq` (handed out) is recent enough to be in the ring, stored or about to be.
    func isWithinRing(_ seq: UInt64) -> Bool {
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
        if seq % SegmentSummaries.segmentSize == 0 {
            // A segment is complete (its other records may still be being stored): its token
            // filter is built off the request path.
            Task(priority: .utility) { await self.summarise(segment: SegmentSummaries.segment(of: seq)) }
        }
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

    // MARK: A mirror of the shared records

    /// Makes this ring a mirror of the shared records (docs/replicas.md) whose first record read
    /// will come after `seq`: numbering goes on from there, and nothing before it exists here.
    /// One task (the mirror) appends, in the shared order.
    func startMirror(after seq: UInt64) {
        head.store(seq, ordering: .releasing)
        cleared.store(seq, ordering: .releasing)
    }

    /// Appends a shared record under its own number. Numbers the mirror did not get (deleted by
    /// retention before it read them, or unreadable) are passed over as cleared.
    func appendMirrored(_ record: RawRecord) {
        skipMirror(through: record.seq - 1)
        append { seq in
            var record = record
            record.seq = seq
            return record
        }
    }

    /// Passes over shared numbers up to `seq` that hold no record here.
    func skipMirror(through seq: UInt64) {
        guard seq > lastSeq else { return }
        if lastSeq == 0 || seq > lastSeq {
            head.store(seq, ordering: .releasing)
            cleared.store(max(clearedThrough, seq), ordering: .releasing)
        }
    }

    /// Tells every event stream `notice` (refused streams and GOAWAYs are not records, so only live
    /// streams hear of them; `/v1/stats` counts them). Costs nothing while nobody subscribes.
    func publish(_ notice: ConnectionNotice) {
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
        stripes[slot % stripeCount].prefetchForWrite(position: slot / stripeCount)
    }

    /// The record `seq` if its slot still holds it; `seq` must have been handed out (the dispatcher
    /// scans with it, RecordStore+Dispatch.swift).
    func read(_ seq: UInt64) -> RawRecord? {
        let slot = Int((seq - 1) % UInt64(capacity))
        let position = slot / stripeCount
        return stripes[slot % stripeCount].slots.withLock { slots in
            slots.record(seq, at: position)
        }
    }

    /// The record `seq` while the ring holds it (not evicted, not cleared, already stored).
    func record(_ seq: UInt64) -> RawRecord? {
        guard capacity > 0, seq >= 1, seq <= lastSeq, seq > clearedThrough, let record = read(seq),
              !Self.isHidden(record, by: hiddenTeamMarks)
        else { return nil }
        return record
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
        let tokenHash = filter.token.map(SegmentSummaries.tokenHash)
        let hidden = hiddenTeamMarks
        while seq <= last, found.count < limit {
            if let tokenHash, seq == SegmentSummaries.firstSeq(of: SegmentSummaries.segment(of: seq)) {
                let segment = SegmentSummaries.segment(of: seq)
                let segmentEnd = SegmentSummaries.lastSeq(of: segment)
                if segmentEnd <= last, summaries.mayHold(segment: segment, tokenHash: tokenHash) == false {
                    // No record of this segment was sent to the token the filter names.
                    next = segmentEnd
                    seq = segmentEnd + 1
                    continue
                }
            }
            if let record = read(seq) {
                if filter.matches(record), !Self.isHidden(record, by: hidden) { found.append(record) }
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

    /// Builds and keeps the token filter of a complete segment (``SegmentSummaries``). A record
    /// not yet stored is waited for a little; a segment partly evicted or cleared gets no filter.
    func summarise(segment: UInt64) async {
        var filter = SegmentSummaries.Filter()
        var seq = SegmentSummaries.firstSeq(of: segment)
        let end = SegmentSummaries.lastSeq(of: segment)
        var tries = 0
        let cleared = clearedThrough
        while seq <= end {
            let slot = Int((seq - 1) % UInt64(capacity))
            var hash: UInt64?
            let present = stripes[slot % stripeCount].slots.withLock { slots in
                slots.modify(seq, at: slot / stripeCount) { hash = SegmentSummaries.tokenHash(path: $0.path) }
            }
            if present {
                if let hash { filter.insert(hash) }
                seq += 1
                continue
            }
            guard isWithinRing(seq), seq > clearedThrough, tries < 100 else { return }
            // Handed out, not yet stored.
            tries += 1
            await Task.yield()
        }
        guard clearedThrough == cleared, seq > end else { return }
        summaries.keep(filter, segment: segment, oldestKept: oldestKept(last: lastSeq))
    }

    /// Clears one team's records up to `seq` (its reset or removal): no query finds them again.
    /// The ring keeps their slots until they are evicted.
    func hideTeam(_ teamID: String, through seq: UInt64) {
        // The team's records up to `seq` that queries still find (those an earlier mark hid are
        // not found again), for ``visibleCount``.
        let newlyHidden = seqs(matching: RecordFilter(outcome: .all, team: teamID), through: seq)
        hiddenSeqs.withLock { seqs in
            seqs = (seqs + newlyHidden).sorted()
        }
        hiddenTeams.withLock { hidden in
            // Two resets of one team at once: the later mark wins.
            hidden[teamID] = max(hidden[teamID] ?? 0, seq)
            // Marks below the whole ring's clearing, or below the oldest record it holds, hide
            // nothing more: forget them. What is left is bounded by the teams reset or removed
            // within one ring's worth of records, and by ``maximumTeamMarks`` (the oldest go first).
            let floor = goneThrough(last: lastSeq)
            hidden = hidden.filter { $0.value > floor }
            if hidden.count > Self.maximumTeamMarks {
                for (team, _) in hidden.sorted(by: { $0.value < $1.value }).prefix(hidden.count - Self.maximumTeamMarks) {
                    hidden[team] = nil
                }
            }
            hidesTeams.store(!hidden.isEmpty, ordering: .releasing)
        }
    }

    /// The most team marks kept (each a team ID and a number).
    static let maximumTeamMarks = 100_000

    /// The teams' marks, for one query (empty while no team was cleared).
    var hiddenTeamMarks: [String: UInt64] {
        hidesTeams.load(ordering: .acquiring) ? hiddenTeams.withLock { $0 } : [:]
    }

    /// Whether `record` belongs to a team cleared after it was recorded.
    static func isHidden(_ record: RawRecord, by marks: [String: UInt64]) -> Bool {
        guard !marks.isEmpty, let team = record.shape.auth.teamId, let mark = marks[team] else { return false }
        return record.seq <= mark
    }

    /// Forgets every record; `seq` keeps counting.
    func removeAll() {
        hiddenTeams.withLock { hidden in
            hidden = [:]
            hidesTeams.store(false, ordering: .releasing)
        }
        hiddenSeqs.withLock { $0 = [] }
        for stripe in stripes {
            // The old records are released after the lock is.
            let old = stripe.replaceSlots()
            _ = consume old
        }
        // Only now: a writer that took its seq before this point may have stored into storage
        // just dropped, and its seq must count as cleared, or queries would wait for it.
        cleared.store(lastSeq, ordering: .releasing)
        summaries.removeAll()
        // A dispatcher that stopped at a slot emptied above looks again.
        subscriptions.recordsArrived()
    }
}

@testable import APNSMock
import APNSMockCore
import Testing

/// What every event loop writes per request is kept per loop, and reads add the loops up.
@Suite("Counters shared by event loops")
struct SharedCounterTests {
    /// Each stripe counts on its own; a loop index past the stripes folds onto one; the values
    /// are the sums.
    @Test func stripedCountersSumTheirStripes() {
        let counters = StripedCounters(width: 3, stripes: 3)  // four stripes
        for stripe in 0..<6 {
            counters.increment(0, stripe: stripe)
            counters.increment(2, stripe: stripe)
            counters.increment(2, stripe: stripe)
        }
        counters.increment(1, stripe: 9)
        #expect(counters.values == [6, 1, 12])
    }

    /// Requests counted on different loops' stripes add up in /v1/stats' numbers.
    @Test func statisticsAddUpTheLoops() {
        let statistics = RequestStatistics(stripes: 4)
        for stripe in 0..<8 {
            statistics.count(status: 200, rejection: nil, action: nil, stripe: stripe)
            statistics.count(status: 400, rejection: Rejection(.badDeviceToken), action: nil, stripe: stripe)
        }
        let snapshot = statistics.snapshot(openConnections: 0, totalConnections: 0, records: RecordStore(capacity: 0))
        #expect(snapshot.requests == 16 && snapshot.accepted == 8 && snapshot.byReason["BadDeviceToken"] == 8)
    }

    /// Each stripe of the record ring counts what it evicts under its own lock: the total is every
    /// record pushed out, not the ones a delete removed, and survives a delete.
    @Test func evictionsAreCountedPerStripe() {
        let store = RecordStore(capacity: 8, stripes: 4)
        let shape = RawRecordTests.shape()
        let record = { @Sendable (seq: UInt64) in
            RawRecord(
                seq: seq, receivedAt: 1_700_000_000_000, shape: shape, path: "/3/device/abcd", apnsIDHeader: nil,
                apnsID: .generated(RawRecordTests.generated), uniqueID: nil, status: 200, rejection: nil, injected: false,
                action: nil, streamID: 1, broadcast: nil)
        }
        for _ in 0..<12 { store.append(record) }
        #expect(store.evictions == 4)
        store.removeAll()
        for _ in 0..<8 { store.append(record) }
        #expect(store.evictions == 4, "deleted records are not evictions")
        for _ in 0..<3 { store.append(record) }
        #expect(store.evictions == 7)
    }
}

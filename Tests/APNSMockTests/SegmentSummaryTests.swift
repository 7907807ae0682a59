@testable import APNSMock
import APNSMockCore
import Testing

/// The token filters a query skips ring segments with: a query by token finds exactly what a full
/// scan finds (no false negatives), also across eviction, and a token nobody pushed to is answered
/// from the filters alone.
@Suite("Segment token filters")
struct SegmentSummaryTests {
    static func append(_ store: RecordStore, token: String) {
        let shape = RawRecordTests.shape()
        store.append { seq in
            RawRecord(
                seq: seq, receivedAt: 0, shape: shape, path: "/3/device/\(token)", apnsIDHeader: nil,
                apnsID: .generated(UUIDValue(high: seq, low: seq)), uniqueID: nil, status: 200, rejection: nil,
                injected: false, action: nil, streamID: 1)
        }
    }

    static func token(_ index: Int) -> String {
        String(repeating: String(format: "%02x", index % 256), count: 32)
    }

    @Test func queriesByTokenFindWhatAScanFinds() async throws {
        let store = RecordStore(capacity: 8192)
        // 12,000 records over 50 tokens: the ring evicted the oldest 3,808.
        for index in 0..<12_000 { Self.append(store, token: Self.token(index % 50 == 7 ? 7 : index % 50)) }
        // The background filters of the complete segments.
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline,
              store.summaries.mayHold(segment: SegmentSummaries.segment(of: 11_264), tokenHash: SegmentSummaries.tokenHash(Self.token(7))) == nil {
            try await Task.sleep(for: .milliseconds(10))
        }
        for index in [0, 7, 13, 49] {
            let filter = RecordFilter(token: Self.token(index))
            let found = store.query(since: 0, filter: filter, limit: 100_000).records.map(\.seq)
            let expected = (UInt64(3809)...12_000).filter { Int($0 - 1) % 50 == index }
            #expect(found == expected, "token \(index)")
        }
        // Upper case in the path is the same token.
        let absent = store.query(since: 0, filter: RecordFilter(token: String(repeating: "ff", count: 32)), limit: 10)
        #expect(absent.records.isEmpty)
        #expect(absent.next == 12_000)
        #expect(SegmentSummaries.tokenHash(path: "/3/device/ABCD") == SegmentSummaries.tokenHash("abcd"))
        #expect(SegmentSummaries.tokenHash(path: "/4/broadcasts/apps/x") == nil)
    }
}

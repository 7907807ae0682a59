import APNSMockCore
import Synchronization

/// What a query by device token needs to skip the parts of the ring that cannot hold a match: for
/// each complete segment of ``segmentSize`` records, a Bloom filter of the device tokens its
/// records were sent to. A `wait` for a push that has not arrived yet, on a ring of 100,000
/// records, then checks about a hundred filters instead of reading every record (it read all of
/// them, about 25 ms each, so that a thousand concurrent waiters cost half a minute of CPU).
///
/// A segment's filter is built off the request path: when a request takes the last `seq` of a
/// segment, a background task reads the segment's tokens (a hash of each, no allocation) and keeps
/// the filter; recording costs one comparison per record. Records of a complete segment never
/// change their token, so a kept filter has no false negatives; a segment without a filter (its
/// build found a record not yet stored, or the ring is being cleared) is simply read. At most one
/// filter per segment of the ring is kept (256 bytes each: 25 KB for the default 100,000 records).
final class SegmentSummaries: Sendable {
    static let segmentSize: UInt64 = 1024
    /// Bits of each filter: 2,048 (about 8% false positives with a thousand distinct tokens).
    private static let words = 32

    struct Filter: Sendable {
        var bits: [UInt64]

        init() { bits = [UInt64](repeating: 0, count: SegmentSummaries.words) }

        mutating func insert(_ hash: UInt64) {
            let (a, b) = Self.positions(hash)
            bits[a >> 6] |= 1 << UInt64(a & 63)
            bits[b >> 6] |= 1 << UInt64(b & 63)
        }

        func mayContain(_ hash: UInt64) -> Bool {
            let (a, b) = Self.positions(hash)
            return bits[a >> 6] & (1 << UInt64(a & 63)) != 0 && bits[b >> 6] & (1 << UInt64(b & 63)) != 0
        }

        private static func positions(_ hash: UInt64) -> (Int, Int) {
            let size = UInt64(SegmentSummaries.words * 64)
            return (Int(hash % size), Int((hash >> 32) % size))
        }
    }

    private let filters = Mutex<[UInt64: Filter]>([:])
    private let limit: Int

    init(capacity: Int) {
        limit = max(1, capacity / Int(Self.segmentSize) + 2)
    }

    static func segment(of seq: UInt64) -> UInt64 { (seq - 1) / segmentSize }
    static func firstSeq(of segment: UInt64) -> UInt64 { segment * segmentSize + 1 }
    static func lastSeq(of segment: UInt64) -> UInt64 { (segment + 1) * segmentSize }

    /// Whether the segment may hold a record for the token whose ``tokenHash(_:)`` is `hash`:
    /// `nil` when no filter of it is kept.
    func mayHold(segment: UInt64, tokenHash hash: UInt64) -> Bool? {
        filters.withLock { $0[segment]?.mayContain(hash) }
    }

    /// Keeps the filter of a complete segment, forgetting those the ring no longer holds.
    func keep(_ filter: Filter, segment: UInt64, oldestKept: UInt64) {
        let oldestSegment = Self.segment(of: max(1, oldestKept))
        filters.withLock { filters in
            if filters.count >= limit {
                filters = filters.filter { $0.key >= oldestSegment }
            }
            if filters.count < limit, segment >= oldestSegment { filters[segment] = filter }
        }
    }

    /// Every filter forgotten (the records were).
    func removeAll() {
        filters.withLock { $0.removeAll() }
    }

    /// FNV-1a of the device token in a `/3/device/<token>` path, in lower case (the canonical
    /// spelling a filter compares by), without allocating; `nil` for any other path.
    static func tokenHash(path: String?) -> UInt64? {
        guard var path else { return nil }
        return path.withUTF8 { bytes -> UInt64? in
            let prefix: StaticString = "/3/device/"
            let expected = UnsafeBufferPointer(start: prefix.utf8Start, count: prefix.utf8CodeUnitCount)
            guard bytes.count > expected.count, bytes.prefix(expected.count).elementsEqual(expected) else { return nil }
            return hash(bytes[prefix.utf8CodeUnitCount...])
        }
    }

    /// The same hash of a canonical token, as a filter names it.
    static func tokenHash(_ token: String) -> UInt64 {
        var token = token
        return token.withUTF8 { hash($0[...]) }
    }

    private static func hash(_ bytes: Slice<UnsafeBufferPointer<UInt8>>) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes {
            let lower = (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) ? byte | 0x20 : byte
            hash = (hash ^ UInt64(lower)) &* 0x0000_0100_0000_01b3
        }
        return hash
    }
}

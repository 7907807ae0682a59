import APNSMockCore
internal import CAPNSMockShims
import Synchronization

// The record ring's storage: the one place in Recording/ that works with addresses (prefetching a
// slot ahead of its store). The ring's logic (sequence numbers, eviction, queries) is in
// RecordStore.swift and touches slots only through these types.

/// Records are held by value in their slots: appending moves the record in and the evicted
/// one out under the stripe's lock, so a record costs no allocation of its own, and the evicted
/// record is destroyed after the lock is released.
final class RecordStripe: Sendable {
    let slots: Mutex<RecordSlots>
    let size: Int
    /// Where the stripe's records and tags start, for prefetching a slot ahead of its store
    /// without the lock: replaced (under the lock) only when ``replaceSlots()`` swaps the storage,
    /// and a prefetch of a stale address is harmless (a hint, it never faults).
    let elementBase: Atomic<UInt>
    let tagBase: Atomic<UInt>

    init(size: Int) {
        self.size = size
        let slots = RecordSlots(size: size)
        let (element, tag) = slots.addresses(at: 0)
        elementBase = Atomic(element)
        tagBase = Atomic(tag)
        self.slots = Mutex(slots)
    }

    /// Brings the slot at `position` (and its tag) into cache before a record is stored there.
    /// Reads the bases without the lock: a stale address after ``replaceSlots()`` only makes the
    /// hint useless, as a prefetch never faults.
    @inline(__always)
    func prefetchForWrite(position: Int) {
        let element = elementBase.load(ordering: .relaxed) &+ UInt(position) &* UInt(MemoryLayout<RawRecord>.stride)
        let tag = tagBase.load(ordering: .relaxed) &+ UInt(position) &* UInt(MemoryLayout<UInt64>.stride)
        CAPNSMockShims_prefetch_for_write(UnsafeRawPointer(bitPattern: element), UInt(MemoryLayout<RawRecord>.size))
        CAPNSMockShims_prefetch_for_write(UnsafeRawPointer(bitPattern: tag), 8)
    }

    /// Swaps in empty storage and returns the old one, to be released after the lock is.
    func replaceSlots() -> RecordSlots {
        slots.withLock { slots -> RecordSlots in
            var old = RecordSlots(size: size)
            swap(&old, &slots)
            let (element, tag) = slots.addresses(at: 0)
            elementBase.store(element, ordering: .relaxed)
            tagBase.store(tag, ordering: .relaxed)
            return old
        }
    }
}

/// A stripe's records in fixed storage, tagged with their `seq` (0: empty), so that checking a
/// slot reads one word. Allocated whole up front; only ever touched under its stripe's lock.
struct RecordSlots: ~Copyable {
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

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// Byte and memory helpers: the only pointer work outside the server's TLS/ and HTTP2/ folders.
// Header values, tokens and payloads are compared and read as UTF-8 bytes on the request path
// (hundreds of thousands of times a second), so these borrow storage instead of copying and compare
// with word loads or memcmp instead of element by element; ``TaggedSlots`` is fixed storage for the
// record ring. Everything else is safe Swift built on them.

extension UInt8 {
    /// ASCII `0-9`, `a-f`, `A-F`.
    var isHexDigit: Bool {
        // Branch-light form of 0-9 / a-f / A-F: runs for every byte of every device token.
        (self &- UInt8(ascii: "0")) < 10 || ((self | 0x20) &- UInt8(ascii: "a")) < 6
    }

    /// ASCII `A-F`: a hex digit that needs folding before tokens are compared.
    var isUppercaseHexLetter: Bool {
        self >= UInt8(ascii: "A") && self <= UInt8(ascii: "F")
    }
}

extension String {
    /// Whether the string's UTF-8 bytes start with `prefix`'s (a byte comparison, no Unicode
    /// normalisation: paths and header values are compared as the client sent them).
    public func hasUTF8Prefix(_ prefix: StaticString) -> Bool {
        withUTF8Bytes { $0.hasPrefix(prefix) }
    }
}

extension Optional where Wrapped == String {
    /// The same value: a no-op to read, and one on purpose. Invariant: on the request path, a
    /// `String?` copied from a field of a value in memory into a field of another goes through
    /// this function, which stays out of line (`@inline(never)`: inlined, it is a plain copy again)
    /// and takes and returns the optional in registers, so that the copy is one
    /// `swift_bridgeObjectRetain` rather than a call to Optional's generic value witness. Evidence:
    /// about 100 instructions a copy, 315 per device push over its uses (Swift 6.3). Guarded by the
    /// instruction gate (docs/speed-idioms.md); elsewhere copy the plain field.
    @inline(never)
    public func registerCopy() -> String? {
        self
    }
}

extension StringProtocol {
    /// Runs `body` over the string's UTF-8 bytes. Native strings are contiguous, so this normally
    /// borrows the storage; anything else is made contiguous in a copy first.
    func withUTF8Bytes<Result>(_ body: (UnsafeBufferPointer<UInt8>) -> Result) -> Result {
        if let result = utf8.withContiguousStorageIfAvailable(body) {
            return result
        }
        var copy = String(self)
        return copy.withUTF8(body)
    }
}

/// Whether `count` bytes at `a` and `b` are equal (`a` may be `nil` only when `count` is 0).
@inlinable @inline(__always)
public func memoryEqual(_ a: UnsafePointer<UInt8>?, _ b: UnsafePointer<UInt8>, _ count: Int) -> Bool {
    guard let a else { return count == 0 }
    // Header names and most values compared here are short: two overlapping word loads cover
    // 4...16 bytes without a call; longer runs go to memcmp.
    let x = UnsafeRawPointer(a), y = UnsafeRawPointer(b)
    switch count {
    case 0:
        return true
    case 1..<4:
        for offset in 0..<count where a[offset] != b[offset] {
            return false
        }
        return true
    case 4...8:
        return x.loadUnaligned(as: UInt32.self) == y.loadUnaligned(as: UInt32.self)
            && x.loadUnaligned(fromByteOffset: count - 4, as: UInt32.self)
                == y.loadUnaligned(fromByteOffset: count - 4, as: UInt32.self)
    case 9...16:
        return x.loadUnaligned(as: UInt64.self) == y.loadUnaligned(as: UInt64.self)
            && x.loadUnaligned(fromByteOffset: count - 8, as: UInt64.self)
                == y.loadUnaligned(fromByteOffset: count - 8, as: UInt64.self)
    default:
        return memcmp(x, y, count) == 0
    }
}

extension Array where Element == UInt8 {
    /// Byte equality through ``memoryEqual`` (memcmp for long runs); `==` on `[UInt8]` compares
    /// element by element. The per-connection memos compare every request's payload with the
    /// previous one's this way.
    @inlinable
    public func hasSameBytes(as other: [UInt8]) -> Bool {
        withUnsafeBufferPointer { mine in
            other.withUnsafeBufferPointer { theirs in
                mine.count == theirs.count
                    && (mine.count == 0 || memoryEqual(mine.baseAddress, theirs.baseAddress!, mine.count))
            }
        }
    }
}

extension UnsafeBufferPointer<UInt8> {
    /// Whether the bytes end with `suffix`.
    func hasSuffix(_ suffix: StaticString) -> Bool {
        let count = suffix.utf8CodeUnitCount
        guard count <= self.count, let base = baseAddress else { return count == 0 }
        return memoryEqual(base + (self.count - count), suffix.utf8Start, count)
    }
}

extension UnsafeRawBufferPointer {
    /// Whether the bytes are exactly `text`'s.
    @inlinable @inline(__always)
    public func hasSameBytes(as text: StaticString) -> Bool {
        count == text.utf8CodeUnitCount
            && memoryEqual(baseAddress?.assumingMemoryBound(to: UInt8.self), text.utf8Start, count)
    }
}

extension Array where Element == UInt8 {
    /// Whether `text`'s bytes (not empty) occur anywhere in the array: memchr finds each candidate
    /// first byte, then the rest is compared in place; no copy, no allocation.
    func containsBytes(of text: StaticString) -> Bool {
        let length = text.utf8CodeUnitCount
        guard length > 0 else { return true }
        return withUnsafeBufferPointer { bytes in
            guard let base = bytes.baseAddress, bytes.count >= length else { return false }
            let first = Int32(text.utf8Start.pointee)
            var offset = 0
            let lastStart = bytes.count - length
            while offset <= lastStart {
                guard let found = memchr(base + offset, first, lastStart - offset + 1) else { return false }
                let position = UnsafePointer(found.assumingMemoryBound(to: UInt8.self)) - base
                if memoryEqual(base + position, text.utf8Start, length) { return true }
                offset = position + 1
            }
            return false
        }
    }
}

extension UnsafeBufferPointer<UInt8> {
    /// Whether the bytes start with `prefix`.
    func hasPrefix(_ prefix: StaticString) -> Bool {
        let count = prefix.utf8CodeUnitCount
        guard count <= self.count else { return false }
        return memoryEqual(baseAddress, prefix.utf8Start, count)
    }

    /// The bytes after the first `count`, borrowed.
    func dropping(_ count: Int) -> UnsafeBufferPointer<UInt8> {
        UnsafeBufferPointer(rebasing: self[Swift.min(count, self.count)...])
    }
}

extension String {
    /// Whether the string's UTF-8 is exactly `bytes`.
    @inlinable
    public func hasSameBytes(as bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        utf8.withContiguousStorageIfAvailable { stored in
            stored.count == bytes.count && memoryEqual(bytes.baseAddress, stored.baseAddress!, stored.count)
        } ?? false
    }
}

/// A fixed number of slots allocated whole up front, each empty or holding one element under a
/// non-zero tag (the record ring tags each record with its `seq`). Storing an element moves it in
/// and the one it displaces out; nothing grows, nothing is wrapped in an Optional, so a slot costs
/// the element's size plus a word. The pages of a large instance become resident only as slots
/// are written.
///
/// Not thread-safe: its owner serialises access (the record ring holds each instance in a Mutex).
public struct TaggedSlots<Element>: ~Copyable {
    // Inlinable (the record ring uses it from the server module): a generic type called across
    // modules would otherwise run unspecialised, moving each record through value witnesses.
    @usableFromInline let elements: UnsafeMutablePointer<Element>
    @usableFromInline let tags: UnsafeMutablePointer<UInt64>
    public let count: Int

    @inlinable
    public init(count: Int) {
        self.count = Swift.max(1, count)
        elements = .allocate(capacity: self.count)
        // calloc, not allocate + initialize: a large zeroed block comes straight from the kernel's
        // zero pages, so the tags of a big ring cost no resident memory until slots are written.
        // (Only a size the address space cannot hold fails; recording.capacity is capped far below.)
        guard let zeroed = calloc(self.count, MemoryLayout<UInt64>.stride) else {
            preconditionFailure("cannot reserve \(self.count) slots")
        }
        tags = zeroed.bindMemory(to: UInt64.self, capacity: self.count)
    }

    @inlinable
    deinit {
        for position in 0..<count where tags[position] != 0 {
            (elements + position).deinitialize(count: 1)
        }
        elements.deallocate()
        free(tags)
    }

    /// The tag of the slot at `position`; 0 when it is empty.
    @inlinable
    public func tag(at position: Int) -> UInt64 {
        precondition(position >= 0 && position < count)
        return tags[position]
    }

    /// Where the element at `position` and its tag live, as addresses only (nothing is read):
    /// for a cache prefetch ahead of a store.
    @inlinable
    public func addresses(at position: Int) -> (element: UInt, tag: UInt) {
        let position = Swift.min(Swift.max(0, position), count - 1)
        return (UInt(bitPattern: elements + position), UInt(bitPattern: tags + position))
    }

    /// The element at `position` if its tag is `tag`.
    @inlinable
    public func element(at position: Int, taggedAs tag: UInt64) -> Element? {
        precondition(position >= 0 && position < count)
        return tag != 0 && tags[position] == tag ? elements[position] : nil
    }

    /// Changes the element at `position` in place if its tag is `tag`; returns whether it did.
    @inlinable
    public mutating func modify(at position: Int, taggedAs tag: UInt64, _ body: (inout Element) -> Void) -> Bool {
        precondition(position >= 0 && position < count)
        guard tag != 0, tags[position] == tag else { return false }
        body(&elements[position])
        return true
    }

    /// Stores the element `make` builds under `tag` (non-zero) at `position`, building it in
    /// place, and returns the element it displaces.
    @inlinable
    public mutating func store(tag: UInt64, at position: Int, _ make: () -> Element) -> Element? {
        precondition(position >= 0 && position < count && tag != 0)
        let displaced = tags[position] == 0 ? nil : (elements + position).move()
        (elements + position).initialize(to: make())
        tags[position] = tag
        return displaced
    }
}

/// A version-4 UUID held as 128 bits and written out as text without allocating.
///
/// APNs generates an uppercase `apns-id` when a request has none and, in the sandbox, a lowercase
/// `apns-unique-id` for every accepted request; at load-test rates that is one or two UUIDs per
/// request, so they come from a per-connection generator and are formatted into a caller's buffer.
struct UUIDValue: Sendable, Equatable {
    var high: UInt64
    var low: UInt64

    static let textLength = 36

    static func random(using generator: inout some RandomNumberGenerator) -> UUIDValue {
        var high = generator.next() as UInt64
        var low = generator.next() as UInt64
        high = (high & ~0xF000) | 0x4000                     // version 4
        low = (low & ~(0xC000 << 48)) | (0x8000 << 48)       // RFC 4122 variant
        return UUIDValue(high: high, low: low)
    }

    /// Writes the 36-character 8-4-4-4-12 form to `destination`.
    ///
    /// Eight hex digits at a time: the nibbles of 32 bits are spread one per byte, turned into
    /// ASCII with a carry test for the letters, and stored as one word (this runs once or twice
    /// per request; a digit at a time cost twice the instructions).
    func write(to destination: UnsafeMutablePointer<UInt8>, uppercase: Bool) {
        let raw = UnsafeMutableRawPointer(destination)
        let letters: UInt64 = uppercase ? 7 : 39  // from "9" + 1 to "A", or to "a"
        /// The digits of the low 32 bits of `value`, the least significant in the lowest byte.
        func digits(_ value: UInt64) -> UInt64 {
            var x = value & 0xFFFF_FFFF
            x = (x | (x << 16)) & 0x0000_FFFF_0000_FFFF
            x = (x | (x << 8)) & 0x00FF_00FF_00FF_00FF
            x = (x | (x << 4)) & 0x0F0F_0F0F_0F0F_0F0F
            // A nibble above 9 carries into bit 4 when 6 is added: those bytes become letters.
            let isLetter = ((x &+ 0x0606_0606_0606_0606) >> 4) & 0x0101_0101_0101_0101
            return x &+ 0x3030_3030_3030_3030 &+ isLetter &* letters
        }
        // Stored big-endian, so that the most significant digit comes first.
        func eight(_ digits: UInt64, at offset: Int) {
            raw.storeBytes(of: digits.bigEndian, toByteOffset: offset, as: UInt64.self)
        }
        func four(_ digits: UInt64, at offset: Int) {
            raw.storeBytes(of: UInt32(truncatingIfNeeded: digits).bigEndian, toByteOffset: offset, as: UInt32.self)
        }
        func dash(at offset: Int) { raw.storeBytes(of: UInt8(ascii: "-"), toByteOffset: offset, as: UInt8.self) }
        eight(digits(high >> 32), at: 0)
        dash(at: 8)
        let middle = digits(high)
        four(middle >> 32, at: 9)
        dash(at: 13)
        four(middle, at: 14)
        dash(at: 18)
        let next = digits(low >> 32)
        four(next >> 32, at: 19)
        dash(at: 23)
        four(next, at: 24)
        eight(digits(low), at: 28)
    }

    func text(uppercase: Bool) -> String {
        String(unsafeUninitializedCapacity: Self.textLength) { buffer in
            write(to: buffer.baseAddress!, uppercase: uppercase)
            return Self.textLength
        }
    }
}

/// xoshiro256** seeded from the system generator: fast, per-connection, not cryptographic.
/// UUIDs in responses only need to be unique, not unpredictable.
struct FastRandom: RandomNumberGenerator {
    private var state: (UInt64, UInt64, UInt64, UInt64)

    init() {
        var system = SystemRandomNumberGenerator()
        state = (system.next(), system.next(), system.next(), system.next() | 1)
    }

    init(seed: UInt64) {
        var splitmix = seed
        func next() -> UInt64 {
            splitmix &+= 0x9E37_79B9_7F4A_7C15
            var z = splitmix
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        state = (next(), next(), next(), next())
    }

    mutating func next() -> UInt64 {
        let result = ((state.1 &* 5) << 7 | (state.1 &* 5) >> 57) &* 9
        let t = state.1 << 17
        state.2 ^= state.0
        state.3 ^= state.1
        state.1 ^= state.2
        state.0 ^= state.3
        state.2 ^= t
        state.3 = state.3 << 45 | state.3 >> 19
        return result
    }
}

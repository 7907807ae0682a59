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
    func write(to destination: UnsafeMutablePointer<UInt8>, uppercase: Bool) {
        let digits: StaticString = uppercase ? "0123456789ABCDEF" : "0123456789abcdef"
        let table = digits.utf8Start
        var out = 0
        func emit(_ value: UInt64, nibbles: Int) {
            var shift = (nibbles - 1) * 4
            while shift >= 0 {
                destination[out] = table[Int((value >> UInt64(shift)) & 0xF)]
                out += 1
                shift -= 4
            }
        }
        func dash() {
            destination[out] = UInt8(ascii: "-")
            out += 1
        }
        emit(high >> 32, nibbles: 8)
        dash()
        emit((high >> 16) & 0xFFFF, nibbles: 4)
        dash()
        emit(high & 0xFFFF, nibbles: 4)
        dash()
        emit(low >> 48, nibbles: 4)
        dash()
        emit(low & 0xFFFF_FFFF_FFFF, nibbles: 12)
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

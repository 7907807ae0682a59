@testable import APNSMock
import Foundation
import Testing

/// The text of a generated id: the 8-4-4-4-12 form Foundation writes, in either case, for every
/// digit value in every position.
@Suite("UUID text")
struct UUIDValueTests {
    static func foundationText(_ value: UUIDValue) -> String {
        var bytes = [UInt8](repeating: 0, count: 16)
        for index in 0..<8 {
            bytes[index] = UInt8(truncatingIfNeeded: value.high >> (56 - 8 * UInt64(index)))
            bytes[8 + index] = UInt8(truncatingIfNeeded: value.low >> (56 - 8 * UInt64(index)))
        }
        let uuid = UUID(uuid: (
            bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
            bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]))
        return uuid.uuidString
    }

    @Test func textMatchesFoundationInBothCases() {
        var values = [
            UUIDValue(high: 0, low: 0), UUIDValue(high: .max, low: .max),
            UUIDValue(high: 0x0123_4567_89AB_CDEF, low: 0xFEDC_BA98_7654_3210),
            UUIDValue(high: 0x9A9A_9A9A_9A9A_9A9A, low: 0xA9A9_A9A9_A9A9_A9A9),
        ]
        var random = FastRandom(seed: 23)
        for _ in 0..<1000 { values.append(UUIDValue.random(using: &random)) }
        for value in values {
            let expected = Self.foundationText(value)
            #expect(value.text(uppercase: true) == expected)
            #expect(value.text(uppercase: false) == expected.lowercased())
        }
    }
}

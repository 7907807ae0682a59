import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The mock's time: the wall clock plus an offset that tests move forward (`POST /v1/clock`), so
/// that "an hour later" takes a second. Every time rule reads it — a provider token's age and
/// skew, the window between token updates, rate limits, the timestamps the mock makes (410
/// `timestamp`, a device unregistered "now") — and records carry it when it differs from the wall
/// clock. `/v1/reset` sets the offset back to 0.
///
/// Reading it is one relaxed atomic load beside the clock call.
final class MockClock: Sendable {
    /// The furthest the clock may be moved ahead: ten years.
    static let maximumOffsetSeconds: Int64 = 10 * 365 * 86_400

    private let offset = Atomic<Int64>(0)

    /// Seconds the mock's time runs ahead of the wall clock.
    var offsetSeconds: Int64 { offset.load(ordering: .relaxed) }

    /// The mock's time in milliseconds since the epoch.
    func nowMilliseconds() -> Int64 {
        Self.wallMilliseconds() + offsetSeconds * 1000
    }

    /// The mock's time in whole seconds since the epoch.
    func nowSeconds() -> Int64 {
        Int64(time(nil)) + offsetSeconds
    }

    /// Moves the clock `seconds` ahead; returns the new offset, or `nil` (nothing changed) when it
    /// would pass ``maximumOffsetSeconds``.
    func advance(seconds: Int64) -> Int64? {
        advance(seconds: seconds, above: 0)
    }

    /// Moves the clock `seconds` ahead, as part of an offset that is `base` more (a team's clock,
    /// whose offset is the mock's plus its own): `nil` when the whole would pass
    /// ``maximumOffsetSeconds``.
    func advance(seconds: Int64, above base: Int64) -> Int64? {
        var current = offset.load(ordering: .relaxed)
        while true {
            guard seconds >= 0, base + current + seconds <= Self.maximumOffsetSeconds else { return nil }
            let (exchanged, original) = offset.compareExchange(
                expected: current, desired: current + seconds, ordering: .relaxed)
            if exchanged { return current + seconds }
            current = original
        }
    }

    func reset() {
        offset.store(0, ordering: .relaxed)
    }

    /// Milliseconds since the epoch on the wall clock: one `clock_gettime`.
    static func wallMilliseconds() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000
    }
}

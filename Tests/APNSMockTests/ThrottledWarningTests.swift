@testable import APNSMock
import Logging
import Testing

/// A warning that may come thousands of times (refused connections, set-up failures) is logged at
/// most once per interval, and what was counted within an interval is reported when it ends, not
/// at the next occurrence (which may come much later, or never).
@Suite("Throttled warnings")
struct ThrottledWarningTests {
    @Test func countsAreReportedWhenTheIntervalEnds() async throws {
        let (logger, store) = CapturingLogHandler.logger()
        let warning = ThrottledWarning("connection limit reached", logger: logger, interval: .milliseconds(200))
        for _ in 0..<50 { warning.note(["listener": "apns"]) }
        #expect(store.all.count == 1)
        #expect(store.all.first?.contains("count=1") == true)
        let deadline = ContinuousClock.now + .seconds(5)
        while store.all.count < 2, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        #expect(store.all.count == 2)
        #expect(store.all.last?.contains("count=49") == true, "\(store.all)")
        #expect(store.all.last?.contains("listener=apns") == true)
        #expect(warning.count == 50)
        // Quiet since: nothing more is logged.
        try await Task.sleep(for: .milliseconds(300))
        #expect(store.all.count == 2)
    }
}

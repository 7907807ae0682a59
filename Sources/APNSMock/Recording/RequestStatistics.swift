import APNSMockCore
import CoreMetrics
import NIOCore
import Prometheus
import Synchronization

/// Request counts for `/v1/stats` and `/metrics`, updated from every event loop.
///
/// One relaxed atomic add per request, filed the way the record listing files the record: answered
/// without a rejection is accepted, under its status (200, or 201 and 204 for channel management);
/// answered with a rejection is rejected, under its reason; answered with one of HTTP's own errors
/// that carry no reason (``reasonlessErrorStatuses``: the 431 of an oversized header list) is
/// rejected, under its status; not answered (a fault's GOAWAY, reset, close or hang) is rejected,
/// under the action. A fault action that still answered (a delay,
/// `shrink-streams`, `ignore-pings`) is counted under its status as well as in ``byAction``.
///
/// `/v1/stats` counts since start or the last `/v1/reset` or `DELETE /v1/notifications`, as the
/// records do (``resetCounts()``), and says the totals since start beside them; Prometheus counters
/// never go down, so `/metrics` counts since start. The Prometheus counters of the same outcomes
/// are brought up to date from the atomic counts when `/metrics` is read; they are created up front through swift-metrics with this server's own
/// `PrometheusMetricsFactory` (not the global `MetricsSystem`, so that several mocks in one test
/// process do not share numbers). The latency
/// histogram takes a lock inside swift-prometheus, so it observes one request in
/// ``latencySampleInterval`` per connection rather than every request.
final class RequestStatistics: Sendable {
    /// The statuses of an accepted answer (``successStatuses``), then `Reason.allCases`, then the
    /// fault actions that left the request unanswered, then ``reasonlessErrorStatuses``.
    private let counts: [RelaxedCounter]
    /// Every fault action applied, answered or not, by `FaultRule.Action.Name.allCases`.
    private let actionCounts: [RelaxedCounter]
    /// The counts at the last reset: `/v1/stats` reports what came since.
    private let baseline: Mutex<(counts: [Int], actions: [Int], refused: [Int])>
    /// Broadcast-side requests by kind (``RecordKind``: device pushes are the other counters'
    /// total, counted here at scrape time), and their Prometheus counters.
    private let kindCounts: [RelaxedCounter]
    private let kindCounters: [CoreMetrics.Counter]
    private let exportedKindCounts: Mutex<[Int]>
    private let counters: [CoreMetrics.Counter]
    let registry: PrometheusCollectorRegistry
    private let openConnectionsGauge: CoreMetrics.Gauge
    private let evictionsCounter: CoreMetrics.Counter
    private let exportedEvictions = Mutex<UInt64>(0)
    /// How much of each of `counts` the Prometheus counters have been given.
    private let exportedCounts: Mutex<[Int]>
    let latency: CoreMetrics.Timer
    /// Streams refused (RST_STREAM REFUSED_STREAM) by cause, and their Prometheus counters.
    private let refusedCounts: [RelaxedCounter]
    private let refusedCounters: [CoreMetrics.Counter]
    private let exportedRefused: Mutex<[Int]>
    /// The rates `/v1/stats` reports.
    private let rate = RequestRate()
    /// GOAWAYs sent, by cause and error code, since start and at the last reset; their Prometheus
    /// counters are made when a pair first occurs (GOAWAYs are rare: a lock is no cost).
    private let goAways = Mutex<GoAwayCounts>(GoAwayCounts())
    private let factory: PrometheusMetricsFactory
    /// Log lines the log sink dropped, and their counter (brought up to date on `/metrics`).
    private let droppedLogLines: (@Sendable () -> Int)?
    private let droppedLogLinesCounter: CoreMetrics.Counter?
    private let exportedDroppedLogLines = Mutex<Int>(0)

    private struct GoAwayCounts {
        struct Key: Hashable {
            var cause: GoAwayCause
            var code: String
        }
        var counts: [Key: Int] = [:]
        var atReset: [Key: Int] = [:]
        var counters: [Key: CoreMetrics.Counter] = [:]
    }
    /// Resets and clears of the records (``resetCounts()``), for `/v1/stats`' `clears`.
    private let clears = Atomic<Int>(0)

    static let latencySampleInterval = 16
    /// The statuses an accepted request is answered with: a push 200, channel management 201
    /// (created) and 204 (deleted) besides.
    static let successStatuses = [200, 201, 204]
    /// Error statuses answered without an APNs reason: 431, for a header list past the limit.
    static let reasonlessErrorStatuses = [HeaderListTooLarge.status]
    static let reasons = Reason.allCases
    static let actions = FaultRule.Action.Name.allCases
    /// Each outcome counter's `status` and `reason` labels in `/metrics`, in the order
    /// ``index(status:rejection:action:)`` files requests under them.
    static let outcomeLabels: [(status: String, reason: String)] =
        successStatuses.map { (String($0), "") } + reasons.map { (String($0.status), $0.rawValue) }
        + actions.map { ("none", $0.rawValue) } + reasonlessErrorStatuses.map { (String($0), "") }
    /// How many outcome counters there are.
    static let outcomeCount = outcomeLabels.count

    init(droppedLogLines: (@Sendable () -> Int)? = nil) {
        let registry = PrometheusCollectorRegistry()
        let factory = PrometheusMetricsFactory(registry: registry)
        self.registry = registry
        self.factory = factory
        self.droppedLogLines = droppedLogLines
        droppedLogLinesCounter = droppedLogLines.map { _ in
            CoreMetrics.Counter(label: "apns_log_lines_dropped_total", factory: factory)
        }
        let counters = Self.outcomeLabels.map {
            CoreMetrics.Counter(label: "apns_requests_total", dimensions: [("status", $0.status), ("reason", $0.reason)], factory: factory)
        }
        self.counters = counters
        self.counts = counters.map { _ in RelaxedCounter() }
        self.actionCounts = Self.actions.map { _ in RelaxedCounter() }
        self.exportedCounts = Mutex(counters.map { _ in 0 })
        kindCounters = RecordKind.allCases.map {
            CoreMetrics.Counter(label: "apns_requests_by_kind_total", dimensions: [("kind", $0.rawValue)], factory: factory)
        }
        kindCounts = RecordKind.allCases.map { _ in RelaxedCounter() }
        exportedKindCounts = Mutex(RecordKind.allCases.map { _ in 0 })
        openConnectionsGauge = CoreMetrics.Gauge(label: "apns_open_connections", factory: factory)
        evictionsCounter = CoreMetrics.Counter(label: "apns_recording_evictions_total", factory: factory)
        latency = CoreMetrics.Timer(label: "apns_request_duration_seconds", factory: factory)
        refusedCounters = RefusedStreamCause.allCases.map {
            CoreMetrics.Counter(label: "apns_refused_streams_total", dimensions: [("cause", $0.metricLabel)], factory: factory)
        }
        refusedCounts = RefusedStreamCause.allCases.map { _ in RelaxedCounter() }
        exportedRefused = Mutex(RefusedStreamCause.allCases.map { _ in 0 })
        baseline = Mutex((counts.map { _ in 0 }, Self.actions.map { _ in 0 }, RefusedStreamCause.allCases.map { _ in 0 }))
    }

    /// `/v1/stats` counts from zero again (`/v1/reset`, `DELETE /v1/notifications`), as the
    /// records do; `/metrics` goes on counting since start.
    func resetCounts() {
        clears.wrappingAdd(1, ordering: .relaxed)
        baseline.withLock { baseline in
            baseline = (counts.map(\.value), actionCounts.map(\.value), refusedCounts.map(\.value))
        }
        goAways.withLock { $0.atReset = $0.counts }
    }

    /// A team's counts since its last reset leave `/v1/stats` with its records (the team's reset
    /// or deletion hides them): the mock's totals are what its remaining records summarise.
    func forget(_ team: TeamCounts.Values) {
        baseline.withLock { baseline in
            for index in baseline.counts.indices { baseline.counts[index] += team.outcomes[index] }
            for index in baseline.actions.indices { baseline.actions[index] += team.actions[index] }
        }
    }

    /// One GOAWAY sent, counted at once in `/v1/stats` and `apns_goaways_total{cause,code}`.
    func countGoAway(cause: GoAwayCause, code: String) {
        let key = GoAwayCounts.Key(cause: cause, code: code)
        let counter = goAways.withLock { goAways -> CoreMetrics.Counter in
            goAways.counts[key, default: 0] += 1
            if let counter = goAways.counters[key] { return counter }
            let counter = CoreMetrics.Counter(
                label: "apns_goaways_total", dimensions: [("cause", cause.rawValue), ("code", code)], factory: factory)
            goAways.counters[key] = counter
            return counter
        }
        counter.increment()
    }

    /// GOAWAYs since the last reset.
    var goAwayStatistics: Statistics.GoAways {
        goAways.withLock { goAways in
            var byCause: [String: Int] = [:]
            for (key, count) in goAways.counts {
                let since = count - goAways.atReset[key, default: 0]
                if since > 0 { byCause[key.cause.rawValue, default: 0] += since }
            }
            return Statistics.GoAways(total: byCause.values.reduce(0, +), byCause: byCause)
        }
    }

    /// One stream refused: a relaxed atomic add.
    func countRefused(_ cause: RefusedStreamCause) {
        refusedCounts[cause.index].increment()
    }

    /// Refused streams since the last reset.
    var refusedStreams: Statistics.RefusedStreams {
        let since = baseline.withLock { $0.refused }
        func value(_ cause: RefusedStreamCause) -> Int { refusedCounts[cause.index].value - since[cause.index] }
        let before = value(.beforeAuthentication), over = value(.overLimit), goaway = value(.afterGoAway)
        return Statistics.RefusedStreams(
            total: before + over + goaway, beforeAuthentication: before, overLimit: over, afterGoAway: goaway)
    }

    /// Where a request is filed (see the type's comment): `status` is `nil` when it was not answered.
    static func index(status: Int?, rejection: Rejection?, action: FaultRule.Action.Name?) -> Int {
        if let rejection { return successStatuses.count + (reasons.firstIndex(of: rejection.reason) ?? 0) }
        if let status {
            if let offset = reasonlessErrorStatuses.firstIndex(of: status) {
                return successStatuses.count + reasons.count + actions.count + offset
            }
            return successStatuses.firstIndex(of: status) ?? 0
        }
        return successStatuses.count + reasons.count + (action.flatMap { actions.firstIndex(of: $0) } ?? 0)
    }

    /// Where a request was filed: its outcome's counter and its fault action's, if any.
    struct Filed {
        var outcome: Int
        var action: Int?
    }

    /// One relaxed atomic add (two with a fault action); the Prometheus counters catch up when
    /// `/metrics` is read. Returns where it was filed, for the request's team to count it the same
    /// way (``TeamCounts/count(_:)``).
    @discardableResult
    func count(status: Int?, rejection: Rejection?, action: FaultRule.Action.Name?) -> Filed {
        let index = Self.index(status: status, rejection: rejection, action: action)
        counts[index].increment()
        var filed = Filed(outcome: index, action: nil)
        if let action, let actionIndex = Self.actions.firstIndex(of: action) {
            actionCounts[actionIndex].increment()
            filed.action = actionIndex
        }
        return filed
    }

    /// Counts a broadcast or channel-management request by its kind (besides ``count(status:rejection:action:)``).
    func count(kind: RecordKind) {
        kindCounts[RecordKind.allCases.firstIndex(of: kind)!].increment()
    }

    /// What `/v1/stats` says of outcome counts (laid out as ``index(status:rejection:action:)``
    /// files them) and fault-action counts: the mock's own, or a team's (``TeamCounts``).
    struct Tally {
        var byStatus: [String: Int] = [:]
        var byReason: [String: Int] = [:]
        var byAction: [String: Int] = [:]
        var accepted = 0
        var total = 0

        init(values: [Int], actionValues: [Int]) {
            let successes = RequestStatistics.successStatuses.count
            for (offset, status) in RequestStatistics.successStatuses.enumerated() where values[offset] > 0 {
                byStatus[String(status)] = values[offset]
            }
            for (offset, reason) in RequestStatistics.reasons.enumerated() where values[successes + offset] > 0 {
                byStatus[String(reason.status), default: 0] += values[successes + offset]
                byReason[reason.rawValue, default: 0] += values[successes + offset]
            }
            for (offset, action) in RequestStatistics.actions.enumerated() where actionValues[offset] > 0 {
                byAction[action.rawValue] = actionValues[offset]
            }
            let reasonless = successes + RequestStatistics.reasons.count + RequestStatistics.actions.count
            for (offset, status) in RequestStatistics.reasonlessErrorStatuses.enumerated() where values[reasonless + offset] > 0 {
                byStatus[String(status), default: 0] += values[reasonless + offset]
            }
            accepted = values[..<successes].reduce(0, +)
            total = values.reduce(0, +)
        }
    }

    func snapshot(openConnections: Int, totalConnections: UInt64, records: RecordStore) -> Statistics {
        let since = baseline.withLock { $0 }
        let lifetimeValues = counts.map(\.value)
        let values = zip(lifetimeValues, since.counts).map { $0 - $1 }
        let actionValues = zip(actionCounts.map(\.value), since.actions).map { $0 - $1 }
        let tally = Tally(values: values, actionValues: actionValues)
        let (byStatus, byReason, byAction) = (tally.byStatus, tally.byReason, tally.byAction)
        let successes = Self.successStatuses.count
        let accepted = tally.accepted
        let lifetimeAccepted = lifetimeValues[..<successes].reduce(0, +)
        let lifetimeTotal = lifetimeValues.reduce(0, +)
        let total = tally.total
        let rates = rate.rates(lifetimeTotal: lifetimeTotal)
        return Statistics(
            requests: total, accepted: accepted, rejected: total - accepted,
            sinceStart: .init(requests: lifetimeTotal, accepted: lifetimeAccepted, rejected: lifetimeTotal - lifetimeAccepted),
            byStatus: byStatus, byReason: byReason, byAction: byAction,
            connections: .init(open: openConnections, total: totalConnections),
            requestsPerSecond: rates.perSecond, averageRequestsPerSecond: rates.average,
            recording: .init(
                capacity: records.capacity, records: records.visibleCount, evictions: records.evictions,
                lastSeq: records.lastSeq),
            refusedStreams: refusedStreams, goaways: goAwayStatistics,
            clears: clears.load(ordering: .relaxed))
    }

    /// Brings each Prometheus counter up to its atomic count, adding what it gained since the last
    /// export.
    private static func export(_ counts: [RelaxedCounter], to counters: [CoreMetrics.Counter], exported: borrowing Mutex<[Int]>) {
        exported.withLock { exported in
            for index in counts.indices {
                let value = counts[index].value
                if value > exported[index] {
                    counters[index].increment(by: Int64(value - exported[index]))
                    exported[index] = value
                }
            }
        }
    }

    /// Prometheus text: the request counters and the gauges, which the request path does not
    /// touch, are brought up to date first.
    func prometheusText(openConnections: Int, evictions: UInt64) -> String {
        Self.export(counts, to: counters, exported: exportedCounts)
        exportedKindCounts.withLock { exported in
            let total = counts.reduce(0) { $0 + $1.value }
            let values = RecordKind.allCases.indices.map { index -> Int in
                // Device pushes are every request that is not of another kind.
                RecordKind.allCases[index] == .device
                    ? total - kindCounts.reduce(0) { $0 + $1.value }
                    : kindCounts[index].value
            }
            for index in values.indices where values[index] > exported[index] {
                kindCounters[index].increment(by: Int64(values[index] - exported[index]))
                exported[index] = values[index]
            }
        }
        Self.export(refusedCounts, to: refusedCounters, exported: exportedRefused)
        if let droppedLogLines, let droppedLogLinesCounter {
            let dropped = droppedLogLines()
            exportedDroppedLogLines.withLock { exported in
                if dropped > exported {
                    droppedLogLinesCounter.increment(by: Int64(dropped - exported))
                    exported = dropped
                }
            }
        }
        openConnectionsGauge.record(openConnections)
        exportedEvictions.withLock { exported in
            if evictions > exported {
                evictionsCounter.increment(by: Int64(evictions - exported))
                exported = evictions
            }
        }
        var buffer: [UInt8] = []
        registry.emit(into: &buffer)
        return String(decoding: buffer, as: UTF8.self)
    }

    /// Rejected requests by reason since start (answered with a rejection; not the unanswered
    /// fault actions), for the periodic summary in the log.
    func rejectionsByReason() -> [Reason: Int] {
        var result: [Reason: Int] = [:]
        for (offset, reason) in Self.reasons.enumerated() {
            let value = counts[Self.successStatuses.count + offset].value
            if value > 0 { result[reason] = value }
        }
        return result
    }

    /// One latency sample: from the request's last frame to its answer being queued.
    func observeLatency(sinceUptimeNanoseconds start: UInt64) {
        latency.recordNanoseconds(Int64(clamping: NIODeadline.now().uptimeNanoseconds &- start))
    }

}

/// One count updated from every event loop: a relaxed atomic add. Synchronization's `Atomic` cannot
/// be an array element, so each lives in an object of its own.
final class RelaxedCounter: Sendable {
    private let count = Atomic<Int>(0)

    func increment() {
        count.wrappingAdd(1, ordering: .relaxed)
    }

    var value: Int { count.load(ordering: .relaxed) }
}

/// The request rates `/v1/stats` reports (the mock's, or a team's): the rate over the interval
/// since the previous query (at least a second), so that a script polling it sees the current rate
/// rather than the lifetime average, and that average since start.
final class RequestRate: Sendable {
    private let started = ContinuousClock.now
    private let last = Mutex<(at: ContinuousClock.Instant, total: Int, perSecond: Double)>((ContinuousClock.now, 0, 0))

    /// The rates with `lifetimeTotal` requests counted since start.
    func rates(lifetimeTotal: Int) -> (perSecond: Double, average: Double) {
        let now = ContinuousClock.now
        let perSecond = last.withLock { last -> Double in
            let elapsed = now - last.at
            if elapsed >= .seconds(1) {
                last.perSecond = Double(lifetimeTotal - last.total) / Self.seconds(elapsed)
                last.at = now
                last.total = lifetimeTotal
            }
            return last.perSecond
        }
        let lifetime = Self.seconds(now - started)
        return (perSecond, lifetime > 0 ? Double(lifetimeTotal) / lifetime : 0)
    }

    private static func seconds(_ duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.components
        return Double(seconds) + Double(attoseconds) * 1e-18
    }
}

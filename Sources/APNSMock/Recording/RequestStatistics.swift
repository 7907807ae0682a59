import APNSMockCore
import CoreMetrics
import NIOCore
import Prometheus
import Synchronization

/// Request counts for `/v1/stats` and `/metrics`, updated from every event loop.
///
/// One relaxed atomic add per request (a counter per outcome: accepted, each reason, each fault
/// action). The Prometheus counters of the same outcomes are brought up to date from those when
/// `/metrics` is read; they are created up front through swift-metrics with this server's own
/// `PrometheusMetricsFactory` (not the global `MetricsSystem`, so that several mocks in one test
/// process do not share numbers). The latency
/// histogram takes a lock inside swift-prometheus, so it observes one request in
/// ``latencySampleInterval`` per connection rather than every request.
final class RequestStatistics: Sendable {
    /// Index 0: accepted (200); 1...: `Reason.allCases`; then the fault actions.
    private let counts: [RelaxedCounter]
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
    let started = ContinuousClock.now
    private let rate = Mutex<(at: ContinuousClock.Instant, total: Int, perSecond: Double)>(
        (ContinuousClock.now, 0, 0))

    static let latencySampleInterval = 16
    private static let reasons = Reason.allCases
    private static let actions = FaultRule.Action.Name.allCases

    init() {
        let registry = PrometheusCollectorRegistry()
        let factory = PrometheusMetricsFactory(registry: registry)
        self.registry = registry
        var counters: [CoreMetrics.Counter] = [
            CoreMetrics.Counter(label: "apns_requests_total", dimensions: [("status", "200"), ("reason", "")], factory: factory)
        ]
        for reason in Self.reasons {
            counters.append(CoreMetrics.Counter(
                label: "apns_requests_total",
                dimensions: [("status", String(reason.status)), ("reason", reason.rawValue)], factory: factory))
        }
        for action in Self.actions {
            counters.append(CoreMetrics.Counter(
                label: "apns_requests_total", dimensions: [("status", "none"), ("reason", action.rawValue)],
                factory: factory))
        }
        self.counters = counters
        self.counts = counters.map { _ in RelaxedCounter() }
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
    }

    /// One stream refused: a relaxed atomic add.
    func countRefused(_ cause: RefusedStreamCause) {
        refusedCounts[cause.index].increment()
    }

    var refusedStreams: Statistics.RefusedStreams {
        let before = refusedCounts[RefusedStreamCause.beforeAuthentication.index].value
        let over = refusedCounts[RefusedStreamCause.overLimit.index].value
        return Statistics.RefusedStreams(total: before + over, beforeAuthentication: before, overLimit: over)
    }

    private static func index(status: Int?, rejection: Rejection?, action: FaultRule.Action.Name?) -> Int {
        if let action { return 1 + reasons.count + (actions.firstIndex(of: action) ?? 0) }
        if let rejection { return 1 + (reasons.firstIndex(of: rejection.reason) ?? 0) }
        return 0
    }

    /// One relaxed atomic add; the Prometheus counters catch up when `/metrics` is read.
    func count(status: Int?, rejection: Rejection?, action: FaultRule.Action.Name?) {
        let index = Self.index(status: status, rejection: rejection, action: action)
        counts[index].increment()
    }

    /// Counts a broadcast or channel-management request by its kind (besides ``count(status:rejection:action:)``).
    func count(kind: RecordKind) {
        kindCounts[RecordKind.allCases.firstIndex(of: kind)!].increment()
    }

    func snapshot(openConnections: Int, totalConnections: UInt64, records: RecordStore) -> Statistics {
        let values = counts.map(\.value)
        var byStatus: [String: Int] = [:]
        var byReason: [String: Int] = [:]
        var byAction: [String: Int] = [:]
        if values[0] > 0 { byStatus["200"] = values[0] }
        for (offset, reason) in Self.reasons.enumerated() where values[1 + offset] > 0 {
            byStatus[String(reason.status), default: 0] += values[1 + offset]
            byReason[reason.rawValue, default: 0] += values[1 + offset]
        }
        for (offset, action) in Self.actions.enumerated() where values[1 + Self.reasons.count + offset] > 0 {
            byAction[action.rawValue] = values[1 + Self.reasons.count + offset]
        }
        let total = values.reduce(0, +)
        let now = ContinuousClock.now
        // The rate over the interval since the previous stats query (at least a second), so that a
        // script polling /v1/stats sees the current rate rather than the lifetime average.
        let perSecond = rate.withLock { rate -> Double in
            let elapsed = now - rate.at
            if elapsed >= .seconds(1) {
                rate.perSecond = Double(total - rate.total) / Self.seconds(elapsed)
                rate.at = now
                rate.total = total
            }
            return rate.perSecond
        }
        let lifetime = Self.seconds(now - started)
        return Statistics(
            requests: total, accepted: values[0], rejected: total - values[0],
            byStatus: byStatus, byReason: byReason, byAction: byAction,
            connections: .init(open: openConnections, total: totalConnections),
            requestsPerSecond: perSecond,
            averageRequestsPerSecond: lifetime > 0 ? Double(total) / lifetime : 0,
            recording: .init(
                capacity: records.capacity, records: records.count, evictions: records.evictions,
                lastSeq: records.lastSeq),
            refusedStreams: refusedStreams)
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

    /// One latency sample: from the request's last frame to its answer being queued.
    func observeLatency(sinceUptimeNanoseconds start: UInt64) {
        latency.recordNanoseconds(Int64(clamping: NIODeadline.now().uptimeNanoseconds &- start))
    }

    private static func seconds(_ duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.components
        return Double(seconds) + Double(attoseconds) * 1e-18
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

import APNSMockCore
import Synchronization

/// One team's request counts (`/v1/stats?team=`, `/metrics`' `apns_team_requests_total`), filed
/// as the mock's own are (``RequestStatistics/index(status:rejection:action:)``) and counted right
/// after them (``count(_:)``): a relaxed atomic add per request. The mock's totals are the sum of every team's and of the requests no
/// team authenticated.
final class TeamCounts: Sendable {
    /// By outcome, laid out as ``RequestStatistics``' counters.
    let outcomes: [RelaxedCounter]
    /// By fault action (``FaultRule/Action/Name/allCases``).
    let actions: [RelaxedCounter]
    /// Streams refused on the team's connections, by ``RefusedStreamCause``.
    let refused: [RelaxedCounter]
    /// GOAWAYs sent on the team's connections, by ``GoAwayCause``.
    let goAways: [RelaxedCounter]
    /// The rates `/v1/stats?team=` reports.
    let rate = RequestRate()
    private let baseline: Mutex<Values>

    /// A reading of the counts.
    struct Values: Sendable {
        var outcomes: [Int]
        var actions: [Int]
        var refused: [Int]
        var goAways: [Int]
    }

    init() {
        outcomes = (0..<RequestStatistics.outcomeCount).map { _ in RelaxedCounter() }
        actions = RequestStatistics.actions.map { _ in RelaxedCounter() }
        refused = RefusedStreamCause.allCases.map { _ in RelaxedCounter() }
        goAways = GoAwayCause.allCases.map { _ in RelaxedCounter() }
        baseline = Mutex(Values(
            outcomes: Array(repeating: 0, count: RequestStatistics.outcomeCount),
            actions: Array(repeating: 0, count: RequestStatistics.actions.count),
            refused: Array(repeating: 0, count: RefusedStreamCause.allCases.count),
            goAways: Array(repeating: 0, count: GoAwayCause.allCases.count)))
    }

    /// Every count since start.
    var lifetime: Values {
        Values(
            outcomes: outcomes.map(\.value), actions: actions.map(\.value), refused: refused.map(\.value),
            goAways: goAways.map(\.value))
    }

    /// The counts since the last reset.
    var sinceReset: Values {
        let now = lifetime
        let since = baseline.withLock { $0 }
        return Values(
            outcomes: zip(now.outcomes, since.outcomes).map { $0 - $1 },
            actions: zip(now.actions, since.actions).map { $0 - $1 },
            refused: zip(now.refused, since.refused).map { $0 - $1 },
            goAways: zip(now.goAways, since.goAways).map { $0 - $1 })
    }

    /// One request of the team, filed as the mock's counts filed it.
    func count(_ filed: RequestStatistics.Filed) {
        outcomes[filed.outcome].increment()
        if let action = filed.action { actions[action].increment() }
    }

    /// One GOAWAY sent on one of the team's connections.
    func countGoAway(_ cause: GoAwayCause) {
        goAways[GoAwayCause.allCases.firstIndex(of: cause)!].increment()
    }

    /// Resets and clears of the team's records.
    let clears = RelaxedCounter()

    /// Counts from zero again; returns what they were since the previous reset.
    func resetCounts() -> Values {
        clears.increment()
        let now = lifetime
        return baseline.withLock { baseline in
            let since = Values(
                outcomes: zip(now.outcomes, baseline.outcomes).map { $0 - $1 },
                actions: zip(now.actions, baseline.actions).map { $0 - $1 },
                refused: zip(now.refused, baseline.refused).map { $0 - $1 },
                goAways: zip(now.goAways, baseline.goAways).map { $0 - $1 })
            baseline = now
            return since
        }
    }
}

import APNSMockCore
import Synchronization

/// The live fault rules, shared by every connection and changed by the admin API.
///
/// The request path pays one atomic load while no rule exists (the usual case, and the benchmark
/// case); only when rules exist does it take the lock, to pick a rule, roll its probability and
/// count down its `times` as one step, so `times: 1` fires exactly once under concurrency.
final class FaultStore: Sendable {
    /// A rule as the admin API lists it.
    struct Entry: Sendable {
        var id: String
        var rule: FaultRule
        /// Applications left when the rule has `times`; the rule is removed at 0.
        var remaining: Int?
        /// Matching requests the rule was applied to.
        var applied: Int = 0
        /// Per rule, so that with a seed each rule's sequence of hits is reproducible regardless
        /// of other rules.
        var random: FastRandom
    }

    private struct State {
        var entries: [Entry] = []
        var nextID = 1
    }

    private let state = Mutex(State())
    private let hasRules = Atomic<Bool>(false)
    let initial: [FaultRule]
    /// When set, rule `n` draws from `FastRandom(seed: seed &+ n)`: runs with a probability rule
    /// hit the same requests every time.
    let seed: UInt64?

    init(_ rules: [FaultRule], seed: UInt64? = nil) {
        self.initial = rules
        self.seed = seed
        reset()
    }

    /// Adds `rule` and returns its id.
    @discardableResult
    func add(_ rule: FaultRule) -> Entry {
        let entry = state.withLock { state -> Entry in
            let number = state.nextID
            state.nextID += 1
            let random = seed.map { FastRandom(seed: $0 &+ UInt64(number)) } ?? FastRandom()
            let entry = Entry(id: String(number), rule: rule, remaining: rule.times, random: random)
            state.entries.append(entry)
            hasRules.store(true, ordering: .releasing)
            return entry
        }
        return entry
    }

    var entries: [Entry] { state.withLock { $0.entries } }

    /// Removes one rule; false when no rule has that id.
    func remove(id: String) -> Bool {
        state.withLock { state in
            guard let index = state.entries.firstIndex(where: { $0.id == id }) else { return false }
            state.entries.remove(at: index)
            hasRules.store(!state.entries.isEmpty, ordering: .releasing)
            return true
        }
    }

    func removeAll() {
        state.withLock { state in
            state.entries.removeAll()
            hasRules.store(false, ordering: .releasing)
        }
    }

    /// Back to the configuration's rules (ids restart at 1, so seeded runs repeat).
    func reset() {
        state.withLock { state in
            state = State()
        }
        hasRules.store(false, ordering: .releasing)
        for rule in initial { add(rule) }
    }

    /// The first rule matching the request that fires (after its probability roll), counted.
    func apply(to request: borrowing PushRequest, decision: Decision, connection: Int = 1, requestNumber: Int = 1) -> FaultRule? {
        guard hasRules.load(ordering: .acquiring) else { return nil }
        let accepted = decision.acceptedPush
        let token: String?
        if let accepted {
            token = accepted.token
        } else if let path = request.path, case .token(let slice) = HeaderSyntax.devicePath(path) {
            token = String(slice)
        } else {
            token = nil
        }
        let topic = accepted?.topic ?? request.topic
        let pushType = accepted?.pushType ?? request.pushType.flatMap(PushType.init(headerValue:))
        return apply(FaultRule.Facts(
            token: token, topic: topic, pushType: pushType, connection: connection, requestNumber: requestNumber))
    }

    /// The first rule matching a request with these facts that fires (broadcast-side requests
    /// have no token; their topic is the app's bundle ID).
    func apply(_ request: FaultRule.Facts) -> FaultRule? {
        guard hasRules.load(ordering: .acquiring) else { return nil }
        return state.withLock { state -> FaultRule? in
            for index in state.entries.indices {
                let rule = state.entries[index].rule
                guard rule.match.matches(request) else { continue }
                if rule.probability < 1 {
                    let roll = Double(state.entries[index].random.next() >> 11) * 0x1p-53
                    if roll >= rule.probability { continue }
                }
                state.entries[index].applied += 1
                if let remaining = state.entries[index].remaining {
                    if remaining <= 1 {
                        state.entries.remove(at: index)
                        hasRules.store(!state.entries.isEmpty, ordering: .releasing)
                    } else {
                        state.entries[index].remaining = remaining - 1
                    }
                }
                return rule
            }
            return nil
        }
    }
}

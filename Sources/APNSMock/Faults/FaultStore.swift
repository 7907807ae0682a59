import APNSMockCore
import Synchronization

/// The live fault rules, shared by every connection and changed by the admin API.
///
/// The request path pays one atomic load while no rule exists (the usual case, and the benchmark
/// case); only when rules exist does it take the lock, to pick a rule, roll its probability and
/// count down its `times` as one step, so `times: 1` fires exactly once under concurrency.
///
/// Rules are indexed by the most selective field they name (token, channel, topic, connection,
/// push type, kind; in that order), so a request looks only at the rules filed under its own
/// values plus those that name none of these: ten thousand rules for other devices cost a
/// request a handful of dictionary look-ups, not ten thousand comparisons. Among the candidates
/// the oldest rule still wins, as in a scan.
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

    /// Where a rule is filed: the first of these fields it names.
    private enum IndexKey: Hashable {
        case token(String)
        case channel(String)
        case topic(String)
        case connection(Int)
        case pushType(PushType)
        case kind(RecordKind)
        /// Names none of them (only `afterRequests`, or nothing: every request).
        case unkeyed

        init(_ match: FaultRule.Match) {
            if let token = match.token {
                self = .token(token)
            } else if let channel = match.channelId {
                self = .channel(channel)
            } else if let topic = match.topic {
                self = .topic(topic)
            } else if let connection = match.connection {
                self = .connection(connection)
            } else if let pushType = match.pushType {
                self = .pushType(pushType)
            } else if let kind = match.kind {
                self = .kind(kind)
            } else {
                self = .unkeyed
            }
        }

        /// The keys a request with these facts (token already canonical) may have rules under.
        static func candidates(_ facts: FaultRule.Facts) -> [IndexKey] {
            var keys: [IndexKey] = [.unkeyed, .connection(facts.connection), .kind(facts.kind)]
            if let token = facts.token { keys.append(.token(token)) }
            if let channel = facts.channelID { keys.append(.channel(channel)) }
            if let topic = facts.topic { keys.append(.topic(topic)) }
            if let pushType = facts.pushType { keys.append(.pushType(pushType)) }
            return keys
        }
    }

    private struct State {
        /// By rule number (the id), which grows with each rule added.
        var entries: [Int: Entry] = [:]
        /// Rule numbers under each key, ascending.
        var index: [IndexKey: [Int]] = [:]
        var nextID = 1

        mutating func insert(_ entry: Entry, number: Int) {
            entries[number] = entry
            index[IndexKey(entry.rule.match), default: []].append(number)
        }

        mutating func remove(number: Int) {
            guard let entry = entries.removeValue(forKey: number) else { return }
            let key = IndexKey(entry.rule.match)
            index[key]?.removeAll { $0 == number }
            if index[key]?.isEmpty == true { index[key] = nil }
        }
    }

    private let state = Mutex(State())
    private let rulesExist = Atomic<Bool>(false)
    let initial: [FaultRule]
    /// When set, rule `n` draws from `FastRandom(seed: seed &+ n)`: runs with a probability rule
    /// hit the same requests every time.
    let seed: UInt64?

    init(_ rules: [FaultRule], seed: UInt64? = nil) {
        self.initial = rules
        self.seed = seed
        reset()
    }

    /// Rules held at once: each costs a few hundred bytes, and the admin API refuses more.
    static let maxRules = 100_000

    /// Adds `rule` and returns its id.
    @discardableResult
    func add(_ rule: FaultRule) -> Entry {
        state.withLock { state in insert(rule, into: &state) }
    }

    /// Adds all of `rules`, or none when they would take the store past ``maxRules``.
    func add(_ rules: [FaultRule]) -> [Entry]? {
        state.withLock { state in
            guard state.entries.count + rules.count <= Self.maxRules else { return nil }
            return rules.map { insert($0, into: &state) }
        }
    }

    private func insert(_ rule: FaultRule, into state: inout State) -> Entry {
        let number = state.nextID
        state.nextID += 1
        let random = seed.map { FastRandom(seed: $0 &+ UInt64(number)) } ?? FastRandom()
        let entry = Entry(id: String(number), rule: rule, remaining: rule.times, random: random)
        state.insert(entry, number: number)
        rulesExist.store(true, ordering: .releasing)
        return entry
    }

    /// The rules, oldest first.
    var entries: [Entry] {
        state.withLock { state in state.entries.sorted { $0.key < $1.key }.map(\.value) }
    }

    var count: Int { state.withLock { $0.entries.count } }

    /// Removes one rule; false when no rule has that id.
    func remove(id: String) -> Bool {
        // Ids are compared as the text the API lists: "01" and "+1" are no rule's id.
        guard let number = Int(id), String(number) == id else { return false }
        return state.withLock { state in
            guard state.entries[number] != nil else { return false }
            state.remove(number: number)
            rulesExist.store(!state.entries.isEmpty, ordering: .releasing)
            return true
        }
    }

    func removeAll() {
        state.withLock { state in
            state.entries.removeAll()
            state.index.removeAll()
            rulesExist.store(false, ordering: .releasing)
        }
    }

    /// Back to the configuration's rules (ids restart at 1, so seeded runs repeat).
    func reset() {
        state.withLock { state in
            state = State()
        }
        rulesExist.store(false, ordering: .releasing)
        for rule in initial { add(rule) }
    }

    /// Whether any rule exists: one atomic load, so that a request builds no facts while none does.
    var hasRules: Bool { rulesExist.load(ordering: .acquiring) }

    /// How many rules a request with these facts is compared with (the index's candidates).
    func candidateCount(_ request: FaultRule.Facts) -> Int {
        let (_, keys) = Self.lookUp(request)
        return state.withLock { state in keys.reduce(0) { $0 + (state.index[$1]?.count ?? 0) } }
    }

    /// The facts with the token in canonical form, and the index keys they may have rules under.
    private static func lookUp(_ request: FaultRule.Facts) -> (FaultRule.Facts, [IndexKey]) {
        var facts = request
        facts.token = request.token.map(DeviceToken.canonical)
        return (facts, IndexKey.candidates(facts))
    }

    /// The first rule matching a request with these facts that fires (after its probability roll),
    /// counted. Broadcast-side requests have no token; their topic is the app's bundle ID.
    func apply(_ request: FaultRule.Facts) -> FaultRule? {
        guard rulesExist.load(ordering: .acquiring) else { return nil }
        let (facts, keys) = Self.lookUp(request)
        return state.withLock { state -> FaultRule? in
            // The candidate lists are each ascending: walk them merged, oldest rule first.
            var lists = keys.compactMap { state.index[$0].map { $0[...] } }
            while true {
                var oldest: (list: Int, number: Int)?
                for (position, list) in lists.enumerated() {
                    if let first = list.first, first < (oldest?.number ?? .max) { oldest = (position, first) }
                }
                guard let (list, number) = oldest else { return nil }
                lists[list].removeFirst()
                guard var entry = state.entries[number], entry.rule.match.matches(facts) else { continue }
                let rule = entry.rule
                if rule.probability < 1 {
                    let roll = Double(entry.random.next() >> 11) * 0x1p-53
                    state.entries[number]?.random = entry.random
                    if roll >= rule.probability { continue }
                }
                entry.applied += 1
                if let remaining = entry.remaining, remaining <= 1 {
                    state.remove(number: number)
                    rulesExist.store(!state.entries.isEmpty, ordering: .releasing)
                } else {
                    entry.remaining = entry.remaining.map { $0 - 1 }
                    state.entries[number] = entry
                }
                return rule
            }
        }
    }
}

import APNSMockCore
import Synchronization

/// The live fault rules, shared by every connection and changed by the admin API.
///
/// The request path pays one atomic load while no rule exists (the usual case, and the benchmark
/// case); only when rules exist does it take the lock, to pick a rule, roll its probability and
/// count down its `times` as one step, so `times: 1` fires exactly once under concurrency. With a
/// shared state, other replicas fire the same rules: a rule with `times` is then claimed in the
/// shared state before it fires (``FaultClaim``), and counted here once it does.
///
/// Rules are indexed (a ``SelectiveIndex``) by the most selective field they name (token, channel,
/// topic, connection, push type, kind; in that order), so a request looks only at the rules filed
/// under its own values plus those that name none of these: ten thousand rules for other devices
/// cost a request a handful of dictionary look-ups, not ten thousand comparisons. Among the
/// candidates the oldest rule still wins, as in a scan.
final class FaultStore: Sendable {
    /// A rule as the admin API lists it.
    struct Entry: Sendable {
        var id: String
        var rule: FaultRule
        /// Applications left when the rule has `times`; the rule is removed at 0. With a shared
        /// state, what is left as far as this replica's own firings tell.
        var remaining: Int?
        /// Matching requests the rule was applied to.
        var applied: Int = 0
        /// Per rule, so that with a seed each rule's sequence of hits is reproducible regardless
        /// of other rules.
        var random: FastRandom
        /// Where the rule came from, which names its claims with a shared state
        /// (``FaultClaim/key``): the shared log's entry that added it (``SharedReplay/entry``; 0
        /// outside one; a reset's, for the configured rules it brings back).
        var origin = Origin()

        struct Origin: Sendable, Equatable {
            var logEntry: Int64 = 0
        }
    }

    /// Where a rule is filed: the first of these fields it names.
    private enum IndexKey: SelectiveIndexKey {
        case token(String)
        case channel(String)
        case topic(String)
        case connection(Int)
        case pushType(PushType)
        case kind(RecordKind)
        /// Names none of them (only `afterRequests`, or nothing: every request).
        case unkeyed

        enum Field: Int {
            case token, channel, topic, connection, pushType, kind, unkeyed
        }

        var field: Field {
            switch self {
            case .token: .token
            case .channel: .channel
            case .topic: .topic
            case .connection: .connection
            case .pushType: .pushType
            case .kind: .kind
            case .unkeyed: .unkeyed
            }
        }

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

        /// Calls `body` with each key a request with these facts (token already canonical) may have
        /// rules under, among the fields that hold any rules.
        static func candidates(_ facts: FaultRule.Facts, in rules: Rules, _ body: (IndexKey) -> Void) {
            if rules.holds(.unkeyed) { body(.unkeyed) }
            if rules.holds(.connection) { body(.connection(facts.connection)) }
            if rules.holds(.kind) { body(.kind(facts.kind)) }
            if rules.holds(.token), let token = facts.token { body(.token(token)) }
            if rules.holds(.channel), let channel = facts.channelID { body(.channel(channel)) }
            if rules.holds(.topic), let topic = facts.topic { body(.topic(topic)) }
            if rules.holds(.pushType), let pushType = facts.pushType { body(.pushType(pushType)) }
        }

        /// At most how many keys ``candidates(_:in:_:)`` gives.
        static let candidateLimit = 7
    }

    /// The entries by rule number (the id, which grows with each rule added), filed under their
    /// rule's ``IndexKey``: the numbers under a key are ascending, oldest rule first.
    private typealias Rules = SelectiveIndex<IndexKey, Int, Entry>

    private struct State {
        var rules = Rules()
        var nextID = 1
    }

    private let state = Mutex(State())
    private let rulesExist = Atomic<Bool>(false)
    let initial: [FaultRule]
    /// When set, rule `n` draws from `FastRandom(seed: seed &+ n)`: runs with a probability rule
    /// hit the same requests every time.
    let seed: UInt64?

    /// Rules this store holds at once (``defaultMaxRules`` for the whole mock's, fewer for a team's).
    let maxRules: Int

    init(_ rules: [FaultRule], seed: UInt64? = nil, maxRules: Int = FaultStore.defaultMaxRules) {
        self.initial = rules
        self.seed = seed
        self.maxRules = maxRules
        reset()
    }

    /// Rules held at once: each costs a few hundred bytes, and the admin API refuses more.
    static let defaultMaxRules = 100_000

    /// Adds `rule` and returns its id.
    @discardableResult
    func add(_ rule: FaultRule) -> Entry {
        state.withLock { state in insert(rule, into: &state) }
    }

    /// Adds all of `rules`, or none when they would take the store past ``maxRules``.
    func add(_ rules: [FaultRule]) -> [Entry]? {
        state.withLock { state in
            guard state.rules.count + rules.count <= maxRules else { return nil }
            return rules.map { insert($0, into: &state) }
        }
    }

    private func insert(_ rule: FaultRule, into state: inout State) -> Entry {
        let number = state.nextID
        state.nextID += 1
        let random = seed.map { FastRandom(seed: $0 &+ UInt64(number)) } ?? FastRandom()
        let entry = Entry(
            id: String(number), rule: rule, remaining: rule.times, random: random,
            origin: Entry.Origin(logEntry: SharedReplay.entry))
        state.rules.insert(entry, id: number, under: IndexKey(rule.match))
        rulesExist.store(true, ordering: .releasing)
        return entry
    }

    /// The rules, oldest first.
    var entries: [Entry] {
        state.withLock { state in state.rules.elements.sorted { $0.id < $1.id }.map(\.value) }
    }

    var count: Int { state.withLock { $0.rules.count } }

    /// Removes one rule; false when no rule has that id.
    func remove(id: String) -> Bool {
        // Ids are compared as the text the API lists: "01" and "+1" are no rule's id.
        guard let number = Int(id), String(number) == id else { return false }
        return state.withLock { state in
            guard state.rules.remove(number) != nil else { return false }
            rulesExist.store(!state.rules.isEmpty, ordering: .releasing)
            return true
        }
    }

    func removeAll() {
        state.withLock { state in
            state.rules = Rules()
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
        let facts = Self.canonical(request)
        return state.withLock { state in
            var count = 0
            IndexKey.candidates(facts, in: state.rules) { count += state.rules.ids(under: $0).count }
            return count
        }
    }

    /// The facts with the token in canonical form, as rules name it.
    private static func canonical(_ request: FaultRule.Facts) -> FaultRule.Facts {
        var facts = request
        facts.token = request.token.map(DeviceToken.canonical)
        return facts
    }

    /// The first rule matching a request with these facts that fires (after its probability roll),
    /// counted. Broadcast-side requests have no token; their topic is the app's bundle ID.
    ///
    /// With a `claimScope` (the mock has a shared state: the team's ID for a team's rules, `*` for
    /// the mock's) and `times` in that rule, it is not counted here: `claim` says what to claim,
    /// and ``settle(_:granted:)`` decides once the shared state answered (``FaultClaim``).
    func apply(_ request: FaultRule.Facts, claimScope: String?, claim: inout FaultClaim?) -> FaultRule? {
        guard rulesExist.load(ordering: .acquiring) else { return nil }
        let facts = Self.canonical(request)
        return state.withLock { state -> FaultRule? in
            // The candidate lists are each ascending: walk them merged, oldest rule first.
            var lists: [ArraySlice<Int>] = []
            lists.reserveCapacity(IndexKey.candidateLimit)
            IndexKey.candidates(facts, in: state.rules) { key in
                let numbers = state.rules.ids(under: key)
                if !numbers.isEmpty { lists.append(numbers) }
            }
            while true {
                var oldest: (list: Int, number: Int)?
                for (position, list) in lists.enumerated() {
                    if let first = list.first, first < (oldest?.number ?? .max) { oldest = (position, first) }
                }
                guard let (list, number) = oldest else { return nil }
                lists[list].removeFirst()
                guard var entry = state.rules[number], entry.rule.match.matches(facts) else { continue }
                let rule = entry.rule
                if rule.probability < 1 {
                    let roll = Double(entry.random.next() >> 11) * 0x1p-53
                    state.rules.modify(number) { $0.random = entry.random }
                    if roll >= rule.probability { continue }
                }
                if let claimScope, let times = rule.times {
                    claim = FaultClaim(
                        store: self, scope: claimScope, number: number, origin: entry.origin, times: times, rule: rule)
                    return rule
                }
                count(&entry, number: number, in: &state)
                return rule
            }
        }
    }

    /// Counts one firing of rule `number` (its entry as it is now): one more applied, one fewer
    /// remaining, and the rule gone with its last.
    private func count(_ entry: inout Entry, number: Int, in state: inout State) {
        entry.applied += 1
        if let remaining = entry.remaining, remaining <= 1 {
            state.rules.remove(number)
            rulesExist.store(!state.rules.isEmpty, ordering: .releasing)
        } else {
            entry.remaining = entry.remaining.map { $0 - 1 }
            state.rules.modify(number) { $0 = entry }
        }
    }

    /// Whether the rule `claim` names fires, now that the shared state answered its claim:
    /// `granted` true, it fires; false, every firing was claimed (on any replica) and the rule is
    /// removed here too; `nil`, the shared state could not answer and the rule counts down in this
    /// process alone, firing while it is still here.
    ///
    /// A firing this process makes is counted in the rule's local entry either way, so the admin
    /// API's `remaining` is what is left as far as this replica knows, and the rule goes once this
    /// replica alone fired it `times` times (all replicas together fired it at least that often).
    /// A claim granted for a rule removed or reset meanwhile still fires: the request matched it,
    /// and the shared state counted the firing.
    func settle(_ claim: FaultClaim, granted: Bool?) -> Bool {
        state.withLock { state in
            guard var entry = state.rules[claim.number], entry.origin == claim.origin else { return granted == true }
            switch granted {
            case false?:
                state.rules.remove(claim.number)
                rulesExist.store(!state.rules.isEmpty, ordering: .releasing)
                return false
            case true?, nil:
                count(&entry, number: claim.number, in: &state)
                return true
            }
        }
    }
}

/// A fault rule with `times` that matched a request while the mock has a shared state: it fires
/// only if the shared state grants the request one of its firings
/// (``SharedStateEngine/claimFault(key:times:on:)``), so that it fires exactly `times` times
/// across replicas. The request waits for the answer (``Pipeline``), then its store settles it
/// (``FaultBackend/settle(_:granted:)``). A class: made only for a claim, it keeps the
/// connection's memo, which holds one between the policy and the pipeline, one reference wide.
final class FaultClaim: Sendable {
    /// The store whose rule it is (the mock's, or a team's).
    let store: any FaultBackend
    /// Whose rules they are: a team's ID, or `*` for the mock's.
    let scope: String
    /// The rule's number in its store.
    let number: Int
    let origin: FaultStore.Entry.Origin
    let times: Int
    let rule: FaultRule

    init(store: any FaultBackend, scope: String, number: Int, origin: FaultStore.Entry.Origin, times: Int, rule: FaultRule) {
        self.store = store
        self.scope = scope
        self.number = number
        self.origin = origin
        self.times = times
        self.rule = rule
    }

    /// What the shared state counts the rule's firings under: the same on every replica, since
    /// every replica applies the same admin changes in the same order (so gives the rule the same
    /// number, log entry and reset count), and never the same for two rules: numbers restart only
    /// when the store is reset (the reset count tells them apart), and a team deleted and added
    /// again starts a new store whose rules come from later log entries.
    /// The rule's scope, the log entry that added it (a reset's, for the rules a reset brings
    /// back) and its number. Not the store's count of resets: a log compacted at a reset holds
    /// fewer resets than a replica that lived through them applied.
    var key: String { "\(scope)/\(origin.logEntry)/\(number)" }
}

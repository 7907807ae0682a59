/// The subscriptions by what a record must carry to match them, so that a record is checked only
/// against subscriptions it may match: each subscription is filed under its most selective filter
/// field (apns-id, channel, token, collapse id, reason, topic, push type), or, without any, under its
/// outcome. A record looks up its own values in each table; ``RecordFilter/matches(_:)`` decides
/// for the few subscriptions found, so fields not indexed here still filter correctly.
struct SubscriptionIndex {
    struct Entry {
        let subscription: Subscription
        /// Only records after this `seq` are handed over (earlier ones were replayed).
        let threshold: UInt64
    }

    private typealias Table = [String: [ObjectIdentifier: Entry]]

    private enum Key: Hashable {
        case apnsId(String), channelId(String), token(String), collapseId(String), reason(String), topic(String)
        case pushType(String)
        case outcome(RecordFilter.Outcome)
    }

    private var apnsIds: Table = [:]
    private var channelIds: Table = [:]
    private var tokens: Table = [:]
    private var collapseIds: Table = [:]
    private var reasons: Table = [:]
    private var topics: Table = [:]
    private var pushTypes: Table = [:]
    private var byOutcome: [RecordFilter.Outcome: [ObjectIdentifier: Entry]] = [:]
    private var keys: [ObjectIdentifier: Key] = [:]

    var isEmpty: Bool { keys.isEmpty }

    var all: [Subscription] {
        var all: [Subscription] = []
        for table in [apnsIds, channelIds, tokens, collapseIds, reasons, topics, pushTypes] {
            for entries in table.values { all += entries.values.map(\.subscription) }
        }
        for entries in byOutcome.values { all += entries.values.map(\.subscription) }
        return all
    }

    private static func key(_ filter: RecordFilter) -> Key {
        if let value = filter.apnsId { return .apnsId(value.lowercased()) }
        if let value = filter.channelId { return .channelId(value) }
        if let value = filter.token { return .token(value) }
        if let value = filter.collapseId { return .collapseId(value) }
        if let value = filter.reason { return .reason(value) }
        if let value = filter.topic { return .topic(value) }
        if let value = filter.pushType { return .pushType(value) }
        return .outcome(filter.outcome)
    }

    mutating func insert(_ subscription: Subscription, threshold: UInt64) {
        let id = ObjectIdentifier(subscription)
        let key = Self.key(subscription.filter)
        let entry = Entry(subscription: subscription, threshold: threshold)
        keys[id] = key
        switch key {
        case .apnsId(let value): apnsIds[value, default: [:]][id] = entry
        case .channelId(let value): channelIds[value, default: [:]][id] = entry
        case .token(let value): tokens[value, default: [:]][id] = entry
        case .collapseId(let value): collapseIds[value, default: [:]][id] = entry
        case .reason(let value): reasons[value, default: [:]][id] = entry
        case .topic(let value): topics[value, default: [:]][id] = entry
        case .pushType(let value): pushTypes[value, default: [:]][id] = entry
        case .outcome(let value): byOutcome[value, default: [:]][id] = entry
        }
    }

    mutating func remove(_ subscription: Subscription) -> Bool {
        let id = ObjectIdentifier(subscription)
        guard let key = keys.removeValue(forKey: id) else { return false }
        func drop(_ table: inout Table, _ value: String) {
            table[value]?[id] = nil
            if table[value]?.isEmpty == true { table[value] = nil }
        }
        switch key {
        case .apnsId(let value): drop(&apnsIds, value)
        case .channelId(let value): drop(&channelIds, value)
        case .token(let value): drop(&tokens, value)
        case .collapseId(let value): drop(&collapseIds, value)
        case .reason(let value): drop(&reasons, value)
        case .topic(let value): drop(&topics, value)
        case .pushType(let value): drop(&pushTypes, value)
        case .outcome(let value):
            byOutcome[value]?[id] = nil
            if byOutcome[value]?.isEmpty == true { byOutcome[value] = nil }
        }
        return true
    }

    /// Tells every event stream (buffer mode) about records it never saw because the ring evicted
    /// them before the dispatcher read them: they are counted as skipped (those after its threshold).
    func reportLost(_ lost: RecordStore.Lost) {
        for table in [apnsIds, channelIds, tokens, collapseIds, reasons, topics, pushTypes] {
            for entries in table.values { Self.reportLost(lost, to: entries) }
        }
        for entries in byOutcome.values { Self.reportLost(lost, to: entries) }
    }

    private static func reportLost(_ lost: RecordStore.Lost, to entries: [ObjectIdentifier: Entry]) {
        for entry in entries.values {
            // Seqs up to the threshold were the replay's to find.
            guard let missed = lost.after(entry.threshold) else { continue }
            entry.subscription.skip(count: Int(clamping: missed.count), first: missed.first, last: missed.last)
        }
    }

    /// Hands `record` to every subscription it matches; returns how many filters were checked and
    /// how many subscriptions took it. A record's values are worked out only for the tables that
    /// hold subscriptions.
    func offer(_ record: RawRecord) -> (checked: Int, handed: Int) {
        var counts = (checked: 0, handed: 0)
        if !apnsIds.isEmpty { Self.offer(record, to: apnsIds[record.apnsIDText.lowercased()], &counts) }
        if !channelIds.isEmpty, let value = record.broadcast?.channelID {
            Self.offer(record, to: channelIds[value], &counts)
        }
        if !tokens.isEmpty, let token = record.token { Self.offer(record, to: tokens[token], &counts) }
        if !collapseIds.isEmpty, let value = record.shape.request.collapseID { Self.offer(record, to: collapseIds[value], &counts) }
        if !reasons.isEmpty, let value = record.reasonText { Self.offer(record, to: reasons[value], &counts) }
        if !topics.isEmpty, let value = record.topic { Self.offer(record, to: topics[value], &counts) }
        if !pushTypes.isEmpty, let value = record.pushType { Self.offer(record, to: pushTypes[value], &counts) }
        if !byOutcome.isEmpty {
            Self.offer(record, to: byOutcome[.all], &counts)
            Self.offer(record, to: byOutcome[record.isAccepted ? .accepted : .rejected], &counts)
        }
        return counts
    }

    private static func offer(
        _ record: RawRecord, to entries: [ObjectIdentifier: Entry]?, _ counts: inout (checked: Int, handed: Int)
    ) {
        guard let entries else { return }
        for entry in entries.values where record.seq > entry.threshold {
            counts.checked += 1
            if entry.subscription.filter.matches(record) {
                counts.handed += 1
                entry.subscription.offer(record)
            }
        }
    }
}

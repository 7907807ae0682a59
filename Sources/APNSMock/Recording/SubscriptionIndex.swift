/// The subscriptions by what a record must carry to match them, so that a record is checked only
/// against subscriptions it may match: each subscription is filed (in a ``SelectiveIndex``) under
/// its most selective filter field (apns-id, channel, token, collapse id, reason, topic, push type),
/// or, without any, under its outcome. A record looks up its own values for the fields that hold
/// subscriptions; ``RecordFilter/matches(_:)`` decides for the few subscriptions found, so fields
/// not indexed here still filter correctly.
struct SubscriptionIndex {
    struct Entry {
        let subscription: Subscription
        /// Only records after this `seq` are handed over (earlier ones were replayed).
        let threshold: UInt64
    }

    /// Where a subscription is filed: the first of these fields its filter names.
    private enum Key: SelectiveIndexKey {
        case apnsId(String), channelId(String), token(String), collapseId(String), reason(String), topic(String)
        case pushType(String)
        case outcome(RecordFilter.Outcome)

        enum Field: Int {
            case apnsId, channelId, token, collapseId, reason, topic, pushType, outcome
        }

        var field: Field {
            switch self {
            case .apnsId: .apnsId
            case .channelId: .channelId
            case .token: .token
            case .collapseId: .collapseId
            case .reason: .reason
            case .topic: .topic
            case .pushType: .pushType
            case .outcome: .outcome
            }
        }

        init(_ filter: RecordFilter) {
            if let value = filter.apnsId {
                self = .apnsId(value.lowercased())
            } else if let value = filter.channelId {
                self = .channelId(value)
            } else if let value = filter.token {
                self = .token(value)
            } else if let value = filter.collapseId {
                self = .collapseId(value)
            } else if let value = filter.reason {
                self = .reason(value)
            } else if let value = filter.topic {
                self = .topic(value)
            } else if let value = filter.pushType {
                self = .pushType(value)
            } else {
                self = .outcome(filter.outcome)
            }
        }

        /// Calls `body` with each key `record` may have subscriptions under. A record's value is
        /// worked out only for the fields that hold subscriptions.
        static func candidates(of record: RawRecord, in subscriptions: Index, _ body: (Key) -> Void) {
            if subscriptions.holds(.apnsId) { body(.apnsId(record.apnsIDText.lowercased())) }
            if subscriptions.holds(.channelId), let value = record.broadcast?.channelID { body(.channelId(value)) }
            if subscriptions.holds(.token), let value = record.token { body(.token(value)) }
            if subscriptions.holds(.collapseId), let value = record.shape.request.collapseID { body(.collapseId(value)) }
            if subscriptions.holds(.reason), let value = record.reasonText { body(.reason(value)) }
            if subscriptions.holds(.topic), let value = record.topic { body(.topic(value)) }
            if subscriptions.holds(.pushType), let value = record.pushType { body(.pushType(value)) }
            if subscriptions.holds(.outcome) {
                body(.outcome(.all))
                body(.outcome(record.isAccepted ? .accepted : .rejected))
            }
        }
    }

    private typealias Index = SelectiveIndex<Key, ObjectIdentifier, Entry>

    private var subscriptions = Index()

    var isEmpty: Bool { subscriptions.isEmpty }

    var all: [Subscription] { subscriptions.elements.map(\.value.subscription) }

    mutating func insert(_ subscription: Subscription, threshold: UInt64) {
        let entry = Entry(subscription: subscription, threshold: threshold)
        subscriptions.insert(entry, id: ObjectIdentifier(subscription), under: Key(subscription.filter))
    }

    mutating func remove(_ subscription: Subscription) -> Bool {
        subscriptions.remove(ObjectIdentifier(subscription)) != nil
    }

    /// Tells every event stream (buffer mode) about records it never saw because the ring evicted
    /// them before the dispatcher read them: they are counted as skipped (those after its threshold).
    func reportLost(_ lost: RecordStore.Lost) {
        for (_, entry) in subscriptions.elements {
            // Seqs up to the threshold were the replay's to find.
            guard let missed = lost.after(entry.threshold) else { continue }
            entry.subscription.skip(count: Int(clamping: missed.count), first: missed.first, last: missed.last)
        }
    }

    /// Hands `record` to every subscription it matches; returns how many filters were checked and
    /// how many subscriptions took it.
    func offer(_ record: RawRecord) -> (checked: Int, handed: Int) {
        var counts = (checked: 0, handed: 0)
        Key.candidates(of: record, in: subscriptions) { key in
            for id in subscriptions.ids(under: key) {
                guard let entry = subscriptions[id], record.seq > entry.threshold else { continue }
                counts.checked += 1
                if entry.subscription.filter.matches(record) {
                    counts.handed += 1
                    entry.subscription.offer(record)
                }
            }
        }
        return counts
    }
}

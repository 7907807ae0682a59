import APNSMockCore

/// A query of the records, as the query API takes it (`GET /v1/notifications`, `/wait`,
/// `/v1/events`): the filter, the cursor and the page size. The server parses it from query
/// parameters and ``APNSMockTesting``'s client writes it as query parameters, both from the one
/// table of parameters below.
public struct RecordQuery: Sendable, Equatable {
    public var filter: RecordFilter
    /// Only records after this `seq`.
    public var since: UInt64?
    /// At most this many records (see ``RecordQuery/defaultLimit``, ``RecordQuery/maximumLimit``).
    public var limit: Int?

    /// Records in one answer when the query gives no `limit`, and the most it may ask for: a page
    /// is rendered whole in memory, so its size is bounded; `next` continues from where it ended.
    public static let defaultLimit = 1000
    public static let maximumLimit = 10_000

    public init(filter: RecordFilter = RecordFilter(), since: UInt64? = nil, limit: Int? = nil) {
        self.filter = filter
        self.since = since
        self.limit = limit
    }

    public init(
        token: String? = nil, topic: String? = nil, pushType: String? = nil, apnsId: String? = nil,
        collapseId: String? = nil, outcome: RecordFilter.Outcome? = nil, reason: String? = nil,
        kind: RecordKind? = nil, channelId: String? = nil, team: String? = nil, since: UInt64? = nil, limit: Int? = nil
    ) {
        var filter = RecordFilter(
            token: token, topic: topic, pushType: pushType, apnsId: apnsId, collapseId: collapseId, reason: reason,
            kind: kind?.rawValue, channelId: channelId, team: team)
        // Asking for a reason implies rejected records, unless the outcome is given.
        filter.outcome = outcome ?? (reason == nil ? .accepted : .all)
        self.init(filter: filter, since: since, limit: limit)
    }

    /// The text filters: parameter name and field.
    private static let textParameters: [(name: String, field: any WritableKeyPath<RecordFilter, String?> & Sendable)] = [
        ("token", \.token), ("topic", \.topic), ("pushType", \.pushType), ("apnsId", \.apnsId),
        ("collapseId", \.collapseId), ("reason", \.reason), ("kind", \.kind), ("channelId", \.channelId),
        ("team", \.team),
    ]

    /// Every parameter name a query takes.
    public static let parameterNames: Set<String> = Set(textParameters.map(\.name) + ["outcome", "since", "limit"])

    /// As query parameters, leaving out what is the default.
    public var parameters: [(String, String)] {
        var items: [(String, String)] = []
        for (name, field) in Self.textParameters {
            if let value = filter[keyPath: field] { items.append((name, value)) }
        }
        items.append(("outcome", filter.outcome.rawValue))
        if let since { items.append(("since", String(since))) }
        if let limit { items.append(("limit", String(limit))) }
        return items
    }

    /// A problem with one parameter: the message names it.
    public struct ParameterError: Error, Sendable {
        public var message: String
    }

    /// Parses `parameters` (already percent-decoded), refusing a name outside ``parameterNames`` and
    /// `extra`, and any value out of its range.
    public init(parameters: [String: String], extra: Set<String> = []) throws(ParameterError) {
        for name in parameters.keys where !Self.parameterNames.contains(name) && !extra.contains(name) {
            throw ParameterError(message: "\(name): unknown query parameter")
        }
        var filter = RecordFilter()
        for (name, field) in Self.textParameters {
            filter[keyPath: field] = parameters[name]
        }
        filter.token = filter.token.map(DeviceToken.canonical)
        if let reason = filter.reason, Reason(rawValue: reason) == nil,
           reason != EnvironmentKeyReasonSpelling.observed.rawValue {
            throw ParameterError(message: "reason: \"\(reason)\" is not a reason APNs sends")
        }
        if let kind = filter.kind, RecordKind(rawValue: kind) == nil {
            throw ParameterError(message: "kind: \"\(kind)\" is not device, broadcast or channel")
        }
        if let outcome = parameters["outcome"] {
            guard let parsed = RecordFilter.Outcome(rawValue: outcome) else {
                throw ParameterError(message: "outcome: \"\(outcome)\" is not accepted, rejected or all")
            }
            filter.outcome = parsed
        } else if filter.reason != nil {
            filter.outcome = .all
        }
        self.filter = filter
        if let text = parameters["since"] {
            guard let value = UInt64(text) else {
                throw ParameterError(message: "since: expected a seq (an integer from 0 to \(UInt64.max))")
            }
            since = value
        }
        if let text = parameters["limit"] {
            guard let value = Int(text), (1...Self.maximumLimit).contains(value) else {
                throw ParameterError(message: "limit: expected an integer from 1 to \(Self.maximumLimit)")
            }
            limit = value
        }
    }
}

/// `{"notifications":[…],"next":<seq>,"more":<bool>}`: one page of records.
public struct NotificationPage: Codable, Sendable {
    public var notifications: [NotificationRecord]
    /// Pass as `since` to continue after this page.
    public var next: UInt64
    /// Whether records after `next` exist that this page did not look at (it was full).
    public var more: Bool
}

/// Which device tokens the mock accepts when it has not been told about them.
public enum DevicePolicy: String, Sendable, Codable, CaseIterable {
    /// Any well-formed token is accepted (for the topics the sender may push to); listed tokens add
    /// restrictions (environment, app, unregistration).
    case open
    /// Only listed tokens are accepted; any other well-formed token is 400 BadDeviceToken, which is
    /// what APNs answers for a token it never issued.
    case registered
}

/// Why a token stopped being valid, as APNs reports it with status 410.
public enum UnregistrationReason: String, Sendable, Codable, CaseIterable {
    /// The app was removed or stopped accepting notifications.
    case unregistered = "Unregistered"
    /// The token expired (Apple answers ExpiredToken for some long-unused tokens).
    case expiredToken = "ExpiredToken"

    public var reason: Reason {
        switch self {
        case .unregistered: return .unregistered
        case .expiredToken: return .expiredToken
        }
    }
}

/// One device the mock knows about: the `devices.tokens` entries of the configuration and the
/// admin API's `/v1/devices`.
public struct DeviceEntry: Sendable, Equatable {
    /// The token in canonical (lowercase) spelling; see ``DeviceToken/canonical(_:)``.
    public var token: String
    /// The bundle ID of the app the token belongs to, or `nil` for "any app". A request whose topic
    /// names another app (after removing the push type's suffix) is 400 DeviceTokenNotForTopic.
    public var topic: String?
    /// The environment that issued the token, or `nil` for both. Used in the other environment the
    /// token is 400 BadDeviceToken, as APNs answers for a sandbox token sent to production.
    public var environment: APNSEnvironment?
    /// When and why the token stopped being valid; `nil` while it is valid.
    public var unregistration: Unregistration?

    /// A token that stopped being valid.
    public struct Unregistration: Sendable, Equatable {
        /// Milliseconds since the epoch, sent as the 410 body's `timestamp`.
        public var timestamp: Int64
        public var reason: UnregistrationReason

        public init(timestamp: Int64, reason: UnregistrationReason = .unregistered) {
            self.timestamp = timestamp
            self.reason = reason
        }
    }

    public init(
        token: String,
        topic: String? = nil,
        environment: APNSEnvironment? = nil,
        unregistration: Unregistration? = nil
    ) {
        self.token = DeviceToken.canonical(token)
        self.topic = topic
        self.environment = environment
        self.unregistration = unregistration
    }
}

/// The device tokens the mock knows, and the policy for those it does not.
///
/// A value type so that the server can keep the current registry behind its lock and hand each
/// request a copy (copy-on-write: no bytes are copied) for the validator to read without holding the
/// lock; admin changes build the next value.
public struct DeviceRegistry: Sendable, Equatable {
    public var policy: DevicePolicy
    private var entriesByToken: [String: DeviceEntry]

    public init(policy: DevicePolicy = .open, entries: [DeviceEntry] = []) {
        self.policy = policy
        self.entriesByToken = Dictionary(entries.map { ($0.token, $0) }, uniquingKeysWith: { _, last in last })
    }

    /// Every entry, ordered by token so that listings are stable.
    public var entries: [DeviceEntry] {
        entriesByToken.values.sorted { $0.token < $1.token }
    }

    public var isEmpty: Bool { entriesByToken.isEmpty }

    /// The entry for `token` in any spelling (case is ignored).
    public func entry(for token: String) -> DeviceEntry? {
        entriesByToken[DeviceToken.canonical(token)]
    }

    /// Adds or replaces the entry for its token; returns the entry it replaced.
    @discardableResult
    public mutating func register(_ entry: DeviceEntry) -> DeviceEntry? {
        entriesByToken.updateValue(entry, forKey: entry.token)
    }

    /// Forgets `token`; returns the entry that was removed.
    @discardableResult
    public mutating func remove(token: String) -> DeviceEntry? {
        entriesByToken.removeValue(forKey: DeviceToken.canonical(token))
    }

    /// Marks `token` as no longer valid from now on, registering it (for any app and environment)
    /// if it was unknown, so that the admin API can unregister a token the open policy let through.
    public mutating func unregister(token: String, at timestamp: Int64, reason: UnregistrationReason = .unregistered) {
        let key = DeviceToken.canonical(token)
        var entry = entriesByToken[key] ?? DeviceEntry(token: key)
        entry.unregistration = .init(timestamp: timestamp, reason: reason)
        entriesByToken[key] = entry
    }

    /// The registry's verdict on sending to `token` for the app `bundleID` in `environment`, or `nil`
    /// when the token may receive it.
    ///
    /// The order is environment, then app, then unregistration: a token of the other environment is
    /// not a token APNs knows there at all, and one of another app is refused before APNs would look
    /// at that app's registration state.
    public func rejection(token: String, bundleID: Substring, environment: APNSEnvironment) -> Rejection? {
        guard let entry = entry(for: token) else {
            return policy == .registered ? Rejection(.badDeviceToken) : nil
        }
        if let home = entry.environment, home != environment {
            return Rejection(.badDeviceToken)
        }
        if let app = entry.topic, app != bundleID {
            return Rejection(.deviceTokenNotForTopic)
        }
        if let unregistration = entry.unregistration {
            return Rejection(unregistration.reason.reason, timestamp: unregistration.timestamp)
        }
        return nil
    }
}

/// The topics the party that sent a request may push to.
///
/// Authentication fills this in (a key's topics or its team's apps; a certificate's topics); until
/// then the server passes what the configuration allows (see ``Configuration/allowedTopics``). A
/// topic outside it is 400 TopicDisallowed.
public enum AllowedTopics: Sendable, Equatable {
    /// Every topic: no check.
    case any
    /// Any push type of these apps (what a token-auth key allows): the request's topic is allowed
    /// when its bundle ID, the topic without the push type's suffix, is in the set.
    case bundleIDs(Set<String>)
    /// Exactly these topics, suffix included (what a certificate's topic extension lists).
    case topics(Set<String>)

    /// Whether `topic`, whose bundle ID is `bundleID`, may be pushed to.
    public func allows(topic: String, bundleID: Substring) -> Bool {
        switch self {
        case .any:
            return true
        case .bundleIDs(let bundles):
            // Most topics are their own bundle ID (alert, background): look the topic up as it is
            // rather than copying the slice into a new string.
            return bundles.contains(bundleID.utf8.count == topic.utf8.count ? topic : String(bundleID))
        case .topics(let topics):
            return topics.contains(topic)
        }
    }
}

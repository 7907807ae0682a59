/// Broadcast push (iOS 18): channels an app's server creates, Live Activities subscribe to, and
/// broadcasts go out on (docs/broadcast.md). The values here are pure; the server keeps the live
/// registry and the listeners.

/// Whether APNs keeps the most recent broadcast of a channel for devices that were offline.
/// Fixed when the channel is created.
public enum MessageStoragePolicy: Int, Sendable, Codable, CaseIterable {
    /// "No Message Stored": a broadcast is tried once; its `apns-expiration` must be 0.
    case noMessageStored = 0
    /// "Most Recent Message Stored": the latest broadcast is kept until its expiration (at most
    /// eight hours).
    case mostRecentMessageStored = 1
}

/// One broadcast channel of an app in one environment.
public struct BroadcastChannel: Sendable, Equatable, Hashable {
    public var bundleID: String
    public var environment: APNSEnvironment
    /// Base64, as APNs returns it in `apns-channel-id`.
    public var id: String
    public var storagePolicy: MessageStoragePolicy

    public init(bundleID: String, environment: APNSEnvironment, id: String, storagePolicy: MessageStoragePolicy) {
        self.bundleID = bundleID
        self.environment = environment
        self.id = id
        self.storagePolicy = storagePolicy
    }
}

/// The syntax of `apns-channel-id` values.
public enum ChannelID {
    /// Longest channel ID the mock accepts (mock's choice: Apple says to make no assumption on the
    /// size; its IDs are tens of characters). Longer: 400 BadChannelId.
    public static let maximumLength = 256

    /// Whether `value` is standard base64 (RFC 4648 §4: `A-Z a-z 0-9 + /`, length a multiple of 4,
    /// at most two `=` of padding at the end) of at most ``maximumLength`` characters. Apple's
    /// IDs look like `dHN0LXNyY2gtY2hubA==`. Anything else is BadChannelId.
    public static func isWellFormed(_ value: String) -> Bool {
        value.withUTF8Bytes { bytes in
            guard !bytes.isEmpty, bytes.count <= maximumLength, bytes.count % 4 == 0 else { return false }
            var padding = 0
            for byte in bytes {
                if byte == UInt8(ascii: "=") {
                    padding += 1
                    continue
                }
                // Padding only at the end.
                guard padding == 0 else { return false }
                switch byte {
                case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                     UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "+"), UInt8(ascii: "/"):
                    continue
                default:
                    return false
                }
            }
            return padding <= 2
        }
    }
}

/// The channels of every app and environment: what channel lookups read. A value (copy-on-write)
/// so that a connection can keep a snapshot and read it without a lock.
public struct ChannelRegistry: Sendable, Equatable {
    public struct Key: Hashable, Sendable {
        public var bundleID: String
        public var environment: APNSEnvironment

        public init(bundleID: String, environment: APNSEnvironment) {
            self.bundleID = bundleID
            self.environment = environment
        }
    }

    /// Channels by app and environment, then by ID.
    private var channels: [Key: [String: BroadcastChannel]] = [:]
    /// Creation order, for listing.
    private var order: [Key: [String]] = [:]

    public init(_ channels: [BroadcastChannel] = []) {
        for channel in channels { insert(channel) }
    }

    public var isEmpty: Bool { channels.isEmpty }

    /// The channel `id` of `bundleID` in `environment`; channels are never shared across apps or
    /// environments.
    public func channel(id: String, bundleID: String, environment: APNSEnvironment) -> BroadcastChannel? {
        channels[Key(bundleID: bundleID, environment: environment)]?[id]
    }

    /// A channel with this ID in any app or environment.
    public func channel(id: String) -> BroadcastChannel? {
        for (_, byID) in channels {
            if let channel = byID[id] { return channel }
        }
        return nil
    }

    /// The app's channels in creation order.
    public func channels(bundleID: String, environment: APNSEnvironment) -> [BroadcastChannel] {
        let key = Key(bundleID: bundleID, environment: environment)
        guard let byID = channels[key] else { return [] }
        return (order[key] ?? []).compactMap { byID[$0] }
    }

    /// Every channel, by app, environment, then creation.
    public var all: [BroadcastChannel] {
        channels.keys.sorted { ($0.bundleID, $0.environment.rawValue) < ($1.bundleID, $1.environment.rawValue) }
            .flatMap { channels(bundleID: $0.bundleID, environment: $0.environment) }
    }

    public func count(bundleID: String, environment: APNSEnvironment) -> Int {
        channels[Key(bundleID: bundleID, environment: environment)]?.count ?? 0
    }

    public mutating func insert(_ channel: BroadcastChannel) {
        let key = Key(bundleID: channel.bundleID, environment: channel.environment)
        if channels[key, default: [:]].updateValue(channel, forKey: channel.id) == nil {
            order[key, default: []].append(channel.id)
        }
    }

    @discardableResult
    public mutating func remove(id: String, bundleID: String, environment: APNSEnvironment) -> BroadcastChannel? {
        let key = Key(bundleID: bundleID, environment: environment)
        guard let removed = channels[key]?.removeValue(forKey: id) else { return nil }
        order[key]?.removeAll { $0 == id }
        if channels[key]?.isEmpty == true {
            channels[key] = nil
            order[key] = nil
        }
        return removed
    }
}

/// The mock's broadcast settings (the configuration's `broadcast:` section).
public struct BroadcastSettings: Sendable, Equatable {
    /// Where the channel-management listeners listen: one per environment, as Apple's
    /// `api-manage-broadcast[.sandbox].push.apple.com` are. 0 picks a free port.
    public var host = "127.0.0.1"
    public var sandboxPort = 2195
    public var productionPort = 2196
    /// Channels an app may have in one environment (Apple: 10,000); creating one more is 400
    /// CannotCreateChannelConfig.
    public var channelLimit = 10_000
    /// Apps whose broadcast capability is off: every channel request and broadcast for them is 400
    /// FeatureNotEnabled.
    public var disabledApps: Set<String> = []
    /// Channels that exist at start and after `/v1/reset`.
    public var channels: [BroadcastChannel] = []
    /// Whether a broadcast without `apns-expiration` is 400 BadExpirationDate (Apple documents the
    /// header as required). Off: a missing header counts as 0.
    public var requireExpiration = true
    /// Whether `apns-priority: 1` is accepted on a broadcast (Apple's broadcast header table lists
    /// 10, 5 and 1; the ActivityKit guide asks for 5 or 10). Off: 1 is BadPriority.
    public var allowPriority1 = true
    /// Whether the spelling of the push type must be Apple's exactly: `LiveActivity` in a channel's
    /// `push-type`, `liveactivity` in a broadcast's `apns-push-type`. Off (the default), any letter
    /// case is accepted, as node-apn sends `liveactivity` in the channel body.
    public var strictPushTypeSpelling = false

    public init() {}

    /// The port of the channel-management listener of `environment`.
    public func port(for environment: APNSEnvironment) -> Int {
        environment == .sandbox ? sandboxPort : productionPort
    }
}

/// What a broadcast-side request is, by its `:method` and `:path`.
public enum BroadcastPath: Sendable, Equatable {
    /// `/1/apps/<bundle>/channels`: create (POST), read (GET) or delete (DELETE) one channel.
    case channels(bundleID: Substring)
    /// `/1/apps/<bundle>/all-channels`: list (GET).
    case allChannels(bundleID: Substring)
    /// `/4/broadcasts/apps/<bundle>`: send (POST).
    case broadcast(bundleID: Substring)
    case other

    /// Reads `:path` (a query string or a trailing slash is not Apple's path: `other`). Runs for
    /// every broadcast, so it compares bytes in place rather than splitting the path.
    public init(_ path: String) {
        let utf8 = path.utf8
        // "/4/broadcasts/apps/<bundle>"  |  "/1/apps/<bundle>/channels"  |  "/1/apps/<bundle>/all-channels"
        if let bundle = Self.segment(of: path, after: "/4/broadcasts/apps/"), bundle.endIndex == utf8.endIndex {
            self = .broadcast(bundleID: bundle)
        } else if let bundle = Self.segment(of: path, after: "/1/apps/"), bundle.endIndex != utf8.endIndex {
            let rest = path[utf8.index(after: bundle.endIndex)...]
            switch rest {
            case "channels": self = .channels(bundleID: bundle)
            case "all-channels": self = .allChannels(bundleID: bundle)
            default: self = .other
            }
        } else {
            self = .other
        }
    }

    /// The non-empty run of bytes up to the next `/` (or the end) after `prefix`, when `path`
    /// starts with `prefix`.
    private static func segment(of path: String, after prefix: StaticString) -> Substring? {
        let range = path.withUTF8Bytes { bytes -> Range<Int>? in
            guard bytes.hasPrefix(prefix) else { return nil }
            let start = prefix.utf8CodeUnitCount
            var end = start
            while end < bytes.count, bytes[end] != UInt8(ascii: "/") { end += 1 }
            return start == end ? nil : start..<end
        }
        guard let range else { return nil }
        let utf8 = path.utf8
        let start = utf8.index(utf8.startIndex, offsetBy: range.lowerBound)
        return path[start..<utf8.index(start, offsetBy: range.count)]
    }

    /// Whether `:path` starts like a broadcast send, `/4/broadcasts/`: such requests go to the
    /// broadcast API (which answers BadPath for the rest of a wrong path).
    public static func isBroadcast(_ path: String) -> Bool {
        path.hasUTF8Prefix(prefix)
    }

    /// What every broadcast path starts with.
    public static let prefix: StaticString = "/4/broadcasts/"
}

/// What a channel-management request asks for.
public enum ChannelOperation: String, Sendable, Codable, CaseIterable {
    case create, read, delete, list
}

/// What a record is of.
public enum RecordKind: String, Sendable, Codable, CaseIterable {
    /// A device push, `POST /3/device/<token>`.
    case device
    /// A broadcast on a channel, `POST /4/broadcasts/apps/<bundle>`.
    case broadcast
    /// A channel-management request (create, read, delete, list).
    case channel
}

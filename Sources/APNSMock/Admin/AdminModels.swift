import APNSMockCore

// The admin API's answers as public Codable types: the server encodes them and APNSMockTesting's
// client (and every test) decodes the same types, so a shape is declared once.

/// A device of the registry as `/v1/devices` lists it.
public struct DeviceView: Codable, Sendable, Equatable {
    public var token: String
    public var topic: String?
    public var environment: String?
    public var unregisteredAt: String?
    public var timestamp: Int64?
    public var reason: String?

    init(_ entry: DeviceEntry) {
        token = entry.token
        topic = entry.topic
        environment = entry.environment?.rawValue
        unregisteredAt = entry.unregistration.map { Timestamp.rfc3339(milliseconds: $0.timestamp) }
        timestamp = entry.unregistration?.timestamp
        reason = entry.unregistration?.reason.rawValue
    }
}

/// `GET /v1/devices`.
public struct DeviceList: Codable, Sendable {
    public var policy: String
    public var devices: [DeviceView]
}

/// `GET /v1/faults`, and `POST /v1/faults` with a list.
public struct FaultList: Codable, Sendable {
    public var faults: [FaultView]
}

/// A rule as listed: the rule's own fields (docs/configuration.md, `faults`) plus `id`, `remaining` and `applied`.
public struct FaultView: Codable, Sendable, Equatable {
    public struct Match: Codable, Sendable, Equatable {
        public var token: String?
        public var topic: String?
        public var pushType: String?
        public var kind: String?
        public var channelId: String?
        public var connection: Int?
        public var afterRequests: Int?
    }

    public struct Respond: Codable, Sendable, Equatable {
        public var status: Int
        public var reason: String
        public var timestamp: Int64?
    }

    public var id: String
    public var match: Match
    public var respond: Respond?
    public var action: String?
    public var delayMs: Int
    public var times: Int?
    public var probability: Double
    /// `shrink-streams`: the connection's new MAX_CONCURRENT_STREAMS.
    public var maxConcurrentStreams: Int?
    /// `shrink-streams`, `ignore-pings`: how long the action lasts.
    public var durationMs: Int?
    /// `goaway`: its error code, its debug data (`reason` or `none`), the last stream id it names
    /// (`"processed"` or a number) and whether the connection stays open.
    public var goawayCode: String?
    public var debugData: String?
    public var lastStreamId: LastStreamID?
    public var keepOpen: Bool?
    public var remaining: Int?

    /// `"processed"` or a stream id.
    public enum LastStreamID: Codable, Sendable, Equatable {
        case processed
        case id(Int32)

        public init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if let id = try? container.decode(Int32.self) {
                self = .id(id)
            } else if try container.decode(String.self) == "processed" {
                self = .processed
            } else {
                throw DecodingError.dataCorruptedError(in: container, debugDescription: "not \"processed\" or a stream id")
            }
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            switch self {
            case .processed: try container.encode("processed")
            case .id(let id): try container.encode(id)
            }
        }
    }
    public var applied: Int

    init(_ entry: FaultStore.Entry) {
        let rule = entry.rule
        id = entry.id
        match = Match(
            token: rule.match.token, topic: rule.match.topic, pushType: rule.match.pushType?.rawValue,
            kind: rule.match.kind?.rawValue, channelId: rule.match.channelId,
            connection: rule.match.connection, afterRequests: rule.match.afterRequests)
        respond = rule.respond.map { Respond(status: $0.status, reason: $0.wireReason, timestamp: $0.timestamp) }
        action = rule.action?.name.rawValue
        delayMs = rule.delayMs
        times = rule.times
        probability = rule.probability
        maxConcurrentStreams = rule.action?.maxConcurrentStreams
        durationMs = rule.action?.durationMs
        if case .goaway(let form)? = rule.action {
            goawayCode = form.code.rawValue
            debugData = form.carriesReason ? "reason" : "none"
            lastStreamId = switch form.lastStream {
            case .processed: .processed
            case .id(let id): .id(id)
            }
            keepOpen = form.keepOpen
        }
        remaining = entry.remaining
        applied = entry.applied
    }
}

/// `/v1/stats` body.
public struct Statistics: Codable, Sendable, Equatable {
    /// Requests since start or the last `/v1/reset` or `DELETE /v1/notifications` (as the
    /// records), filed as the record listing files them: `accepted` is answered without a
    /// rejection (200, 201, 204), `rejected` everything else.
    public var requests: Int
    public var accepted: Int
    public var rejected: Int
    /// The same totals since the mock started (what `/metrics` counts).
    public var sinceStart: Totals
    public var byStatus: [String: Int]
    public var byReason: [String: Int]
    public var byAction: [String: Int]
    public var connections: Connections
    public var requestsPerSecond: Double
    public var averageRequestsPerSecond: Double
    public var recording: Recording
    /// Streams refused with RST_STREAM REFUSED_STREAM, which a client may retry but not all do
    /// (node-apn does not): none of them is a record.
    public var refusedStreams: RefusedStreams
    /// GOAWAY frames this side sent, by cause (``GoAwayCause``), since the last reset.
    public var goaways: GoAways
    /// The team these counts are of (`/v1/stats?team=`); absent for the whole mock's.
    public var team: String?
    /// How many times these counts started again (a reset, or records forgotten): a change means
    /// the records were cleared. A team's reset changes the team's, not the whole mock's.
    public var clears: Int?
    /// This replica's part in the shared state (`state.url`); absent in memory.
    public var shared: SharedStateView?

    public struct GoAways: Codable, Sendable, Equatable {
        public var total: Int
        public var byCause: [String: Int]
    }

    public struct RefusedStreams: Codable, Sendable, Equatable {
        public var total: Int
        /// On a token-auth connection before its first valid token, past
        /// `server.streamsBeforeAuthentication` (APNs: one stream).
        public var beforeAuthentication: Int
        /// Past the connection's MAX_CONCURRENT_STREAMS otherwise (a client that opened streams
        /// before reading a lowered limit: `shrink-streams`, `shrinkStreamsAfterRejection`).
        public var overLimit: Int
        /// Streams that completed above the last stream id of a GOAWAY this side sent (RFC 9113
        /// §6.8: not processed; a client resends them on a new connection).
        public var afterGoAway: Int
    }

    public struct Totals: Codable, Sendable, Equatable {
        public var requests: Int
        public var accepted: Int
        public var rejected: Int
    }

    public struct Connections: Codable, Sendable, Equatable {
        public var open: Int
        public var total: UInt64
    }

    public struct Recording: Codable, Sendable, Equatable {
        public var capacity: Int
        public var records: Int
        public var evictions: UInt64
        public var lastSeq: UInt64
    }
}

/// A broadcast channel as `/v1/channels` lists it (the fields of the configuration's
/// `broadcast.channels`).
public struct ChannelView: Codable, Sendable, Equatable {
    public var bundleId: String
    public var environment: String
    public var channelId: String
    public var messageStoragePolicy: Int

    init(_ channel: BroadcastChannel) {
        bundleId = channel.bundleID
        environment = channel.environment.rawValue
        channelId = channel.id
        messageStoragePolicy = channel.storagePolicy.rawValue
    }
}

/// `GET /v1/channels`.
public struct ChannelList: Codable, Sendable {
    public var channels: [ChannelView]
}

/// `GET /v1/clock`, `POST /v1/clock`: how far the mock's time runs ahead, and the time itself.
public struct ClockView: Codable, Sendable, Equatable {
    public var offsetSeconds: Int64
    /// The mock's time, RFC 3339 with milliseconds.
    public var now: String
    /// The wall clock, for comparison.
    public var wallClock: String
    /// For a team's clock (`?team=`): the team, and its own part of ``offsetSeconds`` (the rest is
    /// the mock's clock).
    public var team: String?
    public var teamOffsetSeconds: Int64?
}

/// A team as `/v1/teams` shows it: its apps and keys (no key material), its own device policy
/// and entries, and where it came from.
public struct TeamView: Codable, Sendable, Equatable {
    public struct Key: Codable, Sendable, Equatable {
        public var keyId: String
        public var environment: String
        public var topics: [String]
        public var relatedKeyId: String?
    }

    public struct Devices: Codable, Sendable, Equatable {
        /// The team's own policy; `nil`: the mock's applies.
        public var policy: String?
        /// The team's own device entries.
        public var count: Int
    }

    public var teamId: String
    public var apps: [String]
    public var keys: [Key]
    public var devices: Devices
    /// `configuration` (the configuration file: it can be reset, not deleted) or `api`.
    public var source: String
}

/// `GET /v1/teams`.
public struct TeamList: Codable, Sendable {
    public var teams: [TeamView]
}

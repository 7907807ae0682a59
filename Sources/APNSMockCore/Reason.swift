/// Every reason APNs puts in an error body (`{"reason":"…"}`), spelled exactly as Apple does.
///
/// Apple's strings live here once; the HTTP status of each reason lives in ``status`` and nowhere
/// else, so a response can only be built from a reason, never from a free-form status/string pair.
public enum Reason: String, CaseIterable, Sendable, Codable {
    // 400
    case badCollapseId = "BadCollapseId"
    case badDeviceToken = "BadDeviceToken"
    case badExpirationDate = "BadExpirationDate"
    case badMessageId = "BadMessageId"
    case badPriority = "BadPriority"
    case badTopic = "BadTopic"
    case deviceTokenNotForTopic = "DeviceTokenNotForTopic"
    case duplicateHeaders = "DuplicateHeaders"
    case idleTimeout = "IdleTimeout"
    case invalidPushType = "InvalidPushType"
    case missingDeviceToken = "MissingDeviceToken"
    case missingTopic = "MissingTopic"
    case payloadEmpty = "PayloadEmpty"
    case topicDisallowed = "TopicDisallowed"
    // 400, broadcast push (channel management and broadcasts)
    case featureNotEnabled = "FeatureNotEnabled"
    case missingChannelId = "MissingChannelId"
    case badChannelId = "BadChannelId"
    case channelNotRegistered = "ChannelNotRegistered"
    case badRequestParams = "BadRequestParams"
    case badRequestPayload = "BadRequestPayload"
    case missingPushType = "MissingPushType"
    case cannotCreateChannelConfig = "CannotCreateChannelConfig"
    // 403
    case badCertificate = "BadCertificate"
    case badCertificateEnvironment = "BadCertificateEnvironment"
    case expiredProviderToken = "ExpiredProviderToken"
    case forbidden = "Forbidden"
    case invalidProviderToken = "InvalidProviderToken"
    case missingProviderToken = "MissingProviderToken"
    case unrelatedKeyIdInToken = "UnrelatedKeyIdInToken"
    case badEnvironmentKeyIdInToken = "BadEnvironmentKeyIdInToken"
    /// Broadcast push: the token's or certificate's apps do not include the bundle in the path.
    case topicMismatch = "TopicMismatch"
    // 404
    case badPath = "BadPath"
    // 405
    case methodNotAllowed = "MethodNotAllowed"
    // 410
    case expiredToken = "ExpiredToken"
    case unregistered = "Unregistered"
    // 413
    case payloadTooLarge = "PayloadTooLarge"
    // 429
    case tooManyProviderTokenUpdates = "TooManyProviderTokenUpdates"
    case tooManyRequests = "TooManyRequests"
    // 500
    case internalServerError = "InternalServerError"
    // 503
    case serviceUnavailable = "ServiceUnavailable"
    case shutdown = "Shutdown"

    /// The HTTP status APNs answers with for this reason.
    public var status: Int {
        switch self {
        case .badCollapseId, .badDeviceToken, .badExpirationDate, .badMessageId, .badPriority,
             .badTopic, .deviceTokenNotForTopic, .duplicateHeaders, .idleTimeout, .invalidPushType,
             .missingDeviceToken, .missingTopic, .payloadEmpty, .topicDisallowed,
             .featureNotEnabled, .missingChannelId, .badChannelId, .channelNotRegistered, .badRequestParams,
             .badRequestPayload, .missingPushType, .cannotCreateChannelConfig:
            return 400
        case .badCertificate, .badCertificateEnvironment, .expiredProviderToken, .forbidden,
             .invalidProviderToken, .missingProviderToken, .unrelatedKeyIdInToken,
             .badEnvironmentKeyIdInToken, .topicMismatch:
            return 403
        case .badPath:
            return 404
        case .methodNotAllowed:
            return 405
        case .expiredToken, .unregistered:
            return 410
        case .payloadTooLarge:
            return 413
        case .tooManyProviderTokenUpdates, .tooManyRequests:
            return 429
        case .internalServerError:
            return 500
        case .serviceUnavailable, .shutdown:
            return 503
        }
    }

    /// Whether a response with this reason carries the `timestamp` member (410 only).
    public var carriesTimestamp: Bool { status == 410 }
}

/// Why a request was refused: the reason, plus what the error body needs beyond it.
///
/// Every error response is built from a `Rejection` (see ``ErrorBody``); nothing assembles an
/// error body by hand.
public struct Rejection: Sendable, Equatable {
    public var reason: Reason
    /// Milliseconds since the epoch when the token stopped being valid; only sent for 410.
    public var timestamp: Int64?
    /// The string put on the wire for `reason`. Normally `reason.rawValue`; differs only where the
    /// configuration selects an alternative spelling (e.g. `BadEnvironmentKeyInToken`).
    public var wireReason: String

    public init(_ reason: Reason, timestamp: Int64? = nil, wireReason: String? = nil) {
        self.reason = reason
        self.timestamp = reason.carriesTimestamp ? timestamp : nil
        self.wireReason = wireReason ?? reason.rawValue
    }

    public var status: Int { reason.status }
}

/// The JSON body of an APNs error response and of a GOAWAY's debug data.
public enum ErrorBody {
    /// `{"reason":"…"}` or, for 410, `{"reason":"…","timestamp":…}` as UTF-8 bytes.
    ///
    /// Reason strings are ASCII identifiers from ``Reason`` (or a configured alias of one), so no
    /// JSON escaping is needed; the body is assembled directly rather than through an encoder.
    public static func bytes(for rejection: Rejection) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(48)
        out.append(contentsOf: #"{"reason":""#.utf8)
        out.append(contentsOf: rejection.wireReason.utf8)
        out.append(UInt8(ascii: "\""))
        if let timestamp = rejection.timestamp {
            out.append(contentsOf: #","timestamp":"#.utf8)
            out.append(contentsOf: String(timestamp).utf8)
        }
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// GOAWAY debug data for a connection-level reason such as `Shutdown` or `IdleTimeout`.
    public static func bytes(for reason: Reason) -> [UInt8] {
        bytes(for: Rejection(reason))
    }
}

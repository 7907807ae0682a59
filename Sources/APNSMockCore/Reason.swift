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

    /// What the reason means for the provider that got it, in one line: the inbox page shows it
    /// beside every rejection and in its fault form, `GET /v1/reasons` serves it, and
    /// docs/admin-api.md lists the same lines (a test keeps them equal). Kept here, beside the
    /// reason and its status, so that there is one wording.
    public var explanation: String {
        switch self {
        case .badCollapseId: return "apns-collapse-id is longer than 64 bytes."
        case .badDeviceToken: return "The device token is malformed, or belongs to the other environment (sandbox vs production)."
        case .badExpirationDate: return "apns-expiration is not a UNIX timestamp in seconds."
        case .badMessageId: return "apns-id is not a UUID in its canonical 8-4-4-4-12 form."
        case .badPriority: return "apns-priority is not 10, 5 or 1, or not one this push type allows."
        case .badTopic: return "apns-topic is malformed: not a bundle ID (with its push type's suffix)."
        case .deviceTokenNotForTopic: return "The device token belongs to another app than apns-topic names."
        case .duplicateHeaders: return "A header was sent more than once."
        case .idleTimeout: return "The connection was idle too long and is being closed (GOAWAY)."
        case .invalidPushType: return "apns-push-type is not a type APNs knows, or apns-topic lacks the suffix it needs (e.g. .voip)."
        case .missingDeviceToken: return "The :path holds no device token."
        case .missingTopic: return "apns-topic is required here (token auth, or a certificate with several topics)."
        case .payloadEmpty: return "The request has no body."
        case .topicDisallowed: return "The sender may not push to this topic (e.g. an app of another team)."
        case .featureNotEnabled: return "The app's broadcast capability is off."
        case .missingChannelId: return "apns-channel-id is required here and missing."
        case .badChannelId: return "apns-channel-id is not base64 of at most 256 characters."
        case .channelNotRegistered: return "No such channel for this app and environment."
        case .badRequestParams: return "The channel's parameters are unknown, repeated or out of range (message-storage-policy)."
        case .badRequestPayload: return "The channel request's body is not a JSON object."
        case .missingPushType: return "A channel needs its push-type (and a broadcast apns-push-type)."
        case .cannotCreateChannelConfig: return "The app has reached its limit of channels."
        case .badCertificate: return "The client certificate is not one APNs issued (not signed by the client CA)."
        case .badCertificateEnvironment: return "The client certificate is for the other environment."
        case .expiredProviderToken: return "The provider token is more than an hour old: sign a new one."
        case .forbidden: return "The request is not allowed (e.g. certificate auth for a push type that needs a token)."
        case .invalidProviderToken: return "The provider token's signature, team or key is wrong, or it is not a JWT."
        case .missingProviderToken: return "No certificate and no authorization header: the request is unauthenticated."
        case .unrelatedKeyIdInToken: return "The key ID in the provider token isn't related to the key ID of the token used in the first push of this connection."
        case .badEnvironmentKeyIdInToken: return "The token's key may only be used in the other environment."
        case .topicMismatch: return "The credentials are not for the app the channel or broadcast names."
        case .badPath: return "The :path is not /3/device/<token>."
        case .methodNotAllowed: return "The :method is not POST."
        case .expiredToken: return "The device token has expired: stop sending to it."
        case .unregistered: return "The device token is no longer active for the topic: stop sending to it (see timestamp)."
        case .payloadTooLarge: return "The payload is larger than the push type allows (4096 bytes, 5120 for VoIP)."
        case .tooManyProviderTokenUpdates: return "The provider token was changed too often on this connection."
        case .tooManyRequests: return "Too many requests to the same device token in a short time."
        case .internalServerError: return "An internal server error (APNs' own; retry later)."
        case .serviceUnavailable: return "The service is unavailable; retry later."
        case .shutdown: return "The server is shutting down (GOAWAY); reconnect and resend."
        }
    }
}

/// Why a request was refused: the reason, plus what the error body needs beyond it.
///
/// Every error response is built from a `Rejection` (see ``ErrorBody``); nothing assembles an
/// error body by hand.
public struct Rejection: Sendable, Equatable {
    public var reason: Reason
    /// Milliseconds since the epoch when the token stopped being valid; only sent for 410.
    /// Spelled `Optional<…>`: the initialiser sets it (docs/speed-idioms.md, "Optionals").
    public var timestamp: Optional<Int64>
    /// Which spelling of `BadEnvironmentKeyIdInToken` goes on the wire (the configuration's
    /// choice); every other reason has one spelling. Held as an enum rather than the text, so a
    /// rejection is a few bytes with nothing to retain (it travels in verdicts and records).
    public var environmentKeySpelling: EnvironmentKeyReasonSpelling

    public init(_ reason: Reason, timestamp: Int64? = nil, spelling: EnvironmentKeyReasonSpelling = .documented) {
        self.reason = reason
        self.timestamp = reason.carriesTimestamp ? timestamp : nil
        self.environmentKeySpelling = reason == .badEnvironmentKeyIdInToken ? spelling : .documented
    }

    /// The string put on the wire for `reason`: `reason.rawValue`, except where the configuration
    /// selects the alternative spelling `BadEnvironmentKeyInToken`.
    public var wireReason: String {
        reason == .badEnvironmentKeyIdInToken && environmentKeySpelling == .observed
            ? EnvironmentKeyReasonSpelling.observed.rawValue : reason.rawValue
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

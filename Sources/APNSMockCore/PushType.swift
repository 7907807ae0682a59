/// The value of the `apns-push-type` header: what kind of notification a request carries.
///
/// Each type fixes how its `apns-topic` is spelled (the app's bundle ID plus a suffix), how large its
/// payload may be, which `apns-priority` values it takes and which kind of provider authentication
/// may send it (docs/apns.md, "Requests"). Those rules live here, once, as data the validator,
/// the lint and the later authentication checks read.
public enum PushType: String, CaseIterable, Sendable, Codable {
    case alert
    case background
    case location
    case voip
    case complication
    case fileprovider
    case mdm
    case liveactivity
    case pushtotalk
    case widgets
    case controls

    /// The type a request without `apns-push-type` is treated as.
    ///
    /// Apple made the header mandatory for watchOS 6 / iOS 13 and later but still delivers requests
    /// that omit it, as alerts; clients written before the header existed rely on that.
    public static let `default`: PushType = .alert

    /// Parses a header value. Apple's values are lowercase and compared exactly, so `Alert` or
    /// ` alert` is unknown (→ InvalidPushType), as it is for APNs.
    public init?(headerValue: String) {
        // Byte comparison against the eleven names: `init(rawValue:)` on a String enum walks a
        // generic string switch, measurable at load-test rates.
        let found: PushType? = headerValue.withUTF8Bytes { bytes in
            PushType.allCases.first { $0.rawValue.hasSameBytes(as: bytes) }
        }
        guard let found else { return nil }
        self = found
    }

    /// What follows the bundle ID in `apns-topic` for this type, including the leading dot; empty
    /// for types whose topic is the bare bundle ID.
    ///
    /// `mdm` also returns empty, but its topic is not a bundle ID at all: it is the UID of the MDM
    /// push certificate, which the mock cannot predict, so ``topicIsBundleBased`` is false for it.
    public var topicSuffix: String { topicSuffixLiteral.description }

    /// ``topicSuffix`` as static bytes, for comparing against a topic without allocating.
    var topicSuffixLiteral: StaticString {
        switch self {
        case .alert, .background, .mdm: return ""
        case .location: return ".location-query"
        case .voip: return ".voip"
        case .complication: return ".complication"
        case .fileprovider: return ".pushkit.fileprovider"
        case .liveactivity: return ".push-type.liveactivity"
        case .pushtotalk: return ".voip-ptt"
        case .widgets: return ".push-type.widgets"
        case .controls: return ".push-type.controls"
        }
    }

    /// Whether the topic is `<bundle ID><topicSuffix>`. False only for `mdm`.
    public var topicIsBundleBased: Bool { self != .mdm }

    /// The largest payload APNs accepts for this type, in bytes; one byte more is 413
    /// PayloadTooLarge. VoIP pushes get 5120 because CallKit payloads carry caller details.
    public var payloadLimit: Int {
        self == .voip ? 5120 : 4096
    }

    /// The largest payload limit over every type: bytes beyond it can never be accepted.
    public static let largestPayloadLimit = allCases.reduce(0) { max($0, $1.payloadLimit) }

    /// The `apns-priority` values this type accepts; any other value is 400 BadPriority.
    ///
    /// Apple documents 10, 5 and 1 for every push and forbids only 10 for background pushes
    /// ("using priority 10 is an error"; mock's choice: 1 is refused too, since Apple says
    /// "always use priority 5"). ActivityKit asks for 5 or 10 on Live Activity pushes, so 1 is
    /// BadPriority there. Every other type, alert included, takes all three (docs/validation.md).
    public var allowedPriorities: [Int] {
        switch self {
        case .background: return [5]
        case .liveactivity: return [10, 5]
        default: return [10, 5, 1]
        }
    }

    /// The priority a request of this type gets when it sends no `apns-priority`.
    ///
    /// Apple's default is 10. Mock's choice: a background push without the header is taken as 5
    /// instead of being refused, because the header's absence is not the sender asking for 10.
    public var defaultPriority: Int {
        self == .background ? 5 : 10
    }

    /// Which provider authentication Apple says may send this type (location pushes need token
    /// authentication, MDM pushes the MDM certificate). Neither is refused: a location push over a
    /// certificate gets the finding `location-over-certificate` (refused under strict lint), and an
    /// MDM push with a token is accepted (docs/validation.md).
    public var requiredAuthentication: AuthenticationRequirement {
        switch self {
        case .location: return .tokenOnly
        case .mdm: return .certificateOnly
        default: return .any
        }
    }

    /// Whether Apple's payload for this type is built around an `aps` dictionary. MDM pushes carry
    /// only `{"mdm":"<PushMagic>"}`, and the system ignores the payload of location and file-provider
    /// pushes, so the lint does not ask those for `aps`.
    public var expectsAPSDictionary: Bool {
        switch self {
        case .mdm, .location, .fileprovider: return false
        default: return true
        }
    }

    /// The bundle ID a topic names for this type, or `nil` when the topic does not fit the type.
    ///
    /// A bundle-based type needs its exact suffix after a non-empty bundle ID. The suffix-less types
    /// (alert, background) refuse a topic that ends in another type's suffix, because Apple was
    /// observed to answer InvalidPushType for an alert sent to `com.x.voip`. For `mdm` the whole
    /// topic is returned: it names the certificate, not an app.
    public func bundleID(inTopic topic: String) -> Substring? {
        guard let length = bundleIDLength(inTopic: topic) else { return nil }
        // Suffixes are ASCII, so cutting at a UTF-8 offset lands on a character boundary.
        return topic[..<topic.utf8.index(topic.utf8.startIndex, offsetBy: length)]
    }

    /// The length in bytes of the bundle ID that starts `topic` (see ``bundleID(inTopic:)``),
    /// found by comparing bytes.
    func bundleIDLength(inTopic topic: String) -> Int? {
        guard topicIsBundleBased else { return topic.utf8.count }
        return topic.withUTF8Bytes { bytes in
            let suffix = topicSuffixLiteral
            if suffix.utf8CodeUnitCount == 0 {
                let endsInOtherSuffix = PushType.suffixedTypes.contains { bytes.hasSuffix($0.topicSuffixLiteral) }
                return endsInOtherSuffix ? nil : bytes.count
            }
            guard bytes.count > suffix.utf8CodeUnitCount, bytes.hasSuffix(suffix) else { return nil }
            return bytes.count - suffix.utf8CodeUnitCount
        }
    }

    /// Types whose topic carries a suffix.
    static let suffixedTypes: [PushType] = PushType.allCases.filter { $0.topicSuffixLiteral.utf8CodeUnitCount > 0 }
}

/// Which kind of provider authentication a push type allows.
public enum AuthenticationRequirement: String, Sendable, Codable {
    case any
    case tokenOnly
    case certificateOnly

    /// Whether a request authenticated with `method` satisfies this requirement.
    public func allows(_ method: AuthenticationMethod) -> Bool {
        switch self {
        case .any: return true
        case .tokenOnly: return method == .token
        case .certificateOnly: return method == .certificate
        }
    }
}

/// How a provider proved who it is: a JWT in `authorization`, or a client certificate.
public enum AuthenticationMethod: String, Sendable, Codable {
    case token
    case certificate
}

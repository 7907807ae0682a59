/// What the validator needs to know about a request besides its headers and body.
public struct RequestContext: Sendable {
    /// The environment the client addressed (from SNI / `:authority`, else the server default).
    public var environment: APNSEnvironment

    public init(environment: APNSEnvironment) {
        self.environment = environment
    }
}

/// A request that passed every check, with its headers interpreted.
public struct AcceptedPush: Sendable, Equatable {
    public var token: String
    public var topic: String?

    public init(token: String, topic: String?) {
        self.token = token
        self.topic = topic
    }
}

/// The validator's verdict on one request.
public enum Decision: Sendable, Equatable {
    case accepted(AcceptedPush)
    case rejected(Rejection)
}

/// Settings that change what the validator accepts.
public struct ValidationSettings: Sendable, Equatable {
    /// Strict mode accepts only 64-hex-digit device tokens.
    public var strictDeviceTokens: Bool

    public init(strictDeviceTokens: Bool = false) {
        self.strictDeviceTokens = strictDeviceTokens
    }
}

/// Decides whether APNs would accept a request, and if not, with which reason.
///
/// Validation is an ordered list of pure checks (the pattern of pushy's
/// `ValidatingPushNotificationHandler`): the first check that fails decides the reason. The order
/// is documented in docs/validation.md.
public struct Validator: Sendable {
    public var settings: ValidationSettings

    public init(settings: ValidationSettings = .init()) {
        self.settings = settings
    }

    public func validate(_ request: PushRequest, context: RequestContext) -> Decision {
        guard request.method == "POST" else {
            return .rejected(Rejection(.methodNotAllowed))
        }
        guard let path = request.path, path.utf8.starts(with: Self.devicePathPrefix) else {
            return .rejected(Rejection(.badPath))
        }
        let token = path.utf8.dropFirst(Self.devicePathPrefix.count)
        if token.isEmpty {
            return .rejected(Rejection(.missingDeviceToken))
        }
        if token.contains(UInt8(ascii: "/")) {
            return .rejected(Rejection(.badPath))
        }
        guard DeviceToken.isWellFormed(token, strict: settings.strictDeviceTokens) else {
            return .rejected(Rejection(.badDeviceToken))
        }
        return .accepted(AcceptedPush(token: String(Substring(token)), topic: request.topic))
    }

    static let devicePathPrefix = Array("/3/device/".utf8)
}

/// Device-token format rules (apns-behavior.md section 5).
public enum DeviceToken {
    /// Longest token accepted by default. Apple makes no promise about length; 64 hex digits is
    /// common and 160 is seen from simulators.
    public static let maximumLength = 200
    /// The only length accepted in strict mode.
    public static let strictLength = 64

    /// Non-empty, even-length hex (either case) up to ``maximumLength``; exactly
    /// ``strictLength`` digits in strict mode.
    public static func isWellFormed(_ token: some Collection<UInt8>, strict: Bool) -> Bool {
        let count = token.count
        if strict {
            guard count == strictLength else { return false }
        } else {
            guard count > 0, count <= maximumLength, count % 2 == 0 else { return false }
        }
        return token.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"),
                 UInt8(ascii: "A")...UInt8(ascii: "F"):
                return true
            default:
                return false
            }
        }
    }
}

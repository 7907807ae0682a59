/// What deciding a broadcast-side request needs besides the request: facts from the connection,
/// the authenticator's verdict and a snapshot of the channels, handed in so that deciding stays
/// pure (as for device pushes, ``RequestContext``).
public struct BroadcastContext: Sendable {
    /// The environment of the request: the channel-management listener's own, or for a
    /// broadcast the one the dialled host names (else the server's default).
    public var environment: APNSEnvironment
    /// What the sender's key or certificate may push to.
    public var allowedTopics: AllowedTopics
    /// The authenticator's refusal of the credentials, if any.
    public var authenticationFailure: Rejection?
    public var channels: ChannelRegistry
    public var settings: BroadcastSettings
    public var validation: ValidationSettings

    public init(
        environment: APNSEnvironment, allowedTopics: AllowedTopics = .any, authenticationFailure: Rejection? = nil,
        channels: ChannelRegistry = ChannelRegistry(), settings: BroadcastSettings = BroadcastSettings(),
        validation: ValidationSettings = ValidationSettings()
    ) {
        self.environment = environment
        self.allowedTopics = allowedTopics
        self.authenticationFailure = authenticationFailure
        self.channels = channels
        self.settings = settings
        self.validation = validation
    }
}

/// A channel-management request decided.
public struct ChannelRequestVerdict: Sendable, Equatable {
    public enum Outcome: Sendable, Equatable {
        /// Create a channel with this policy (the store makes the ID and enforces the limit).
        case create(MessageStoragePolicy)
        case read(BroadcastChannel)
        case delete(BroadcastChannel)
        case list([BroadcastChannel])
        case rejected(Rejection)
    }

    /// `nil` when the method and path name no operation (405, 404).
    public var operation: ChannelOperation?
    public var bundleID: String?
    /// The request's `apns-channel-id`, as sent.
    public var channelID: String?
    public var outcome: Outcome

    public var rejection: Rejection? {
        if case .rejected(let rejection) = outcome { return rejection }
        return nil
    }
}

/// A broadcast that passed every check.
public struct AcceptedBroadcast: Sendable, Equatable {
    public var channel: BroadcastChannel
    public var priority: Int
    /// `apns-expiration` in UNIX seconds (0 when absent and not required).
    public var expiration: Int64
    public var lint: [LintFinding]
}

/// A broadcast decided.
public struct BroadcastVerdict: Sendable, Equatable {
    public enum Outcome: Sendable, Equatable {
        case accepted(AcceptedBroadcast)
        case rejected(Rejection)
    }

    public var bundleID: String?
    /// The request's `apns-channel-id`, as sent.
    public var channelID: String?
    public var outcome: Outcome

    public var rejection: Rejection? {
        if case .rejected(let rejection) = outcome { return rejection }
        return nil
    }
}

/// Decides channel-management requests and broadcasts (docs/broadcast.md): an ordered list of
/// checks, each with one reason, the first failing one deciding, as ``Validator`` does for device
/// pushes. Pure: the channel store applies a create or delete afterwards.
public struct BroadcastValidator: Sendable {
    public init() {}

    /// The largest channel-management body (mock's choice; the body is a small JSON object).
    public static let managementBodyLimit = 4096
    /// The largest broadcast payload: 5 KB, as Apple documents.
    public static let broadcastPayloadLimit = 5120
    /// The push type a channel is created for, as Apple spells it in the create body.
    public static let channelPushType = "LiveActivity"

    // MARK: BroadcastChannel management

    /// A request on a channel-management listener. Checks, in order: path (404 BadPath), method
    /// (405 MethodNotAllowed), the bundle (400 TopicDisallowed for a push-type suffix),
    /// `apns-request-id` (400 BadMessageId), credentials (403), the credentials against the bundle
    /// (403 TopicMismatch), the app's broadcast capability (400 FeatureNotEnabled), then the
    /// operation's own checks.
    public func decideManagement(_ request: PushRequest, context: BroadcastContext) -> ChannelRequestVerdict {
        var verdict = ChannelRequestVerdict(operation: nil, bundleID: nil, channelID: request.channelID, outcome: .rejected(Rejection(.badPath)))
        let bundle: Substring
        switch BroadcastPath(request.path ?? "") {
        case .channels(let bundleID):
            bundle = bundleID
            switch request.method {
            case "POST": verdict.operation = .create
            case "GET": verdict.operation = .read
            case "DELETE": verdict.operation = .delete
            default: break
            }
        case .allChannels(let bundleID):
            bundle = bundleID
            if request.method == "GET" { verdict.operation = .list }
        case .broadcast, .other:
            return verdict
        }
        verdict.bundleID = String(bundle)
        guard let operation = verdict.operation else {
            verdict.outcome = .rejected(Rejection(.methodNotAllowed))
            return verdict
        }
        if let rejection = commonChecks(request, bundleID: verdict.bundleID!, context: context) {
            verdict.outcome = .rejected(rejection)
            return verdict
        }
        let bundleID = verdict.bundleID!
        switch operation {
        case .create:
            verdict.outcome = decideCreate(request, context: context)
        case .read, .delete:
            switch lookUp(request.channelID, bundleID: bundleID, context: context) {
            case .rejected(let rejection): verdict.outcome = .rejected(rejection)
            case .found(let channel): verdict.outcome = operation == .read ? .read(channel) : .delete(channel)
            }
        case .list:
            verdict.outcome = .list(context.channels.channels(bundleID: bundleID, environment: context.environment))
        }
        return verdict
    }

    /// The create body: `{"message-storage-policy": 0|1, "push-type": "LiveActivity"}`, both
    /// required. Empty: PayloadEmpty; over the limit: PayloadTooLarge; not a JSON object:
    /// BadRequestPayload; an attribute Apple does not define, a repeated one or a policy other than
    /// 0 or 1 (or none): BadRequestParams; no push type: MissingPushType; another push type:
    /// InvalidPushType.
    private func decideCreate(_ request: PushRequest, context: BroadcastContext) -> ChannelRequestVerdict.Outcome {
        if request.bodyLength == 0 { return .rejected(Rejection(.payloadEmpty)) }
        if request.bodyLength > Self.managementBodyLimit { return .rejected(Rejection(.payloadTooLarge)) }
        guard let body = try? JSONValue.parse(request.body), let members = body.members else {
            return .rejected(Rejection(.badRequestPayload))
        }
        var policy: MessageStoragePolicy?
        var pushType: String?
        var seen: Set<String> = []
        for member in members {
            guard seen.insert(member.key).inserted else { return .rejected(Rejection(.badRequestParams)) }
            switch member.key {
            case "message-storage-policy":
                guard let value = member.value.integerValue, let parsed = MessageStoragePolicy(rawValue: Int(clamping: value)) else {
                    return .rejected(Rejection(.badRequestParams))
                }
                policy = parsed
            case "push-type":
                guard let text = member.value.stringValue else { return .rejected(Rejection(.invalidPushType)) }
                pushType = text
            default:
                return .rejected(Rejection(.badRequestParams))
            }
        }
        guard let pushType else { return .rejected(Rejection(.missingPushType)) }
        guard Self.isLiveActivity(pushType, exactly: Self.channelPushType, strict: context.settings.strictPushTypeSpelling)
        else { return .rejected(Rejection(.invalidPushType)) }
        guard let policy else { return .rejected(Rejection(.badRequestParams)) }
        return .create(policy)
    }

    // MARK: Broadcasts

    /// `POST /4/broadcasts/apps/<bundle>` on the APNs listener. Checks, in order: method (405),
    /// path (404 BadPath), the bundle (400 TopicDisallowed for a push-type suffix), `apns-id` and
    /// `apns-request-id` (400 BadMessageId), credentials (403), TopicMismatch (403),
    /// FeatureNotEnabled, MissingChannelId, BadChannelId, MissingPushType, InvalidPushType,
    /// BadExpirationDate (missing or not UNIX seconds), BadPriority, ChannelNotRegistered,
    /// BadExpirationDate (non-zero on a no-storage channel), PayloadEmpty, PayloadTooLarge, then
    /// strict lint.
    public func decideBroadcast(
        _ request: PushRequest, context: BroadcastContext, memo: inout ValidationMemo
    ) -> BroadcastVerdict {
        var verdict = BroadcastVerdict(bundleID: nil, channelID: request.channelID, outcome: .rejected(Rejection(.methodNotAllowed)))
        guard case .broadcast(let bundle) = BroadcastPath(request.path ?? "") else {
            verdict.outcome = .rejected(Rejection(request.method == "POST" ? .badPath : .methodNotAllowed))
            return verdict
        }
        verdict.bundleID = String(bundle)
        guard request.method == "POST" else { return verdict }
        if let apnsID = request.apnsID, !HeaderSyntax.isCanonicalUUID(apnsID) {
            verdict.outcome = .rejected(Rejection(.badMessageId))
            return verdict
        }
        if let rejection = commonChecks(request, bundleID: verdict.bundleID!, context: context) {
            verdict.outcome = .rejected(rejection)
            return verdict
        }
        guard let channelID = request.channelID else {
            verdict.outcome = .rejected(Rejection(.missingChannelId))
            return verdict
        }
        guard ChannelID.isWellFormed(channelID) else {
            verdict.outcome = .rejected(Rejection(.badChannelId))
            return verdict
        }
        guard let pushType = request.pushType else {
            verdict.outcome = .rejected(Rejection(.missingPushType))
            return verdict
        }
        guard Self.isLiveActivity(pushType, exactly: PushType.liveactivity.rawValue, strict: context.settings.strictPushTypeSpelling)
        else {
            verdict.outcome = .rejected(Rejection(.invalidPushType))
            return verdict
        }
        var expiration: Int64 = 0
        if let value = request.expiration {
            guard let seconds = HeaderSyntax.expiration(value) else {
                verdict.outcome = .rejected(Rejection(.badExpirationDate))
                return verdict
            }
            expiration = seconds
        } else if context.settings.requireExpiration {
            verdict.outcome = .rejected(Rejection(.badExpirationDate))
            return verdict
        }
        var priority = 10
        if let value = request.priority {
            guard let parsed = HeaderSyntax.priority(value), parsed != 1 || context.settings.allowPriority1 else {
                verdict.outcome = .rejected(Rejection(.badPriority))
                return verdict
            }
            priority = parsed
        }
        guard let channel = context.channels.channel(id: channelID, bundleID: verdict.bundleID!, environment: context.environment)
        else {
            verdict.outcome = .rejected(Rejection(.channelNotRegistered))
            return verdict
        }
        if channel.storagePolicy == .noMessageStored, expiration != 0 {
            verdict.outcome = .rejected(Rejection(.badExpirationDate))
            return verdict
        }
        if request.bodyLength == 0 {
            verdict.outcome = .rejected(Rejection(.payloadEmpty))
            return verdict
        }
        if request.bodyLength > Self.broadcastPayloadLimit {
            verdict.outcome = .rejected(Rejection(.payloadTooLarge))
            return verdict
        }
        // The payload's own findings depend on its bytes alone: memoized while a connection repeats
        // the payload (the memo keys on them). Whether a subscribed channel exists is looked up
        // each time: channels come and go.
        var lint = memo.lint(request, pushType: .liveactivity, broadcast: true) { request, pushType in
            guard request.bodyLength == request.body.count else { return [] }
            var findings = Lint.findings(payload: request.body, pushType: pushType)
            if Lint.startsLiveActivity(request.body) {
                findings.append(LintFinding(
                    .broadcastStartsLiveActivity, "a broadcast cannot start a Live Activity (\"aps.event\": \"start\")"))
            }
            return findings
        }
        lint += Self.channelFindings(request.body, bundleID: verdict.bundleID!, context: context)
        if context.validation.strictLint, !lint.isEmpty {
            verdict.outcome = .rejected(Rejection(context.validation.lintRejectionReason))
            return verdict
        }
        verdict.outcome = .accepted(AcceptedBroadcast(channel: channel, priority: priority, expiration: expiration, lint: lint))
        return verdict
    }

    /// The finding for a Live Activity payload whose `aps.input-push-channel` names no channel of
    /// the app in this environment (the activity would not start on the device).
    public static func channelFindings(_ payload: [UInt8], bundleID: String, context: BroadcastContext) -> [LintFinding] {
        guard let channelID = Lint.inputPushChannel(payload) else { return [] }
        if context.channels.channel(id: channelID, bundleID: bundleID, environment: context.environment) != nil {
            return []
        }
        return [LintFinding(
            .liveActivityUnknownChannel,
            "\"aps.input-push-channel\" names no channel of \(bundleID) in the \(context.environment.rawValue) environment")]
    }

    // MARK: Shared checks

    /// Bundle, request ID, credentials, TopicMismatch, FeatureNotEnabled.
    private func commonChecks(_ request: PushRequest, bundleID: String, context: BroadcastContext) -> Rejection? {
        // "Ensure that no push type suffix is added to the bundle ID."
        if PushType.allCases.contains(where: { suffix in
            suffix.topicSuffixLiteral.utf8CodeUnitCount > 0 && bundleID.withUTF8Bytes { $0.hasSuffix(suffix.topicSuffixLiteral) }
        }) {
            return Rejection(.topicDisallowed)
        }
        guard HeaderSyntax.isWellFormedTopic(bundleID) else { return Rejection(.badPath) }
        if let requestID = request.requestID, !HeaderSyntax.isCanonicalUUID(requestID) {
            return Rejection(.badMessageId)
        }
        if let failure = context.authenticationFailure {
            return context.validation.rejection(failure.reason, timestamp: failure.timestamp)
        }
        // The Live Activity topic is built only when the bundle itself is not allowed.
        guard context.allowedTopics.allows(topic: bundleID, bundleID: Substring(bundleID))
            || context.allowedTopics.allows(topic: bundleID + PushType.liveactivity.topicSuffix, bundleID: Substring(bundleID))
        else { return Rejection(.topicMismatch) }
        if !context.settings.disabledApps.isEmpty, context.settings.disabledApps.contains(bundleID) {
            return Rejection(.featureNotEnabled)
        }
        return nil
    }

    private enum LookUp {
        case found(BroadcastChannel)
        case rejected(Rejection)
    }

    private func lookUp(_ channelID: String?, bundleID: String, context: BroadcastContext) -> LookUp {
        guard let channelID else { return .rejected(Rejection(.missingChannelId)) }
        guard ChannelID.isWellFormed(channelID) else { return .rejected(Rejection(.badChannelId)) }
        guard let channel = context.channels.channel(id: channelID, bundleID: bundleID, environment: context.environment)
        else { return .rejected(Rejection(.channelNotRegistered)) }
        return .found(channel)
    }

    /// Whether `value` names the Live Activity push type: exactly `exact` when strict, in any
    /// letter case otherwise (clients send both `LiveActivity` and `liveactivity`).
    static func isLiveActivity(_ value: String, exactly exact: String, strict: Bool) -> Bool {
        strict ? value == exact : value.lowercased() == "liveactivity"
    }
}

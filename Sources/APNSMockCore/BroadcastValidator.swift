/// What deciding a broadcast-side request needs besides the request: facts from the connection,
/// the authenticator's verdict and a snapshot of the channels, handed in so that deciding stays
/// pure (as for device pushes, ``ValidationContext``).
public struct BroadcastContext: Sendable {
    // Optionals spelled `Optional<…>`: a stored `var` spelled `T?` is first set to an implicit
    // `nil` in the initialiser, whose assignment then destroys that `nil` (through Optional's
    // generic value witness) on every request that builds one.
    /// The environment of the request: the channel-management listener's own, or for a
    /// broadcast the one the dialled host names (else the server's default).
    public var environment: APNSEnvironment
    /// What the sender's key or certificate may push to.
    public var allowedTopics: AllowedTopics
    /// The authenticator's refusal of the credentials, if any.
    public var authenticationFailure: Optional<Rejection>
    public var channels: ChannelRegistry
    /// The version of ``channels`` in its store, which moves with every change; `nil` when
    /// unknown (then a broadcast's channel is looked up afresh every time).
    public var channelsVersion: Optional<UInt64>
    public var settings: BroadcastSettings
    public var validation: ValidationSettings

    public init(
        environment: APNSEnvironment, allowedTopics: AllowedTopics = .any, authenticationFailure: Rejection? = nil,
        channels: ChannelRegistry = ChannelRegistry(), channelsVersion: UInt64? = nil,
        settings: BroadcastSettings = BroadcastSettings(), validation: ValidationSettings = ValidationSettings()
    ) {
        self.environment = environment
        self.allowedTopics = allowedTopics
        self.authenticationFailure = authenticationFailure
        self.channels = channels
        self.channelsVersion = channelsVersion
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

/// One check on a broadcast-side request, with the reasons it can answer. Like
/// ``ValidationStep`` for device pushes, the checks are pure and ordered, and the first that fails
/// decides; ``BroadcastValidator`` walks ``broadcastOrder`` for a broadcast and
/// ``managementOrder`` for a channel-management request. The checks both kinds share (the bundle,
/// the request ID, credentials, the credentials against the bundle, the app's capability, the
/// channel ID and look-up) are written once, here, and so are the ones they share with device
/// pushes (``RequestChecks``). docs/broadcast.md lists both orders.
public enum BroadcastStep: String, CaseIterable, Sendable {
    /// Management: a path that names no channel operation (404 BadPath), then a method the path
    /// does not take (405).
    case managementRoute
    /// Broadcasts: a path other than `/4/broadcasts/apps/<bundle>` (404 BadPath for POST, else
    /// 405), then any method but POST (405).
    case broadcastRoute
    /// `apns-id` (broadcasts only), as for device pushes.
    case messageID
    /// "Ensure that no push type suffix is added to the bundle ID" (TopicDisallowed); a bundle that
    /// is no topic (BadPath).
    case bundle
    /// `apns-request-id` (BadMessageId).
    case requestID
    /// The authenticator's refusal of the credentials.
    case authentication
    /// The credentials against the bundle (TopicMismatch).
    case topicMismatch
    /// The app's broadcast capability (FeatureNotEnabled, `broadcast.disabledApps`).
    case featureEnabled
    /// `apns-channel-id` present and well formed (broadcasts; reading and deleting a channel).
    case channelID
    /// `apns-push-type` names Live Activities (broadcasts).
    case pushType
    /// `apns-expiration` in UNIX seconds, required unless `broadcast.requireExpiration` is off.
    case expiration
    /// `apns-priority`: 5 or 10, and 1 with `broadcast.allowPriority1`.
    case priority
    /// The channel exists for the app in this environment (broadcasts; reading and deleting).
    case channelRegistered
    /// A channel that stores no messages takes only expiration 0 (broadcasts).
    case expirationForStoragePolicy
    /// PayloadEmpty, PayloadTooLarge (5 KB for broadcasts).
    case payloadSize
    /// Lint findings reject under `validation.strictLint` (broadcasts).
    case strictLint
    /// The create body (creating a channel).
    case createBody

    /// The checks on a channel-management request; the channel checks apply to reading and
    /// deleting, the create body to creating.
    public static let managementOrder: [BroadcastStep] = [
        .managementRoute, .bundle, .requestID, .authentication, .topicMismatch, .featureEnabled,
        .channelID, .channelRegistered, .createBody,
    ]

    /// The checks on a broadcast.
    public static let broadcastOrder: [BroadcastStep] = [
        .broadcastRoute, .messageID, .bundle, .requestID, .authentication, .topicMismatch, .featureEnabled,
        .channelID, .pushType, .expiration, .priority, .channelRegistered, .expirationForStoragePolicy,
        .payloadSize, .strictLint,
    ]

    /// Whether the step reads only the request's known headers and the configuration (not the
    /// credentials, the channels or the body): its answer repeats while the headers do, which lets
    /// a connection remember it (``BroadcastValidator/decideBroadcast(_:context:memo:)``).
    public var readsHeadersOnly: Bool {
        switch self {
        case .managementRoute, .broadcastRoute, .messageID, .bundle, .requestID, .featureEnabled, .channelID, .pushType,
             .expiration, .priority:
            true
        case .authentication, .topicMismatch, .channelRegistered, .expirationForStoragePolicy, .payloadSize, .strictLint,
             .createBody:
            false
        }
    }

    /// The reasons this step can answer with.
    public var reasons: [Reason] {
        switch self {
        case .managementRoute, .broadcastRoute: [.badPath, .methodNotAllowed]
        case .messageID, .requestID: [.badMessageId]
        case .bundle: [.topicDisallowed, .badPath]
        case .authentication: Reason.allCases.filter { $0.status == 403 } + [.tooManyProviderTokenUpdates]
        case .topicMismatch: [.topicMismatch]
        case .featureEnabled: [.featureNotEnabled]
        case .channelID: [.missingChannelId, .badChannelId]
        case .pushType: [.missingPushType, .invalidPushType]
        case .expiration, .expirationForStoragePolicy: [.badExpirationDate]
        case .priority: [.badPriority]
        case .channelRegistered: [.channelNotRegistered]
        case .payloadSize: [.payloadEmpty, .payloadTooLarge]
        case .strictLint: Reason.allCases.filter { $0.status == 400 }
        case .createBody:
            [.payloadEmpty, .payloadTooLarge, .badRequestPayload, .badRequestParams, .missingPushType, .invalidPushType]
        }
    }
}

/// Decides channel-management requests and broadcasts (docs/broadcast.md) by walking
/// ``BroadcastStep``'s orders. Pure: the channel store applies a create or delete afterwards.
public struct BroadcastValidator: Sendable {
    public init() {}

    /// The largest channel-management body (mock's choice; the body is a small JSON object).
    public static let managementBodyLimit = 4096
    /// The largest broadcast payload: 5 KB, as Apple documents.
    public static let broadcastPayloadLimit = 5120
    /// The push type a channel is created for, as Apple spells it in the create body.
    public static let channelPushType = "LiveActivity"

    /// What the checks so far have interpreted, for the checks after them.
    struct Draft {
        /// The bundle the path names, once the route step has read it.
        var bundleID: String?
        var bundle: String { bundleID ?? "" }
        var operation: ChannelOperation?
        var channel: BroadcastChannel?
        var expiration: Int64 = 0
        var priority = 10
        var policy: MessageStoragePolicy?
        var lint: [LintFinding] = []
    }

    /// A request on a channel-management listener, checked in ``BroadcastStep/managementOrder``.
    public func decideManagement(_ request: PushRequest, context: BroadcastContext) -> ChannelRequestVerdict {
        var draft = Draft()
        var memo = ValidationMemo()
        for step in BroadcastStep.managementOrder {
            if let rejection = check(step, request, context, &draft, &memo) {
                return ChannelRequestVerdict(
                    operation: draft.operation, bundleID: draft.bundleID,
                    channelID: request.channelID, outcome: .rejected(rejection))
            }
        }
        let bundleID = draft.bundle
        let outcome: ChannelRequestVerdict.Outcome
        switch draft.operation {
        case .create?:
            outcome = draft.policy.map { .create($0) } ?? .rejected(Rejection(.badRequestParams))
        case .read?, .delete?:
            guard let channel = draft.channel else { return ChannelRequestVerdict(
                operation: draft.operation, bundleID: bundleID, channelID: request.channelID,
                outcome: .rejected(Rejection(.channelNotRegistered))) }
            outcome = draft.operation == .read ? .read(channel) : .delete(channel)
        case .list?, nil:
            outcome = .list(context.channels.channels(bundleID: bundleID, environment: context.environment))
        }
        return ChannelRequestVerdict(operation: draft.operation, bundleID: bundleID, channelID: request.channelID, outcome: outcome)
    }

    /// What a broadcast's header steps (``BroadcastStep/readsHeadersOnly``) made of its headers:
    /// the draft they leave, and the first of them that rejects, if one does.
    struct HeaderOutcome {
        var draft: Draft
        var failure: (step: BroadcastStep, rejection: Rejection)?
    }

    /// `POST /4/broadcasts/apps/<bundle>` on the APNs listener, checked in
    /// ``BroadcastStep/broadcastOrder``.
    ///
    /// The steps that read only the headers and the configuration are run once for a connection's
    /// headers and remembered in `memo` while the headers repeat (in a ``ValidationMemo/HeaderMemo``,
    /// as the device push's header steps are); the others (credentials, the channel, the payload) run for
    /// every broadcast. The order of the answers is the same either way: a remembered failure
    /// answers at its own step, after the steps before it ran. The settings must be the same for
    /// every broadcast of one memo (they are the configuration's).
    public func decideBroadcast(
        _ request: PushRequest, context: BroadcastContext, memo: inout ValidationMemo
    ) -> BroadcastVerdict {
        var draft: Draft
        let headerFailure: (step: BroadcastStep, rejection: Rejection)?
        if let outcome = memo.broadcastHeaders.take(for: request, certificateTopic: nil) {
            // Only the draft, which the other steps add to, is copied.
            draft = outcome.draft
            headerFailure = outcome.failure
            memo.broadcastHeaders.putBack(outcome)
        } else {
            draft = Draft()
            var failure: (step: BroadcastStep, rejection: Rejection)?
            for step in BroadcastStep.broadcastOrder where step.readsHeadersOnly {
                if let rejection = check(step, request, context, &draft, &memo) {
                    failure = (step, rejection)
                    break
                }
            }
            headerFailure = failure
            memo.broadcastHeaders.keep(HeaderOutcome(draft: draft, failure: failure), for: request, certificateTopic: nil)
        }
        for step in BroadcastStep.broadcastOrder {
            if let failure = headerFailure, failure.step == step {
                return BroadcastVerdict(bundleID: draft.bundleID, channelID: request.channelID, outcome: .rejected(failure.rejection))
            }
            if step.readsHeadersOnly { continue }
            if let rejection = check(step, request, context, &draft, &memo) {
                return BroadcastVerdict(bundleID: draft.bundleID, channelID: request.channelID, outcome: .rejected(rejection))
            }
        }
        guard let channel = draft.channel else {
            return BroadcastVerdict(
                bundleID: draft.bundleID, channelID: request.channelID, outcome: .rejected(Rejection(.channelNotRegistered)))
        }
        return BroadcastVerdict(
            bundleID: draft.bundleID, channelID: request.channelID,
            outcome: .accepted(AcceptedBroadcast(channel: channel, priority: draft.priority, expiration: draft.expiration, lint: draft.lint)))
    }

    private func check(
        _ step: BroadcastStep, _ request: PushRequest, _ context: BroadcastContext, _ draft: inout Draft,
        _ memo: inout ValidationMemo
    ) -> Rejection? {
        switch step {
        case .managementRoute:
            switch BroadcastPath(request.path ?? "") {
            case .channels(let bundleID):
                draft.bundleID = String(bundleID)
                switch request.method {
                case "POST": draft.operation = .create
                case "GET": draft.operation = .read
                case "DELETE": draft.operation = .delete
                default: return Rejection(.methodNotAllowed)
                }
            case .allChannels(let bundleID):
                draft.bundleID = String(bundleID)
                guard request.method == "GET" else { return Rejection(.methodNotAllowed) }
                draft.operation = .list
            case .broadcast, .other:
                return Rejection(.badPath)
            }
            return nil

        case .broadcastRoute:
            guard case .broadcast(let bundleID) = BroadcastPath(request.path ?? "") else {
                return Rejection(request.method == "POST" ? .badPath : .methodNotAllowed)
            }
            draft.bundleID = String(bundleID)
            return request.method == "POST" ? nil : Rejection(.methodNotAllowed)

        case .messageID:
            return RequestChecks.messageID(request.apnsID)

        case .bundle:
            if PushType.allCases.contains(where: { suffix in
                suffix.topicSuffixLiteral.utf8CodeUnitCount > 0 && draft.bundle.withUTF8Bytes { $0.hasSuffix(suffix.topicSuffixLiteral) }
            }) {
                return Rejection(.topicDisallowed)
            }
            return HeaderSyntax.isWellFormedTopic(draft.bundle) ? nil : Rejection(.badPath)

        case .requestID:
            return RequestChecks.messageID(request.requestID)

        case .authentication:
            return RequestChecks.authentication(context.authenticationFailure, settings: context.validation)

        case .topicMismatch:
            // The Live Activity topic is built only when the bundle itself is not allowed.
            let bundleID = draft.bundle
            return memo.allows(topic: bundleID, bundleID: Substring(bundleID), in: context.allowedTopics)
                || context.allowedTopics.allows(topic: bundleID + PushType.liveactivity.topicSuffix, bundleID: Substring(bundleID))
                ? nil : Rejection(.topicMismatch)

        case .featureEnabled:
            let disabled = context.settings.disabledApps
            return !disabled.isEmpty && disabled.contains(draft.bundle) ? Rejection(.featureNotEnabled) : nil

        case .channelID:
            guard draft.operation != .create, draft.operation != .list else { return nil }
            guard let channelID = request.channelID else { return Rejection(.missingChannelId) }
            return ChannelID.isWellFormed(channelID) ? nil : Rejection(.badChannelId)

        case .pushType:
            guard let pushType = request.pushType else { return Rejection(.missingPushType) }
            return Self.isLiveActivity(pushType, exactly: PushType.liveactivity.rawValue, strict: context.settings.strictPushTypeSpelling)
                ? nil : Rejection(.invalidPushType)

        case .expiration:
            guard let value = request.expiration else {
                return context.settings.requireExpiration ? Rejection(.badExpirationDate) : nil
            }
            guard let seconds = HeaderSyntax.expiration(value) else { return Rejection(.badExpirationDate) }
            draft.expiration = seconds
            return nil

        case .priority:
            guard let value = request.priority else { return nil }
            guard let priority = HeaderSyntax.priority(value), priority != 1 || context.settings.allowPriority1 else {
                return Rejection(.badPriority)
            }
            draft.priority = priority
            return nil

        case .channelRegistered:
            guard draft.operation != .create, draft.operation != .list, let channelID = request.channelID else { return nil }
            draft.channel = Self.channel(channelID, bundleID: draft.bundle, context: context, memo: &memo)
            return draft.channel == nil ? Rejection(.channelNotRegistered) : nil

        case .expirationForStoragePolicy:
            return draft.channel?.storagePolicy == .noMessageStored && draft.expiration != 0 ? Rejection(.badExpirationDate) : nil

        case .payloadSize:
            return RequestChecks.payloadSize(request.bodyLength, limit: Self.broadcastPayloadLimit)

        case .strictLint:
            // The payload's own findings depend on its bytes alone: memoized while a connection
            // repeats the payload (the memo keys on them). Whether a subscribed channel exists is
            // looked up each time: channels come and go.
            draft.lint = memo.lint(request, pushType: .liveactivity, broadcast: true) { request, pushType in
                guard request.bodyLength == request.body.count else { return [] }
                var findings = Lint.findings(payload: request.body, pushType: pushType)
                if Lint.startsLiveActivity(request.body) {
                    findings.append(LintFinding(
                        .broadcastStartsLiveActivity, "a broadcast cannot start a Live Activity (\"aps.event\": \"start\")"))
                }
                return findings
            }
            draft.lint += Self.channelFindings(request.body, bundleID: draft.bundle, context: context)
            return RequestChecks.strictLint(draft.lint, settings: context.validation)

        case .createBody:
            guard draft.operation == .create else { return nil }
            return checkCreateBody(request, context: context, &draft)
        }
    }

    /// The channel a request names, remembered for the last look-up while the registry's version
    /// stays the same: the ID compares by identity first (a connection repeating it hands in the
    /// same String), the bundle ID is the memoized draft's.
    private static func channel(
        _ id: String, bundleID: String, context: BroadcastContext, memo: inout ValidationMemo
    ) -> BroadcastChannel? {
        guard let version = context.channelsVersion else {
            return context.channels.channel(id: id, bundleID: bundleID, environment: context.environment)
        }
        // Compared where it is stored: copying the entry out (a tuple of two strings and an optional
        // channel) went through Optional's generic value witness, about 300 instructions.
        if memo.broadcastChannel?.answers(id: id, bundleID: bundleID, environment: context.environment, version: version) == true,
           let last = memo.broadcastChannel {
            return last.channel
        }
        let channel = context.channels.channel(id: id, bundleID: bundleID, environment: context.environment)
        memo.broadcastChannel = ValidationMemo.ChannelLookup(
            id: id, bundleID: bundleID, environment: context.environment, version: version, channel: channel)
        return channel
    }

    /// The create body: `{"message-storage-policy": 0|1, "push-type": "LiveActivity"}`, both
    /// required. Empty: PayloadEmpty; over the limit: PayloadTooLarge; not a JSON object:
    /// BadRequestPayload; an attribute Apple does not define, a repeated one or a policy other than
    /// 0 or 1 (or none): BadRequestParams; no push type: MissingPushType; another push type:
    /// InvalidPushType.
    private func checkCreateBody(_ request: PushRequest, context: BroadcastContext, _ draft: inout Draft) -> Rejection? {
        if let rejection = RequestChecks.payloadSize(request.bodyLength, limit: Self.managementBodyLimit) { return rejection }
        guard let body = try? JSONValue.parse(request.body), let members = body.members else {
            return Rejection(.badRequestPayload)
        }
        var policy: MessageStoragePolicy?
        var pushType: String?
        var seen: Set<String> = []
        for member in members {
            guard seen.insert(member.key).inserted else { return Rejection(.badRequestParams) }
            switch member.key {
            case "message-storage-policy":
                guard let value = member.value.integerValue, let parsed = MessageStoragePolicy(rawValue: Int(clamping: value)) else {
                    return Rejection(.badRequestParams)
                }
                policy = parsed
            case "push-type":
                guard let text = member.value.stringValue else { return Rejection(.invalidPushType) }
                pushType = text
            default:
                return Rejection(.badRequestParams)
            }
        }
        guard let pushType else { return Rejection(.missingPushType) }
        guard Self.isLiveActivity(pushType, exactly: Self.channelPushType, strict: context.settings.strictPushTypeSpelling)
        else { return Rejection(.invalidPushType) }
        guard let policy else { return Rejection(.badRequestParams) }
        draft.policy = policy
        return nil
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

    /// Whether `value` names the Live Activity push type: exactly `exact` when strict, in any
    /// letter case otherwise (clients send both `LiveActivity` and `liveactivity`).
    static func isLiveActivity(_ value: String, exactly exact: String, strict: Bool) -> Bool {
        strict ? value == exact : value.lowercased() == "liveactivity"
    }
}

/// What the validator needs to know about a request besides its headers and body: facts the server
/// learned from the connection and state it keeps (the device registry), handed in so that
/// validation itself stays pure.
public struct ValidationContext: Sendable {
    /// The environment the client addressed (from SNI / `:authority`, else the server default).
    public var environment: APNSEnvironment
    /// The topics the sender may push to: filled from its key or certificate once authentication
    /// exists, until then from the configuration (``Configuration/allowedTopics``). A topic outside
    /// it is TopicDisallowed. Defaults to ``AllowedTopics/any``.
    public var allowedTopics: AllowedTopics
    /// The topic of a single-topic client certificate. APNs uses it when the request has no
    /// `apns-topic`; without it (token auth, multi-topic certificate) a missing topic is MissingTopic.
    public var certificateTopic: String?
    /// The authenticator's refusal of this request's credentials (MissingProviderToken,
    /// InvalidProviderToken, ExpiredProviderToken, BadCertificate, …), or `nil` when they were
    /// accepted or not checked. Authentication is stateful (connection binding, verified-token
    /// cache), so the server decides it; the validator reports it at its place in the order
    /// (``ValidationStep/authentication``), so that earlier reasons still win.
    public var authenticationFailure: Rejection?
    /// The current device registry (a copy-on-write snapshot; see ``DeviceRegistry``).
    public var devices: DeviceRegistry
    /// The current broadcast channels (a snapshot), which a Live Activity's
    /// `aps.input-push-channel` must name (``ValidationStep/liveActivityChannel``). Not set by
    /// ``update(environment:allowedTopics:certificateTopic:authenticationFailure:devices:authenticatedWithCertificate:)``:
    /// a server sets it only when the registry changed (copying it in for every request cost
    /// about 300 instructions per device push).
    public var channels: ChannelRegistry
    /// The request came over certificate authentication (a location push then has the finding
    /// `location-over-certificate`, refused under strict lint).
    public var authenticatedWithCertificate: Bool

    public init(
        environment: APNSEnvironment,
        allowedTopics: AllowedTopics = .any,
        certificateTopic: String? = nil,
        authenticationFailure: Rejection? = nil,
        devices: DeviceRegistry = DeviceRegistry(),
        authenticatedWithCertificate: Bool = false,
        channels: ChannelRegistry = ChannelRegistry()
    ) {
        self.environment = environment
        self.allowedTopics = allowedTopics
        self.certificateTopic = certificateTopic
        self.authenticationFailure = authenticationFailure
        self.devices = devices
        self.authenticatedWithCertificate = authenticatedWithCertificate
        self.channels = channels
    }

    /// Sets every field, as ``init(environment:allowedTopics:certificateTopic:authenticationFailure:devices:)``
    /// does: a server that decides many requests keeps one context and updates it in place.
    @inlinable
    public mutating func update(
        environment: APNSEnvironment, allowedTopics: AllowedTopics, certificateTopic: String?,
        authenticationFailure: Rejection?, devices: DeviceRegistry, authenticatedWithCertificate: Bool
    ) {
        self.environment = environment
        self.allowedTopics = allowedTopics
        self.certificateTopic = certificateTopic
        self.authenticationFailure = authenticationFailure
        self.devices = devices
        self.authenticatedWithCertificate = authenticatedWithCertificate
    }
}

/// A request that passed every check, with its headers interpreted: what gets delivered and
/// recorded.
public struct AcceptedPush: Sendable, Equatable {
    /// The device token as it appeared in the path (either case); ``DeviceToken/canonical(_:)``
    /// gives the spelling to compare by.
    public var token: String
    /// `apns-topic`, or the single-topic certificate's topic when the header was absent.
    public var topic: String
    /// `apns-push-type`, or ``PushType/default`` when the header was absent.
    public var pushType: PushType
    /// `apns-priority`, or the push type's ``PushType/defaultPriority`` when absent.
    public var priority: Int
    // The optionals are spelled `Optional<…>`: a stored `var` spelled `T?` is first set to its
    // implicit `nil` in the initialiser, whose assignment then destroyed that `nil` (through
    // Optional's generic value witness) and copied the push, for every accepted push.

    /// `apns-expiration` in UNIX seconds; `nil` when absent (0 means "deliver once, do not store").
    public var expiration: Optional<Int64>
    public var collapseId: Optional<String>
    /// `apns-id` as sent, or `nil` when the server must generate one (uppercase).
    public var apnsId: Optional<String>
    /// Lint findings on the payload; never a reason to reject here (strict lint rejects earlier).
    public var lint: [LintFinding]

    public init(
        token: String,
        topic: String,
        pushType: PushType = .default,
        priority: Int = 10,
        expiration: Int64? = nil,
        collapseId: String? = nil,
        apnsId: String? = nil,
        lint: [LintFinding] = []
    ) {
        self.token = token
        self.topic = topic
        self.pushType = pushType
        self.priority = priority
        self.expiration = expiration
        self.collapseId = collapseId
        self.apnsId = apnsId
        self.lint = lint
    }

    /// Whether the payload parsed as JSON, i.e. whether a record can embed it as JSON rather than
    /// as a string.
    public var payloadIsJSON: Bool {
        !lint.contains { $0.code == .invalidJSON }
    }
}

/// The validator's verdict on one request.
public enum Decision: Sendable, Equatable {
    case accepted(AcceptedPush)
    case rejected(Rejection)

    /// Whether the request was accepted; unlike ``acceptedPush``, copies nothing.
    public var isAccepted: Bool {
        if case .accepted = self { return true }
        return false
    }

    /// The accepted push's type, without copying the push.
    public var acceptedPushType: PushType? {
        if case .accepted(let push) = self { return push.pushType }
        return nil
    }

    /// The accepted push's lint findings, without copying the push.
    public var acceptedLint: [LintFinding]? {
        if case .accepted(let push) = self { return push.lint }
        return nil
    }

    /// The accepted push, if the request was accepted.
    public var acceptedPush: AcceptedPush? {
        if case .accepted(let push) = self { return push }
        return nil
    }

    /// The rejection, if the request was rejected.
    public var rejection: Rejection? {
        if case .rejected(let rejection) = self { return rejection }
        return nil
    }
}

/// Which spelling of the 403 reason for a key restricted to the other environment goes on the wire.
public enum EnvironmentKeyReasonSpelling: String, Sendable, CaseIterable, Codable {
    /// Apple's documented spelling.
    case documented = "BadEnvironmentKeyIdInToken"
    /// The spelling one client library reports seeing from APNs.
    case observed = "BadEnvironmentKeyInToken"
}

/// Settings that change what the validator accepts.
public struct ValidationSettings: Sendable, Equatable {
    /// Strict mode accepts only 64-hex-digit device tokens.
    public var strictDeviceTokens: Bool
    /// Strict lint rejects any request whose payload has a lint finding, with
    /// ``lintRejectionReason``. Off by default, because APNs accepts such payloads.
    public var strictLint: Bool
    /// The reason strict lint answers with. Apple has no reason for "payload is not a valid
    /// notification", so the mock borrows 400 PayloadEmpty by default: a payload problem that clients
    /// treat as permanent for this notification, neither retried nor blamed on the device token
    /// (docs/validation.md explains the choice). The configuration allows any 400 reason.
    public var lintRejectionReason: Reason
    /// The wire spelling for ``Reason/badEnvironmentKeyIdInToken``.
    public var environmentKeyReasonSpelling: EnvironmentKeyReasonSpelling
    /// Per-device-token rate limit; `nil` (the default) for none. Enforced by ``RateLimiter``,
    /// after validation.
    public var rateLimit: RateLimit?
    /// Strict provider tokens accept only an integer `iat`, as Apple documents it; the decimal and
    /// string forms clients send (``ProviderToken/IssuedAtForm``) are then InvalidProviderToken.
    /// Off by default, because Apple accepts them.
    public var strictProviderTokens: Bool

    public init(
        strictDeviceTokens: Bool = false,
        strictLint: Bool = false,
        lintRejectionReason: Reason = .payloadEmpty,
        environmentKeyReasonSpelling: EnvironmentKeyReasonSpelling = .documented,
        rateLimit: RateLimit? = nil,
        strictProviderTokens: Bool = false
    ) {
        self.strictDeviceTokens = strictDeviceTokens
        self.strictLint = strictLint
        self.lintRejectionReason = lintRejectionReason
        self.environmentKeyReasonSpelling = environmentKeyReasonSpelling
        self.rateLimit = rateLimit
        self.strictProviderTokens = strictProviderTokens
    }

    /// A rejection with the configured wire spelling of its reason. Code that refuses a request for
    /// a reason with an alternative spelling (the authenticator) builds its `Rejection` here.
    public func rejection(_ reason: Reason, timestamp: Int64? = nil) -> Rejection {
        Rejection(reason, timestamp: timestamp, spelling: environmentKeyReasonSpelling)
    }
}

/// One check of the validation, in order: the declaration order of the cases *is* the order in
/// which ``Validator`` runs them, and the first check that fails decides the reason.
///
/// Header-only checks come first, in the order APNs was observed or documented to apply them
/// (method, path, token, then header values), authentication and topic permission next, then the
/// payload, then the state of the device. docs/validation.md lists the order and why.
/// Rate limiting is not a case: it needs state, and runs after validation (``RateLimiter``).
public enum ValidationStep: String, CaseIterable, Sendable {
    case method
    case path
    case deviceTokenFormat
    case duplicateHeaders
    case messageID
    case expiration
    case priorityValue
    case collapseID
    case pushType
    case topic
    case topicFitsPushType
    case priorityForPushType
    case authentication
    case topicAllowed
    case payloadSize
    case strictLint
    case deviceRegistry
    /// A Live Activity that subscribes to a channel (`aps.input-push-channel`) names a channel of
    /// its app in the request's environment: a lint finding, refused only under strict lint. Last,
    /// as it reads the channel registry.
    case liveActivityChannel

    /// `allCases`, computed once: the synthesized property builds a new array on every call, and
    /// validation walks the order for every request.
    public static let order: [ValidationStep] = allCases

    /// The steps before ``authentication``: they read nothing but the request's headers (and the
    /// validator's fixed settings), so their outcome can be reused for a request whose headers
    /// are the same as the previous one's (see ``ValidationMemo``).
    static let headerSteps: [ValidationStep] = Array(order.prefix { $0 != .authentication })
    /// The steps from ``authentication`` on, which depend on the context or the payload.
    static let contextSteps: [ValidationStep] = Array(order.drop { $0 != .authentication })

    /// The reasons this step can answer with.
    public var reasons: [Reason] {
        switch self {
        case .method: return [.methodNotAllowed]
        case .path: return [.badPath, .missingDeviceToken]
        case .deviceTokenFormat: return [.badDeviceToken]
        case .duplicateHeaders: return [.duplicateHeaders]
        case .messageID: return [.badMessageId]
        case .expiration: return [.badExpirationDate]
        case .priorityValue, .priorityForPushType: return [.badPriority]
        case .collapseID: return [.badCollapseId]
        case .pushType, .topicFitsPushType: return [.invalidPushType]
        case .topic: return [.missingTopic, .badTopic]
        case .authentication:
            return Reason.allCases.filter { $0.status == 403 } + [.tooManyProviderTokenUpdates]
        case .topicAllowed: return [.topicDisallowed]
        case .payloadSize: return [.payloadEmpty, .payloadTooLarge]
        case .strictLint: return Reason.allCases.filter { $0.status == 400 }
        case .deviceRegistry: return [.badDeviceToken, .deviceTokenNotForTopic, .unregistered, .expiredToken]
        case .liveActivityChannel: return Reason.allCases.filter { $0.status == 400 }
        }
    }
}

/// The checks device pushes and broadcast-side requests share, written once: each gives the
/// rejection, or `nil` when the request passes.
public enum RequestChecks {
    /// `apns-id` or `apns-request-id`: absent, or a UUID in its canonical form (BadMessageId).
    public static func messageID(_ id: String?) -> Rejection? {
        guard let id else { return nil }
        return HeaderSyntax.isCanonicalUUID(id) ? nil : Rejection(.badMessageId)
    }

    /// The authenticator's refusal, as the settings answer it (``ValidationSettings/rejection(_:timestamp:)``).
    public static func authentication(_ failure: Rejection?, settings: ValidationSettings) -> Rejection? {
        guard let failure else { return nil }
        return settings.rejection(failure.reason, timestamp: failure.timestamp)
    }

    /// PayloadEmpty for no body, PayloadTooLarge past `limit` bytes.
    public static func payloadSize(_ length: Int, limit: Int) -> Rejection? {
        if length == 0 { return Rejection(.payloadEmpty) }
        return length <= limit ? nil : Rejection(.payloadTooLarge)
    }

    /// Under `validation.strictLint`, any finding rejects with the configured reason.
    public static func strictLint(_ findings: [LintFinding], settings: ValidationSettings) -> Rejection? {
        guard settings.strictLint, !findings.isEmpty else { return nil }
        return Rejection(settings.lintRejectionReason)
    }
}

/// Decides whether APNs would accept a request, and if not, with which reason.
///
/// Validation is an ordered list of pure checks (the pattern of pushy's
/// `ValidatingPushNotificationHandler`), listed by ``ValidationStep``: each check yields at most one
/// reason, and the first that does decides. Deciding is separate from recording: the validator
/// returns a ``Decision`` and touches nothing. It is a value without state, safe to share between
/// threads and cheap to call: header values are read as bytes, and the payload is parsed once,
/// for the lint.
public struct Validator: Sendable {
    public var settings: ValidationSettings

    public init(settings: ValidationSettings = .init()) {
        self.settings = settings
    }

    public func validate(_ request: PushRequest, context: ValidationContext) -> Decision {
        var memo = ValidationMemo()
        return validate(request, context: context, memo: &memo)
    }

    /// Validates with `memo` carrying what the previous request of the same connection left to
    /// reuse (see ``ValidationMemo``); the decision is the same as without it.
    public func validate(_ request: PushRequest, context: ValidationContext, memo: inout ValidationMemo) -> Decision {
        // The outcome is moved out and back rather than copied (a copy retained every string of the
        // draft, and destroying it released them again, about 230 instructions per request).
        if let outcome = memo.deviceHeaders.take(for: request, certificateTopic: context.certificateTopic) {
            switch consume outcome {
            case .rejected(let rejection):
                memo.deviceHeaders.putBack(.rejected(rejection))
                return .rejected(rejection)
            case .passed(var draft):
                let decision = decideInContext(request, context: context, draft: &draft, memo: &memo)
                memo.deviceHeaders.putBack(.passed(draft))
                return decision
            }
        }
        var draft = Draft()
        var rejection: Rejection?
        for step in ValidationStep.headerSteps {
            rejection = check(step, request, context, &draft, &memo)
            if rejection != nil { break }
        }
        if let rejection {
            memo.deviceHeaders.keep(.rejected(rejection), for: request, certificateTopic: context.certificateTopic)
            return .rejected(rejection)
        }
        let decision = decideInContext(request, context: context, draft: &draft, memo: &memo)
        memo.deviceHeaders.keep(.passed(draft), for: request, certificateTopic: context.certificateTopic)
        return decision
    }

    /// The steps from ``ValidationStep/authentication`` on, after the header steps passed with
    /// `draft`, and the accepted push. Leaves `draft` as the header steps left it, for the memo:
    /// the lint it picks up on the way belongs to this request's payload.
    private func decideInContext(
        _ request: PushRequest, context: ValidationContext, draft: inout Draft, memo: inout ValidationMemo
    ) -> Decision {
        for step in ValidationStep.contextSteps {
            if let rejection = check(step, request, context, &draft, &memo) {
                draft.lint = nil
                return .rejected(rejection)
            }
        }
        let findings = draft.lint ?? memo.lint(request, pushType: draft.pushType, lint)
        draft.lint = nil
        return .accepted(AcceptedPush(
            token: draft.token,
            topic: draft.topic,
            pushType: draft.pushType,
            priority: draft.priority ?? draft.pushType.defaultPriority,
            expiration: draft.expiration,
            // `registerCopy()`: one retain per `String?` copied into the push (docs/speed-idioms.md).
            collapseId: request.collapseID.registerCopy(),
            apnsId: request.apnsID.registerCopy(),
            lint: findings
        ))
    }

    /// The lint findings for any request, accepted or not, so that a record can carry them either
    /// way. The push type is the request's (``PushType/default`` when absent; when unknown only the
    /// type-independent checks run). An empty body, or one longer than the server kept
    /// (``PushRequest/bodyLimit``), has nothing to inspect: no findings; its rejection says enough.
    public func lint(_ request: PushRequest) -> [LintFinding] {
        guard let header = request.pushType else {
            return lint(request, pushType: .default)
        }
        return lint(request, pushType: PushType(headerValue: header))
    }

    private func lint(_ request: PushRequest, pushType: PushType?) -> [LintFinding] {
        guard request.bodyLength > 0, request.bodyLength == request.body.count else { return [] }
        return Lint.findings(payload: request.body, pushType: pushType)
    }

    /// What the checks so far have interpreted, for the checks after them.
    fileprivate struct Draft {
        var token = ""
        var pushType = PushType.default
        var priority: Int?
        var expiration: Int64?
        var topic = ""
        var bundleID: Substring = ""
        var lint: [LintFinding]?
    }

    private func check(
        _ step: ValidationStep, _ request: PushRequest, _ context: ValidationContext, _ draft: inout Draft,
        _ memo: inout ValidationMemo
    ) -> Rejection? {
        switch step {
        case .method:
            return request.method == "POST" ? nil : Rejection(.methodNotAllowed)

        case .path:
            guard let path = request.path else { return Rejection(.badPath) }
            switch HeaderSyntax.devicePath(path) {
            case .token(let token):
                draft.token = memo.token(token)
                return nil
            case .missingToken:
                return Rejection(.missingDeviceToken)
            case .badPath:
                return Rejection(.badPath)
            }

        case .deviceTokenFormat:
            let strict = settings.strictDeviceTokens
            return draft.token.withUTF8Bytes { DeviceToken.isWellFormed($0, strict: strict) }
                ? nil : Rejection(.badDeviceToken)

        case .duplicateHeaders:
            return request.duplicatedHeader == nil ? nil : Rejection(.duplicateHeaders)

        case .messageID:
            return RequestChecks.messageID(request.apnsID)

        case .expiration:
            guard let value = request.expiration else { return nil }
            guard let seconds = HeaderSyntax.expiration(value) else { return Rejection(.badExpirationDate) }
            draft.expiration = seconds
            return nil

        case .priorityValue:
            guard let value = request.priority else { return nil }
            guard let priority = HeaderSyntax.priority(value) else { return Rejection(.badPriority) }
            draft.priority = priority
            return nil

        case .collapseID:
            guard let id = request.collapseID else { return nil }
            return id.utf8.count <= HeaderSyntax.maximumCollapseIDLength ? nil : Rejection(.badCollapseId)

        case .pushType:
            guard let value = request.pushType else { return nil }
            guard let type = PushType(headerValue: value) else { return Rejection(.invalidPushType) }
            draft.pushType = type
            return nil

        case .topic:
            guard let topic = request.topic ?? context.certificateTopic else { return Rejection(.missingTopic) }
            guard HeaderSyntax.isWellFormedTopic(topic) else { return Rejection(.badTopic) }
            draft.topic = topic
            return nil

        case .topicFitsPushType:
            guard let bundleID = draft.pushType.bundleID(inTopic: draft.topic) else {
                return Rejection(.invalidPushType)
            }
            draft.bundleID = bundleID
            return nil

        case .priorityForPushType:
            guard let priority = draft.priority else { return nil }
            return draft.pushType.allowedPriorities.contains(priority) ? nil : Rejection(.badPriority)

        case .authentication:
            return RequestChecks.authentication(context.authenticationFailure, settings: settings)

        case .topicAllowed:
            return memo.allows(topic: draft.topic, bundleID: draft.bundleID, in: context.allowedTopics)
                ? nil : Rejection(.topicDisallowed)

        case .payloadSize:
            return RequestChecks.payloadSize(request.bodyLength, limit: draft.pushType.payloadLimit)

        case .strictLint:
            if settings.strictLint, draft.pushType == .location, context.authenticatedWithCertificate {
                // location-over-certificate: Apple's "supports only token-based authentication",
                // answered with the reason APNs has for credentials not allowed what they ask.
                return Rejection(.forbidden)
            }
            let findings = memo.lint(request, pushType: draft.pushType, lint)
            draft.lint = findings
            return RequestChecks.strictLint(findings, settings: settings)

        case .deviceRegistry:
            if context.devices.isEmpty, context.devices.policy == .open {
                return nil
            }
            return context.devices.rejection(
                token: draft.token, bundleID: draft.bundleID, environment: context.environment)

        case .liveActivityChannel:
            guard draft.pushType == .liveactivity, let bundleID = draft.pushType.bundleID(inTopic: draft.topic) else {
                return nil
            }
            let findings = BroadcastValidator.channelFindings(
                request.body, bundleID: String(bundleID),
                context: BroadcastContext(environment: context.environment, channels: context.channels))
            guard !findings.isEmpty else { return nil }
            // ``strictLint`` left the payload's other findings (and refused them under strict lint).
            draft.lint = (draft.lint ?? []) + findings
            return RequestChecks.strictLint(findings, settings: settings)
        }
    }
}

/// What one request's validation can leave for the next request on the same connection.
///
/// Providers, and load tests above all, send the same payload to the same device token over and
/// over. The lint findings are a pure function of (payload, push type) and the token text a pure
/// function of the path, so a connection keeps the last of each and reuses them when the bytes
/// match: one `memcmp` instead of a JSON parse and a String allocation. Never shared between
/// connections, so it needs no lock.
public struct ValidationMemo: Sendable {
    private var lintPayload: [UInt8] = []
    private var lintPushType: PushType?
    private var lintBroadcast = false
    private var lintFindings: [LintFinding]?
    private var lastToken: String = ""
    /// The last topic-permission answer: a connection's sender and topic rarely change, and a Set
    /// look-up hashes the whole topic.
    private var allowedTopic: String?
    private var allowedBundleIDLength = 0
    private var allowedTopics = AllowedTopics.any
    private var allowedAnswer = true
    /// A device push's header steps, for the last device push's headers (``Validator``).
    fileprivate var deviceHeaders = HeaderMemo<HeaderOutcome>()
    /// A broadcast's header steps, for the last broadcast's headers (``BroadcastValidator``).
    var broadcastHeaders = HeaderMemo<BroadcastValidator.HeaderOutcome>()
    /// The last channel a broadcast looked up.
    var broadcastChannel: ChannelLookup?

    /// A channel look-up: the ID (the String the request carried), bundle and environment, the
    /// registry version it was read at, and what it found.
    struct ChannelLookup {
        var id: String
        var bundleID: String
        var environment: APNSEnvironment
        var version: UInt64
        var channel: Optional<BroadcastChannel>

        /// Whether this look-up answers the same question (the strings compare by identity first).
        func answers(id: String, bundleID: String, environment: APNSEnvironment, version: UInt64) -> Bool {
            self.version == version && self.environment == environment && self.id == id && self.bundleID == bundleID
        }
    }

    public init() {}

    /// Everything the header steps read: the request's known headers (without the body and the
    /// other headers, whose storage stays the stream's) and the certificate's topic. Strings
    /// compare by identity first, and the server hands in the same String objects when a
    /// connection repeats a value, so a match costs a few word comparisons.
    struct HeaderKey {
        var headers: PushRequest
        // Spelled `Optional<…>`, as ``AcceptedPush``'s are: a key is made for every request whose
        // headers are not the last one's.
        var certificateTopic: Optional<String>

        init(_ request: PushRequest, certificateTopic: String?) {
            headers = request
            headers.authorization = nil
            headers.body = []
            headers.otherHeaders = []
            self.certificateTopic = certificateTopic
        }

        /// Compared against the request in place, so that checking costs no copy; equal repeat
        /// keys vouch for every header but the per-request ones.
        func matches(_ request: PushRequest, certificateTopic: String?) -> Bool {
            guard self.certificateTopic == certificateTopic,
                  headers.duplicatedHeader == request.duplicatedHeader else { return false }
            if let key = request.repeatKey, key == headers.repeatKey {
                return request.hasSamePerRequestHeaders(as: headers)
            }
            return request.hasSameKnownHeaders(as: headers, except: KnownHeader.Set(.authorization))
        }
    }

    fileprivate enum HeaderOutcome {
        case passed(Validator.Draft)
        case rejected(Rejection)
    }

    /// What a validator's header steps (those that read only the headers and the configuration)
    /// made of the last headers of a connection, for both validators: a connection repeats its
    /// headers, so the steps run once while they do. The key is compared where it is stored
    /// (copying it out would copy a whole request), and the outcome is moved out and back rather
    /// than copied.
    struct HeaderMemo<Outcome: Sendable>: Sendable {
        private var key: Optional<HeaderKey> = nil
        private var outcome: Optional<Outcome> = nil

        /// The outcome remembered for these headers (and certificate topic), moved out: the caller
        /// puts it back (``putBack(_:)``) once done with it. `nil` when the headers differ.
        mutating func take(for request: PushRequest, certificateTopic: String?) -> Outcome? {
            guard key?.matches(request, certificateTopic: certificateTopic) == true else { return nil }
            return outcome.take()
        }

        /// Puts back the outcome ``take(for:certificateTopic:)`` moved out.
        mutating func putBack(_ outcome: consuming Outcome) {
            self.outcome = outcome
        }

        /// Remembers `outcome` for `request`'s headers.
        mutating func keep(_ outcome: consuming Outcome, for request: PushRequest, certificateTopic: String?) {
            key = HeaderKey(request, certificateTopic: certificateTopic)
            self.outcome = outcome
        }
    }

    /// The findings `compute` gives for the request's payload, remembered for the last payload.
    /// `broadcast` tells a broadcast's findings (which add the broadcast-only ones) from a device
    /// push's: a connection may send both, with the same push type and payload.
    mutating func lint(
        _ request: PushRequest, pushType: PushType?, broadcast: Bool = false,
        _ compute: (PushRequest, PushType?) -> [LintFinding]
    ) -> [LintFinding] {
        if let findings = lintFindings, lintPushType == pushType, lintBroadcast == broadcast,
           request.bodyLength == lintPayload.count, request.body.hasSameBytes(as: lintPayload) {
            return findings
        }
        let findings = compute(request, pushType)
        lintPayload.removeAll(keepingCapacity: true)
        lintPayload.append(contentsOf: request.body)
        lintPushType = pushType
        lintBroadcast = broadcast
        lintFindings = findings
        return findings
    }

    /// ``AllowedTopics/allows(topic:bundleID:)``, remembered for the last question. `bundleID` is a
    /// prefix of `topic`, so its length identifies it; the sets compare by identity first, and a
    /// connection's sender hands in the same set every time.
    mutating func allows(topic: String, bundleID: Substring, in topics: AllowedTopics) -> Bool {
        if case .any = topics { return true }
        if let last = allowedTopic, last == topic, allowedBundleIDLength == bundleID.utf8.count,
           allowedTopics == topics {
            return allowedAnswer
        }
        allowedAnswer = topics.allows(topic: topic, bundleID: bundleID)
        allowedTopic = topic
        allowedBundleIDLength = bundleID.utf8.count
        allowedTopics = topics
        return allowedAnswer
    }

    mutating func token(_ text: Substring) -> String {
        // Compared as bytes: Substring == String goes through Unicode-aware comparison.
        if text.withUTF8Bytes(lastToken.hasSameBytes(as:)) {
            return lastToken
        }
        lastToken = String(text)
        return lastToken
    }
}

import APNSMockCore

/// A device push decided: the verdict and everything a record and the response need.
struct DeviceVerdict {
    var decision: Decision
    var environment: APNSEnvironment
    var auth: AuthSummary
    /// The request carried the connection's first accepted provider token.
    var acceptedFirstToken: Bool
    var response: APNSResponse
}

/// Device pushes, `POST /3/device/<token>` on the APNs listener (and every other path there that
/// no other API claims, which it answers 404 BadPath, as APNs does).
///
/// Deciding is a function of the request, the connection's state (its credentials, its memos, its
/// snapshots of the device registry and the channels) and the immutable configuration: it reads no
/// shared mutable state and changes none. What the mock's state does to the verdict (rate limits,
/// fault rules) happens afterwards, in the ``Policy`` stage, and recording it in the ``Recorder``.
final class DeviceAPI: RequestAPI {
    let validator: Validator
    let authenticator: Authenticator
    let defaultEnvironment: APNSEnvironment
    let policy: Policy
    let recorder: Recorder
    /// Where the connection's snapshots are refreshed from.
    let devices: any VersionedState<DeviceRegistry>
    let channels: any ChannelState

    init(configuration: ServerConfiguration, authenticator: Authenticator, policy: Policy, recorder: Recorder) {
        validator = Validator(settings: configuration.validation)
        defaultEnvironment = configuration.environment
        self.authenticator = authenticator
        self.policy = policy
        self.recorder = recorder
        devices = policy.state.devices
        channels = policy.state.channels
    }

    func answer(
        _ request: borrowing PushRequest, stream: RequestStream, context: ConnectionContext,
        connection: inout ConnectionState
    ) -> Effects {
        var verdict = decide(request, context: context, state: &connection)
        let actions = policy.device(&verdict, request: request, context: context, connection: &connection)
        let seq = recorder.recordDevice(
            verdict, actions: actions, request: request, stream: stream, context: context, connection: &connection)
        return Effects(.apns(verdict.response), actions: actions, recordSeq: seq)
    }

    func decide(_ request: borrowing PushRequest, context: ConnectionContext, state: inout ConnectionState) -> DeviceVerdict {
        let environment = state.environment(of: request, context: context, fallback: defaultEnvironment)
        let auth = authenticator.authenticate(
            authorization: request.authorization, environment: environment, now: authenticator.now(), state: &state.auth)
        // The connection's context is updated in place: building one per request copied it whole
        // and destroyed it twice (about 300 instructions).
        state.validation.update(
            environment: environment, allowedTopics: auth.allowedTopics, certificateTopic: auth.certificateTopic.registerCopy(),
            authenticationFailure: auth.failure, devices: state.devices.refreshed(from: devices),
            authenticatedWithCertificate: state.auth.certificate != nil)
        var decision = validator.validate(request, context: state.validation, memo: &state.memo)
        if decision.acceptedPushType == .liveactivity, case .accepted(var push) = decision,
           let bundleID = push.pushType.bundleID(inTopic: push.topic) {
            // A Live Activity that subscribes to a channel (`input-push-channel`) needs the channel
            // to exist for the app in this environment: a finding that needs the registry.
            let findings = BroadcastValidator.channelFindings(
                request.body, bundleID: String(bundleID),
                context: BroadcastContext(environment: environment, channels: state.channels.refreshed(from: channels.registry)))
            if !findings.isEmpty {
                push.lint += findings
                decision = RequestChecks.strictLint(push.lint, settings: validator.settings).map { .rejected($0) } ?? .accepted(push)
            }
        }
        let apnsID = APNSResponse.RequestID.take(request.apnsID, random: &state.random)
        let response: APNSResponse
        switch decision {
        case .accepted:
            // Apple sends apns-unique-id only in the development (sandbox) environment.
            let uniqueID = environment == .sandbox ? UUIDValue.random(using: &state.random) : nil
            response = .accepted(apnsID: apnsID, uniqueID: uniqueID)
        case .rejected(let rejection):
            response = .rejected(rejection, apnsID: apnsID)
        }
        return DeviceVerdict(
            decision: decision, environment: environment, auth: auth.summary, acceptedFirstToken: auth.acceptedFirstToken,
            response: response)
    }
}

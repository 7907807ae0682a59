import APNSMockCore

/// A device push decided: the verdict and everything a record and the response need.
struct DeviceVerdict: Verdict {
    var decision: Decision
    var environment: APNSEnvironment
    var auth: AuthSummary
    /// The request carried the connection's first accepted provider token.
    var acceptedFirstToken: Bool
    var answer: APNSResponse

    static var kind: RecordKind { .device }
    var status: Int { answer.status }
    var rejection: Rejection? { answer.rejection }
    var answerID: APNSResponse.RequestID { answer.apnsID }
    var uniqueID: UUIDValue? { answer.uniqueID }
    var response: Effects.Response { .apns(answer) }

    func faultFacts(for request: borrowing PushRequest, connection: Int, requestNumber: Int) -> FaultRule.Facts {
        FaultRule.Facts(devicePush: request, decision: decision, connection: connection, requestNumber: requestNumber)
    }

    /// An accepted push may be refused TooManyRequests (`server.rateLimit`).
    mutating func limitRate(in state: MockState) {
        guard state.isRateLimited, decision.isAccepted else { return }
        let checked = decision
        decision = state.rateLimiter.withLock { limiter in limiter?.apply(to: checked) ?? checked }
        if let rejection = decision.rejection {
            answer = .rejected(rejection, apnsID: answer.apnsID)
        }
    }

    mutating func replaceAnswer(with rejection: Rejection) {
        answer = .rejected(rejection, apnsID: answer.apnsID)
    }

    func shape(for request: borrowing PushRequest, shapes: inout RecordShapes, connectionID: UInt64) -> RequestShape {
        let decision = decision
        return shapes.device(
            for: request, accepted: decision.isAccepted, lint: decision.acceptedLint,
            interpreted: {
                decision.acceptedPush.map {
                    RawRecord.Interpreted(
                        priority: $0.priority, expiration: $0.expiration, pushType: $0.pushType, topic: $0.topic,
                        lint: $0.lint)
                }
            },
            environment: environment, auth: auth, connectionID: connectionID)
    }
}

/// Device pushes, `POST /3/device/<token>` on the APNs listener (and every other path there that
/// no other API claims, which it answers 404 BadPath, as APNs does).
///
/// Deciding is a function of the request, the connection's state (its credentials, its memos, its
/// snapshots of the device registry and the channels) and the immutable configuration: it reads no
/// shared mutable state and changes none. What the mock's state does to the verdict (rate limits,
/// fault rules) happens afterwards, in the ``Pipeline``.
final class DeviceAPI: DecidingAPI {
    let validator: Validator
    let authenticator: Authenticator
    let defaultEnvironment: APNSEnvironment
    let pipeline: Pipeline
    /// Where the connection's snapshots are refreshed from.
    let devices: any VersionedBackend<DeviceRegistry>
    let channelRegistry: any VersionedBackend<ChannelRegistry>

    init(configuration: ServerConfiguration, authenticator: Authenticator, pipeline: Pipeline) {
        validator = Validator(settings: configuration.validation)
        defaultEnvironment = configuration.environment
        self.authenticator = authenticator
        self.pipeline = pipeline
        devices = pipeline.state.devices
        channelRegistry = pipeline.state.channels.registry
    }

    func decide(_ request: borrowing PushRequest, context: ConnectionContext, state: inout ConnectionMemo) -> DeviceVerdict {
        let environment = state.environment(of: request, context: context, fallback: defaultEnvironment)
        let auth = authenticator.authenticate(
            authorization: request.authorization, environment: environment, state: &state.auth)
        // The connection's context is updated in place: building one per request copied it whole
        // and destroyed it twice (about 300 instructions). `registerCopy()`: a `String?` copied
        // field to field is one retain through it (docs/speed-idioms.md), not Optional's witness.
        state.validation.update(
            environment: environment, allowedTopics: auth.allowedTopics, certificateTopic: auth.certificateTopic.registerCopy(),
            authenticationFailure: auth.failure, devices: state.devices.refreshed(from: devices, team: state.auth.team),
            authenticatedWithCertificate: state.auth.certificate != nil)
        // The channels change rarely: the context takes a new snapshot only when they did.
        let channelsVersion = channelRegistry.version
        if channelsVersion != state.validationChannelsVersion {
            state.validationChannelsVersion = channelsVersion
            state.validation.channels = state.channels.refreshed(from: channelRegistry)
        }
        let decision = validator.validate(request, context: state.validation, memo: &state.memo)
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
            answer: response)
    }
}

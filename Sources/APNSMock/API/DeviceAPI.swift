import APNSMockCore

/// A device push decided: the verdict and everything a record and the response need.
struct DeviceVerdict {
    var decision: Decision
    var environment: APNSEnvironment
    var auth: AuthSummary
    var response: APNSResponse
}

/// Device pushes, `POST /3/device/<token>` on the APNs listener (and every other path there that
/// no other API claims, which it answers 404 BadPath, as APNs does).
///
/// Deciding is a function of the request, the connection's state (its credentials, its memos, its
/// snapshot of the device registry) and the immutable configuration: it reads no shared mutable
/// state and changes none. What the mock's state does to the verdict (rate limits, fault rules)
/// and recording it happen afterwards, in the ``Recorder``.
struct DeviceAPI: Sendable {
    let validator: Validator
    let authenticator: Authenticator
    let defaultEnvironment: APNSEnvironment

    init(configuration: ServerConfiguration, tokenKeys: TokenKeys) {
        validator = Validator(settings: configuration.validation)
        defaultEnvironment = configuration.environment
        authenticator = Authenticator(
            keys: tokenKeys, settings: configuration.validation, tokenUpdateInterval: configuration.tokenUpdateInterval,
            fallbackTopics: configuration.allowedTopics, narrowsTopics: configuration.allowedTopics != .any)
    }

    func decide(
        _ request: borrowing PushRequest, context: ConnectionContext, state: inout ConnectionState,
        devices: DeviceStore
    ) -> DeviceVerdict {
        let environment = state.environment(of: request, context: context, fallback: defaultEnvironment)
        let auth = authenticator.authenticate(
            authorization: request.authorization, environment: environment, now: Clock.nowSeconds(), state: &state.auth)
        let requestContext = RequestContext(
            environment: environment, allowedTopics: auth.allowedTopics, certificateTopic: auth.certificateTopic,
            authenticationFailure: auth.failure, devices: state.devices.refreshed(from: devices))
        let decision = validator.validate(request, context: requestContext, memo: &state.memo)
        let apnsID: APNSResponse.RequestID
        if let sent = request.apnsID, HeaderSyntax.isCanonicalUUID(sent) {
            apnsID = .echoed(sent)
        } else {
            apnsID = .generated(UUIDValue.random(using: &state.random))
        }
        let response: APNSResponse
        switch decision {
        case .accepted:
            // Apple sends apns-unique-id only in the development (sandbox) environment.
            let uniqueID = environment == .sandbox ? UUIDValue.random(using: &state.random) : nil
            response = .accepted(apnsID: apnsID, uniqueID: uniqueID)
        case .rejected(let rejection):
            response = .rejected(rejection, apnsID: apnsID)
        }
        return DeviceVerdict(decision: decision, environment: environment, auth: auth.summary, response: response)
    }
}

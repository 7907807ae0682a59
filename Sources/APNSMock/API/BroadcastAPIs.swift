import APNSMockCore

/// A broadcast-side answer in APNs' terms, written out as an ``HTTP2Response``: every response
/// carries `apns-request-id` (the client's, echoed, or a generated lowercase UUID); a created channel
/// adds `apns-channel-id`, an accepted broadcast `apns-unique-id`; an error carries its
/// ``Rejection`` and the JSON body built from it.
struct BroadcastResponse: Sendable {
    var status: Int
    var requestID: APNSResponse.RequestID
    var channelID: String?
    var uniqueID: UUIDValue?
    var rejection: Rejection?
    /// A JSON body of a success (a read channel, the channel list).
    var successBody: [UInt8] = []

    static func rejected(_ rejection: Rejection, requestID: APNSResponse.RequestID) -> BroadcastResponse {
        BroadcastResponse(status: rejection.status, requestID: requestID, rejection: rejection)
    }
}

extension BroadcastResponse: HTTP2Response {
    /// For an error `{"reason":…}`, else the success's JSON, if any.
    var body: [UInt8] { rejection.map(ErrorBody.bytes(for:)) ?? successBody }

    func writeFields(into fields: inout ResponseFields) {
        requestID.write(as: "apns-request-id", uppercase: false, into: &fields)
        if let channelID {
            fields.add("apns-channel-id", text: channelID, indexed: false)
        }
        if let uniqueID {
            fields.add("apns-unique-id", uuid: uniqueID, uppercase: false, indexed: false)
        }
        if rejection != nil || !successBody.isEmpty {
            fields.add("content-type", literal: "application/json")
        }
    }
}

/// The authenticated, decided form of a broadcast-side request, for the ``Policy`` stage and the
/// ``Recorder``.
struct BroadcastSideVerdict<Verdict: Sendable>: Sendable {
    var verdict: Verdict
    var environment: APNSEnvironment
    var auth: AuthSummary
    /// The request carried the connection's first accepted provider token.
    var acceptedFirstToken: Bool
    var requestID: APNSResponse.RequestID
}

/// Channel management in one environment, on that environment's channel-management listener
/// (`/1/apps/<bundle>/channels` and `/all-channels`; docs/broadcast.md). Deciding reads the
/// connection's credentials and its snapshot of the channels; creating and deleting happen
/// afterwards, in the ``Policy`` stage, once no fault rule replaced the answer.
final class ChannelAPI: RequestAPI {
    let validator = BroadcastValidator()
    let environment: APNSEnvironment
    let authenticator: Authenticator
    let validation: ValidationSettings
    let settings: BroadcastSettings
    let policy: Policy
    let recorder: Recorder

    init(
        environment: APNSEnvironment, configuration: ServerConfiguration, authenticator: Authenticator, policy: Policy,
        recorder: Recorder
    ) {
        self.environment = environment
        self.authenticator = authenticator
        validation = configuration.validation
        settings = configuration.broadcast
        self.policy = policy
        self.recorder = recorder
    }

    func answer(
        _ request: borrowing PushRequest, stream: RequestStream, context: ConnectionContext,
        connection: inout ConnectionState
    ) -> Effects {
        let decided = decide(request, state: &connection)
        let (actions, response, channelID) = policy.channelRequest(decided, context: context, connection: &connection)
        let side = Recorder.BroadcastSide(
            kind: .channel, bundleID: decided.verdict.bundleID, channelID: channelID, operation: decided.verdict.operation,
            environment: environment, auth: decided.auth)
        let seq = recorder.recordBroadcastSide(
            side, response: response, actions: actions, request: request, stream: stream, context: context,
            connection: &connection)
        return Effects(.broadcast(response), actions: actions, recordSeq: seq)
    }

    func decide(_ request: borrowing PushRequest, state: inout ConnectionState) -> BroadcastSideVerdict<ChannelRequestVerdict> {
        let (auth, context) = BroadcastContext.deciding(
            request, environment: environment, authenticator: authenticator, state: &state,
            channels: policy.state.channels, settings: settings, validation: validation)
        let verdict = validator.decideManagement(request, context: context)
        return BroadcastSideVerdict(
            verdict: verdict, environment: environment, auth: auth.summary, acceptedFirstToken: auth.acceptedFirstToken,
            requestID: .take(request.requestID, random: &state.random))
    }

    /// The response to a decided request whose create or delete the store has carried out.
    static func response(
        to outcome: ChannelRequestVerdict.Outcome, requestID: APNSResponse.RequestID
    ) -> BroadcastResponse {
        switch outcome {
        case .rejected(let rejection):
            return .rejected(rejection, requestID: requestID)
        case .create:
            // Only when a fault rule kept a create from the store (nothing was created): the
            // rule's rejection or no response replaces it, and only requestID is used.
            return .rejected(Rejection(.internalServerError), requestID: requestID)
        case .read(let channel):
            let body = #"{"message-storage-policy":\#(channel.storagePolicy.rawValue),"push-type":"\#(BroadcastValidator.channelPushType)"}"#
            return BroadcastResponse(status: 200, requestID: requestID, successBody: Array(body.utf8))
        case .delete:
            return BroadcastResponse(status: 204, requestID: requestID)
        case .list(let channels):
            // Channel IDs are base64: no JSON escaping needed.
            let body = #"{"channels":["# + channels.map { "\"\($0.id)\"" }.joined(separator: ",") + "]}"
            return BroadcastResponse(status: 200, requestID: requestID, successBody: Array(body.utf8))
        }
    }
}

/// Broadcasts, `POST /4/broadcasts/apps/<bundle>` on the APNs listener (docs/broadcast.md).
/// Deciding is a function of the request, the connection's credentials and its snapshot of the
/// channels: a channel lookup is a dictionary look-up, with no lock.
final class BroadcastAPI: RequestAPI {
    let validator = BroadcastValidator()
    let authenticator: Authenticator
    let validation: ValidationSettings
    let settings: BroadcastSettings
    let defaultEnvironment: APNSEnvironment
    let policy: Policy
    let recorder: Recorder

    init(configuration: ServerConfiguration, authenticator: Authenticator, policy: Policy, recorder: Recorder) {
        self.authenticator = authenticator
        validation = configuration.validation
        settings = configuration.broadcast
        defaultEnvironment = configuration.environment
        self.policy = policy
        self.recorder = recorder
    }

    func answer(
        _ request: borrowing PushRequest, stream: RequestStream, context: ConnectionContext,
        connection: inout ConnectionState
    ) -> Effects {
        let decided = decide(request, context: context, state: &connection)
        var response: BroadcastResponse
        var interpreted: RawRecord.Interpreted?
        switch decided.verdict.outcome {
        case .accepted(let broadcast):
            response = BroadcastResponse(
                status: 200, requestID: decided.requestID, uniqueID: UUIDValue.random(using: &connection.random))
            interpreted = RawRecord.Interpreted(
                priority: broadcast.priority, expiration: broadcast.expiration, pushType: .liveactivity,
                topic: broadcast.channel.bundleID, lint: broadcast.lint)
        case .rejected(let rejection):
            response = .rejected(rejection, requestID: decided.requestID)
        }
        let actions = policy.broadcast(decided, response: &response, context: context, connection: &connection)
        let side = Recorder.BroadcastSide(
            kind: .broadcast, bundleID: decided.verdict.bundleID, channelID: decided.verdict.channelID,
            interpreted: interpreted, environment: decided.environment, auth: decided.auth)
        let seq = recorder.recordBroadcastSide(
            side, response: response, actions: actions, request: request, stream: stream, context: context,
            connection: &connection)
        return Effects(.broadcast(response), actions: actions, recordSeq: seq)
    }

    func decide(
        _ request: borrowing PushRequest, context: ConnectionContext, state: inout ConnectionState
    ) -> BroadcastSideVerdict<BroadcastVerdict> {
        let environment = state.environment(of: request, context: context, fallback: defaultEnvironment)
        let (auth, broadcastContext) = BroadcastContext.deciding(
            request, environment: environment, authenticator: authenticator, state: &state,
            channels: policy.state.channels, settings: settings, validation: validation)
        let verdict = validator.decideBroadcast(request, context: broadcastContext, memo: &state.memo)
        return BroadcastSideVerdict(
            verdict: verdict, environment: environment, auth: auth.summary, acceptedFirstToken: auth.acceptedFirstToken,
            requestID: .take(request.requestID, random: &state.random))
    }
}

extension BroadcastContext {
    /// What both broadcast-side APIs do before deciding: authenticate the request's credentials on
    /// the connection and take the connection's snapshot of the channels.
    static func deciding(
        _ request: borrowing PushRequest, environment: APNSEnvironment, authenticator: Authenticator,
        state: inout ConnectionState, channels: any ChannelState, settings: BroadcastSettings, validation: ValidationSettings
    ) -> (AuthenticationResult, BroadcastContext) {
        let auth = authenticator.authenticate(
            authorization: request.authorization, environment: environment, now: authenticator.now(), state: &state.auth)
        let registry = state.channels.refreshed(from: channels.registry)
        let context = BroadcastContext(
            environment: environment, allowedTopics: auth.allowedTopics, authenticationFailure: auth.failure,
            channels: registry, channelsVersion: state.channels.version, settings: settings, validation: validation)
        return (auth, context)
    }
}

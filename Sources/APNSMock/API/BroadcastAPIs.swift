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

/// A broadcast decided: the validator's verdict, its answer and what its record says.
struct BroadcastPushVerdict: Verdict {
    var verdict: BroadcastVerdict
    var environment: APNSEnvironment
    var auth: AuthSummary
    /// The request carried the connection's first accepted provider token.
    var acceptedFirstToken: Bool
    var answer: BroadcastResponse
    /// An accepted broadcast's interpretation, for its record.
    var interpreted: RawRecord.Interpreted?

    static var kind: RecordKind { .broadcast }
    var status: Int { answer.status }
    var rejection: Rejection? { answer.rejection }
    var answerID: APNSResponse.RequestID { answer.requestID }
    var uniqueID: UUIDValue? { answer.uniqueID }
    var response: Effects.Response { .broadcast(answer) }

    func faultFacts(for request: borrowing PushRequest, connection: Int, requestNumber: Int) -> FaultRule.Facts {
        FaultRule.Facts(
            topic: verdict.bundleID, pushType: .liveactivity, kind: .broadcast, channelID: verdict.channelID,
            connection: connection, requestNumber: requestNumber)
    }

    mutating func replaceAnswer(with rejection: Rejection) {
        answer = .rejected(rejection, requestID: answer.requestID)
    }

    func shape(for request: borrowing PushRequest, shapes: inout RecordShapes, connectionID: UInt64) -> RequestShape {
        shapes.broadcastSide(
            for: request, interpreted: interpreted, environment: environment, auth: auth, connectionID: connectionID)
    }

    func details(shapes: inout RecordShapes) -> RawRecord.BroadcastDetails? {
        shapes.broadcastDetails(kind: .broadcast, bundleID: verdict.bundleID, channelID: verdict.channelID, operation: nil)
    }
}

/// A channel-management request decided: the validator's verdict, its answer, and the create or
/// delete it asks of the channel store (carried out by the ``Pipeline`` when no fault rule
/// replaced the answer).
struct ChannelVerdict: Verdict {
    var verdict: ChannelRequestVerdict
    var environment: APNSEnvironment
    var auth: AuthSummary
    /// The request carried the connection's first accepted provider token.
    var acceptedFirstToken: Bool
    var answer: BroadcastResponse
    var storeChange: StoreChange?
    /// The channel the request concerns: the one it names, or the one it created.
    var channelID: String?

    static var kind: RecordKind { .channel }
    var status: Int { answer.status }
    var rejection: Rejection? { answer.rejection }
    var answerID: APNSResponse.RequestID { answer.requestID }
    var uniqueID: UUIDValue? { answer.uniqueID }
    var response: Effects.Response { .broadcast(answer) }

    /// `verdict` answered, its create or delete still to be carried out.
    init(
        _ verdict: ChannelRequestVerdict, environment: APNSEnvironment, auth: AuthSummary, acceptedFirstToken: Bool,
        requestID: APNSResponse.RequestID
    ) {
        self.verdict = verdict
        self.environment = environment
        self.auth = auth
        self.acceptedFirstToken = acceptedFirstToken
        channelID = verdict.channelID
        answer = ChannelAPI.response(to: verdict.outcome, requestID: requestID)
        switch verdict.outcome {
        case .create(let policy):
            storeChange = verdict.bundleID.map { .createChannel(bundleID: $0, environment: environment, policy: policy) }
        case .delete(let channel):
            storeChange = .deleteChannel(channel)
        case .read, .list, .rejected:
            storeChange = nil
        }
    }

    func faultFacts(for request: borrowing PushRequest, connection: Int, requestNumber: Int) -> FaultRule.Facts {
        FaultRule.Facts(
            topic: verdict.bundleID, kind: .channel, channelID: verdict.channelID, connection: connection,
            requestNumber: requestNumber)
    }

    mutating func replaceAnswer(with rejection: Rejection) {
        answer = .rejected(rejection, requestID: answer.requestID)
        storeChange = nil
    }

    mutating func settle(_ result: StoreChange.Result) {
        storeChange = nil
        switch result {
        case .created(let channel):
            channelID = channel.id
            answer = BroadcastResponse(status: 201, requestID: answer.requestID, channelID: channel.id)
        case .notCreated:
            answer = .rejected(Rejection(.cannotCreateChannelConfig), requestID: answer.requestID)
        case .deleted:
            break
        case .alreadyGone:
            answer = .rejected(Rejection(.channelNotRegistered), requestID: answer.requestID)
        }
    }

    func shape(for request: borrowing PushRequest, shapes: inout RecordShapes, connectionID: UInt64) -> RequestShape {
        shapes.broadcastSide(for: request, interpreted: nil, environment: environment, auth: auth, connectionID: connectionID)
    }

    func details(shapes: inout RecordShapes) -> RawRecord.BroadcastDetails? {
        shapes.broadcastDetails(kind: .channel, bundleID: verdict.bundleID, channelID: channelID, operation: verdict.operation)
    }
}

/// Channel management in one environment, on that environment's channel-management listener
/// (`/1/apps/<bundle>/channels` and `/all-channels`; docs/broadcast.md). Deciding reads the
/// connection's credentials and its snapshot of the channels; a create or delete is a
/// ``StoreChange`` of the verdict, which the ``Pipeline`` carries out once no fault rule replaced
/// the answer.
final class ChannelAPI: DecidingAPI {
    let validator = BroadcastValidator()
    let environment: APNSEnvironment
    let authenticator: Authenticator
    let validation: ValidationSettings
    let settings: BroadcastSettings
    let pipeline: Pipeline

    init(environment: APNSEnvironment, configuration: ServerConfiguration, authenticator: Authenticator, pipeline: Pipeline) {
        self.environment = environment
        self.authenticator = authenticator
        validation = configuration.validation
        settings = configuration.broadcast
        self.pipeline = pipeline
    }

    func decide(_ request: borrowing PushRequest, context: ConnectionContext, state: inout ConnectionMemo) -> ChannelVerdict {
        let (auth, broadcastContext) = BroadcastContext.deciding(
            request, environment: environment, authenticator: authenticator, state: &state,
            channels: pipeline.state.channels, settings: settings, validation: validation)
        let verdict = validator.decideManagement(request, context: broadcastContext)
        return ChannelVerdict(
            verdict, environment: environment, auth: auth.summary, acceptedFirstToken: auth.acceptedFirstToken,
            requestID: .take(request.requestID, random: &state.random))
    }

    /// The answer to a decided request, before its create or delete is carried out.
    static func response(
        to outcome: ChannelRequestVerdict.Outcome, requestID: APNSResponse.RequestID
    ) -> BroadcastResponse {
        switch outcome {
        case .rejected(let rejection):
            return .rejected(rejection, requestID: requestID)
        case .create:
            // Settled once the store created the channel (``ChannelVerdict/settle(_:)``); stands
            // only when a fault rule kept the create from the store (its rejection or no response
            // replaces it, and only requestID is used) or the request named no app.
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
final class BroadcastAPI: DecidingAPI {
    let validator = BroadcastValidator()
    let authenticator: Authenticator
    let validation: ValidationSettings
    let settings: BroadcastSettings
    let defaultEnvironment: APNSEnvironment
    let pipeline: Pipeline

    init(configuration: ServerConfiguration, authenticator: Authenticator, pipeline: Pipeline) {
        self.authenticator = authenticator
        validation = configuration.validation
        settings = configuration.broadcast
        defaultEnvironment = configuration.environment
        self.pipeline = pipeline
    }

    func decide(
        _ request: borrowing PushRequest, context: ConnectionContext, state: inout ConnectionMemo
    ) -> BroadcastPushVerdict {
        let environment = state.environment(of: request, context: context, fallback: defaultEnvironment)
        let (auth, broadcastContext) = BroadcastContext.deciding(
            request, environment: environment, authenticator: authenticator, state: &state,
            channels: pipeline.state.channels, settings: settings, validation: validation)
        let verdict = validator.decideBroadcast(request, context: broadcastContext, memo: &state.memo)
        let requestID = APNSResponse.RequestID.take(request.requestID, random: &state.random)
        let answer: BroadcastResponse
        var interpreted: RawRecord.Interpreted?
        switch verdict.outcome {
        case .accepted(let broadcast):
            answer = BroadcastResponse(status: 200, requestID: requestID, uniqueID: UUIDValue.random(using: &state.random))
            interpreted = RawRecord.Interpreted(
                priority: broadcast.priority, expiration: broadcast.expiration, pushType: .liveactivity,
                topic: broadcast.channel.bundleID, lint: broadcast.lint)
        case .rejected(let rejection):
            answer = .rejected(rejection, requestID: requestID)
        }
        return BroadcastPushVerdict(
            verdict: verdict, environment: environment, auth: auth.summary, acceptedFirstToken: auth.acceptedFirstToken,
            answer: answer, interpreted: interpreted)
    }
}

extension BroadcastContext {
    /// What both broadcast-side APIs do before deciding: authenticate the request's credentials on
    /// the connection and take the connection's snapshot of the channels.
    static func deciding(
        _ request: borrowing PushRequest, environment: APNSEnvironment, authenticator: Authenticator,
        state: inout ConnectionMemo, channels: any ChannelBackend, settings: BroadcastSettings, validation: ValidationSettings
    ) -> (AuthenticationResult, BroadcastContext) {
        let auth = authenticator.authenticate(
            authorization: request.authorization, environment: environment, state: &state.auth)
        let registry = state.channels.refreshed(from: channels.registry)
        let context = BroadcastContext(
            environment: environment, allowedTopics: auth.allowedTopics, authenticationFailure: auth.failure,
            channels: registry, channelsVersion: state.channels.version, settings: settings, validation: validation)
        return (auth, context)
    }
}

import APNSMockCore
import Logging

/// Applies the mock's state to a decided request and keeps what happened: the rate limiter and the
/// fault rules may change the verdict, a channel is created or deleted, then the outcome is counted,
/// recorded and logged. The one place where a request touches shared state, after deciding
/// (``DeviceAPI``, ``BroadcastAPI``, ``ChannelAPI``) is done.
struct Recorder: Sendable {
    let state: MockState
    let logger: Logger

    /// What a fault rule matches a request of this connection on, besides the request's own facts.
    private func facts(_ facts: FaultRule.Facts, context: ConnectionContext, connection: ConnectionState) -> FaultRule.Facts {
        var facts = facts
        facts.connection = context.connectionNumber
        facts.requestNumber = connection.requestCount
        return facts
    }

    /// The device push's final answer.
    func conclude(
        _ verdict: consuming DeviceVerdict, request: borrowing PushRequest, streamID: Int32, context: ConnectionContext,
        connection: inout ConnectionState
    ) -> Answer {
        if state.isRateLimited, verdict.decision.isAccepted {
            let checked = verdict.decision
            verdict.decision = state.rateLimiter.withLock { limiter in limiter?.apply(to: checked) ?? checked }
            if let rejection = verdict.decision.rejection {
                verdict.response = .rejected(rejection, apnsID: verdict.response.apnsID)
            }
        }

        let rule = state.faults.apply(
            to: request, decision: verdict.decision, connection: context.connectionNumber, requestNumber: connection.requestCount)
        var answer = Answer(response: .apns(verdict.response))
        if let rule, let rejection = answer.apply(rule, now: state.clock.nowMilliseconds) {
            verdict.response = .rejected(rejection, apnsID: verdict.response.apnsID)
            answer.response = .apns(verdict.response)
        }

        let status = answer.response == nil ? nil : verdict.response.status
        let rejection = answer.response == nil ? nil : verdict.response.rejection
        note(status: status, rejection: rejection, action: rule?.action?.name, kind: .device, id: verdict.response.apnsIDText,
             streamID: streamID, context: context, connection: &connection)
        if state.records.isEnabled {
            let receivedAt = connection.readTime()
            let shape = connection.recordShape(
                for: request, accepted: verdict.decision.isAccepted, lint: verdict.decision.acceptedLint,
                interpreted: {
                    verdict.decision.acceptedPush.map {
                        RawRecord.Interpreted(
                            priority: $0.priority, expiration: $0.expiration, pushType: $0.pushType, topic: $0.topic,
                            lint: $0.lint)
                    }
                },
                environment: verdict.environment, auth: verdict.auth, connectionID: UInt64(context.connectionNumber))
            let path = request.path, apnsIDHeader = request.apnsID, apnsID = verdict.response.apnsID
            let uniqueID = answer.response == nil ? nil : verdict.response.uniqueID
            let isInjected = rule != nil, action = rule?.action?.name
            let written = answer.writtenAtOnce, offset = state.clock.offsetSeconds
            answer.recordSeq = state.records.append { seq in
                RawRecord(
                    seq: seq, receivedAt: receivedAt, shape: shape, path: path, apnsIDHeader: apnsIDHeader,
                    apnsID: apnsID, uniqueID: uniqueID, status: status, rejection: rejection, injected: isInjected,
                    action: action, streamID: streamID, responseWritten: written, clockOffset: offset)
            }
        }
        return answer
    }

    /// A broadcast's final answer: 200 with `apns-request-id` and `apns-unique-id`, or its rejection.
    func concludeBroadcast(
        _ decided: BroadcastSideVerdict<BroadcastVerdict>, request: borrowing PushRequest, streamID: Int32,
        context: ConnectionContext, connection: inout ConnectionState
    ) -> Answer {
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
        let rule = state.faults.apply(facts(
            FaultRule.Facts(topic: decided.verdict.bundleID, pushType: .liveactivity, kind: .broadcast, channelID: decided.verdict.channelID),
            context: context, connection: connection))
        return finish(
            response: &response, rule: rule, kind: .broadcast, bundleID: decided.verdict.bundleID,
            channelID: decided.verdict.channelID,
            operation: nil, interpreted: interpreted, environment: decided.environment, auth: decided.auth,
            request: request, streamID: streamID, context: context, connection: &connection)
    }

    /// A channel-management request's final answer. A create or delete happens here, once no fault
    /// rule replaced the answer: a client told "503" must not find the channel created.
    func concludeChannelRequest(
        _ decided: BroadcastSideVerdict<ChannelRequestVerdict>, request: borrowing PushRequest, streamID: Int32,
        context: ConnectionContext, connection: inout ConnectionState
    ) -> Answer {
        let verdict = decided.verdict
        let rule = state.faults.apply(facts(
            FaultRule.Facts(topic: verdict.bundleID, kind: .channel, channelID: verdict.channelID),
            context: context, connection: connection))
        var outcome = verdict.outcome
        var channelID = verdict.channelID
        if rule?.action?.answers ?? true, rule?.respond == nil, let bundleID = verdict.bundleID {
            switch outcome {
            case .create(let policy):
                switch state.channels.create(bundleID: bundleID, environment: decided.environment, policy: policy) {
                case .success(let channel):
                    channelID = channel.id
                    var response = BroadcastResponse(status: 201, requestID: decided.requestID, channelID: channel.id)
                    return finish(
                        response: &response, rule: rule, kind: .channel, bundleID: bundleID, channelID: channelID,
                        operation: verdict.operation, interpreted: nil, environment: decided.environment,
                        auth: decided.auth, request: request, streamID: streamID, context: context,
                        connection: &connection)
                case .failure:
                    outcome = .rejected(Rejection(.cannotCreateChannelConfig))
                }
            case .delete(let channel):
                if state.channels.delete(id: channel.id, bundleID: channel.bundleID, environment: channel.environment) == nil {
                    // Deleted by another request since this connection's snapshot was taken.
                    outcome = .rejected(Rejection(.channelNotRegistered))
                }
            case .read, .list, .rejected:
                break
            }
        }
        var response = ChannelAPI.response(to: outcome, requestID: decided.requestID)
        return finish(
            response: &response, rule: rule, kind: .channel, bundleID: verdict.bundleID, channelID: channelID,
            operation: verdict.operation,
            interpreted: nil, environment: decided.environment, auth: decided.auth, request: request,
            streamID: streamID, context: context, connection: &connection)
    }

    /// Applies a fault rule's outcome to a broadcast-side response, then counts and records it.
    private func finish(
        response: inout BroadcastResponse, rule: FaultRule?, kind: RecordKind, bundleID: String?, channelID: String?,
        operation: ChannelOperation?, interpreted: RawRecord.Interpreted?, environment: APNSEnvironment,
        auth: AuthSummary, request: borrowing PushRequest, streamID: Int32, context: ConnectionContext,
        connection: inout ConnectionState
    ) -> Answer {
        var answer = Answer(response: .broadcast(response))
        if let rule, let rejection = answer.apply(rule, now: state.clock.nowMilliseconds) {
            response = .rejected(rejection, requestID: response.requestID)
            answer.response = .broadcast(response)
        }
        let status = answer.response == nil ? nil : response.status
        let rejection = answer.response == nil ? nil : response.rejection
        state.statistics.count(kind: kind)
        note(status: status, rejection: rejection, action: rule?.action?.name, kind: kind,
             id: response.requestID.text(uppercase: false), streamID: streamID, context: context, connection: &connection)
        if state.records.isEnabled {
            let receivedAt = connection.readTime()
            let shape = connection.broadcastSideShape(
                for: request, interpreted: interpreted, environment: environment, auth: auth,
                connectionID: UInt64(context.connectionNumber))
            let path = request.path, apnsIDHeader = request.apnsID, requestID = response.requestID
            let uniqueID = answer.response == nil ? nil : response.uniqueID
            let details = connection.broadcastDetails(kind: kind, bundleID: bundleID, channelID: channelID, operation: operation)
            let isInjected = rule != nil, action = rule?.action?.name
            let written = answer.writtenAtOnce, offset = state.clock.offsetSeconds
            answer.recordSeq = state.records.append { seq in
                RawRecord(
                    seq: seq, receivedAt: receivedAt, shape: shape, path: path, apnsIDHeader: apnsIDHeader,
                    apnsID: requestID, uniqueID: uniqueID, status: status, rejection: rejection, injected: isInjected,
                    action: action, streamID: streamID, broadcast: details, responseWritten: written, clockOffset: offset)
            }
        }
        return answer
    }

    /// Counts the outcome, tells the connection's credentials what it was answered, and logs a
    /// rejection.
    private func note(
        status: Int?, rejection: Rejection?, action: FaultRule.Action.Name?, kind: RecordKind, id: @autoclosure () -> String,
        streamID: Int32, context: ConnectionContext, connection: inout ConnectionState
    ) {
        if rejection?.reason == .expiredProviderToken {
            connection.auth.tokenExpired(registry: state.tokens, clock: state.clock)
        }
        state.statistics.count(status: status, rejection: rejection, action: action)
        if let rejection {
            logger.info(
                "rejected request",
                metadata: [
                    "connection": "\(context.connectionNumber)",
                    "stream": "\(streamID)",
                    kind == .device ? "apns-id" : "apns-request-id": "\(id())",
                    "status": "\(rejection.status)",
                    "reason": "\(rejection.wireReason)",
                ])
        }
    }
}

extension ConnectionState {
    /// The last device-push record's shape if `request` fits it, else a new one (kept for the next
    /// record). `interpreted` runs only when a new shape is made. `lint` is the accepted push's: one
    /// finding depends on the channels that exist, not on the request alone, so it is compared.
    mutating func recordShape(
        for request: borrowing PushRequest, accepted: Bool, lint: [LintFinding]?,
        interpreted: () -> RawRecord.Interpreted?, environment: APNSEnvironment, auth: AuthSummary, connectionID: UInt64
    ) -> RequestShape {
        Self.share(
            &recordShape, for: request, accepted: accepted, fits: { $0.interpreted?.lint == lint },
            interpreted: interpreted, environment: environment, auth: auth, connectionID: connectionID)
    }

    /// The same for broadcast-side records, kept apart from device pushes' (the same headers mean
    /// other things). The app of a broadcast is in `:path`, which a shape leaves to each record, so
    /// a shape whose interpreted topic is another app's does not fit; nor does one whose lint
    /// differs (it depends on the channels that exist).
    mutating func broadcastSideShape(
        for request: borrowing PushRequest, interpreted: RawRecord.Interpreted?, environment: APNSEnvironment,
        auth: AuthSummary, connectionID: UInt64
    ) -> RequestShape {
        Self.share(
            &broadcastSideShape, for: request, accepted: interpreted != nil,
            fits: { $0.interpreted?.topic == interpreted?.topic && $0.interpreted?.lint == interpreted?.lint },
            interpreted: { interpreted }, environment: environment, auth: auth, connectionID: connectionID)
    }

    /// The shape in `cached` if `request` matches it and `fits` accepts what it interprets beyond
    /// the request, else a new one, kept in `cached` for the next record.
    private static func share(
        _ cached: inout RequestShape?, for request: borrowing PushRequest, accepted: Bool,
        fits: (RequestShape) -> Bool, interpreted: () -> RawRecord.Interpreted?, environment: APNSEnvironment,
        auth: AuthSummary, connectionID: UInt64
    ) -> RequestShape {
        if let shape = cached, fits(shape),
           shape.matches(request, accepted: accepted, environment: environment, auth: auth) {
            return shape
        }
        let shape = RequestShape(
            copy request, interpreted: interpreted(), environment: environment, auth: auth, connectionID: connectionID)
        cached = shape
        return shape
    }

    /// The last broadcast-side record's details when they are the same, else new ones (kept for
    /// the next record): a load of broadcasts on one channel allocates them once.
    mutating func broadcastDetails(
        kind: RecordKind, bundleID: String?, channelID: String?, operation: ChannelOperation?
    ) -> RawRecord.BroadcastDetails {
        if let last = broadcastDetails, last.kind == kind, last.bundleID == bundleID, last.channelID == channelID,
           last.operation == operation {
            return last
        }
        let details = RawRecord.BroadcastDetails(kind: kind, bundleID: bundleID, channelID: channelID, operation: operation)
        broadcastDetails = details
        return details
    }
}

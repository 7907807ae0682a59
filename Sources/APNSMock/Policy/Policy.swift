import APNSMockCore

/// The policy stage of the request path: turns a decided request (its API's verdict) and the
/// mock's shared state into the request's ``Effects``.
///
/// The rate limiter and the fault rules may replace the verdict's answer; a channel is created or
/// deleted here, once no fault rule replaced the answer; an ExpiredProviderToken answer expires the
/// token on every connection; the first accepted token and `server.shrinkStreamsAfterRejection`
/// become stream-limit changes. Deciding before it only reads shared state (its snapshots, the
/// token registry, which also notes a token's first sighting), and the ``Recorder`` after it only
/// keeps what happened.
struct Policy: Sendable {
    let state: MockState
    /// `server.shrinkStreamsAfterRejection`.
    let shrinksStreamsAfterRejection: Bool

    /// A device push: the rate limiter (for an accepted push), then the fault rules. The answer,
    /// if they change it, is `verdict.response`.
    func device(
        _ verdict: inout DeviceVerdict, request: borrowing PushRequest, context: ConnectionContext,
        connection: inout ConnectionState
    ) -> Effects.Actions {
        if state.isRateLimited, verdict.decision.isAccepted {
            let checked = verdict.decision
            verdict.decision = state.rateLimiter.withLock { limiter in limiter?.apply(to: checked) ?? checked }
            if let rejection = verdict.decision.rejection {
                verdict.response = .rejected(rejection, apnsID: verdict.response.apnsID)
            }
        }
        var actions = Effects.Actions()
        if state.faults.hasRules,
           let rule = state.faults.apply(FaultRule.Facts(
               devicePush: request, decision: verdict.decision, connection: context.connectionNumber,
               requestNumber: connection.requestCount)),
           let rejection = actions.apply(rule, now: state.clock.nowMilliseconds) {
            verdict.response = .rejected(rejection, apnsID: verdict.response.apnsID)
        }
        settle(&actions, rejection: verdict.response.rejection, acceptedFirstToken: verdict.acceptedFirstToken, connection: &connection)
        return actions
    }

    /// A broadcast: the fault rules. The answer, if they change it, is `response`.
    func broadcast(
        _ decided: BroadcastSideVerdict<BroadcastVerdict>, response: inout BroadcastResponse,
        context: ConnectionContext, connection: inout ConnectionState
    ) -> Effects.Actions {
        // As for device pushes, the facts are gathered only when some rule could use them.
        let rule = state.faults.hasRules ? state.faults.apply(FaultRule.Facts(
            topic: decided.verdict.bundleID, pushType: .liveactivity, kind: .broadcast,
            channelID: decided.verdict.channelID, connection: context.connectionNumber,
            requestNumber: connection.requestCount)) : nil
        return effects(of: rule, response: &response, acceptedFirstToken: decided.acceptedFirstToken, connection: &connection)
    }

    /// A channel-management request: the fault rules, then the create or delete it asks for,
    /// unless a rule replaced the answer (a client told "503" must not find the channel created).
    /// Returns the response and the channel the request concerns (a created one's new ID).
    func channelRequest(
        _ decided: BroadcastSideVerdict<ChannelRequestVerdict>, context: ConnectionContext,
        connection: inout ConnectionState
    ) -> (actions: Effects.Actions, response: BroadcastResponse, channelID: String?) {
        let verdict = decided.verdict
        let rule = state.faults.hasRules ? state.faults.apply(FaultRule.Facts(
            topic: verdict.bundleID, kind: .channel, channelID: verdict.channelID,
            connection: context.connectionNumber, requestNumber: connection.requestCount)) : nil
        var outcome = verdict.outcome
        var channelID = verdict.channelID
        var response: BroadcastResponse?
        if rule?.action?.answers ?? true, rule?.respond == nil, let bundleID = verdict.bundleID {
            switch outcome {
            case .create(let policy):
                switch state.channels.create(bundleID: bundleID, environment: decided.environment, policy: policy) {
                case .success(let channel):
                    channelID = channel.id
                    response = BroadcastResponse(status: 201, requestID: decided.requestID, channelID: channel.id)
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
        var answered = response ?? ChannelAPI.response(to: outcome, requestID: decided.requestID)
        let actions = effects(of: rule, response: &answered, acceptedFirstToken: decided.acceptedFirstToken, connection: &connection)
        return (actions, answered, channelID)
    }

    /// A broadcast-side request's effects: the matched rule's, if any, applied to `response`.
    private func effects(
        of rule: FaultRule?, response: inout BroadcastResponse, acceptedFirstToken: Bool, connection: inout ConnectionState
    ) -> Effects.Actions {
        var actions = Effects.Actions()
        if let rule, let rejection = actions.apply(rule, now: state.clock.nowMilliseconds) {
            response = .rejected(rejection, requestID: response.requestID)
        }
        settle(&actions, rejection: response.rejection, acceptedFirstToken: acceptedFirstToken, connection: &connection)
        return actions
    }

    /// What the final answer does beyond itself: ExpiredProviderToken expires the connection's
    /// token everywhere; the connection's first accepted token lifts its stream limit; with
    /// `server.shrinkStreamsAfterRejection` a rejection lowers it to one stream until a request is
    /// accepted again (as reported from production APNs, docs/admin-api.md).
    ///
    /// `rejection` is the answer's (every answer of status 400 and above carries one, and only
    /// those); it counts only when the actions answer.
    private func settle(
        _ actions: inout Effects.Actions, rejection: Rejection?, acceptedFirstToken: Bool, connection: inout ConnectionState
    ) {
        if actions.answers, rejection?.reason == .expiredProviderToken {
            connection.auth.tokenExpired(registry: state.tokens, clock: state.clock)
        }
        actions.raisesStreamLimit = acceptedFirstToken
        if shrinksStreamsAfterRejection, actions.answers {
            actions.streamLimit = rejection == nil ? .normal : .one
        }
    }
}

extension FaultRule.Facts {
    /// What a fault rule matches a device push on: the accepted push's token, topic and push type,
    /// else what the request names (its path's token, `apns-topic`, `apns-push-type`).
    init(devicePush request: borrowing PushRequest, decision: Decision, connection: Int, requestNumber: Int) {
        let accepted = decision.acceptedPush
        let token: String?
        if let accepted {
            token = accepted.token
        } else if let path = request.path, case .token(let slice) = HeaderSyntax.devicePath(path) {
            token = String(slice)
        } else {
            token = nil
        }
        self.init(
            token: token, topic: accepted?.topic ?? request.topic,
            pushType: accepted?.pushType ?? request.pushType.flatMap(PushType.init(headerValue:)),
            connection: connection, requestNumber: requestNumber)
    }
}

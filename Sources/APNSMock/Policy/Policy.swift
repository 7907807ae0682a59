import APNSMockCore

/// The policy stage of the request path: what the mock's shared state does to a decided request
/// (its API's ``Verdict``), for every API alike.
///
/// The rate limiter and the fault rules may replace the verdict's answer
/// (``applyRules(to:request:context:requestNumber:)``); once the answer is final
/// (``settle(_:verdict:connection:)``), an ExpiredProviderToken answer expires the token on every
/// connection, and the first accepted token and `server.shrinkStreamsAfterRejection` become
/// stream-limit changes. Deciding before it only reads shared state (its snapshots, the token
/// registry, which also notes a token's first sighting), and the ``Recorder`` after it only keeps
/// what happened.
struct Policy: Sendable {
    let state: MockState
    /// `server.shrinkStreamsAfterRejection`.
    let shrinksStreamsAfterRejection: Bool
    /// `validation.magicDeviceTokens`: the rules a magic device token names (``MagicDeviceToken``),
    /// by reason; `nil` while off.
    let magicRules: [Reason: FaultRule]?
    /// Whether fault rules with `times` are claimed in a shared state (``FaultClaim``): read once
    /// here, so that a request's rules do not look at ``MockState/shared``.
    let claimsFaults: Bool

    init(state: MockState, shrinksStreamsAfterRejection: Bool, magicDeviceTokens: Bool = false) {
        self.state = state
        self.shrinksStreamsAfterRejection = shrinksStreamsAfterRejection
        claimsFaults = state.shared != nil
        magicRules = magicDeviceTokens
            ? Dictionary(uniqueKeysWithValues: MagicDeviceToken.answers.map { ($0.reason, FaultRule(respond: Rejection($0.reason))) })
            : nil
    }

    /// The rate limiter (for the verdicts it concerns), then the fault rules; a rule's answer
    /// replaces the verdict's. Returns the request's actions.
    ///
    /// With a shared state, a rule with `times` that matches is not applied here: `claim` says
    /// which (it is `nil` on entry, and stays so otherwise); the pipeline applies the rule once the
    /// claim is settled (``applyClaimed(_:to:actions:team:)``).
    func applyRules<V: Verdict>(
        to verdict: inout V, request: borrowing PushRequest, context: ConnectionContext, requestNumber: Int,
        team: Unmanaged<TeamSpace>?, claim: inout FaultClaim?
    ) -> Effects.Actions {
        verdict.limitRate(in: state)
        var actions = Effects.Actions()
        // The team's rules first, then the mock's; the facts are gathered only when some rule could
        // use them.
        let teamHasRules = team?._withUnsafeGuaranteedRef { $0.faults.hasRules } ?? false
        guard teamHasRules || state.faults.hasRules || magicRules != nil else { return actions }
        let facts = verdict.faultFacts(for: request, connection: context.connectionNumber, requestNumber: requestNumber)
        var fired: FaultRule?
        if teamHasRules, let team {
            fired = team._withUnsafeGuaranteedRef { space in
                space.faults.apply(facts, claimScope: claimsFaults ? space.teamID : nil, claim: &claim)
            }
        }
        if fired == nil, state.faults.hasRules {
            fired = state.faults.apply(facts, claimScope: claimsFaults ? "*" : nil, claim: &claim)
        }
        if claimsFaults, claim != nil { return actions }
        // A magic device token answers what it names where the push would have been accepted.
        if fired == nil, let magicRules, V.kind == .device, verdict.rejection == nil, let token = facts.token,
           let reason = MagicDeviceToken.reason(for: token) {
            fired = magicRules[reason]
        }
        if let rule = fired,
           let rejection = actions.apply(rule, now: team?.takeUnretainedValue().clock.nowMilliseconds ?? state.clock.nowMilliseconds) {
            verdict.replaceAnswer(with: rejection)
        }
        return actions
    }

    /// Applies the rule of a settled claim that fires (``FaultBackend/settle(_:granted:)``), as
    /// ``applyRules(to:request:context:requestNumber:team:claim:)`` applies a rule that needs none.
    func applyClaimed<V: Verdict>(_ rule: FaultRule, to verdict: inout V, actions: inout Effects.Actions, team: TeamSpace?) {
        if let rejection = actions.apply(rule, now: team?.clock.nowMilliseconds ?? state.clock.nowMilliseconds) {
            verdict.replaceAnswer(with: rejection)
        }
    }

    /// What the final answer does beyond itself: ExpiredProviderToken expires the connection's
    /// token everywhere; the connection's first accepted token lifts its stream limit; with
    /// `server.shrinkStreamsAfterRejection` a rejection lowers it to one stream until a request is
    /// accepted again (as reported from production APNs, docs/admin-api.md). The answer counts
    /// only when the actions answer.
    func settle<V: Verdict>(_ actions: inout Effects.Actions, verdict: V, connection: inout ConnectionMemo) {
        let rejection = verdict.rejection
        if actions.answers, rejection?.reason == .expiredProviderToken {
            if let expired = connection.auth.tokenExpired() {
                state.shared?.tokenExpired(team: expired.team, tokenId: expired.tokenId, offset: expired.offset)
            }
        }
        actions.settle(
            rejected: rejection != nil, acceptedFirstToken: verdict.acceptedFirstToken,
            shrinksStreamsAfterRejection: shrinksStreamsAfterRejection)
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

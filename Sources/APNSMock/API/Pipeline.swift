import APNSMockCore

/// A decided request, as the stages after deciding read and change it. Each API's verdict carries
/// its answer from the start (``response``); the ``Policy`` may replace it (the rate limiter, a
/// fault rule's rejection), a ``StoreChange`` it asks for settles it, and the ``Recorder`` keeps it.
protocol Verdict {
    /// What its records are.
    static var kind: RecordKind { get }
    /// The request carried the connection's first accepted provider token.
    var acceptedFirstToken: Bool { get }
    /// The answer's status.
    var status: Int { get }
    /// The answer's rejection: every answer of status 400 and above carries one, and only those.
    var rejection: Rejection? { get }
    /// The answer's `apns-id` (device pushes) or `apns-request-id` (broadcast side), as recorded.
    var answerID: APNSResponse.RequestID { get }
    /// The answer's `apns-unique-id`, if it has one.
    var uniqueID: UUIDValue? { get }
    /// The answer, for the connection.
    var response: Effects.Response { get }
    /// A change of the mock's shared stores the verdict asks for, carried out only when the
    /// decided answer goes out (a client told "503" must not find the channel created).
    var storeChange: StoreChange? { get }

    /// What a fault rule matches the request on.
    func faultFacts(for request: borrowing PushRequest, connection: Int, requestNumber: Int) -> FaultRule.Facts
    /// The rate limiter's word on the verdict (`server.rateLimit`; device pushes only).
    mutating func limitRate(in state: MockState)
    /// A fault rule's answer replaces the decided one, and drops its ``storeChange``.
    mutating func replaceAnswer(with rejection: Rejection)
    /// The answer once the store carried out ``storeChange``.
    mutating func settle(_ result: StoreChange.Result)
    /// The record's shape (shared with the connection's last record where it can be).
    func shape(for request: borrowing PushRequest, shapes: inout RecordShapes, connectionID: UInt64) -> RequestShape
    /// What a broadcast-side record says beyond the request and its response.
    func details(shapes: inout RecordShapes) -> RawRecord.BroadcastDetails?
}

extension Verdict {
    var storeChange: StoreChange? { nil }
    mutating func limitRate(in state: MockState) {}
    mutating func settle(_ result: StoreChange.Result) {}
    func details(shapes: inout RecordShapes) -> RawRecord.BroadcastDetails? { nil }
}

/// A change of the mock's shared stores that a verdict asks for: channel management's create and
/// delete. The ``Pipeline`` carries it out after the ``Policy`` kept the decided answer and before
/// the answer is settled and recorded, since what the store says (the new channel's ID, a limit
/// reached, a channel deleted meanwhile) is part of the answer.
enum StoreChange: Equatable {
    /// Create a channel for `bundleID` in `environment` (the store makes the ID and enforces the
    /// limit).
    case createChannel(bundleID: String, environment: APNSEnvironment, policy: MessageStoragePolicy)
    /// Delete the channel the connection's snapshot found.
    case deleteChannel(BroadcastChannel)

    enum Result: Equatable {
        case created(BroadcastChannel)
        /// The store refused (`broadcast.maxChannels` reached).
        case notCreated
        case deleted
        /// Deleted by another request since the connection's snapshot was taken.
        case alreadyGone
    }

    func carryOut(on state: MockState) -> Result {
        // With a shared state the other replicas learn of the change from its log, a moment later.
        switch self {
        case .createChannel(let bundleID, let environment, let policy):
            switch state.channels.create(bundleID: bundleID, environment: environment, policy: policy) {
            case .success(let channel):
                state.shared?.channelCreated(channel)
                return .created(channel)
            case .failure:
                return .notCreated
            }
        case .deleteChannel(let channel):
            guard state.channels.delete(id: channel.id, bundleID: channel.bundleID, environment: channel.environment) != nil
            else { return .alreadyGone }
            state.shared?.channelDeleted(channel)
            return .deleted
        }
    }
}

/// An API whose requests go through the ``Pipeline``: it only decides. Deciding is a function of
/// the request, the connection's context and own state (its credentials, memos and snapshots) and
/// the immutable configuration; it reads no shared mutable state and changes none.
protocol DecidingAPI: RequestAPI {
    associatedtype Decided: Verdict
    var pipeline: Pipeline { get }
    func decide(_ request: borrowing PushRequest, context: ConnectionContext, state: inout ConnectionMemo) -> Decided
}

extension DecidingAPI {
    func answer(
        _ request: borrowing PushRequest, stream: RequestStream, context: ConnectionContext,
        connection: inout ConnectionMemo
    ) -> Effects {
        var verdict = decide(request, context: context, state: &connection)
        return pipeline.run(&verdict, request: request, stream: stream, context: context, connection: &connection)
    }
}

/// The stages after deciding, the same for every API: the ``Policy`` (rate limit and fault rules),
/// the verdict's ``StoreChange`` when its answer stands, the policy's settling of what the answer
/// does to the connection, the ``Recorder``; the result is the request's ``Effects``, which the
/// connection carries out. Generic over the verdict, so each API's run is compiled for its own
/// verdict type (no existential, no allocation).
///
/// With a shared state, a fault rule with `times` that matches fires only once the shared state
/// grants it (``FaultClaim``), which the request waits for: the run stops after the policy, reads
/// what the record takes from the request while it is lent, and leaves the rest to an
/// ``AwaitingClaim`` that the connection finishes once the claim is answered.
struct Pipeline: Sendable {
    let policy: Policy
    let recorder: Recorder

    var state: MockState { policy.state }

    func run<V: Verdict>(
        _ verdict: inout V, request: borrowing PushRequest, stream: RequestStream, context: ConnectionContext,
        connection: inout ConnectionMemo
    ) -> Effects {
        // The request's team (its token's or certificate's), unretained (``ConnectionAuth/team``).
        let team = connection.auth.team
        var actions = policy.applyRules(
            to: &verdict, request: request, context: context, requestNumber: connection.requestCount, team: team,
            claim: &connection.faultClaim)
        if _slowPath(connection.faultClaim != nil), let claim = connection.faultClaim.take() {
            return awaitClaim(
                claim, verdict: verdict, actions: actions, request: request, context: context, team: team,
                connection: &connection)
        }
        if actions.answers, let change = verdict.storeChange {
            verdict.settle(change.carryOut(on: policy.state))
        }
        policy.settle(&actions, verdict: verdict, connection: &connection)
        let seq = recorder.record(
            verdict, actions: actions, request: request, stream: stream, context: context, team: team, connection: &connection)
        return Effects(verdict.response, actions: actions, recordSeq: seq)
    }

    /// The rest of ``run(_:request:stream:context:connection:)`` for a request whose fault rule
    /// waits for its claim: what the record takes from the request is read now, and the rest (the
    /// rule applied or not, the store change, settling, the record) is left in
    /// ``ConnectionMemo/awaitingClaim`` for the connection to finish once the claim is answered.
    /// Out of line: only requests with a claim pay for the closure.
    @inline(never)
    private func awaitClaim<V: Verdict>(
        _ claim: FaultClaim, verdict: V, actions: Effects.Actions, request: borrowing PushRequest,
        context: ConnectionContext, team: Unmanaged<TeamSpace>?, connection: inout ConnectionMemo
    ) -> Effects {
        let received = recorder.received(verdict, request: request, context: context, connection: &connection)
        // Held (retained) until the claim is settled: the connection may be bound to another team,
        // or the team removed, by then.
        let space = team?.takeUnretainedValue()
        connection.awaitingClaim = AwaitingClaim(key: claim.key, times: claim.times) { granted, stream, connection in
            var verdict = verdict
            var actions = actions
            if claim.store.settle(claim, granted: granted) {
                policy.applyClaimed(claim.rule, to: &verdict, actions: &actions, team: space)
            }
            let team = space.map { Unmanaged.passUnretained($0) }
            return finish(
                &verdict, actions: actions, received: received, stream: stream, context: context, team: team,
                connection: &connection)
        }
        return .awaitingClaim(actions)
    }

    /// After the fault rules, for a request whose rule was claimed: the store change, settling and
    /// the record, as ``run(_:request:stream:context:connection:)`` does them.
    private func finish<V: Verdict>(
        _ verdict: inout V, actions: Effects.Actions, received: Recorder.Received?, stream: RequestStream,
        context: ConnectionContext, team: Unmanaged<TeamSpace>?, connection: inout ConnectionMemo
    ) -> Effects {
        var actions = actions
        if actions.answers, let change = verdict.storeChange {
            verdict.settle(change.carryOut(on: policy.state))
        }
        policy.settle(&actions, verdict: verdict, connection: &connection)
        let seq = recorder.record(
            verdict, received: received, actions: actions, stream: stream, context: context, team: team,
            connection: &connection)
        return Effects(verdict.response, actions: actions, recordSeq: seq)
    }
}

/// A request whose fault rule waits for its claim in the shared state (``FaultClaim``), as the
/// ``Pipeline`` leaves it to the connection: what to claim, and how to finish the request once
/// the claim is answered. ``finish`` takes the answer (`nil`: the shared state could not give
/// one), the request's stream as it is then (closed: the record says the answer was not written)
/// and the connection's memo, and returns the request's ``Effects``, settled and recorded.
struct AwaitingClaim {
    let key: String
    let times: Int
    let finish: (_ granted: Bool?, _ stream: RequestStream, _ connection: inout ConnectionMemo) -> Effects
}

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
        switch self {
        case .createChannel(let bundleID, let environment, let policy):
            switch state.channels.create(bundleID: bundleID, environment: environment, policy: policy) {
            case .success(let channel): .created(channel)
            case .failure: .notCreated
            }
        case .deleteChannel(let channel):
            state.channels.delete(id: channel.id, bundleID: channel.bundleID, environment: channel.environment) == nil
                ? .alreadyGone : .deleted
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
            to: &verdict, request: request, context: context, requestNumber: connection.requestCount, team: team)
        if actions.answers, let change = verdict.storeChange {
            verdict.settle(change.carryOut(on: policy.state))
        }
        policy.settle(&actions, verdict: verdict, connection: &connection)
        let seq = recorder.record(
            verdict, actions: actions, request: request, stream: stream, context: context, team: team, connection: &connection)
        return Effects(verdict.response, actions: actions, recordSeq: seq)
    }
}

@testable import APNSMock
import APNSMockCore
import APNSMockTesting
import Logging
import Testing

/// The request path after HTTP/2, with no TLS and no socket: a ``PushRequest`` and a
/// ``ConnectionContext`` through routing, deciding, the ``Policy``, a verdict's ``StoreChange`` and
/// the ``Recorder``, to the ``Effects`` the connection would carry out.
struct PipelineHarness {
    let state: MockState
    let routes: Routes
    var connection: ConnectionMemo
    var context = ConnectionContext(connectionID: 1, connectionNumber: 1, sniEnvironment: nil)

    static let noLogger = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })

    /// A harness whose mock has the shared state `shared` (`nil`: in memory).
    init(shared: (any SharedStateEngine)? = nil, configure: (inout ServerConfiguration) -> Void = { _ in }) throws {
        var configuration = ServerConfiguration()
        configuration.teams = [try MockHarness.demoTeam()]
        configure(&configuration)
        state = MockState(
            configuration: configuration, parts: .inMemory(configuration), tokenKeys: try TokenKeys.load(configuration.teams),
            shared: shared)
        routes = Routes(
            configuration: configuration, state: state,
            logger: Self.noLogger)
        connection = ConnectionMemo(state: state)
    }

    /// One request, as the connection hands it over.
    mutating func run(_ request: PushRequest, on role: ListenerRole = .apns, stream: RequestStream = RequestStream(id: 1)) -> Effects {
        connection.requestCount &+= 1
        connection.readMilliseconds = nil
        return routes.serving(role).answer(request, stream: stream, context: context, connection: &connection)
    }

    var lastRecord: RawRecord? { state.records.record(state.records.lastSeq) }

    static var authorization: String { "bearer " + ((try? MockHarness.demoToken()) ?? "") }

    static func devicePush(_ change: (inout PushRequest) -> Void = { _ in }) -> PushRequest {
        var request = PushRequest()
        request.method = "POST"
        request.scheme = "https"
        request.path = "/3/device/\(Pushes.token)"
        request.authority = "api.sandbox.push.apple.com"
        request.authorization = authorization
        request.topic = "com.example.app"
        request.body = Array(#"{"aps":{"alert":"hi"}}"#.utf8)
        request.bodyLength = request.body.count
        change(&request)
        return request
    }

    static func channelRequest(
        _ method: String, _ path: String, channelID: String? = nil, body: String = ""
    ) -> PushRequest {
        var request = PushRequest()
        request.method = method
        request.scheme = "https"
        request.path = path
        request.authority = "api-manage-broadcast.sandbox.push.apple.com"
        request.authorization = authorization
        request.channelID = channelID
        request.body = Array(body.utf8)
        request.bodyLength = request.body.count
        return request
    }

    static func createChannel() -> PushRequest {
        channelRequest(
            "POST", "/1/apps/com.example.app/channels", body: #"{"message-storage-policy":1,"push-type":"LiveActivity"}"#)
    }

    static func broadcast(channelID: String) -> PushRequest {
        var request = PushRequest()
        request.method = "POST"
        request.scheme = "https"
        request.path = "/4/broadcasts/apps/com.example.app"
        request.authority = "api.sandbox.push.apple.com"
        request.authorization = authorization
        request.channelID = channelID
        request.pushType = "liveactivity"
        request.expiration = "1893456000"
        request.body = Array(#"{"aps":{"event":"update","content-state":{},"timestamp":1}}"#.utf8)
        request.bodyLength = request.body.count
        return request
    }
}

extension Effects.Response {
    var status: Int {
        switch self {
        case .apns(let response): response.status
        case .broadcast(let response): response.status
        }
    }

    var channelID: String? {
        if case .broadcast(let response) = self { return response.channelID }
        return nil
    }
}

@Suite("Pipeline")
struct PipelineTests {
    @Test func anAcceptedDevicePushIsAnsweredAndRecorded() throws {
        var mock = try PipelineHarness()
        let effects = mock.run(PipelineHarness.devicePush())
        #expect(effects.actions.disposition == .answer)
        #expect(effects.response?.status == 200)
        // The first accepted token lifts the connection's stream limit.
        #expect(effects.actions.raisesStreamLimit)
        let record = try #require(mock.lastRecord)
        #expect(effects.recordSeq == record.seq)
        #expect(record.kind == .device && record.status == 200 && record.responseWritten)
        #expect(record.path == "/3/device/\(Pushes.token)")
        #expect(!mock.run(PipelineHarness.devicePush()).actions.raisesStreamLimit)
    }

    @Test func aRejectedDevicePushCarriesItsReasonToTheRecord() throws {
        var mock = try PipelineHarness()
        let effects = mock.run(PipelineHarness.devicePush { $0.topic = "com.example.other" })
        #expect(effects.response?.rejection?.reason == .topicDisallowed)
        #expect(try #require(mock.lastRecord).rejection?.reason == .topicDisallowed)
    }

    @Test func aStreamClosedBeforeTheAnswerIsRecordedUnwritten() throws {
        var mock = try PipelineHarness()
        _ = mock.run(PipelineHarness.devicePush(), stream: RequestStream(id: 3, isOpen: false))
        let record = try #require(mock.lastRecord)
        #expect(record.status == 200 && !record.responseWritten && record.streamID == 3)
    }

    @Test func aChannelIsCreatedThroughTheStoreChangeAndRecordedWithItsID() throws {
        var mock = try PipelineHarness()
        let effects = mock.run(PipelineHarness.createChannel(), on: .channelManagement(.sandbox))
        #expect(effects.response?.status == 201)
        let id = try #require(effects.response?.channelID)
        #expect(mock.state.channels.registry.current.channel(id: id, bundleID: "com.example.app", environment: .sandbox) != nil)
        let record = try #require(mock.lastRecord)
        #expect(record.kind == .channel && record.broadcast?.channelID == id && record.broadcast?.operation == .create)

        // A broadcast on it, on the APNs listener, with the connection's refreshed snapshot.
        let broadcast = mock.run(PipelineHarness.broadcast(channelID: id))
        #expect(broadcast.response?.status == 200, "\(String(describing: broadcast.response?.rejection))")
        #expect(try #require(mock.lastRecord).kind == .broadcast)

        // Deleting it; a second delete finds none.
        let delete = PipelineHarness.channelRequest("DELETE", "/1/apps/com.example.app/channels", channelID: id)
        #expect(mock.run(delete, on: .channelManagement(.sandbox)).response?.status == 204)
        #expect(mock.run(delete, on: .channelManagement(.sandbox)).response?.rejection?.reason == .channelNotRegistered)
    }

    @Test func aFaultRulesAnswerKeepsTheChannelFromTheStore() throws {
        var mock = try PipelineHarness()
        _ = mock.state.faults.add(FaultRule(match: .init(kind: .channel), respond: Rejection(.serviceUnavailable), times: 1))
        let effects = mock.run(PipelineHarness.createChannel(), on: .channelManagement(.sandbox))
        #expect(effects.response?.rejection?.reason == .serviceUnavailable)
        #expect(mock.state.channels.registry.current.channels(bundleID: "com.example.app", environment: .sandbox).isEmpty)
        #expect(try #require(mock.lastRecord).injected)
    }

    @Test func aFaultActionInsteadOfTheAnswerLeavesNoResponse() throws {
        var mock = try PipelineHarness()
        _ = mock.state.faults.add(FaultRule(action: .hang))
        let effects = mock.run(PipelineHarness.devicePush())
        #expect(effects.actions.disposition == .hang)
        #expect(effects.response == nil)
        let record = try #require(mock.lastRecord)
        #expect(record.status == nil && record.action == .hang && !record.responseWritten)
    }

    @Test func anUnroutedRequestIsResetAndNotRecorded() throws {
        let mock = try PipelineHarness()
        let listener = ListenerRoutes(role: .apns, routes: [], state: mock.state)
        var connection = mock.connection
        let effects = listener.answer(
            PipelineHarness.devicePush(), stream: RequestStream(id: 1), context: mock.context, connection: &connection)
        #expect(effects.actions.disposition == .reset && effects.response == nil && effects.recordSeq == 0)
        #expect(!effects.actions.faultMatched && effects.actions.actionName == nil)
        #expect(mock.state.records.lastSeq == 0)
    }
}

@Suite("Effects")
struct EffectsTests {
    @Test func eachFaultActionBecomesOneDisposition() {
        let goAway = FaultRule.GoAway(code: .enhanceYourCalm)
        let cases: [(FaultRule.Action, Rejection?, Effects.Disposition)] = [
            (.reset, nil, .reset),
            (.close, nil, .close),
            (.tcpReset, nil, .tcpReset),
            (.hang, nil, .hang),
            (.goaway(goAway), nil, .goAway(goAway, reason: .shutdown)),
            (.goaway(goAway), Rejection(.internalServerError), .goAway(goAway, reason: .internalServerError)),
            (.shrinkStreams(maxConcurrentStreams: 2, durationMs: 50), nil,
             .answerAndShrinkStreams(maxConcurrentStreams: 2, durationMs: 50)),
            (.ignorePings(durationMs: 10), nil, .answerAndIgnorePings(durationMs: 10)),
        ]
        for (action, respond, expected) in cases {
            var actions = Effects.Actions()
            _ = actions.apply(FaultRule(respond: respond, action: action), now: { 0 })
            #expect(actions.disposition == expected, "\(action)")
            #expect(actions.answers == action.answers, "\(action)")
            #expect(actions.actionName == action.name, "\(action)")
            #expect(actions.faultMatched)
        }
    }

    @Test func aRuleWithoutActionAnswersWithItsRejectionAfterItsDelay() {
        var actions = Effects.Actions()
        let rejection = actions.apply(FaultRule(respond: Rejection(.unregistered), delayMs: 20), now: { 1234 })
        #expect(rejection?.reason == .unregistered && rejection?.timestamp == 1234)
        #expect(actions.disposition == .answer && actions.delayMs == 20 && actions.actionName == nil)
        #expect(!actions.writtenAtOnce(streamOpen: true))
    }

    @Test func anActionThatReplacesTheAnswerReturnsNoRejection() {
        var actions = Effects.Actions()
        #expect(actions.apply(FaultRule(respond: Rejection(.badTopic), action: .reset), now: { 0 }) == nil)
        #expect(!actions.answers && !actions.writtenAtOnce(streamOpen: true))
    }

    @Test func theResponseIsPresentExactlyWhenTheDispositionAnswers() {
        let response = Effects.Response.apns(.accepted(apnsID: .echoed("x"), uniqueID: nil))
        var hang = Effects.Actions()
        _ = hang.apply(FaultRule(action: .hang), now: { 0 })
        #expect(Effects(response, actions: hang, recordSeq: 1).response == nil)
        #expect(Effects(response, actions: Effects.Actions(), recordSeq: 1).response != nil)
    }

    @Test func settlingSetsStreamLimitsOnlyForAnswers() {
        var answered = Effects.Actions()
        answered.settle(rejected: true, acceptedFirstToken: false, shrinksStreamsAfterRejection: true)
        #expect(answered.streamLimit == .one)
        answered.settle(rejected: false, acceptedFirstToken: true, shrinksStreamsAfterRejection: true)
        #expect(answered.streamLimit == .normal && answered.raisesStreamLimit)
        var reset = Effects.Actions()
        _ = reset.apply(FaultRule(action: .reset), now: { 0 })
        reset.settle(rejected: true, acceptedFirstToken: false, shrinksStreamsAfterRejection: true)
        #expect(reset.streamLimit == nil)
        var off = Effects.Actions()
        off.settle(rejected: true, acceptedFirstToken: false, shrinksStreamsAfterRejection: false)
        #expect(off.streamLimit == nil)
    }
}

@Suite("Policy")
struct PolicyTests {
    static func verdict(_ mock: inout PipelineHarness, _ request: PushRequest) throws -> DeviceVerdict {
        let api = try #require(mock.routes.table.lazy.compactMap { $0.api as? DeviceAPI }.first)
        return api.decide(request, context: mock.context, state: &mock.connection)
    }

    @Test func theRateLimiterRefusesAnAcceptedPush() throws {
        var mock = try PipelineHarness { $0.validation.rateLimit = RateLimit(requests: 1, interval: .seconds(60)) }
        let policy = Policy(state: mock.state, shrinksStreamsAfterRejection: false)
        let request = PipelineHarness.devicePush()
        var first = try Self.verdict(&mock, request)
        _ = policy.applyRules(to: &first, request: request, context: mock.context, requestNumber: 1, team: nil,
            claim: &mock.connection.faultClaim)
        #expect(first.rejection == nil)
        var second = try Self.verdict(&mock, request)
        _ = policy.applyRules(to: &second, request: request, context: mock.context, requestNumber: 2, team: nil,
            claim: &mock.connection.faultClaim)
        #expect(second.rejection?.reason == .tooManyRequests && second.status == 429)
    }

    @Test func aMatchingRulesRejectionReplacesTheAnswerAndKeepsTheID() throws {
        var mock = try PipelineHarness()
        _ = mock.state.faults.add(FaultRule(match: .init(token: Pushes.token), respond: Rejection(.badDeviceToken)))
        let policy = Policy(state: mock.state, shrinksStreamsAfterRejection: true)
        let request = PipelineHarness.devicePush()
        var verdict = try Self.verdict(&mock, request)
        let id = verdict.answerID
        var actions = policy.applyRules(to: &verdict, request: request, context: mock.context, requestNumber: 1, team: nil,
            claim: &mock.connection.faultClaim)
        #expect(verdict.rejection?.reason == .badDeviceToken && verdict.answerID == id && actions.faultMatched)
        policy.settle(&actions, verdict: verdict, connection: &mock.connection)
        #expect(actions.streamLimit == .one)
    }

    @Test func anExpiredProviderTokenAnswerExpiresTheToken() throws {
        var mock = try PipelineHarness()
        _ = mock.state.faults.add(FaultRule(respond: Rejection(.expiredProviderToken), times: 1))
        #expect(mock.run(PipelineHarness.devicePush()).response?.rejection?.reason == .expiredProviderToken)
        // The same token is now refused on its own.
        #expect(mock.run(PipelineHarness.devicePush()).response?.rejection?.reason == .expiredProviderToken)
    }
}

@Suite("Recorder")
struct RecorderTests {
    @Test func aReplacedAnswerIsRecordedWithoutStatusAndWithItsAction() throws {
        var mock = try PipelineHarness()
        let recorder = Recorder(state: mock.state, logger: PipelineHarness.noLogger)
        var actions = Effects.Actions()
        _ = actions.apply(FaultRule(action: .tcpReset), now: { 0 })
        let request = PipelineHarness.devicePush { $0.topic = "com.example.other" }
        let verdict = try PolicyTests.verdict(&mock, request)
        #expect(verdict.rejection?.reason == .topicDisallowed)
        let seq = recorder.record(
            verdict, actions: actions, request: request, stream: RequestStream(id: 5), context: mock.context, team: nil,
            connection: &mock.connection)
        let record = try #require(mock.state.records.record(seq))
        #expect(record.status == nil && record.rejection == nil && record.action == .tcpReset && record.injected)
        #expect(record.streamID == 5 && !record.responseWritten && record.kind == .device)
    }

    @Test func aBroadcastSideRecordCarriesItsDetails() throws {
        var mock = try PipelineHarness()
        let recorder = Recorder(state: mock.state, logger: PipelineHarness.noLogger)
        let api = try #require(mock.routes.table.lazy.compactMap { $0.api as? ChannelAPI }.first { $0.environment == .sandbox })
        let request = PipelineHarness.channelRequest("GET", "/1/apps/com.example.app/all-channels")
        let verdict = api.decide(request, context: mock.context, state: &mock.connection)
        #expect(verdict.storeChange == nil && verdict.status == 200)
        let seq = recorder.record(
            verdict, actions: Effects.Actions(), request: request, stream: RequestStream(id: 1), context: mock.context, team: nil,
            connection: &mock.connection)
        let record = try #require(mock.state.records.record(seq))
        #expect(record.kind == RecordKind.channel && record.status == 200 && record.broadcast?.operation == .list)
        #expect(record.broadcast?.bundleID == "com.example.app" && record.responseWritten)
    }

    @Test func recordingOffKeepsNoRecordButCounts() throws {
        var mock = try PipelineHarness { $0.recordingCapacity = 0 }
        let recorder = Recorder(state: mock.state, logger: PipelineHarness.noLogger)
        let request = PipelineHarness.devicePush()
        let verdict = try PolicyTests.verdict(&mock, request)
        let before = mock.state.statistics.snapshot(openConnections: 0, totalConnections: 0, records: mock.state.records)
        let seq = recorder.record(
            verdict, actions: Effects.Actions(), request: request, stream: RequestStream(id: 1), context: mock.context, team: nil,
            connection: &mock.connection)
        #expect(seq == 0 && mock.state.records.lastSeq == 0)
        let after = mock.state.statistics.snapshot(openConnections: 0, totalConnections: 0, records: mock.state.records)
        #expect(after.requests == before.requests + 1)
    }
}

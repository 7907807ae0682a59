import Testing
@testable import APNSMockCore

/// One change to the valid baseline request, and the reason it must produce (`nil`: accepted).
struct ValidationRow: Sendable, CustomTestStringConvertible {
    let name: String
    let expected: Reason?
    let change: @Sendable (inout Scenario) -> Void

    init(_ name: String, _ expected: Reason?, _ change: @escaping @Sendable (inout Scenario) -> Void) {
        self.name = name
        self.expected = expected
        self.change = change
    }

    var testDescription: String { name }
}

/// Everything a validation depends on: the request, its context, the settings.
struct Scenario {
    static let token = String(repeating: "ab", count: 32)
    static let topic = "com.example.app"
    static let apnsID = "123E4567-E89B-12D3-A456-426614174000"
    static let payload = #"{"aps":{"alert":"hi"}}"#

    var request: PushRequest
    var context = ValidationContext(environment: .sandbox)
    var settings = ValidationSettings()

    /// The one valid request every row starts from.
    static func baseline() -> Scenario {
        var request = PushRequest()
        request.setHeader(name: ":method", value: "POST")
        request.setHeader(name: ":path", value: "/3/device/\(token)")
        request.setHeader(name: "apns-topic", value: topic)
        request.setHeader(name: "apns-push-type", value: "alert")
        request.setHeader(name: "apns-priority", value: "10")
        request.setHeader(name: "apns-id", value: apnsID)
        request.setHeader(name: "apns-expiration", value: "0")
        request.setHeader(name: "apns-collapse-id", value: "group-1")
        var scenario = Scenario(request: request)
        scenario.setBody(payload)
        return scenario
    }

    mutating func setBody(_ text: String) {
        setBody(Array(text.utf8))
    }

    mutating func setBody(_ bytes: [UInt8]) {
        request.body = []
        request.bodyLength = 0
        bytes.withUnsafeBytes { request.appendBody($0) }
    }

    /// An alert payload of exactly `size` bytes.
    mutating func setBody(size: Int) {
        let frame = #"{"aps":{"alert":""}}"#
        setBody(#"{"aps":{"alert":""# + String(repeating: "x", count: size - frame.utf8.count) + #""}}"#)
    }

    mutating func setToken(_ token: String) {
        request.path = "/3/device/\(token)"
    }

    func decision() -> Decision {
        Validator(settings: settings).validate(request, context: context)
    }
}

private let hex64 = String(repeating: "0123456789abcdef", count: 4)

let validationRows: [ValidationRow] = [
    ValidationRow("baseline is accepted", nil) { _ in },

    // :method
    ValidationRow("GET", .methodNotAllowed) { $0.request.method = "GET" },
    ValidationRow("lowercase post", .methodNotAllowed) { $0.request.method = "post" },
    ValidationRow("no method", .methodNotAllowed) { $0.request.method = nil },

    // :path
    ValidationRow("no path", .badPath) { $0.request.path = nil },
    ValidationRow("other path", .badPath) { $0.request.path = "/3/devices/\(Scenario.token)" },
    ValidationRow("version 4 path", .badPath) { $0.request.path = "/4/device/\(Scenario.token)" },
    ValidationRow("path with extra segment", .badPath) { $0.request.path = "/3/device/\(Scenario.token)/x" },
    ValidationRow("empty token", .missingDeviceToken) { $0.request.path = "/3/device/" },

    // device token format
    ValidationRow("odd-length token", .badDeviceToken) { $0.setToken("abc") },
    ValidationRow("non-hex token", .badDeviceToken) { $0.setToken(String(repeating: "zz", count: 32)) },
    ValidationRow("token with query", .badDeviceToken) { $0.setToken(Scenario.token + "?x=1") },
    ValidationRow("2-digit token", nil) { $0.setToken("ab") },
    ValidationRow("uppercase token", nil) { $0.setToken(Scenario.token.uppercased()) },
    ValidationRow("160-digit simulator token", nil) { $0.setToken(String(repeating: "a1", count: 80)) },
    ValidationRow("200-digit token", nil) { $0.setToken(String(repeating: "a1", count: 100)) },
    ValidationRow("202-digit token", .badDeviceToken) { $0.setToken(String(repeating: "a1", count: 101)) },
    ValidationRow("strict: 64-digit token", nil) { $0.settings.strictDeviceTokens = true },
    ValidationRow("strict: 66-digit token", .badDeviceToken) {
        $0.settings.strictDeviceTokens = true
        $0.setToken(hex64 + "ab")
    },
    ValidationRow("strict: 62-digit token", .badDeviceToken) {
        $0.settings.strictDeviceTokens = true
        $0.setToken(String(hex64.dropLast(2)))
    },

    // duplicate headers
    ValidationRow("apns-topic twice", .duplicateHeaders) { $0.request.setHeader(name: "apns-topic", value: "com.example.app") },
    ValidationRow("unknown apns- header twice", .duplicateHeaders) {
        $0.request.setHeader(name: "apns-foo", value: "1")
        $0.request.setHeader(name: "apns-foo", value: "2")
    },
    ValidationRow("other header twice is fine", nil) {
        $0.request.setHeader(name: "user-agent", value: "a")
        $0.request.setHeader(name: "user-agent", value: "b")
    },

    // apns-id
    ValidationRow("apns-id lowercase", nil) { $0.request.apnsID = Scenario.apnsID.lowercased() },
    ValidationRow("apns-id absent", nil) { $0.request.apnsID = nil },
    ValidationRow("apns-id without hyphens", .badMessageId) { $0.request.apnsID = Scenario.apnsID.filter { $0 != "-" } },
    ValidationRow("apns-id in braces", .badMessageId) { $0.request.apnsID = "{\(Scenario.apnsID)}" },
    ValidationRow("apns-id 35 characters", .badMessageId) { $0.request.apnsID = String(Scenario.apnsID.dropLast()) },
    ValidationRow("apns-id 37 characters", .badMessageId) { $0.request.apnsID = Scenario.apnsID + "0" },
    ValidationRow("apns-id non-hex", .badMessageId) { $0.request.apnsID = "G23E4567-E89B-12D3-A456-426614174000" },
    ValidationRow("apns-id hyphen misplaced", .badMessageId) { $0.request.apnsID = "123E456-7E89B-12D3-A456-426614174000" },
    ValidationRow("apns-id empty", .badMessageId) { $0.request.apnsID = "" },

    // apns-expiration
    ValidationRow("expiration in the future", nil) { $0.request.expiration = "1900000000" },
    ValidationRow("expiration Int64.max", nil) { $0.request.expiration = "9223372036854775807" },
    ValidationRow("expiration overflows", .badExpirationDate) { $0.request.expiration = "9223372036854775808" },
    ValidationRow("expiration negative", .badExpirationDate) { $0.request.expiration = "-1" },
    ValidationRow("expiration fraction", .badExpirationDate) { $0.request.expiration = "1.5" },
    ValidationRow("expiration as date", .badExpirationDate) { $0.request.expiration = "2026-01-01" },
    ValidationRow("expiration empty", .badExpirationDate) { $0.request.expiration = "" },

    // apns-priority
    ValidationRow("priority 5", nil) { $0.request.priority = "5" },
    ValidationRow("priority absent", nil) { $0.request.priority = nil },
    ValidationRow("priority 0", .badPriority) { $0.request.priority = "0" },
    ValidationRow("priority 05", .badPriority) { $0.request.priority = "05" },
    ValidationRow("priority empty", .badPriority) { $0.request.priority = "" },
    ValidationRow("priority 1 for alert", nil) { $0.request.priority = "1" },
    ValidationRow("priority 1 for complication", nil) {
        $0.request.priority = "1"
        $0.request.pushType = "complication"
        $0.request.topic = "com.example.app.complication"
    },
    ValidationRow("background priority 10", .badPriority) {
        $0.request.pushType = "background"
        $0.setBody(#"{"aps":{"content-available":1}}"#)
    },
    ValidationRow("background priority 5", nil) {
        $0.request.pushType = "background"
        $0.request.priority = "5"
        $0.setBody(#"{"aps":{"content-available":1}}"#)
    },
    ValidationRow("background priority 1", .badPriority) {
        $0.request.pushType = "background"
        $0.request.priority = "1"
        $0.setBody(#"{"aps":{"content-available":1}}"#)
    },
    ValidationRow("liveactivity priority 1", .badPriority) {
        $0.request.priority = "1"
        $0.request.pushType = "liveactivity"
        $0.request.topic = "com.example.app.push-type.liveactivity"
    },
    ValidationRow("liveactivity priority 5", nil) {
        $0.request.priority = "5"
        $0.request.pushType = "liveactivity"
        $0.request.topic = "com.example.app.push-type.liveactivity"
    },
    ValidationRow("background without priority", nil) {
        $0.request.pushType = "background"
        $0.request.priority = nil
        $0.setBody(#"{"aps":{"content-available":1}}"#)
    },

    // apns-collapse-id
    ValidationRow("collapse id 64 bytes", nil) { $0.request.collapseID = String(repeating: "c", count: 64) },
    ValidationRow("collapse id 65 bytes", .badCollapseId) { $0.request.collapseID = String(repeating: "c", count: 65) },
    ValidationRow("collapse id 32 two-byte characters", nil) { $0.request.collapseID = String(repeating: "é", count: 32) },
    ValidationRow("collapse id 33 two-byte characters", .badCollapseId) { $0.request.collapseID = String(repeating: "é", count: 33) },

    // apns-push-type
    ValidationRow("push type absent means alert", nil) { $0.request.pushType = nil },
    ValidationRow("push type unknown", .invalidPushType) { $0.request.pushType = "notification" },
    ValidationRow("push type capitalised", .invalidPushType) { $0.request.pushType = "Alert" },
    ValidationRow("push type empty", .invalidPushType) { $0.request.pushType = "" },

    // apns-topic
    ValidationRow("topic absent", .missingTopic) { $0.request.topic = nil },
    ValidationRow("topic absent, single-topic certificate", nil) {
        $0.request.topic = nil
        $0.context.certificateTopic = "com.example.app"
    },
    ValidationRow("topic empty", .badTopic) { $0.request.topic = "" },
    ValidationRow("topic with space", .badTopic) { $0.request.topic = "com.example app" },
    ValidationRow("topic with trailing newline", .badTopic) { $0.request.topic = "com.example.app\n" },
    ValidationRow("topic with empty label", .badTopic) { $0.request.topic = "com..example" },
    ValidationRow("topic with leading dot", .badTopic) { $0.request.topic = ".com.example.app" },
    ValidationRow("topic with trailing dot", .badTopic) { $0.request.topic = "com.example.app." },
    ValidationRow("topic non-ASCII", .badTopic) { $0.request.topic = "com.exämple.app" },
    ValidationRow("topic 256 bytes", .badTopic) { $0.request.topic = String(repeating: "a", count: 256) },

    // topic fits push type
    ValidationRow("voip type, bundle topic", .invalidPushType) { $0.request.pushType = "voip" },
    ValidationRow("voip type, .voip topic", nil) {
        $0.request.pushType = "voip"
        $0.request.topic = "com.example.app.voip"
    },
    ValidationRow("alert type, .voip topic", .invalidPushType) { $0.request.topic = "com.example.app.voip" },
    ValidationRow("alert type, liveactivity topic", .invalidPushType) { $0.request.topic = "com.example.app.push-type.liveactivity" },
    ValidationRow("voip type, topic is only the suffix", .invalidPushType) {
        $0.request.pushType = "voip"
        $0.request.topic = "voip"
    },
    ValidationRow("pushtotalk type, .voip topic", .invalidPushType) {
        $0.request.pushType = "pushtotalk"
        $0.request.topic = "com.example.app.voip"
    },

    // authentication slot
    ValidationRow("authentication refused", .invalidProviderToken) {
        $0.context.authenticationFailure = Rejection(.invalidProviderToken)
    },
    ValidationRow("authentication refused, but bad token first", .badDeviceToken) {
        $0.context.authenticationFailure = Rejection(.missingProviderToken)
        $0.setToken("xyz")
    },

    // topic allowed
    ValidationRow("topic of another team", .topicDisallowed) {
        $0.context.allowedTopics = .bundleIDs(["org.example.news"])
    },
    ValidationRow("voip topic of an allowed app", nil) {
        $0.context.allowedTopics = .bundleIDs(["com.example.app"])
        $0.request.pushType = "voip"
        $0.request.topic = "com.example.app.voip"
    },
    ValidationRow("certificate without the voip topic", .topicDisallowed) {
        $0.context.allowedTopics = .topics(["com.example.app"])
        $0.request.pushType = "voip"
        $0.request.topic = "com.example.app.voip"
    },

    // payload size
    ValidationRow("payload empty", .payloadEmpty) { $0.setBody([]) },
    ValidationRow("payload 4096 bytes", nil) { $0.setBody(size: 4096) },
    ValidationRow("payload 4097 bytes", .payloadTooLarge) { $0.setBody(size: 4097) },
    ValidationRow("voip payload 5120 bytes", nil) {
        $0.request.pushType = "voip"
        $0.request.topic = "com.example.app.voip"
        $0.setBody(size: 5120)
    },
    ValidationRow("voip payload 5121 bytes", .payloadTooLarge) {
        $0.request.pushType = "voip"
        $0.request.topic = "com.example.app.voip"
        $0.setBody(size: 5121)
    },
    ValidationRow("payload far over the kept bytes", .payloadTooLarge) { $0.setBody(size: 20000) },

    // strict lint
    ValidationRow("strict lint, clean payload", nil) { $0.settings.strictLint = true },
    ValidationRow("strict lint, invalid JSON", .payloadEmpty) {
        $0.settings.strictLint = true
        $0.setBody("{")
    },
    ValidationRow("strict lint, configured reason", .badTopic) {
        $0.settings.strictLint = true
        $0.settings.lintRejectionReason = .badTopic
        $0.setBody(#"{"aps":{"alert":"hi","colour":"red"}}"#)
    },
    ValidationRow("lint findings without strict lint", nil) { $0.setBody("not json") },
    // location "supports only token-based authentication": a finding, refused as Forbidden under strict lint.
    ValidationRow("location over a certificate", nil) {
        $0.request.pushType = "location"
        $0.request.topic = "com.example.app.location-query"
        $0.context.authenticatedWithCertificate = true
    },
    ValidationRow("location over a certificate, strict lint", .forbidden) {
        $0.request.pushType = "location"
        $0.request.topic = "com.example.app.location-query"
        $0.context.authenticatedWithCertificate = true
        $0.settings.strictLint = true
    },
    ValidationRow("location with a token, strict lint", nil) {
        $0.request.pushType = "location"
        $0.request.topic = "com.example.app.location-query"
        $0.settings.strictLint = true
    },

    // device registry
    ValidationRow("registered policy, unknown token", .badDeviceToken) {
        $0.context.devices = DeviceRegistry(policy: .registered)
    },
    ValidationRow("registered policy, listed token", nil) {
        $0.context.devices = DeviceRegistry(policy: .registered, entries: [DeviceEntry(token: Scenario.token)])
    },
    ValidationRow("token of the other environment", .badDeviceToken) {
        $0.context.devices = DeviceRegistry(entries: [DeviceEntry(token: Scenario.token, environment: .production)])
    },
    ValidationRow("token of this environment", nil) {
        $0.context.devices = DeviceRegistry(entries: [DeviceEntry(token: Scenario.token, environment: .sandbox)])
    },
    ValidationRow("token of another app", .deviceTokenNotForTopic) {
        $0.context.devices = DeviceRegistry(entries: [DeviceEntry(token: Scenario.token, topic: "org.example.news")])
    },
    ValidationRow("token of this app, voip topic", nil) {
        $0.context.devices = DeviceRegistry(entries: [DeviceEntry(token: Scenario.token, topic: "com.example.app")])
        $0.request.pushType = "voip"
        $0.request.topic = "com.example.app.voip"
    },
    ValidationRow("unregistered token", .unregistered) {
        $0.context.devices = DeviceRegistry(entries: [
            DeviceEntry(token: Scenario.token, unregistration: .init(timestamp: 1_767_225_600_000)),
        ])
    },
    ValidationRow("expired token", .expiredToken) {
        $0.context.devices = DeviceRegistry(entries: [
            DeviceEntry(token: Scenario.token, unregistration: .init(timestamp: 1, reason: .expiredToken)),
        ])
    },
    ValidationRow("unregistered token sent in uppercase", .unregistered) {
        $0.context.devices = DeviceRegistry(entries: [
            DeviceEntry(token: Scenario.token, unregistration: .init(timestamp: 1)),
        ])
        $0.setToken(Scenario.token.uppercased())
    },

    // order between steps
    ValidationRow("GET to a bad path", .methodNotAllowed) {
        $0.request.method = "GET"
        $0.request.path = "/"
    },
    ValidationRow("bad token and bad topic", .badDeviceToken) {
        $0.setToken("x")
        $0.request.topic = ""
    },
    ValidationRow("bad apns-id and bad priority", .badMessageId) {
        $0.request.apnsID = "x"
        $0.request.priority = "7"
    },
    ValidationRow("oversized payload to an unregistered token", .payloadTooLarge) {
        $0.setBody(size: 4097)
        $0.context.devices = DeviceRegistry(entries: [DeviceEntry(token: Scenario.token, unregistration: .init(timestamp: 1))])
    },
    ValidationRow("disallowed topic with empty payload", .topicDisallowed) {
        $0.setBody([])
        $0.context.allowedTopics = .bundleIDs([])
    },
]

@Test("each row changes one thing about the valid baseline", arguments: validationRows)
func validation(row: ValidationRow) throws {
    var scenario = Scenario.baseline()
    row.change(&scenario)
    let decision = scenario.decision()
    if let expected = row.expected {
        let rejection = try #require(decision.rejection, "expected \(expected), got \(decision)")
        #expect(rejection.reason == expected)
        #expect(rejection.status == expected.status)
        #expect(rejection.wireReason == expected.rawValue)
    } else {
        #expect(decision.acceptedPush != nil, "expected acceptance, got \(decision)")
    }
}

@Test func everyReasonTheValidatorOwnsHasARow() {
    let covered = Set(validationRows.compactMap(\.expected))
    let owned: [Reason] = [
        .methodNotAllowed, .badPath, .missingDeviceToken, .badDeviceToken, .duplicateHeaders, .badMessageId,
        .badExpirationDate, .badPriority, .missingTopic, .badTopic, .invalidPushType, .badCollapseId,
        .payloadEmpty, .payloadTooLarge, .topicDisallowed, .deviceTokenNotForTopic, .unregistered, .expiredToken,
    ]
    for reason in owned {
        #expect(covered.contains(reason), "no row for \(reason)")
    }
}

@Test func acceptedPushCarriesTheInterpretedRequest() throws {
    var scenario = Scenario.baseline()
    scenario.request.expiration = "1900000000"
    let push = try #require(scenario.decision().acceptedPush)
    #expect(push.token == Scenario.token)
    #expect(push.topic == "com.example.app")
    #expect(push.pushType == .alert)
    #expect(push.priority == 10)
    #expect(push.expiration == 1_900_000_000)
    #expect(push.collapseId == "group-1")
    #expect(push.apnsId == Scenario.apnsID)
    #expect(push.lint.isEmpty)
    #expect(push.payloadIsJSON)
}

@Test func absentHeadersGetAppleDefaults() throws {
    var scenario = Scenario.baseline()
    scenario.request.pushType = nil
    scenario.request.priority = nil
    scenario.request.apnsID = nil
    scenario.request.expiration = nil
    scenario.request.collapseID = nil
    let push = try #require(scenario.decision().acceptedPush)
    #expect(push.pushType == .alert)
    #expect(push.priority == 10)
    #expect(push.apnsId == nil)
    #expect(push.expiration == nil)
    #expect(push.collapseId == nil)

    var background = Scenario.baseline()
    background.request.pushType = "background"
    background.request.priority = nil
    background.setBody(#"{"aps":{"content-available":1}}"#)
    #expect(try #require(background.decision().acceptedPush).priority == 5)
}

@Test func certificateTopicStandsInForAMissingHeader() throws {
    var scenario = Scenario.baseline()
    scenario.request.topic = nil
    scenario.context.certificateTopic = "com.example.app"
    #expect(try #require(scenario.decision().acceptedPush).topic == "com.example.app")
}

@Test func unregisteredCarriesTheTimestampInMilliseconds() throws {
    var scenario = Scenario.baseline()
    scenario.context.devices = DeviceRegistry(entries: [
        DeviceEntry(token: Scenario.token, unregistration: .init(timestamp: 1_767_225_600_000)),
    ])
    let rejection = try #require(scenario.decision().rejection)
    #expect(rejection.status == 410)
    #expect(rejection.timestamp == 1_767_225_600_000)
    #expect(String(decoding: ErrorBody.bytes(for: rejection), as: UTF8.self)
        == #"{"reason":"Unregistered","timestamp":1767225600000}"#)
}

@Test func authenticationRefusalUsesTheConfiguredSpelling() throws {
    var scenario = Scenario.baseline()
    scenario.context.authenticationFailure = Rejection(.badEnvironmentKeyIdInToken)
    #expect(try #require(scenario.decision().rejection).wireReason == "BadEnvironmentKeyIdInToken")
    scenario.settings.environmentKeyReasonSpelling = .observed
    let rejection = try #require(scenario.decision().rejection)
    #expect(rejection.reason == .badEnvironmentKeyIdInToken)
    #expect(rejection.status == 403)
    #expect(rejection.wireReason == "BadEnvironmentKeyInToken")
}

@Test func lintIsAttachedToAcceptedPushesAndAvailableForRejectedOnes() throws {
    var scenario = Scenario.baseline()
    scenario.setBody(#"{"aps":{"alert":"hi","colour":"red"}}"#)
    let push = try #require(scenario.decision().acceptedPush)
    #expect(push.lint.map(\.code) == [.unknownAPSKey])

    scenario.request.method = "GET"
    #expect(scenario.decision().rejection?.reason == .methodNotAllowed)
    #expect(Validator().lint(scenario.request).map(\.code) == [.unknownAPSKey])

    scenario.setBody("nope")
    #expect(Validator().lint(scenario.request).map(\.code) == [.invalidJSON])
    scenario.setBody(size: 30000)
    #expect(Validator().lint(scenario.request).isEmpty, "a truncated body is not inspected")
    scenario.setBody([])
    #expect(Validator().lint(scenario.request).isEmpty)
}

@Test("every push type is accepted with its own topic suffix", arguments: PushType.allCases)
func pushTypeWithItsTopic(type: PushType) throws {
    var scenario = Scenario.baseline()
    scenario.request.pushType = type.rawValue
    scenario.request.priority = String(type.allowedPriorities[0])
    scenario.request.topic = type.topicIsBundleBased
        ? "com.example.app" + type.topicSuffix
        : "com.apple.mgmt.External.3c5e0d6a-0b4f-4f8e-9a8c-1d2e3f4a5b6c"
    let push = try #require(scenario.decision().acceptedPush, "\(scenario.decision())")
    #expect(push.pushType == type)
}

@Test func validationStepsRunInTheDocumentedOrder() {
    #expect(ValidationStep.allCases == [
        .method, .path, .deviceTokenFormat, .duplicateHeaders, .messageID, .expiration, .priorityValue,
        .collapseID, .pushType, .topic, .topicFitsPushType, .priorityForPushType, .authentication,
        .topicAllowed, .payloadSize, .strictLint, .deviceRegistry, .liveActivityChannel,
    ])
    #expect(ValidationStep.authentication.reasons.contains(.missingProviderToken))
}

/// A connection's memo must never change a decision: every row, validated after the baseline and
/// after itself on the same memo, decides exactly as a fresh validation does.
@Test("memoised validation decides as fresh validation", arguments: validationRows)
func memoisedValidation(row: ValidationRow) {
    var scenario = Scenario.baseline()
    row.change(&scenario)
    let fresh = scenario.decision()
    let baseline = Scenario.baseline()
    let validator = Validator(settings: scenario.settings)
    var memo = ValidationMemo()
    _ = validator.validate(baseline.request, context: baseline.context, memo: &memo)
    #expect(validator.validate(scenario.request, context: scenario.context, memo: &memo) == fresh)
    #expect(validator.validate(scenario.request, context: scenario.context, memo: &memo) == fresh)
    _ = validator.validate(baseline.request, context: baseline.context, memo: &memo)
    #expect(validator.validate(scenario.request, context: scenario.context, memo: &memo) == fresh)
}

/// A repeat key vouches for the headers the engine cached, never for `:path` or `apns-id`: a
/// request carrying the previous request's key with another token or message id is still judged
/// on them.
@Test func repeatKeyDoesNotCoverPathOrMessageID() {
    var baseline = Scenario.baseline()
    baseline.request.repeatKey = RepeatKey(generation: 7, fields: 0b1011)
    var badToken = baseline
    badToken.request.path = "/3/device/zz"
    var badID = baseline
    badID.request.apnsID = "not-a-uuid"
    let validator = Validator(settings: baseline.settings)
    var memo = ValidationMemo()
    #expect(validator.validate(baseline.request, context: baseline.context, memo: &memo).acceptedPush != nil)
    #expect(validator.validate(badToken.request, context: badToken.context, memo: &memo) == .rejected(Rejection(.badDeviceToken)))
    #expect(validator.validate(badID.request, context: badID.context, memo: &memo) == .rejected(Rejection(.badMessageId)))
    #expect(validator.validate(baseline.request, context: baseline.context, memo: &memo).acceptedPush != nil)
}

/// A server keeps one context per connection and updates it in place for every request: the
/// update must set every field the initialiser sets (a new field fails the count below until
/// `update` sets it too).
@Test func contextUpdateSetsEveryField() {
    var context = ValidationContext(
        environment: .production, allowedTopics: .topics(["old.topic"]), certificateTopic: "old.topic",
        authenticationFailure: Rejection(.invalidProviderToken), devices: DeviceRegistry(policy: .registered))
    context.update(
        environment: .sandbox, allowedTopics: .bundleIDs(["com.example.app"]), certificateTopic: nil,
        authenticationFailure: nil, devices: DeviceRegistry(entries: [DeviceEntry(token: Scenario.token)]),
        authenticatedWithCertificate: true)
    #expect(context.environment == .sandbox)
    #expect(context.allowedTopics == .bundleIDs(["com.example.app"]))
    #expect(context.certificateTopic == nil)
    #expect(context.authenticationFailure == nil)
    #expect(context.devices.policy == .open && !context.devices.isEmpty)
    #expect(context.authenticatedWithCertificate)
    // `channels` (the seventh) is set on its own, only when the registry changed.
    #expect(Mirror(reflecting: context).children.count == 7)
}

/// A Live Activity naming a channel in `aps.input-push-channel`: the channel must exist for the
/// app in the request's environment; a lint finding, a rejection under strict lint, and only after
/// the device registry had its say.
@Test func liveActivityChannelStepNeedsTheChannel() throws {
    let channelID = "dHN0LTEyMzQ1Njc4OTBhYmNkZWY="
    var scenario = Scenario.baseline()
    scenario.request.pushType = "liveactivity"
    scenario.request.topic = "com.example.app.push-type.liveactivity"
    scenario.request.collapseID = nil
    scenario.setBody(#"{"aps":{"event":"update","content-state":{},"timestamp":1,"input-push-channel":"\#(channelID)"}}"#)
    let unknown = try #require(scenario.decision().acceptedPush)
    #expect(unknown.lint.map(\.code) == [.liveActivityUnknownChannel])

    scenario.context.channels = ChannelRegistry([
        BroadcastChannel(bundleID: "com.example.app", environment: .sandbox, id: channelID, storagePolicy: .noMessageStored),
    ])
    #expect(try #require(scenario.decision().acceptedPush).lint.isEmpty)
    scenario.context.environment = .production
    scenario.settings.strictLint = true
    #expect(scenario.decision().rejection?.reason == scenario.settings.lintRejectionReason)
    scenario.context.devices = DeviceRegistry(policy: .registered)
    #expect(scenario.decision().rejection?.reason == .badDeviceToken)
}

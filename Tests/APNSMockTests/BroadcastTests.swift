import APNSMock
import APNSMockCore
import APNSMockTesting
import Foundation
import Testing

/// Broadcast push end to end over TLS and HTTP/2 with curl: channel management on its own
/// listeners, broadcasts on the APNs listener, every reason of the broadcast table, the records and
/// the admin API (docs/broadcast.md).
@Suite("Broadcast push", .timeLimit(.minutes(3)))
struct BroadcastTests {
    static let app = "com.example.app"

    static func manage(
        _ mock: RunningMock, _ method: String, path: String = "/1/apps/\(app)/channels",
        environment: APNSEnvironment = .sandbox, headers: [String: String] = [:], body: Data? = nil,
        authorization: String? = Curl.demoAuthorization, extra: [String] = []
    ) async throws -> CurlResponse {
        try await Curl.send(
            url: "https://localhost:\(mock.channelManagementPort(environment))\(path)", caPath: mock.caPath,
            method: method, headers: headers, authorization: authorization, body: body, extra: extra)
    }

    static func create(_ mock: RunningMock, environment: APNSEnvironment = .sandbox, policy: Int = 1) async throws -> String {
        let response = try await manage(
            mock, "POST", environment: environment,
            body: Data(#"{"message-storage-policy":\#(policy),"push-type":"LiveActivity"}"#.utf8))
        #expect(response.status == 201)
        return try #require(response.headers["apns-channel-id"])
    }

    static func broadcast(
        _ mock: RunningMock, channel: String?, headers: [String: String] = [:], path: String = "/4/broadcasts/apps/\(app)",
        body: Data? = Broadcasts.update, authorization: String? = Curl.demoAuthorization, host: String = "localhost"
    ) async throws -> CurlResponse {
        var all = ["apns-push-type": "liveactivity", "apns-expiration": "0", "apns-priority": "10"]
        if let channel { all["apns-channel-id"] = channel }
        for (name, value) in headers { all[name] = value }
        let extra = host == "localhost" ? [] : ["--resolve", "\(host):\(mock.apnsPort):127.0.0.1"]
        return try await Curl.send(
            url: "https://\(host):\(mock.apnsPort)\(path)", caPath: mock.caPath, headers: all.filter { !$0.value.isEmpty },
            authorization: authorization, body: body, extra: extra)
    }

    // MARK: Lifecycle

    @Test func channelLifecycleAndABroadcastOnIt() async throws {
        try await MockHarness.withRunningMock { mock in
            let created = try await Self.manage(mock, "POST", body: Broadcasts.createBody)
            #expect(created.status == 201)
            #expect(created.body.isEmpty)
            #expect(Broadcasts.isLowercaseUUID(created.headers["apns-request-id"]))
            let channel = try #require(created.headers["apns-channel-id"])
            #expect(ChannelID.isWellFormed(channel))

            let read = try await Self.manage(mock, "GET", headers: ["apns-channel-id": channel])
            #expect(read.status == 200)
            #expect(read.headers["content-type"] == "application/json")
            let policy = try JSONDecoder().decode([String: RecordJSON].self, from: read.body)
            #expect(policy == ["message-storage-policy": .integer(1), "push-type": .string("LiveActivity")])

            let list = try await Self.manage(mock, "GET", path: "/1/apps/\(Self.app)/all-channels")
            #expect(list.status == 200)
            #expect(try JSONDecoder().decode([String: [String]].self, from: list.body) == ["channels": [channel]])

            let sent = try await Self.broadcast(mock, channel: channel, headers: ["apns-expiration": "1900000000"])
            #expect(sent.status == 200)
            #expect(Broadcasts.isLowercaseUUID(sent.headers["apns-request-id"]))
            #expect(Broadcasts.isLowercaseUUID(sent.headers["apns-unique-id"]))
            #expect(sent.body.isEmpty)

            let deleted = try await Self.manage(mock, "DELETE", headers: ["apns-channel-id": channel])
            #expect(deleted.status == 204)
            let gone = try await Self.manage(mock, "GET", headers: ["apns-channel-id": channel])
            #expect(gone.status == 400)
            #expect(gone.reason == "ChannelNotRegistered")
            #expect(Broadcasts.isLowercaseUUID(gone.headers["apns-request-id"]))
            let late = try await Self.broadcast(mock, channel: channel)
            #expect(late.reason == "ChannelNotRegistered")

            // Every request is recorded, by kind, with its channel and operation.
            let channelRecords = try await mock.admin.notifications(RecordQuery(outcome: .all, kind: .channel)).notifications
            #expect(channelRecords.map(\.operation) == ["create", "read", "list", "delete", "read"])
            #expect(channelRecords.map(\.status) == [201, 200, 200, 204, 400])
            #expect(channelRecords.first?.channelId == channel)
            #expect(channelRecords.allSatisfy { $0.lint.isEmpty })  // a create body is not a payload
            #expect(channelRecords.first?.requestId == created.headers["apns-request-id"])
            let broadcasts = try await mock.admin.notifications(RecordQuery(kind: .broadcast, channelId: channel)).notifications
            let record = try #require(broadcasts.first)
            #expect(broadcasts.count == 1)
            #expect(record.kind == "broadcast")
            #expect(record.requestId == sent.headers["apns-request-id"])
            #expect(record.uniqueId == sent.headers["apns-unique-id"])
            #expect(record.topic == Self.app)
            #expect(record.pushType == "liveactivity")
            #expect(record.expiration == 1_900_000_000)
            #expect(record.payload?["aps"]?["event"] == .string("update"))
            #expect(record.token == nil)
            let (waited, timedOut) = try await mock.admin.wait(RecordQuery(kind: .broadcast), count: 1, timeout: 5)
            #expect(!timedOut && waited.notifications.count == 1)
        }
    }

    @Test func requestIDIsEchoedAndAMalformedOneRefused() async throws {
        try await MockHarness.withRunningMock { mock in
            let id = "6f1e0b47-8d3c-4c1a-9a4f-2b7d0e6c5a31"
            let echoed = try await Self.manage(mock, "POST", headers: ["apns-request-id": id], body: Broadcasts.createBody)
            #expect(echoed.headers["apns-request-id"] == id)
            let bad = try await Self.manage(mock, "POST", headers: ["apns-request-id": "not-a-uuid"], body: Broadcasts.createBody)
            #expect(bad.status == 400)
            #expect(bad.reason == "BadMessageId")
            #expect(Broadcasts.isLowercaseUUID(bad.headers["apns-request-id"]))
        }
    }

    /// Channels are per environment: the production listener does not see a sandbox channel.
    @Test func environmentsKeepTheirOwnChannels() async throws {
        try await MockHarness.withRunningMock { mock in
            let sandbox = try await Self.create(mock)
            let inProduction = try await Self.manage(mock, "GET", environment: .production, headers: ["apns-channel-id": sandbox])
            #expect(inProduction.reason == "ChannelNotRegistered")
            let production = try await Self.create(mock, environment: .production)
            let list = try await Self.manage(mock, "GET", path: "/1/apps/\(Self.app)/all-channels", environment: .production)
            #expect(try JSONDecoder().decode([String: [String]].self, from: list.body) == ["channels": [production]])
            // A broadcast to the production host finds the production channel only.
            let sent = try await Self.broadcast(mock, channel: production, host: "api.push.apple.com")
            #expect(sent.status == 200)
            let wrong = try await Self.broadcast(mock, channel: sandbox, host: "api.push.apple.com")
            #expect(wrong.reason == "ChannelNotRegistered")
            let sandboxHost = try await Self.broadcast(mock, channel: sandbox, host: "api-broadcast.sandbox.push.apple.com")
            #expect(sandboxHost.status == 200)
        }
    }

    // MARK: Every reason of the table

    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        var status: Int
        var reason: String?
        var testDescription: String { "\(name) → \(status) \(reason ?? "")" }
    }

    /// Channel-management requests, each one valid request with one thing changed.
    struct ManagementCase: Sendable, CustomTestStringConvertible {
        var name: String
        var method = "POST"
        var path = "/1/apps/\(BroadcastTests.app)/channels"
        var headers: [String: String] = [:]
        var body: String? = #"{"message-storage-policy":1,"push-type":"LiveActivity"}"#
        var authorization: String?? = .some(Curl.demoAuthorization)
        var status: Int
        var reason: String?
        var testDescription: String { "\(name) → \(status) \(reason ?? "")" }
    }

    static let managementCases: [ManagementCase] = [
        ManagementCase(name: "create", status: 201),
        ManagementCase(name: "create, push type as node-apn spells it", body: #"{"push-type":"liveactivity","message-storage-policy":0}"#, status: 201),
        ManagementCase(name: "unknown path", path: "/1/apps/\(app)/channel", status: 404, reason: "BadPath"),
        ManagementCase(name: "path with a trailing segment", path: "/1/apps/\(app)/channels/x", status: 404, reason: "BadPath"),
        ManagementCase(name: "PUT", method: "PUT", status: 405, reason: "MethodNotAllowed"),
        ManagementCase(name: "POST all-channels", path: "/1/apps/\(app)/all-channels", status: 405, reason: "MethodNotAllowed"),
        ManagementCase(name: "bundle with a push-type suffix", path: "/1/apps/\(app).push-type.liveactivity/channels", status: 400, reason: "TopicDisallowed"),
        ManagementCase(name: "no credentials", authorization: .some(nil), status: 403, reason: "MissingProviderToken"),
        ManagementCase(name: "bad token", authorization: "bearer x.y.z", status: 403, reason: "InvalidProviderToken"),
        ManagementCase(name: "another team's app", path: "/1/apps/com.other.app/channels", status: 403, reason: "TopicMismatch"),
        ManagementCase(name: "empty body", body: nil, status: 400, reason: "PayloadEmpty"),
        ManagementCase(name: "unparseable body", body: #"{"message-storage-policy":"#, status: 400, reason: "BadRequestPayload"),
        ManagementCase(name: "body not an object", body: #"[1]"#, status: 400, reason: "BadRequestPayload"),
        ManagementCase(name: "unknown attribute", body: #"{"message-storage-policy":1,"push-type":"LiveActivity","colour":1}"#, status: 400, reason: "BadRequestParams"),
        ManagementCase(name: "repeated attribute", body: #"{"message-storage-policy":1,"message-storage-policy":0,"push-type":"LiveActivity"}"#, status: 400, reason: "BadRequestParams"),
        ManagementCase(name: "policy 2", body: #"{"message-storage-policy":2,"push-type":"LiveActivity"}"#, status: 400, reason: "BadRequestParams"),
        ManagementCase(name: "policy missing", body: #"{"push-type":"LiveActivity"}"#, status: 400, reason: "BadRequestParams"),
        ManagementCase(name: "push type missing", body: #"{"message-storage-policy":1}"#, status: 400, reason: "MissingPushType"),
        ManagementCase(name: "push type alert", body: #"{"message-storage-policy":1,"push-type":"alert"}"#, status: 400, reason: "InvalidPushType"),
        ManagementCase(name: "body too large", body: #"{"message-storage-policy":1,"push-type":"LiveActivity","x":""# + String(repeating: "a", count: 5000) + #""}"#, status: 413, reason: "PayloadTooLarge"),
        ManagementCase(name: "read without channel", method: "GET", body: nil, status: 400, reason: "MissingChannelId"),
        ManagementCase(name: "read a malformed channel", method: "GET", headers: ["apns-channel-id": "not base64!"], body: nil, status: 400, reason: "BadChannelId"),
        ManagementCase(name: "read a huge channel ID", method: "GET", headers: ["apns-channel-id": String(repeating: "A", count: 4000)], body: nil, status: 400, reason: "BadChannelId"),
        ManagementCase(name: "read an unknown channel", method: "GET", headers: ["apns-channel-id": "dHN0LXNyY2gtY2hubA=="], body: nil, status: 400, reason: "ChannelNotRegistered"),
        ManagementCase(name: "delete without channel", method: "DELETE", body: nil, status: 400, reason: "MissingChannelId"),
        ManagementCase(name: "delete an unknown channel", method: "DELETE", headers: ["apns-channel-id": "dHN0LXNyY2gtY2hubA=="], body: nil, status: 400, reason: "ChannelNotRegistered"),
        ManagementCase(name: "list", method: "GET", path: "/1/apps/\(app)/all-channels", body: nil, status: 200),
        ManagementCase(name: "list of a disabled app", method: "GET", path: "/1/apps/com.example.disabled/all-channels", body: nil, status: 400, reason: "FeatureNotEnabled"),
    ]

    /// The demo team owns com.example.app and com.example.disabled (broadcast off for the latter).
    static func configure(_ configuration: inout ServerConfiguration) {
        if var team = try? MockHarness.demoTeam() {
            team.apps = [app, "com.example.disabled"]
            configuration.teams = [team]
        }
        configuration.allowedTopics = .bundleIDs([app, "com.example.disabled"])
        configuration.broadcast.disabledApps = ["com.example.disabled"]
    }

    @Test(arguments: managementCases)
    func channelManagementReasons(_ testCase: ManagementCase) async throws {
        try await MockHarness.withRunningMock(configure: Self.configure) { mock in
            let response = try await Self.manage(
                mock, testCase.method, path: testCase.path, headers: testCase.headers, body: testCase.body.map { Data($0.utf8) },
                authorization: testCase.authorization ?? nil)
            #expect(response.status == testCase.status)
            #expect(response.reason == testCase.reason)
            #expect(Broadcasts.isLowercaseUUID(response.headers["apns-request-id"]))
            if testCase.reason != nil {
                #expect(response.headers["content-type"] == "application/json")
            }
            let record = try #require(try await mock.admin.notifications(RecordQuery(outcome: .all, kind: .channel)).notifications.last)
            #expect(record.status == testCase.status)
            #expect(record.reason == testCase.reason)
        }
    }

    /// Broadcasts, each one valid broadcast with one header, the path or the body changed.
    struct BroadcastCase: Sendable, CustomTestStringConvertible {
        var name: String
        var headers: [String: String] = [:]
        var path = "/4/broadcasts/apps/\(BroadcastTests.app)"
        var body: String? = #"{"aps":{"event":"update","timestamp":1700000000,"content-state":{}}}"#
        var channel: Channel = .existing
        var authorization: String?? = .some(Curl.demoAuthorization)
        var status: Int
        var reason: String?
        var testDescription: String { "\(name) → \(status) \(reason ?? "")" }

        enum Channel: Sendable { case existing, noStorage, none, literal(String) }
    }

    static let broadcastCases: [BroadcastCase] = [
        BroadcastCase(name: "valid", status: 200),
        BroadcastCase(name: "push type LiveActivity", headers: ["apns-push-type": "LiveActivity"], status: 200),
        BroadcastCase(name: "priority 5", headers: ["apns-priority": "5"], status: 200),
        BroadcastCase(name: "priority 1", headers: ["apns-priority": "1"], status: 200),
        BroadcastCase(name: "no priority (default 10)", headers: ["apns-priority": ""], status: 200),
        BroadcastCase(name: "stored channel, expiration in the future", headers: ["apns-expiration": "1900000000"], status: 200),
        BroadcastCase(name: "a path under /4/broadcasts that is not Apple's", path: "/4/broadcasts/apps", status: 404, reason: "BadPath"),
        BroadcastCase(name: "bundle with a push-type suffix", path: "/4/broadcasts/apps/\(app).push-type.liveactivity", status: 400, reason: "TopicDisallowed"),
        BroadcastCase(name: "bad apns-id", headers: ["apns-id": "nope"], status: 400, reason: "BadMessageId"),
        BroadcastCase(name: "bad apns-request-id", headers: ["apns-request-id": "nope"], status: 400, reason: "BadMessageId"),
        BroadcastCase(name: "no credentials", authorization: .some(nil), status: 403, reason: "MissingProviderToken"),
        BroadcastCase(name: "another team's app", path: "/4/broadcasts/apps/com.other.app", status: 403, reason: "TopicMismatch"),
        BroadcastCase(name: "disabled app", path: "/4/broadcasts/apps/com.example.disabled", status: 400, reason: "FeatureNotEnabled"),
        BroadcastCase(name: "no channel", channel: .none, status: 400, reason: "MissingChannelId"),
        BroadcastCase(name: "channel not base64", channel: .literal("%%%%"), status: 400, reason: "BadChannelId"),
        BroadcastCase(name: "channel too long", channel: .literal(String(repeating: "QUFB", count: 100)), status: 400, reason: "BadChannelId"),
        BroadcastCase(name: "no push type", headers: ["apns-push-type": ""], status: 400, reason: "MissingPushType"),
        BroadcastCase(name: "push type alert", headers: ["apns-push-type": "alert"], status: 400, reason: "InvalidPushType"),
        BroadcastCase(name: "no expiration", headers: ["apns-expiration": ""], status: 400, reason: "BadExpirationDate"),
        BroadcastCase(name: "expiration not a number", headers: ["apns-expiration": "tomorrow"], status: 400, reason: "BadExpirationDate"),
        BroadcastCase(name: "priority 7", headers: ["apns-priority": "7"], status: 400, reason: "BadPriority"),
        BroadcastCase(name: "unknown channel", channel: .literal("dHN0LXNyY2gtY2hubA=="), status: 400, reason: "ChannelNotRegistered"),
        BroadcastCase(name: "no-storage channel, non-zero expiration", headers: ["apns-expiration": "1900000000"], channel: .noStorage, status: 400, reason: "BadExpirationDate"),
        BroadcastCase(name: "no-storage channel, expiration 0", channel: .noStorage, status: 200),
        BroadcastCase(name: "empty payload", body: nil, status: 400, reason: "PayloadEmpty"),
        BroadcastCase(name: "5120 bytes", body: payload(ofSize: 5120), status: 200),
        BroadcastCase(name: "5121 bytes", body: payload(ofSize: 5121), status: 413, reason: "PayloadTooLarge"),
        BroadcastCase(name: "unparseable payload (lint only)", body: "{", status: 200),
    ]

    /// A valid update payload of exactly `size` bytes.
    static func payload(ofSize size: Int) -> String {
        let head = #"{"aps":{"event":"update","timestamp":1,"content-state":{"x":""#, tail = #""}}}"#
        return head + String(repeating: "a", count: size - head.utf8.count - tail.utf8.count) + tail
    }

    @Test(arguments: broadcastCases)
    func broadcastReasons(_ testCase: BroadcastCase) async throws {
        try await MockHarness.withRunningMock(configure: Self.configure) { mock in
            let channel: String?
            switch testCase.channel {
            case .existing: channel = try await Self.create(mock)
            case .noStorage: channel = try await Self.create(mock, policy: 0)
            case .none: channel = nil
            case .literal(let value): channel = value
            }
            let response = try await Self.broadcast(
                mock, channel: channel, headers: testCase.headers, path: testCase.path,
                body: testCase.body.map { Data($0.utf8) }, authorization: testCase.authorization ?? nil)
            #expect(response.status == testCase.status)
            #expect(response.reason == testCase.reason)
            #expect(Broadcasts.isLowercaseUUID(response.headers["apns-request-id"]))
            #expect((response.headers["apns-unique-id"] != nil) == (testCase.status == 200))
        }
    }

    // MARK: Limits, policies, payload rules

    @Test func channelLimitIsPerAppAndEnvironment() async throws {
        try await MockHarness.withRunningMock(configure: { $0.broadcast.channelLimit = 2 }) { mock in
            _ = try await Self.create(mock)
            _ = try await Self.create(mock)
            let third = try await Self.manage(mock, "POST", body: Broadcasts.createBody)
            #expect(third.status == 400)
            #expect(third.reason == "CannotCreateChannelConfig")
            _ = try await Self.create(mock, environment: .production)
            // Deleting one makes room; the new channel gets a new ID, never a deleted one.
            let list = try await Self.manage(mock, "GET", path: "/1/apps/\(Self.app)/all-channels")
            let ids = try JSONDecoder().decode([String: [String]].self, from: list.body)["channels"] ?? []
            let deleted = try #require(ids.first)
            #expect(try await Self.manage(mock, "DELETE", headers: ["apns-channel-id": deleted]).status == 204)
            let again = try await Self.create(mock)
            #expect(!ids.contains(again))
        }
    }

    @Test func liveActivityRulesAreFindingsOnBroadcasts() async throws {
        try await MockHarness.withRunningMock { mock in
            let channel = try await Self.create(mock)
            let start = Data(#"{"aps":{"event":"start","timestamp":1,"content-state":{},"attributes-type":"A","attributes":{},"alert":"a"}}"#.utf8)
            #expect(try await Self.broadcast(mock, channel: channel, body: start).status == 200)
            let record = try #require(try await mock.admin.notifications(RecordQuery(kind: .broadcast)).notifications.first)
            #expect(record.lint.map(\.code) == ["broadcast-starts-liveactivity"])
        }
        try await MockHarness.withRunningMock(configure: { $0.validation.strictLint = true }) { mock in
            let channel = try await Self.create(mock)
            let noTimestamp = Data(#"{"aps":{"event":"update","content-state":{}}}"#.utf8)
            let response = try await Self.broadcast(mock, channel: channel, body: noTimestamp)
            #expect(response.status == 400)
            #expect(response.reason == "PayloadEmpty")
        }
    }

    /// A device push that starts a Live Activity on a channel names a channel that must exist.
    @Test func inputPushChannelMustExist() async throws {
        try await MockHarness.withRunningMock { mock in
            let channel = try await Self.create(mock)
            func start(_ id: String) -> Data {
                Data(#"{"aps":{"event":"start","timestamp":1,"content-state":{},"attributes-type":"A","attributes":{},"alert":"a","input-push-channel":"\#(id)"}}"#.utf8)
            }
            let token = String(repeating: "ab", count: 32)
            for id in [channel, "dHN0LXNyY2gtY2hubA=="] {
                let response = try await Curl.send(
                    url: "\(mock.baseURL)/3/device/\(token)", caPath: mock.caPath,
                    headers: ["apns-topic": "\(Self.app).push-type.liveactivity", "apns-push-type": "liveactivity"],
                    body: start(id))
                #expect(response.status == 200)
            }
            let records = try await mock.admin.notifications(RecordQuery(kind: .device)).notifications
            #expect(records.map { $0.lint.map(\.code) } == [[], ["liveactivity-unknown-channel"]])
        }
    }

    @Test func certificateAuthWorksForChannelsAndBroadcasts() async throws {
        try await MockHarness.withRunningMock { mock in
            let paths = mock.certificates.clientCertificatePaths(for: Self.app)
            let certificate = ["--cert", paths.certificate, "--key", paths.key]
            let created = try await Self.manage(mock, "POST", body: Broadcasts.createBody, authorization: nil, extra: certificate)
            #expect(created.status == 201)
            let channel = try #require(created.headers["apns-channel-id"])
            let other = try await Self.manage(
                mock, "POST", path: "/1/apps/com.other.app/channels", body: Broadcasts.createBody, authorization: nil, extra: certificate)
            #expect(other.reason == "TopicMismatch")
            let sent = try await Curl.send(
                url: "\(mock.baseURL)/4/broadcasts/apps/\(Self.app)", caPath: mock.caPath,
                headers: ["apns-channel-id": channel, "apns-push-type": "liveactivity", "apns-expiration": "0"],
                authorization: nil, body: Broadcasts.update, extra: certificate)
            #expect(sent.status == 200)
            let record = try #require(try await mock.admin.notifications(RecordQuery(kind: .broadcast)).notifications.first)
            #expect(record.auth.method == .certificate)
        }
    }

    @Test func faultRulesMatchKindAndChannel() async throws {
        try await MockHarness.withRunningMock { mock in
            let channel = try await Self.create(mock)
            let other = try await Self.create(mock)
            try await mock.admin.addFault(
                json: #"{"match":{"kind":"broadcast","channelId":"\#(channel)"},"respond":{"reason":"TooManyRequests"}}"#
            ).expect([201])
            #expect(try await Self.broadcast(mock, channel: channel).reason == "TooManyRequests")
            #expect(try await Self.broadcast(mock, channel: other).status == 200)
            // A fault on channel management answers instead of creating the channel.
            try await mock.admin.addFault(json: #"{"match":{"kind":"channel"},"respond":{"reason":"ServiceUnavailable"},"times":1}"#)
                .expect([201])
            let refused = try await Self.manage(mock, "POST", body: Broadcasts.createBody)
            #expect(refused.status == 503)
            let list = try await Self.manage(mock, "GET", path: "/1/apps/\(Self.app)/all-channels")
            #expect(try JSONDecoder().decode([String: [String]].self, from: list.body)["channels"]?.count == 2)
            let record = try #require(try await mock.admin.notifications(RecordQuery(outcome: .rejected, kind: .broadcast)).notifications.first)
            #expect(record.injected)
        }
    }

    // MARK: Admin API and configuration

    @Test func channelsThroughTheAdminAPIAndReset() async throws {
        let seeded = "c2VlZGVkLWNoYW5uZWw="
        try await MockHarness.withRunningMock(configure: {
            $0.broadcast.channels = [
                BroadcastChannel(bundleID: Self.app, environment: .sandbox, id: seeded, storagePolicy: .noMessageStored)
            ]
        }) { mock in
            #expect(try await Self.broadcast(mock, channel: seeded).status == 200)
            let added = try await mock.admin.request(
                "POST", "/v1/channels", body: Data(#"{"bundleId":"com.example.app","environment":"production","messageStoragePolicy":0}"#.utf8))
            #expect(added.status == 201)
            let view = try added.decode(ChannelView.self, expecting: [201])
            #expect(view.environment == "production" && view.messageStoragePolicy == 0)
            let withSlash = "AB/+CD=="
            let explicit = try await mock.admin.request(
                "POST", "/v1/channels", body: Data(#"{"bundleId":"com.example.app","channelId":"\#(withSlash)"}"#.utf8))
            #expect(explicit.status == 201)
            let duplicate = try await mock.admin.request(
                "POST", "/v1/channels", body: Data(#"{"bundleId":"com.example.app","channelId":"\#(withSlash)"}"#.utf8))
            #expect(duplicate.status == 409)
            let list = try await mock.admin.request("GET", "/v1/channels", query: [("environment", "sandbox")]).decode(ChannelList.self)
            #expect(Set(list.channels.map(\.channelId)) == [seeded, withSlash])

            for (body, field) in [
                (#"{"bundleId":"com.unknown.app"}"#, "bundleId"), (#"{"bundleId":"com.example.app","channelId":"!!"}"#, "channelId"),
                (#"{"bundleId":"com.example.app","messageStoragePolicy":3}"#, "messageStoragePolicy"),
                (#"{"bundleId":"com.example.app","environment":"staging"}"#, "environment"), (#"{"colour":1}"#, "colour"),
            ] {
                let response = try await mock.admin.request("POST", "/v1/channels", body: Data(body.utf8))
                #expect(response.status == 400)
                #expect(response.error?.hasPrefix(field) == true, "\(response.error ?? "")")
            }
            #expect(try await mock.admin.request("GET", "/v1/channels", query: [("environment", "staging")]).status == 400)

            let encoded = withSlash.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? withSlash
            #expect(try await mock.admin.request("DELETE", "/v1/channels/\(encoded)").status == 204)
            #expect(try await mock.admin.request("DELETE", "/v1/channels/\(encoded)").status == 404)

            try await mock.admin.reset()
            let restored = try await mock.admin.request("GET", "/v1/channels").decode(ChannelList.self)
            #expect(restored.channels.map(\.channelId) == [seeded])
        }
    }

    @Test func broadcastConfigurationIsCheckedWithFieldNames() throws {
        let cases: [(String, String)] = [
            ("broadcast: { sandboxPort: 2197 }", "broadcast.sandboxPort"),
            ("broadcast: { sandboxPort: 4000, productionPort: 4000 }", "broadcast.productionPort"),
            ("broadcast: { channelLimit: 2000000 }", "broadcast.channelLimit"),
            ("broadcast: { channels: [ { bundleId: com.example.app, channelId: 'no!' } ] }", "broadcast.channels[0].channelId"),
            ("broadcast: { channels: [ { bundleId: com.nobody.app, channelId: 'YWJj' } ] }", "broadcast.channels[0].bundleId"),
            ("broadcast: { channels: [ { bundleId: com.example.app, channelId: 'YWJj' }, { bundleId: com.example.app, channelId: 'YWJj' } ] }", "broadcast.channels[1].channelId"),
            ("broadcast: { colour: red }", "broadcast.colour"),
        ]
        for (yaml, field) in cases {
            do {
                _ = try Configuration.parse(yaml: yaml, file: "test.yaml")
                Issue.record("\(yaml) was accepted")
            } catch {
                #expect(error.description.contains(field), "\(error.description)")
            }
        }
        let parsed = try Configuration.parse(
            yaml: "broadcast: { sandboxPort: 0, productionPort: 0, channelLimit: 5, disabledApps: [com.example.app], channels: [ { bundleId: com.example.app, environment: production, channelId: 'YWJj', messageStoragePolicy: 0 } ] }",
            file: "test.yaml")
        #expect(parsed.broadcast.channelLimit == 5)
        #expect(parsed.broadcast.channels == [BroadcastChannel(bundleID: "com.example.app", environment: .production, id: "YWJj", storagePolicy: .noMessageStored)])
    }
}

import APNSMock
import APNSMockCore
import APNSMockTesting
import Foundation
import Testing

/// Broadcast push (iOS 18 channels) through real HTTP/2 clients over real TLS, sent the way the
/// client libraries that have it send: node-apn 7.1's `manageChannels` and
/// `broadcast` on Node's http2, pushy's channel-management branch and broadcast PR on Go's
/// x/net/http2 (scripts/clients/), and curl and nghttp by hand. Every test checks what the client
/// surfaced and what the mock recorded (kind `channel` or `broadcast`, operation, channel,
/// request ID, the headers as sent). The README's "Tested clients" and docs/broadcast.md list what
/// each client sends and its quirks.
@Suite("Broadcast push through real clients", .timeLimit(.minutes(3)))
struct BroadcastClientTests {
    static let app = ClientDriver.bundleID
    /// A channel that exists from the start (configuration), for tests that inject faults on it.
    static let seeded = "c2VlZGVkLWNoYW5uZWw="
    /// The `apns-request-id` of node-apn's README example (upper case).
    static let readmeRequestID = "0309F412-AA57-46A8-9AC6-B5AECA8C4594"

    static var inAnHour: Int64 { Int64(Date().timeIntervalSince1970) + 3600 }

    static let seededChannel = """
        broadcast:
          channels: [{ bundleId: \(app), environment: sandbox, channelId: "\(seeded)", messageStoragePolicy: 1 }]
        """

    // MARK: node-apn and pushy

    struct LifecycleCase: Sendable, CustomTestStringConvertible {
        var client: RealClient
        var policy: Int
        var testDescription: String { "\(client == .node ? "node-apn" : "pushy (Go)"), message-storage-policy \(policy)" }
    }

    static let lifecycleCases = [RealClient.node, .go].flatMap { client in
        [0, 1].map { LifecycleCase(client: client, policy: $0) }
    }

    /// Create, read, list, broadcast, delete, then read and broadcast on the deleted channel. The
    /// broadcast carries the expiration each client sends for the channel: an hour from now on a
    /// stored channel, 0 on a no-storage one (node-apn sends `apns-expiration` because
    /// `note.expiry` is set; pushy always sends it, 0 for a notification without one).
    @Test("Channel lifecycle and a broadcast", arguments: lifecycleCases)
    func lifecycle(_ test: LifecycleCase) async throws {
        let node = test.client == .node
        let expiry: Int64 = test.policy == 1 ? Self.inAnHour : 0
        let broadcast: BroadcastStep = node
            ? .broadcast(expiry: expiry)
            : .broadcast(expiry: test.policy == 1 ? expiry : nil, priority: 10)
        try await ServerProcess.withRunning { mock in
            let report = try await BroadcastDriver(
                client: test.client, scenario: "lifecycle",
                steps: [.create(policy: test.policy), .read(), .readAll, broadcast, .delete(), .read(), broadcast]
            ).run(against: mock)
            let steps = report.steps
            let (create, read, list, sent, late) = (steps[0], steps[1], steps[2], steps[3], steps[6])

            // What the client surfaced.
            #expect(steps.map(\.ok) == [true, true, true, true, true, false, false])
            #expect(steps.map(\.error) == Array(repeating: nil, count: 7))
            // node-apn's results carry no status on success; pushy's responses always do.
            #expect(steps.map(\.status) == (node ? [nil, nil, nil, nil, nil, 400, 400] : [201, 200, 200, 200, 204, 400, 400]))
            #expect(steps.map(\.reason) == [nil, nil, nil, nil, nil, "ChannelNotRegistered", "ChannelNotRegistered"])
            let channel = try #require(create.channelId)
            #expect(ChannelID.isWellFormed(channel))
            #expect(read.policy == test.policy)
            // node-apn hands over the read body's members; pushy keeps only the policy.
            #expect(read.pushType == (node ? "LiveActivity" : nil))
            #expect(list.channels == [channel])
            #expect(Broadcasts.isLowercaseUUID(sent.uniqueId))
            #expect(steps.allSatisfy { Broadcasts.isLowercaseUUID($0.requestId) })
            // node-apn shares one token between its sessions; pushy signs one per connection.
            #expect(report.tokensSigned == (node ? 1 : 2))
            #expect(report.dialed == ["127.0.0.1:\(mock.channelManagementPort(.sandbox))", "127.0.0.1:\(mock.apnsPort)"])

            // What the mock recorded.
            let management = try await Self.records(mock, .channel, count: 5)
            #expect(management.map(\.operation) == ["create", "read", "list", "delete", "read"])
            #expect(management.map(\.status) == [201, 200, 200, 204, 400])
            #expect(management.map(\.requestId) == [steps[0], steps[1], steps[2], steps[4], steps[5]].map(\.requestId))
            #expect(management.filter { $0.operation != "list" }.allSatisfy { $0.channelId == channel })
            #expect(Set(management.map(\.connectionId)).count == 1)
            #expect(management.allSatisfy { $0.environment == "sandbox" && $0.auth.method == .token })
            // pushy signs with Java's SHA256withECDSA: a DER signature, accepted and noted; node-apn's
            // jsonwebtoken signs JOSE's r || s. One token on every management request.
            #expect(management.allSatisfy { $0.auth.signatureForm == (node ? .jose : .der) })
            #expect(management.allSatisfy { $0.lint.map(\.code).contains("token-signature-der") == !node })
            #expect(Set(management.map(\.auth.tokenId)).count == 1)
            // node-apn puts `apns-priority: 10` on management requests and spells the push type
            // in lower case; pushy sends Apple's body and no extra headers.
            #expect(management.allSatisfy { $0.headers["apns-priority"] == (node ? "10" : nil) })
            #expect(management.allSatisfy { $0.headers["apns-expiration"] == nil && $0.headers["apns-topic"] == nil })
            #expect(management[0].payload == .object([
                "message-storage-policy": .integer(Int64(test.policy)), "push-type": .string(node ? "liveactivity" : "LiveActivity"),
            ]))
            // Read, list and delete carry no body.
            #expect(management.dropFirst().allSatisfy { $0.payloadSize == 0 })

            let broadcasts = try await Self.records(mock, .broadcast, count: 2)
            #expect(broadcasts.map(\.status) == [200, 400])
            #expect(broadcasts.map(\.reason) == [nil, "ChannelNotRegistered"])
            #expect(broadcasts.map(\.requestId) == [sent.requestId, late.requestId])
            #expect(broadcasts.map(\.uniqueId) == [sent.uniqueId, nil])
            #expect(broadcasts.allSatisfy { $0.channelId == channel && $0.pushType == "liveactivity" })
            #expect(broadcasts[0].topic == Self.app)
            #expect(broadcasts.allSatisfy { $0.headers["apns-expiration"] == String(expiry) && $0.headers["apns-priority"] == "10" })
            #expect(broadcasts.allSatisfy { $0.headers["apns-topic"] == nil && $0.headers["apns-id"] == nil })
            #expect(broadcasts[0].expiration == expiry)
            #expect(broadcasts[0].priority == 10)
            #expect(broadcasts[0].payload?["aps"]?["event"] == .string("update"))
            #expect(Set(broadcasts.map(\.connectionId)).count == 1)
        }
    }

    /// node-apn sends `apns-expiration` only when `note.expiry` is set (its default is -1), and
    /// Apple lists the header as required for broadcasts: the mock answers 400 BadExpirationDate,
    /// unless `broadcast.requireExpiration` is off, when it takes the missing header as 0.
    @Test("node-apn without note.expiry", arguments: [true, false])
    func nodeWithoutExpiry(requireExpiration: Bool) async throws {
        try await ServerProcess.withRunning(yaml: "broadcast: { requireExpiration: \(requireExpiration) }\n") { mock in
            let report = try await BroadcastDriver(
                client: .node, scenario: "no-expiry", steps: [.create(policy: 0), .broadcast()]
            ).run(against: mock)
            let sent = report.steps[1]
            #expect(report.steps[0].ok)
            #expect(sent.ok == !requireExpiration)
            #expect(sent.status == (requireExpiration ? 400 : nil))
            #expect(sent.reason == (requireExpiration ? "BadExpirationDate" : nil))
            #expect(Broadcasts.isLowercaseUUID(sent.requestId))

            let record = try #require(try await Self.records(mock, .broadcast, count: 1).first)
            #expect(record.headers["apns-expiration"] == nil)
            #expect(record.status == (requireExpiration ? 400 : 200))
            #expect(record.requestId == sent.requestId)
            #expect(record.expiration == (requireExpiration ? nil : 0))
        }
    }

    /// node-apn's README creates a channel with `{'message-storage-policy': '1', 'push-type':
    /// 'liveactivity'}` (the policy a string; Apple documents a number) and an upper-case
    /// `apns-request-id`. The string policy is 400 BadRequestParams; the request ID is accepted and
    /// echoed as sent.
    @Test("node-apn's README example of a create")
    func nodeReadmeCreate() async throws {
        try await ServerProcess.withRunning { mock in
            let report = try await BroadcastDriver(
                client: .node, scenario: "readme-create",
                steps: [
                    .create(payload: ["message-storage-policy": "1", "push-type": "liveactivity"], requestId: Self.readmeRequestID),
                    .create(policy: 1, requestId: Self.readmeRequestID),
                ]
            ).run(against: mock)
            let (readme, numeric) = (report.steps[0], report.steps[1])
            #expect(!readme.ok)
            #expect(readme.status == 400)
            #expect(readme.reason == "BadRequestParams")
            #expect(readme.requestId == Self.readmeRequestID)
            #expect(numeric.ok)
            #expect(numeric.channelId != nil)
            #expect(numeric.requestId == Self.readmeRequestID)

            let records = try await Self.records(mock, .channel, count: 2)
            #expect(records.map(\.status) == [400, 201])
            #expect(records.map(\.requestId) == [Self.readmeRequestID, Self.readmeRequestID])
            #expect(records[0].payload?["message-storage-policy"] == .string("1"))
        }
    }

    /// node-apn answers 403 ExpiredProviderToken by signing a new token and resending on the same
    /// session, on the management session as on the APNs one; the mock takes the new token at
    /// once. The faults answer the first read and the first broadcast of the seeded channel.
    @Test("node-apn: ExpiredProviderToken on both sessions, a new token, the same session")
    func nodeRefreshesItsToken() async throws {
        try await ServerProcess.withRunning(yaml: Self.seededChannel) { mock in
            try await Self.expireTokenOnce(mock, kind: .channel)
            try await Self.expireTokenOnce(mock, kind: .broadcast)
            let report = try await BroadcastDriver(
                client: .node, scenario: "expired-token", steps: [.read(Self.seeded), .broadcast(Self.seeded, expiry: 0)]
            ).run(against: mock)
            #expect(report.steps.map(\.ok) == [true, true])
            #expect(report.steps[0].policy == 1)
            // The first token, one after each ExpiredProviderToken.
            #expect(report.tokensSigned == 3)

            for kind in [RecordKind.channel, .broadcast] {
                let records = try await Self.records(mock, kind, count: 2)
                #expect(records.map(\.status) == [403, 200], "\(kind)")
                #expect(records.map(\.reason) == ["ExpiredProviderToken", nil], "\(kind)")
                #expect(records.map(\.injected) == [true, false], "\(kind)")
                #expect(records[0].connectionId == records[1].connectionId, "\(kind)")
            }
            let retried = try #require(try await Self.records(mock, .broadcast, count: 2).last)
            #expect(retried.requestId == report.steps[1].requestId)
        }
    }

    /// pushy hands ExpiredProviderToken to the caller. Its notification handler then closes the
    /// connection, so the caller's next broadcast goes on a new connection with a new token; the
    /// branch's management handler does nothing, so the next management request reuses the
    /// connection and its token — which is expired, on every connection, as APNs' expired tokens
    /// are: refused again (the branch's management requests fail until its token ages out).
    @Test("pushy: ExpiredProviderToken reaches the caller; a broadcast connection is replaced")
    func pushyOnExpiredToken() async throws {
        try await ServerProcess.withRunning(yaml: Self.seededChannel) { mock in
            try await Self.expireTokenOnce(mock, kind: .channel)
            try await Self.expireTokenOnce(mock, kind: .broadcast)
            let broadcast = BroadcastStep.broadcast(Self.seeded, priority: 10)
            let report = try await BroadcastDriver(
                client: .go, scenario: "expired-token", steps: [.read(Self.seeded), .read(Self.seeded), broadcast, broadcast]
            ).run(against: mock)
            #expect(report.steps.map(\.ok) == [false, false, false, true])
            #expect(report.steps.map(\.status) == [403, 403, 403, 200])
            #expect(report.steps.map(\.reason) == ["ExpiredProviderToken", "ExpiredProviderToken", "ExpiredProviderToken", nil])
            #expect(report.tokensSigned == 3)
            let apns = "127.0.0.1:\(mock.apnsPort)"
            #expect(report.dialed == ["127.0.0.1:\(mock.channelManagementPort(.sandbox))", apns, apns])

            let management = try await Self.records(mock, .channel, count: 2)
            #expect(management.map(\.status) == [403, 403])
            #expect(management.map(\.injected) == [true, false])
            #expect(management[0].connectionId == management[1].connectionId)
            #expect(management[0].auth.tokenId == management[1].auth.tokenId)
            let broadcasts = try await Self.records(mock, .broadcast, count: 2)
            #expect(broadcasts.map(\.status) == [403, 200])
            #expect(broadcasts.map(\.injected) == [true, false])
            #expect(broadcasts[0].connectionId != broadcasts[1].connectionId)
            #expect(broadcasts[0].auth.tokenId != broadcasts[1].auth.tokenId, "the new connection signed a new token")
            #expect(broadcasts.map(\.requestId) == [report.steps[2].requestId, report.steps[3].requestId])
        }
    }

    /// pushy's branch as written adds `authorization` to a management request only when its
    /// handler signs a token: on a connection's first request. APNs wants the token on every
    /// request ("Required for token-based authentication"), and so does the mock.
    @Test("pushy's branch: a token on the first management request only")
    func pushyTokenOnFirstStreamOnly() async throws {
        try await ServerProcess.withRunning { mock in
            let report = try await BroadcastDriver(
                client: .go, scenario: "token-first-stream", managementToken: "first-stream",
                steps: [.create(policy: 1), .read(), .readAll]
            ).run(against: mock)
            #expect(report.steps.map(\.status) == [201, 403, 403])
            #expect(report.steps.map(\.reason) == [nil, "MissingProviderToken", "MissingProviderToken"])
            #expect(report.tokensSigned == 1)

            let records = try await Self.records(mock, .channel, count: 3)
            #expect(records.map(\.status) == [201, 403, 403])
            #expect(records.map(\.auth.method) == [.token, nil, nil])
            #expect(Set(records.map(\.connectionId)).count == 1)
        }
    }

    @Test("node-apn with a client certificate: channels and a broadcast")
    func nodeCertificate() async throws {
        try await ServerProcess.withRunning { mock in
            let report = try await BroadcastDriver(
                client: .node, scenario: "certificate", auth: .certificate,
                steps: [.create(policy: 0), .read(), .readAll, .broadcast(expiry: 0), .delete()]
            ).run(against: mock)
            #expect(report.steps.map(\.ok) == [true, true, true, true, true])
            #expect(report.tokensSigned == 0)
            let channel = try #require(report.steps[0].channelId)
            #expect(report.steps[2].channels == [channel])

            let management = try await Self.records(mock, .channel, count: 4)
            #expect(management.map(\.status) == [201, 200, 200, 204])
            let broadcast = try #require(try await Self.records(mock, .broadcast, count: 1).first)
            #expect(broadcast.status == 200)
            #expect((management + [broadcast]).allSatisfy { $0.auth.method == .certificate && $0.auth.teamId == ClientDriver.teamID })
        }
    }

    /// pushy's branch builds its channel-management handler with the client's signing key, so a
    /// client with certificate credentials cannot manage channels; its broadcasts (PR #1097) work.
    /// The channel comes from the configuration. The broadcast has no priority, and pushy then
    /// sends no `apns-priority`: the mock takes 10, though Apple lists the header as required.
    @Test("pushy with a client certificate: no channel management, a broadcast")
    func pushyCertificate() async throws {
        try await ServerProcess.withRunning(yaml: Self.seededChannel) { mock in
            let report = try await BroadcastDriver(
                client: .go, scenario: "certificate", auth: .certificate,
                steps: [.create(policy: 1), .broadcast(Self.seeded, expiry: Self.inAnHour)]
            ).run(against: mock)
            let (create, sent) = (report.steps[0], report.steps[1])
            #expect(!create.ok)
            #expect(create.status == nil)
            #expect(create.error?.contains("NoSuchElementException") == true)
            #expect(sent.ok)
            #expect(sent.status == 200)
            #expect(report.dialed == ["127.0.0.1:\(mock.apnsPort)"])

            let record = try #require(try await Self.records(mock, .broadcast, count: 1).first)
            #expect(record.auth.method == .certificate)
            #expect(record.headers["apns-priority"] == nil)
            #expect(record.priority == 10)
            #expect(record.requestId == sent.requestId)
            #expect(try await mock.admin.notifications(RecordQuery(outcome: .all, kind: .channel)).notifications.isEmpty)
        }
    }

    /// node-apn left to its own host names with `production: true`: channel management on
    /// api-manage-broadcast.push.apple.com (the mock's production management port), broadcasts on
    /// api.push.apple.com; both resolve to 127.0.0.1 through node-apn's pass-through `lookup`
    /// option. Everything lands in the production environment.
    @Test("node-apn on Apple's production host names")
    func nodeProductionHosts() async throws {
        try await ServerProcess.withRunning { mock in
            let report = try await BroadcastDriver(
                client: .node, scenario: "production", environment: .production, hosts: .apple,
                steps: [.create(policy: 1), .readAll, .broadcast(expiry: Self.inAnHour), .delete()]
            ).run(against: mock)
            #expect(report.steps.map(\.ok) == [true, true, true, true])
            #expect(report.dialed == [
                "api-manage-broadcast.push.apple.com:\(mock.channelManagementPort(.production))", "api.push.apple.com:\(mock.apnsPort)",
            ])
            let management = try await Self.records(mock, .channel, count: 3)
            #expect(management.allSatisfy { $0.environment == "production" })
            #expect(management.allSatisfy { $0.headers[":authority"] == "api-manage-broadcast.push.apple.com" })
            let broadcast = try #require(try await Self.records(mock, .broadcast, count: 1).first)
            #expect(broadcast.status == 200)
            #expect(broadcast.environment == "production")
            #expect(broadcast.headers[":authority"] == "api.push.apple.com")
            #expect(broadcast.channelId == report.steps[0].channelId)
        }
    }

    // MARK: curl and nghttp

    /// curl to Apple's production host names (`--connect-to` maps each to the mock's port), over
    /// HTTP/2, one process per request.
    @Test("curl: the lifecycle on Apple's production host names")
    func curlLifecycle() async throws {
        try await ServerProcess.withRunning { mock in
            let manageHost = "api-manage-broadcast.push.apple.com"
            let manage = ["--connect-to", "\(manageHost):443:127.0.0.1:\(mock.channelManagementPort(.production))"]
            let apns = ["--connect-to", "api.push.apple.com:443:127.0.0.1:\(mock.apnsPort)"]
            let channels = "https://\(manageHost)/1/apps/\(Self.app)/channels"
            let broadcastURL = "https://api.push.apple.com/4/broadcasts/apps/\(Self.app)"
            func manageRequest(_ method: String, _ url: String = channels, channel: String? = nil, body: Data? = nil) async throws -> CurlResponse {
                try await Curl.send(
                    url: url, caPath: mock.caPath, method: method, headers: channel.map { ["apns-channel-id": $0] } ?? [:],
                    body: body, extra: manage)
            }
            func broadcast(_ channel: String) async throws -> CurlResponse {
                try await Curl.send(
                    url: broadcastURL, caPath: mock.caPath,
                    headers: ["apns-channel-id": channel, "apns-push-type": "liveactivity", "apns-expiration": "0", "apns-priority": "5"],
                    body: Broadcasts.update, extra: apns)
            }

            let created = try await manageRequest("POST", body: Data(#"{"message-storage-policy":0,"push-type":"LiveActivity"}"#.utf8))
            #expect(created.status == 201)
            let channel = try #require(created.headers["apns-channel-id"])
            let read = try await manageRequest("GET", channel: channel)
            #expect(read.status == 200)
            #expect(try JSONDecoder().decode([String: RecordJSON].self, from: read.body)["message-storage-policy"] == .integer(0))
            let list = try await manageRequest("GET", "https://\(manageHost)/1/apps/\(Self.app)/all-channels")
            #expect(try JSONDecoder().decode([String: [String]].self, from: list.body) == ["channels": [channel]])
            let sent = try await broadcast(channel)
            #expect(sent.status == 200)
            #expect(Broadcasts.isLowercaseUUID(sent.headers["apns-unique-id"]))
            let deleted = try await manageRequest("DELETE", channel: channel)
            #expect(deleted.status == 204)
            let gone = try await manageRequest("GET", channel: channel)
            #expect(gone.reason == "ChannelNotRegistered")
            let late = try await broadcast(channel)
            #expect(late.reason == "ChannelNotRegistered")

            let responses = [created, read, list, sent, deleted, gone, late]
            #expect(responses.allSatisfy { $0.httpVersion == "HTTP/2" && Broadcasts.isLowercaseUUID($0.headers["apns-request-id"]) })
            let management = try await Self.records(mock, .channel, count: 5)
            #expect(management.map(\.operation) == ["create", "read", "list", "delete", "read"])
            #expect(management.map(\.requestId) == [created, read, list, deleted, gone].map { $0.headers["apns-request-id"] })
            let broadcasts = try await Self.records(mock, .broadcast, count: 2)
            #expect(broadcasts.map(\.status) == [200, 400])
            #expect(broadcasts.map(\.requestId) == [sent, late].map { $0.headers["apns-request-id"] })
            #expect(broadcasts[0].priority == 5)
            #expect((management + broadcasts).allSatisfy { $0.environment == "production" })
        }
    }

    /// nghttp with `-v`: headers given with `-H`, the response read from its frame log, one
    /// connection per request. Read, list and delete end the stream with their HEADERS frame.
    @Test("nghttp -v: the lifecycle on the management port, broadcasts on the APNs port")
    func nghttpLifecycle() async throws {
        try await ServerProcess.withRunning { mock in
            let bearer = try #require(Curl.demoAuthorization)
            let channels = "https://127.0.0.1:\(mock.channelManagementPort(.sandbox))/1/apps/\(Self.app)/channels"
            func manage(_ method: String, _ url: String = channels, channel: String? = nil, body: Data? = nil) async throws -> NghttpExchange {
                var headers = ["authorization": bearer]
                headers["apns-channel-id"] = channel
                return try await Nghttp.send(url: url, method: method, headers: headers, body: body)
            }
            func broadcast(_ channel: String) async throws -> NghttpExchange {
                try await Nghttp.send(
                    url: "https://127.0.0.1:\(mock.apnsPort)/4/broadcasts/apps/\(Self.app)", method: "POST",
                    headers: ["authorization": bearer, "apns-channel-id": channel, "apns-push-type": "liveactivity",
                              "apns-expiration": String(Self.inAnHour), "apns-priority": "10"],
                    body: Broadcasts.update)
            }

            let created = try await manage("POST", body: Broadcasts.createBody)
            #expect(created.status == 201)
            #expect(created.body.isEmpty)
            let channel = try #require(created.headers["apns-channel-id"])
            let read = try await manage("GET", channel: channel)
            #expect(read.status == 200)
            #expect(read.headers["content-type"] == "application/json")
            #expect(try JSONDecoder().decode([String: RecordJSON].self, from: read.body)
                == ["message-storage-policy": .integer(1), "push-type": .string("LiveActivity")])
            let list = try await manage("GET", "https://127.0.0.1:\(mock.channelManagementPort(.sandbox))/1/apps/\(Self.app)/all-channels")
            #expect(list.status == 200)
            #expect(try JSONDecoder().decode([String: [String]].self, from: list.body) == ["channels": [channel]])
            let sent = try await broadcast(channel)
            #expect(sent.status == 200)
            #expect(Broadcasts.isLowercaseUUID(sent.headers["apns-unique-id"]))
            let deleted = try await manage("DELETE", channel: channel)
            #expect(deleted.status == 204)
            let gone = try await manage("GET", channel: channel)
            #expect(gone.status == 400)
            #expect(gone.reason == "ChannelNotRegistered")
            let late = try await broadcast(channel)
            #expect(late.status == 400)
            #expect(late.reason == "ChannelNotRegistered")

            let exchanges = [created, read, list, sent, deleted, gone, late]
            #expect(exchanges.allSatisfy { Broadcasts.isLowercaseUUID($0.headers["apns-request-id"]) })
            #expect(exchanges.map(\.requestEndsWithHeaders) == [false, true, true, false, true, true, false])
            let management = try await Self.records(mock, .channel, count: 5)
            #expect(management.map(\.operation) == ["create", "read", "list", "delete", "read"])
            #expect(management.map(\.status) == [201, 200, 200, 204, 400])
            #expect(management.map(\.requestId) == [created, read, list, deleted, gone].map { $0.headers["apns-request-id"] })
            let broadcasts = try await Self.records(mock, .broadcast, count: 2)
            #expect(broadcasts.map(\.status) == [200, 400])
            #expect(broadcasts.map(\.requestId) == [sent, late].map { $0.headers["apns-request-id"] })
            #expect(broadcasts[0].uniqueId == sent.headers["apns-unique-id"])
        }
    }

    // MARK: helpers

    /// The records of `kind`, accepted or not, oldest first, once `count` of them exist.
    static func records(_ mock: some MockEndpoints, _ kind: RecordKind, count: Int) async throws -> [NotificationRecord] {
        let (page, timedOut) = try await mock.admin.wait(RecordQuery(outcome: .all, kind: kind), count: count, timeout: 10)
        #expect(!timedOut, "expected \(count) \(kind) records, found \(page.notifications.count)")
        return page.notifications
    }

    /// A fault answering the first request of `kind` on the seeded channel 403 ExpiredProviderToken.
    static func expireTokenOnce(_ mock: some MockEndpoints, kind: RecordKind) async throws {
        try await mock.admin.addFault(json: """
            {"match":{"kind":"\(kind.rawValue)","channelId":"\(seeded)"},"respond":{"reason":"ExpiredProviderToken"},"times":1}
            """).expect([201])
    }
}

import APNSMock
import APNSMockCore
import APNSMockTesting
import Foundation
import Testing

/// Real APNs client libraries, each unmodified, against the mock over real TLS: a driver per
/// client (scripts/clients/) sends, the test checks what the client surfaced and what the mock
/// recorded. The clients, how each is pointed at the mock and their quirks are
/// listed in the README's "Tested clients".
@Suite("Real clients through the mock", .timeLimit(.minutes(3)))
struct ClientMatrixTests {
    struct Case: Sendable, CustomTestStringConvertible {
        var client: RealClient
        var auth: ClientAuth
        var testDescription: String { "\(client.rawValue), \(auth.rawValue) auth" }
    }

    static let acceptedCases = RealClient.allCases.filter(\.supportsToken).map { Case(client: $0, auth: .token) }
        + RealClient.allCases.filter(\.supportsCertificate).map { Case(client: $0, auth: .certificate) }

    static let device = String(repeating: "a1", count: 32)
    static let otherDevice = String(repeating: "b2", count: 32)
    /// Odd length: not a device token APNs could have issued.
    static let malformedDevice = "abc"
    /// The unregistration time a 410 reports, milliseconds since the epoch.
    static let unregisteredAt: Int64 = 1_700_000_000_123

    @Test("A push is accepted, and the query API finds it with its payload and topic", arguments: acceptedCases)
    func acceptedPush(_ test: Case) async throws {
        try await ServerProcess.withRunning { mock in
            let report = try await Self.run(test.client, test.auth == .token ? "accepted" : "certificate",
                                            auth: test.auth, devices: [Self.device], mock: mock)
            let result = try #require(report.results.first)
            #expect(result.error == nil)
            #expect(result.sent)
            #expect(result.reason == nil)
            #expect(result.status == (test.client.surfacesStatusOnSuccess ? 200 : nil))

            let record = try #require(try await Self.records(mock, device: Self.device, count: 1).first)
            let (topic, pushType) = test.auth == .certificate
                ? test.client.certificatePush(bundleID: ClientDriver.bundleID) : (ClientDriver.bundleID, "alert")
            #expect(record.status == 200)
            #expect(record.reason == nil)
            #expect(record.topic == topic)
            #expect(record.pushType == pushType)
            #expect(Self.alertText(record.payload) == test.client.alertText)
            // Tokens whose iat is not an integer are accepted, and the record says so.
            let iatForm = test.auth == .token ? test.client.issuedAtForm : nil
            #expect(record.auth.iatForm == iatForm)
            let signatureForm = test.auth == .token ? test.client.signatureForm : nil
            #expect(record.auth.signatureForm == signatureForm)
            #expect(record.lint.map(\.code)
                == (iatForm == nil || iatForm == .integer ? [] : ["iat-not-integer"]) + (signatureForm == .der ? ["token-signature-der"] : []))
            #expect(record.environment == test.client.environment)
            #expect(record.auth.method == (test.auth == .token ? .token : .certificate))
            #expect(record.auth.teamId == ClientDriver.teamID)
            #expect(record.auth.keyId == (test.auth == .token ? ClientDriver.keyID : nil))
            #expect(result.apnsId?.lowercased() == (test.client.surfacesApnsIdOnSuccess ? record.apnsId.lowercased() : nil))
        }
    }

    @Test("BadDeviceToken reaches the caller", arguments: RealClient.allCases)
    func badDeviceToken(_ client: RealClient) async throws {
        try await ServerProcess.withRunning { mock in
            let report = try await Self.run(client, "bad-device-token", auth: client.primaryAuth,
                                            devices: [Self.malformedDevice], mock: mock)
            let result = try #require(report.results.first)
            #expect(result.error == nil)
            #expect(!result.sent)
            #expect(result.reason == "BadDeviceToken")
            #expect(result.status == (client.surfacesStatus ? 400 : nil))

            let record = try #require(try await Self.records(mock, device: Self.malformedDevice, count: 1).first)
            #expect(record.status == 400)
            #expect(record.reason == "BadDeviceToken")
            #expect(result.apnsId?.lowercased() == (client.surfacesApnsIdOnError ? record.apnsId.lowercased() : nil))
        }
    }

    @Test("410 Unregistered reaches the caller with its timestamp", arguments: RealClient.allCases)
    func unregistered(_ client: RealClient) async throws {
        try await ServerProcess.withRunning { mock in
            try await mock.admin.request(
                "POST", "/v1/devices/\(Self.device)/unregister", body: Data(#"{"timestamp":\#(Self.unregisteredAt)}"#.utf8)
            ).expect([200, 201])
            let report = try await Self.run(client, "unregistered", auth: client.primaryAuth, devices: [Self.device], mock: mock)
            let result = try #require(report.results.first)
            #expect(result.error == nil)
            #expect(!result.sent)
            #expect(result.reason == "Unregistered")
            #expect(result.status == (client.surfacesStatus ? 410 : nil))
            #expect(result.timestamp == (client.surfacesTimestamp ? Self.unregisteredAt : nil))

            let record = try #require(try await Self.records(mock, device: Self.device, count: 1).first)
            #expect(record.status == 410)
            #expect(record.reason == "Unregistered")
            #expect(record.timestamp == Self.unregisteredAt)
        }
    }

    /// Clients that act on ExpiredProviderToken by themselves. The fault answers the second push
    /// once; node-apn and Go providers sign a new token and retry on the same connection, which
    /// the mock accepts at once (no TooManyProviderTokenUpdates: the old token expired), and the
    /// records show the new token's id.
    @Test("ExpiredProviderToken, then a new token and a successful retry", arguments: [RealClient.go, .node])
    func expiredProviderTokenIsRetried(_ client: RealClient) async throws {
        try await ServerProcess.withRunning { mock in
            try await mock.admin.addFault(json: """
                {"match":{"token":"\(Self.otherDevice)"},"respond":{"reason":"ExpiredProviderToken"},"times":1}
                """).expect([201])
            let report = try await Self.run(client, "expired-token", auth: .token, devices: [Self.device, Self.otherDevice], mock: mock)
            try #require(report.results.count == 2)
            for result in report.results {
                #expect(result.error == nil)
                #expect(result.sent)
                #expect(result.reason == nil)
                #expect(result.status == (client.surfacesStatusOnSuccess ? 200 : nil))
            }

            let first = try #require(try await Self.records(mock, device: Self.device, count: 1).first)
            let retried = try await Self.records(mock, device: Self.otherDevice, count: 2)
            try #require(retried.count == 2)
            #expect(retried.map(\.status) == [403, 200])
            #expect(retried.map(\.reason) == ["ExpiredProviderToken", nil])
            #expect(retried.map(\.injected) == [true, false])
            #expect(retried.map(\.connectionId) == [first.connectionId, first.connectionId])
            #expect(report.tokensSigned == 2)
            #expect(retried[0].auth.tokenId == first.auth.tokenId)
            #expect(retried[1].auth.tokenId != retried[0].auth.tokenId, "the retry carried a new token")
        }
    }

    /// pyapns-client tries a push three times on ExpiredProviderToken (each time on a new
    /// connection), always with the same token: an expired token is expired on every connection, as APNs' are, so
    /// every retry is refused and the push fails. The records show one token id throughout.
    @Test func pyapnsClientRetriesWithTheExpiredToken() async throws {
        try await ServerProcess.withRunning { mock in
            try await mock.admin.addFault(json: """
                {"match":{"token":"\(Self.otherDevice)"},"respond":{"reason":"ExpiredProviderToken"},"times":1}
                """).expect([201])
            let report = try await Self.run(
                .pyapnsClient, "expired-token", auth: .token, devices: [Self.device, Self.otherDevice], mock: mock)
            try #require(report.results.count == 2)
            #expect(report.results[0].sent)
            #expect(!report.results[1].sent)
            #expect(report.results[1].reason == "ExpiredProviderToken")

            let first = try #require(try await Self.records(mock, device: Self.device, count: 1).first)
            let attempts = try await Self.records(mock, device: Self.otherDevice, count: 3)
            #expect(attempts.count == 3, "pyapns-client's three tries")
            #expect(attempts.allSatisfy { $0.status == 403 && $0.reason == "ExpiredProviderToken" })
            #expect(attempts.map(\.injected) == [true, false, false])
            #expect(Set(attempts.map(\.auth.tokenId)) == [first.auth.tokenId])
            // Its httpx client keeps no idle connection: every attempt came on a new one.
            #expect(Set([first.connectionId] + attempts.map(\.connectionId)).count == 4)
        }
    }

    /// node-apn's provider.send(note, [tokens]) opens a stream per token at once, before Node has
    /// read the server's SETTINGS. On a cold token connection APNs allows one stream until a token
    /// is accepted, so the others are refused (RST_STREAM REFUSED_STREAM, which node-apn does not
    /// retry); `server.streamsBeforeAuthentication` lets them through.
    @Test("Node's first streams on a cold token connection", arguments: [UInt32(1), 3])
    func nodeBatchOnAColdConnection(streamsBeforeAuthentication: UInt32) async throws {
        let devices = [Self.device, Self.otherDevice, String(repeating: "c3", count: 32)]
        try await ServerProcess.withRunning(yaml: "server: { streamsBeforeAuthentication: \(streamsBeforeAuthentication) }\n") { mock in
            let report = try await Self.run(.node, "batch", auth: .token, devices: devices, mock: mock)
            let refused = report.results.filter { $0.rstCode == 7 }
            let sent = report.results.filter(\.sent)
            #expect(sent.count == Int(streamsBeforeAuthentication))
            #expect(refused.count == devices.count - Int(streamsBeforeAuthentication))
            #expect(sent.allSatisfy { $0.status == 200 })
            let (page, _) = try await mock.admin.wait(RecordQuery(), count: sent.count, timeout: 10)
            #expect(Set(page.notifications.compactMap(\.token)) == Set(sent.map(\.device)))
        }
    }

    // MARK: helpers

    /// Runs `client`'s driver and checks what every run must show: one result per device, the
    /// pinned version, and, for clients that dial Apple's hosts, the name they resolved.
    static func run(
        _ client: RealClient, _ scenario: String, auth: ClientAuth, devices: [String], mock: some MockEndpoints
    ) async throws -> DriverReport {
        let report = try await ClientDriver(client: client, scenario: scenario, auth: auth, devices: devices).run(against: mock)
        #expect(report.results.map(\.device) == devices)
        if let pinned = try ClientDriver.pinnedVersion(of: client) {
            #expect(report.version == pinned)
        }
        if let dialed = client.expectedDialed {
            #expect(report.dialed == dialed)
        }
        return report
    }

    /// The records of `device`, accepted or not, oldest first, once `count` of them exist.
    static func records(_ mock: some MockEndpoints, device: String, count: Int) async throws -> [NotificationRecord] {
        let (page, timedOut) = try await mock.admin.wait(RecordQuery(token: device, outcome: .all), count: count, timeout: 10)
        #expect(!timedOut, "expected \(count) records of \(device), found \(page.notifications.count)")
        return page.notifications
    }

    /// `aps.alert`, or its `body` when the client sends the dictionary form.
    static func alertText(_ payload: RecordJSON?) -> String? {
        let alert = payload?["aps"]?["alert"]
        return alert?.stringValue ?? alert?["body"]?.stringValue
    }
}

@testable import APNSMock
import APNSMockCore
import APNSMockTesting
import Foundation
import Testing

/// Apple's connection penalty, opt-in (`server.errorDisconnect`): "APNs disconnects a provider
/// connection with too many error conditions. APNs disconnects sooner with certain error
/// conditions, such as BadDeviceToken. Note that status code 410 isn't considered an error
/// condition."
@Suite("Apple's connection penalty", .timeLimit(.minutes(2)))
struct ErrorDisconnectTests {
    /// Go's HTTP/2 client (as sideshow/apns2 sends) reads the GOAWAY after the third error and
    /// carries on on a new connection: every push is answered, and the second connection is dialled.
    @Test func aRealClientReconnectsAfterThePenalty() async throws {
        try await MockHarness.withRunningMock(configure: { $0.errorDisconnect = .init(after: 3) }) { mock in
            let devices = ["zz00", "zz01", "zz02", Pushes.token, Pushes.otherToken]
            let report = try await ClientDriver(client: .go, scenario: "error-disconnect", auth: .token, devices: devices)
                .run(against: mock)
            #expect(report.results.map(\.status) == [400, 400, 400, 200, 200], "\(report.results)")
            #expect(report.results.allSatisfy { $0.error == nil })
            #expect(report.dialed.count == 2, "dialled \(report.dialed)")
            let stats = try await mock.admin.stats()
            #expect(stats.goaways.byCause == ["error-disconnect": 1])
            #expect(stats.connections.total == 2)
        }
    }

    /// BadDeviceToken weighs `badDeviceTokenCounts`; 410 is no error; other 4xx count once.
    @Test func badDeviceTokenCountsMoreAnd410IsNoError() async throws {
        try await MockHarness.withRunningMock(configure: {
            $0.errorDisconnect = .init(after: 4, badDeviceTokenCounts: 2)
            $0.http2.streamsBeforeAuthentication = 100
        }) { mock in
            try await mock.admin.request(
                "POST", "/v1/devices/\(Pushes.otherToken)/unregister", body: Data("{}".utf8)).expect([200, 201, 204])
            let client = try await Hostile.tlsClient(mock)
            try await client.send(H2.preface + H2.settings() + H2.request(stream: 1, token: Pushes.token, body: Pushes.body))
            // Two 410s: no error. Then a BadTopic (1) and a BadDeviceToken (2): 3 of 4.
            try await client.send(H2.request(stream: 3, token: Pushes.otherToken, body: Pushes.body))
            try await client.send(H2.request(stream: 5, token: Pushes.otherToken, body: Pushes.body))
            try await client.send(H2.request(stream: 7, token: Pushes.token, extra: [("apns-topic", "com.example.other")], body: Pushes.body))
            try await client.send(H2.request(stream: 9, token: "bad", body: Pushes.body))
            let three = await client.waitUntil { H2.parse($0).filter { $0.type == H2.FrameType.headers.rawValue }.count == 5 }
            #expect(!H2.parse(three).contains { $0.goaway != nil })
            // One more error: GOAWAY, whose debug data is the last error's reason, then a clean close.
            try await client.send(H2.request(stream: 11, token: "bad", body: Pushes.body))
            let outcome = await client.waitForClose()
            let goaway = try #require(H2.parse(outcome.received).compactMap(\.goaway).first)
            #expect(goaway.errorCode == 0)
            #expect(goaway.lastStream == 11)
            #expect(goaway.debug == #"{"reason":"BadDeviceToken"}"#)
            #expect(outcome.closed && outcome.error == nil)
        }
    }
}

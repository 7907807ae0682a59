import APNSMock
import APNSMockCore
import APNSMockTesting
import Foundation
import Testing

/// APNSMockTesting's AdminClient: the operations the Python, Node and Go clients have too, against
/// a running mock, with pushes sent by curl.
@Suite("AdminClient's operations", .timeLimit(.minutes(2)))
struct AdminClientTests {
    static let token = String(repeating: "5a", count: 32)

    static func push(_ mock: RunningMock, token: String = token, title: String = "Hello") async throws -> CurlResponse {
        try await Curl.send(
            url: "\(mock.baseURL)/3/device/\(token)", caPath: mock.caPath,
            headers: ["apns-topic": "com.example.app", "apns-push-type": "alert"],
            body: Data(#"{"aps":{"alert":{"title":"\#(title)"}}}"#.utf8))
    }

    @Test func waitForReturnsTheRecordsOrSaysWhatArrived() async throws {
        try await MockHarness.withRunningMock { mock in
            #expect(try await Self.push(mock).status == 200)
            let records = try await mock.admin.waitFor(RecordQuery(token: Self.token), count: 1)
            #expect(records.first?.payload?["aps"]?["alert"]?["title"] == .string("Hello"))
            #expect(records.first?.headers["apns-push-type"] == "alert")
            do {
                _ = try await mock.admin.waitFor(RecordQuery(token: Self.token), count: 2, timeout: 0.3)
                Issue.record("no timeout")
            } catch let error as WaitTimeout {
                #expect(error.matched == 1 && error.expected == 2)
                #expect(error.description.contains("1 arrived") && error.description.contains("token=5a5a"))
            }
        }
    }

    @Test func errorsCarryTheServersMessage() async throws {
        try await MockHarness.withRunningMock { mock in
            do {
                try await mock.admin.advanceClock(seconds: -1)
                Issue.record("no error")
            } catch let error as AdminClientError {
                #expect(error.status == 400)
                #expect(error.message.hasPrefix("advanceSeconds: "))
            }
        }
    }

    @Test func eventsFaultsDevicesChannelsAndTheClock() async throws {
        try await MockHarness.withRunningMock { mock in
            let admin = mock.admin
            // Events: subscribed once events() returns.
            let stream = try await admin.events(RecordQuery(token: Self.token, outcome: .all))
            #expect(try await Self.push(mock, title: "streamed").status == 200)
            var iterator = stream.makeAsyncIterator()
            let event = try #require(try await iterator.next())
            #expect(event.type == "message")
            #expect(try event.record().payload?["aps"]?["alert"]?["title"] == .string("streamed"))
            stream.close()

            // Faults.
            let added = try await admin.addFaults(json: #"[{"match":{"token":"\#(Self.token)"},"respond":{"reason":"BadDeviceToken"},"times":1},{"delayMs":5}]"#)
            #expect(added.count == 2)
            #expect(try await Self.push(mock).status == 400)
            try await admin.removeFault(id: added[1].id)
            #expect(try await admin.faults().faults.isEmpty)
            _ = try await admin.addFault(json: #"{"delayMs":1}"#)
            try await admin.clearFaults()
            #expect(try await admin.faults().faults.isEmpty)

            // Devices.
            let other = String(repeating: "6b", count: 32)
            try await admin.registerDevice(token: other, topic: "com.example.app")
            let unregistered = try await admin.unregisterDevice(token: other, reason: "ExpiredToken", timestamp: 1_700_000_000_000)
            #expect(unregistered.reason == "ExpiredToken")
            #expect(try await Self.push(mock, token: other).status == 410)
            try await admin.removeDevice(token: other)
            #expect(try await admin.devices().devices.isEmpty)

            // Channels (an ID holding "/" and "+").
            let channel = try await admin.createChannel(bundleId: "com.example.app", channelId: "dGVzdC9jaGFubmVsKw==")
            #expect(try await admin.channels(bundleId: "com.example.app").map(\.channelId) == [channel.channelId])
            try await admin.deleteChannel(id: channel.channelId)
            #expect(try await admin.channels().isEmpty)

            // The clock, reasons, metrics, reset.
            #expect(try await admin.advanceClock(seconds: 60).offsetSeconds == 60)
            #expect(try await admin.clock().offsetSeconds == 60)
            #expect(try await admin.reasons().contains { $0.reason == "Unregistered" && $0.status == 410 })
            #expect(try await admin.metrics().contains("apns_requests_total"))
            try await admin.reset()
            #expect(try await admin.clock().offsetSeconds == 0)
        }
    }
}

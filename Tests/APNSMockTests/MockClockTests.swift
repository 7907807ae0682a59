@testable import APNSMock
import APNSMockCore
import APNSMockTesting
import Foundation
import Testing

/// The mock's clock (`/v1/clock`): moving it forward ages provider tokens and refills rate
/// limits, records say the mock's time, `/v1/reset` sets it back. And whether each record's
/// response left the mock (`responseWritten`).
@Suite("The mock's clock, and what the record tells", .timeLimit(.minutes(2)))
struct MockClockTests {
    static let device = String(repeating: "c7", count: 32)

    static func clock(_ mock: RunningMock) async throws -> ClockView {
        try await mock.admin.request("GET", "/v1/clock").decode(ClockView.self)
    }

    static func advance(_ mock: RunningMock, _ body: String) async throws -> AdminResponse {
        try await mock.admin.request("POST", "/v1/clock", body: Data(body.utf8))
    }

    static func token(iat: Int) throws -> String {
        let material = try MockHarness.sharedCertificates()
        let pem = try String(contentsOfFile: material.tokenKeyPath(material.tokenKeys[0]), encoding: .utf8)
        return "bearer " + (try ProviderTokenSigner.token(keyPEM: pem, teamID: "DEMOTEAM01", keyID: "DEMOKEY001", issuedAt: iat))
    }

    /// "Does my client sign a new token after an hour?", in a second: the token it holds is
    /// expired once the clock is an hour ahead, the one it signs then is fresh. Records carry the
    /// mock's time while it differs from the wall clock.
    @Test func anHourInASecond() async throws {
        try await MockHarness.withRunningMock { mock in
            let before = try await Self.clock(mock)
            #expect(before.offsetSeconds == 0)
            let held = try Self.token(iat: Int(Date().timeIntervalSince1970))
            let url = "\(mock.baseURL)/3/device/\(Self.device)"
            #expect(try await Curl.send(url: url, caPath: mock.caPath, authorization: held).status == 200)

            let moved = try await Self.advance(mock, #"{"advanceSeconds":3601}"#).decode(ClockView.self)
            #expect(moved.offsetSeconds == 3601)
            let mockNow = try #require(Timestamp.milliseconds(rfc3339: moved.now))
            let wall = try #require(Timestamp.milliseconds(rfc3339: moved.wallClock))
            #expect(mockNow - wall == 3_601_000)

            let expired = try await Curl.send(url: url, caPath: mock.caPath, authorization: held)
            #expect(expired.status == 403)
            #expect(expired.reason == "ExpiredProviderToken")
            let renewed = try Self.token(iat: Int(Date().timeIntervalSince1970))
            #expect(try await Curl.send(url: url, caPath: mock.caPath, authorization: renewed).status == 200)

            let records = try await mock.admin.notifications(RecordQuery(token: Self.device, outcome: .all)).notifications
            #expect(records.map(\.status) == [200, 403, 200])
            #expect(records[0].mockTime == nil)
            for record in records.dropFirst() {
                let received = try #require(Timestamp.milliseconds(rfc3339: record.receivedAt))
                #expect(record.mockTime.flatMap(Timestamp.milliseconds(rfc3339:)) == received + 3_601_000)
            }
            #expect(records[1].auth.tokenId == records[0].auth.tokenId)
            #expect(records[2].auth.tokenId != records[1].auth.tokenId)

            try await mock.admin.reset()
            #expect(try await Self.clock(mock).offsetSeconds == 0)
        }
    }

    /// A 410's timestamp and a device unregistered "now" are the mock's now.
    @Test func timestampsTheMockMakesAreItsOwnTime() async throws {
        try await MockHarness.withRunningMock { mock in
            try await Self.advance(mock, #"{"advanceSeconds":86400}"#).expect([200])
            try await mock.admin.request("POST", "/v1/devices/\(Self.device)/unregister").expect([200])
            let device = try #require(try await mock.admin.devices().devices.first { $0.token == Self.device })
            let wall = Int64(Date().timeIntervalSince1970 * 1000)
            let timestamp = try #require(device.timestamp)
            #expect(abs(timestamp - (wall + 86_400_000)) < 60_000, "unregistered at \(timestamp), wall \(wall)")
        }
    }

    /// Moving the clock refills rate-limit allowances as the time passing would.
    @Test func rateLimitsFollowTheClock() async throws {
        try await MockHarness.withRunningMock(configure: {
            $0.validation.rateLimit = RateLimit(requests: 1, interval: .seconds(3600))
        }) { mock in
            let url = "\(mock.baseURL)/3/device/\(Self.device)"
            #expect(try await Curl.send(url: url, caPath: mock.caPath).status == 200)
            #expect(try await Curl.send(url: url, caPath: mock.caPath).reason == "TooManyRequests")
            try await Self.advance(mock, #"{"advanceSeconds":3600}"#).expect([200])
            // The token is an hour older too: sign a fresh one.
            let fresh = try Self.token(iat: Int(Date().timeIntervalSince1970))
            #expect(try await Curl.send(url: url, caPath: mock.caPath, authorization: fresh).status == 200)
        }
    }

    static let badBodies: [(String, String)] = [
        (#"{"advanceSeconds":-1}"#, "advanceSeconds"),
        (#"{"advanceSeconds":1.5}"#, "advanceSeconds"),
        (#"{"advanceSeconds":"60"}"#, "advanceSeconds"),
        (#"{"advanceSeconds":315360001}"#, "advanceSeconds"),
        (#"{"advanceSeconds":99999999999999999999999}"#, "advanceSeconds"),
        (#"{}"#, "advanceSeconds"),
        (#"{"advanceSeconds":1,"back":true}"#, "back"),
        (#"[1]"#, "body"),
        (#"not json"#, "body"),
    ]

    @Test(arguments: badBodies)
    func badAdvanceIsRefusedNamingTheField(_ body: String, _ field: String) async throws {
        try await MockHarness.withRunningMock { mock in
            let response = try await Self.advance(mock, body)
            #expect(response.status == 400)
            #expect(response.error?.hasPrefix(field + ":") == true, "\(response.error ?? "")")
            #expect(try await Self.clock(mock).offsetSeconds == 0, "nothing changed")
        }
    }

    @Test func theClockRunsAtMostTenYearsAhead() async throws {
        try await MockHarness.withRunningMock { mock in
            try await Self.advance(mock, #"{"advanceSeconds":315360000}"#).expect([200])
            let past = try await Self.advance(mock, #"{"advanceSeconds":1}"#)
            #expect(past.status == 400)
            #expect(past.error?.contains("ten years") == true)
            #expect(try await Self.clock(mock).offsetSeconds == 315_360_000)
        }
    }

    // MARK: responseWritten

    /// A response that went out says so; a delayed one says so once it went out; a hung stream's
    /// never does; a response decided but cut off with its connection (a `close` fault on another
    /// stream of the same read) says it did not.
    @Test func recordsSayWhetherTheResponseLeft() async throws {
        try await MockHarness.withRunningMock(configure: H2Connections.configure) { mock in
            let delayed = String(repeating: "d1", count: 32), hung = String(repeating: "d2", count: 32)
            let closer = String(repeating: "d3", count: 32), cutOff = String(repeating: "d4", count: 32)
            try await mock.admin.addFault(json: #"{"match":{"token":"\#(delayed)"},"delayMs":4000}"#).expect([201])
            try await mock.admin.addFault(json: #"{"match":{"token":"\#(hung)"},"action":"hang"}"#).expect([201])
            try await mock.admin.addFault(json: #"{"match":{"token":"\#(closer)"},"action":"close"}"#).expect([201])

            let client = try await H2Connections.connect(mock)
            try await client.send(
                H2.request(stream: 1, token: Self.device, body: Pushes.body)
                    + H2.request(stream: 3, token: delayed, body: Pushes.body)
                    + H2.request(stream: 5, token: hung, body: Pushes.body))
            _ = await client.waitUntil { Hostile.hasResponse(H2.parse($0), stream: 1) }
            // The delayed answer has not gone out yet.
            let waiting = try #require(try await mock.admin.wait(RecordQuery(token: delayed), count: 1).page.notifications.first)
            #expect(!waiting.responseWritten)
            _ = await client.waitUntil(timeout: .seconds(20)) { Hostile.hasResponse(H2.parse($0), stream: 3) }
            #expect(Hostile.hasResponse(H2Connections.frames(client), stream: 3))
            await client.close()

            let records = try await mock.admin.notifications(RecordQuery(outcome: .all)).notifications
            func record(_ token: String) -> NotificationRecord? { records.first { $0.token == token } }
            #expect(record(Self.device)?.responseWritten == true)
            #expect(record(delayed)?.responseWritten == true)
            #expect(record(hung)?.responseWritten == false)

            // Two requests in one write: the first is answered in the same turn as the second,
            // whose fault drops the connection before anything is sent.
            let second = try await H2Connections.connect(mock)
            try await second.send(
                H2.request(stream: 1, token: cutOff, body: Pushes.body)
                    + H2.request(stream: 3, token: closer, body: Pushes.body))
            let (_, closed, _) = await second.waitForClose()
            #expect(closed)
            let after = try await mock.admin.wait(RecordQuery(token: cutOff), count: 1).page.notifications
            #expect(after.first?.status == 200, "decided: 200")
            #expect(after.first?.responseWritten == false, "but never sent")
            #expect(!Hostile.hasResponse(H2Connections.frames(second), stream: 1))
        }
    }
}

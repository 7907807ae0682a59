@testable import APNSMock
import APNSMockCore
import APNSMockTesting
import Foundation
import Testing

/// GOAWAY as RFC 9113 §6.8 says, for the `goaway` fault and the mock's own: the streams up to the
/// last stream id it names are answered; the ones above were not processed, so they change no
/// state and are never recorded or counted as accepted (a client resends them on a new connection,
/// and only that resend is a record); the connection then closes gracefully, so a client still
/// writing reads the GOAWAY and never gets a TCP reset.
@Suite("GOAWAY accounting", .timeLimit(.minutes(2)))
struct GoAwayTests {
    /// The requests of a client that writes in bursts and keeps writing after the GOAWAY.
    static func burst(_ streams: StrideThrough<UInt32>) -> [UInt8] {
        streams.flatMap { H2.request(stream: $0, token: Pushes.token, body: Pushes.body) }
    }

    @Test(arguments: [false, true])
    func aClientStillWritingReadsTheGoAwayAndNothingAboveItCounts(_ lowLastStream: Bool) async throws {
        try await MockHarness.withRunningMock(configure: { $0.http2.streamsBeforeAuthentication = 1000 }) { mock in
            let form = lowLastStream ? #","lastStreamId":1"# : ""
            try await mock.admin.addFault(
                json: #"{"match":{"connection":1,"afterRequests":20},"action":"goaway","times":1\#(form)}"#).expect([201])
            let client = try await Hostile.tlsClient(mock)
            try await client.send(H2.preface + H2.settings() + Self.burst(stride(from: 1, through: 199, by: 2)))
            // The client goes on writing for a while, as a client that has not read the GOAWAY yet.
            var next: UInt32 = 201
            for _ in 0..<20 {
                try? await client.send(Self.burst(stride(from: next, through: next + 18, by: 2)))
                next += 20
                try await Task.sleep(for: .milliseconds(5))
            }
            let outcome = await client.waitForClose()
            #expect(outcome.closed)
            #expect(outcome.error == nil, "the client saw \(outcome.error ?? "")")
            let frames = H2.parse(outcome.received)
            let goaway = try #require(frames.compactMap(\.goaway).first)
            let last = goaway.lastStream
            #expect(goaway.errorCode == 0)
            #expect(frames.first { $0.stream == 41 }?.rstErrorCode == HTTP2ErrorCode.refusedStream.rawValue)

            let decoder = HPACKDecoder()
            var answered: [UInt32: String] = [:]
            for frame in frames where frame.type == H2.FrameType.headers.rawValue {
                answered[frame.stream] = decoder.decode(frame.payload)?.first { $0.name == ":status" }?.value
            }
            #expect(answered.keys.allSatisfy { $0 <= last }, "answered above the GOAWAY's last stream \(last)")
            #expect(!answered.isEmpty || lowLastStream)

            let records = try await mock.admin.notifications(RecordQuery(outcome: .all, limit: 1000)).notifications
            #expect(records.allSatisfy { UInt32($0.streamId) <= last || $0.streamId == 41 }, "a record above \(last)")
            let accepted = records.filter { $0.status == 200 }
            #expect(accepted.count == answered.values.filter { $0 == "200" }.count)
            let stats = try await mock.admin.stats()
            #expect(stats.accepted == accepted.count)
            #expect(stats.requests == records.count)
            #expect(stats.goaways.byCause["fault"] == 1)
        }
    }

    /// `keepOpen`: the connection stays open; streams the client opens after it are refused.
    @Test func keepOpenRefusesNewStreams() async throws {
        try await MockHarness.withRunningMock { mock in
            try await mock.admin.addFault(
                json: #"{"match":{"afterRequests":1},"action":"goaway","keepOpen":true,"goawayCode":"ENHANCE_YOUR_CALM","debugData":"none","times":1}"#).expect([201])
            let client = try await Hostile.tlsClient(mock)
            try await client.send(H2.preface + H2.settings() + H2.request(stream: 1, token: Pushes.token, body: Pushes.body))
            _ = await client.waitUntil { H2.parse($0).contains { $0.stream == 1 && $0.type == H2.FrameType.headers.rawValue } }
            try await client.send(H2.request(stream: 3, token: Pushes.token, body: Pushes.body))
            let received = await client.waitUntil { H2.parse($0).contains { $0.goaway != nil } }
            let goaway = try #require(H2.parse(received).compactMap(\.goaway).first)
            #expect(goaway.errorCode == 0xB)
            #expect(goaway.debug.isEmpty)
            #expect(goaway.lastStream == 3)
            try await client.send(H2.request(stream: 5, token: Pushes.token, body: Pushes.body))
            let refused = await client.waitUntil { H2.parse($0).contains { $0.stream == 5 } }
            #expect(H2.parse(refused).first { $0.stream == 5 }?.rstErrorCode == HTTP2ErrorCode.refusedStream.rawValue)
            #expect(await client.waitForClose(timeout: .milliseconds(300)).closed == false)
            await client.close()
            let stats = try await mock.admin.stats()
            #expect(stats.refusedStreams.afterGoAway == 1)
            #expect(stats.accepted == 1)
        }
    }

    /// An invalid `goaway` form is a 400 naming the field.
    @Test(arguments: [
        (#"{"action":"goaway","goawayCode":"CANCEL"}"#, "goawayCode"),
        (#"{"action":"goaway","lastStreamId":2}"#, "lastStreamId"),
        (#"{"action":"goaway","debugData":"all"}"#, "debugData"),
        (#"{"action":"reset","keepOpen":true}"#, "keepOpen"),
    ])
    func invalidFormsAreRefused(_ json: String, _ field: String) async throws {
        try await MockHarness.withRunningMock { mock in
            let response = try await mock.admin.request("POST", "/v1/faults", body: Data(json.utf8))
            #expect(response.status == 400)
            #expect(String(decoding: response.body, as: UTF8.self).contains(field))
        }
    }
}

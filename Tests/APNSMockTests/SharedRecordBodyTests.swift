@testable import APNSMock
import APNSMockCore
import Foundation
import NIOCore
import Testing

/// A record stored in the shared state (``SharedRecordBody``, bytes in PostgreSQL) is the same record
/// when a replica's mirror reads it back: every field the admin API renders, filters on or counts.
@Suite("Shared record bodies")
struct SharedRecordBodyTests {
    static func request(broadcast: Bool) -> PushRequest {
        var request = PushRequest()
        request.method = "POST"
        request.scheme = "https"
        request.path = broadcast ? "/4/broadcasts/apps/com.example.app" : "/3/device/ABCDEF0123"
        request.authority = "api.sandbox.push.apple.com"
        request.apnsID = broadcast ? nil : "0A1B2C3D-0000-4000-8000-00000000000A"
        request.topic = "com.example.app"
        request.collapseID = "group-1"
        request.pushType = "alert"
        request.priority = "5"
        request.expiration = "0"
        request.requestID = broadcast ? "0a1b2c3d-0000-4000-8000-00000000000b" : nil
        request.otherHeaders = [(name: "x-trace", value: "1"), (name: "x-trace", value: "2")]
        let body = Array(#"{"aps":{"alert":"hello \u00e9"}}"#.utf8) + [0xFF]
        request.body = body
        request.bodyLength = body.count + 10
        return request
    }

    @Test(arguments: [false, true], [false, true])
    func everyRenderedFieldComesBack(broadcast: Bool, echoed: Bool) throws {
        let request = Self.request(broadcast: broadcast)
        var auth = AuthSummary(method: .token)
        auth.teamId = "TEAM000001"
        auth.keyId = "KEY0000001"
        let interpreted = broadcast ? nil : RawRecord.Interpreted(
            priority: 5, expiration: 0, pushType: .alert, topic: "com.example.app",
            lint: [LintFinding(.invalidJSON, "not JSON")])
        let shape = RequestShape(request, interpreted: interpreted, environment: .production, auth: auth, connectionID: 42)
        let details = broadcast
            ? RawRecord.BroadcastDetails(kind: .broadcast, bundleID: "com.example.app", channelID: "chan", operation: .create)
            : nil
        let id: APNSResponse.RequestID = echoed
            ? .echoed(broadcast ? request.requestID! : request.apnsID!)
            : .generated(UUIDValue(high: 0x0123_4567_89AB_4CDE, low: 0x8123_4567_89AB_CDEF))
        for rejection in [nil, Rejection(.unregistered, timestamp: 1_767_225_600_000), Rejection(.badEnvironmentKeyIdInToken, spelling: .observed)] {
            let original = RawRecord(
                seq: 3, receivedAt: 1_700_000_000_123, shape: shape, path: request.path,
                apnsIDHeader: request.apnsID, apnsID: id, uniqueID: rejection == nil ? UUIDValue(high: 1, low: 2) : nil,
                status: rejection?.status ?? 200, rejection: rejection, injected: rejection != nil, action: rejection == nil ? nil : .hang,
                streamID: 7, broadcast: details, responseWritten: true, clockOffset: 3600)
            var encoder = SharedRecordEncoder(), decoder = SharedRecordDecoder()
            var stored = ByteBuffer()
            encoder.encode(original, into: &stored)
            let read = try decoder.decode(stored, seq: 99)
            // A second record of the same shape is read back with the same shape object.
            var again = ByteBuffer()
            encoder.encode(original, into: &again)
            #expect(try decoder.decode(again, seq: 100).shape === read.shape)
            // Cut anywhere, a body is refused, never misread.
            for length in stride(from: 0, to: stored.readableBytes, by: 7) {
                var fresh = SharedRecordDecoder()
                #expect(throws: (any Error).self) { try fresh.decode(stored.getSlice(at: 0, length: length)!, seq: 1) }
            }
            let validator = Validator()
            var expected = original.render(validator: validator)
            expected.seq = 99
            #expect(read.render(validator: validator) == expected)
            #expect(read.seq == 99 && read.kind == original.kind && read.isAccepted == original.isAccepted)
            #expect(read.token == original.token)
            #expect(read.topic == original.topic)
            #expect(read.auth == original.auth)
        }
    }
}

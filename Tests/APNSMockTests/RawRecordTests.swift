@testable import APNSMock
import APNSMockCore
import Testing

/// The ring's packed record gives back exactly what it was built from.
@Suite("Packed records")
struct RawRecordTests {
    static let generated = UUIDValue(high: 0x0123_4567_89AB_4CDE, low: 0x8123_4567_89AB_CDEF)
    static let unique = UUIDValue(high: 0x1111_2222_3333_4444, low: 0x8555_6666_7777_8888)
    static let echoed = "0A1B2C3D-0000-4000-8000-00000000000A"

    static func shape(requestID: String? = nil) -> RequestShape {
        var request = PushRequest()
        request.topic = "com.example.app"
        request.requestID = requestID
        return RequestShape(request, interpreted: nil, environment: .sandbox, auth: AuthSummary(method: .token), connectionID: 7)
    }

    static let rejections: [Rejection?] = [
        nil,
        Rejection(.badDeviceToken),
        Rejection(.unregistered, timestamp: 0),
        Rejection(.unregistered, timestamp: 1_767_225_600_000),
        Rejection(.badEnvironmentKeyIdInToken, spelling: .observed),
    ]

    @Test(arguments: [false, true], [false, true])
    func everyFieldComesBack(echoedID: Bool, broadcast: Bool) {
        for rejection in Self.rejections {
            for status in [nil, 200, 410] as [Int?] {
                for action in [nil, FaultRule.Action.Name.hang] {
                    let details = broadcast
                        ? RawRecord.BroadcastDetails(kind: .broadcast, bundleID: "com.example.app", channelID: "c", operation: nil) : nil
                    let apnsID: APNSResponse.RequestID = echoedID ? .echoed(Self.echoed) : .generated(Self.generated)
                    let uniqueID = status == 200 ? Self.unique : nil
                    let record = RawRecord(
                        seq: 9, receivedAt: 1_700_000_000_123,
                        shape: Self.shape(requestID: broadcast && echoedID ? Self.echoed : nil),
                        path: "/3/device/abcd", apnsIDHeader: !broadcast && echoedID ? Self.echoed : nil, apnsID: apnsID,
                        uniqueID: uniqueID, status: status, rejection: rejection, injected: action != nil, action: action,
                        streamID: 31, broadcast: details)
                    #expect(record.apnsID == apnsID)
                    #expect(record.uniqueID == uniqueID)
                    #expect(record.status == status)
                    #expect(record.rejection == rejection)
                    #expect(record.rejection?.wireReason == rejection?.wireReason)
                    #expect(record.injected == (action != nil) && record.action == action)
                    #expect(record.streamID == 31 && record.seq == 9 && record.receivedAt == 1_700_000_000_123)
                }
            }
        }
    }

    /// Two cache lines: the ring writes one record per request into memory it last touched
    /// `capacity` requests ago.
    @Test func aRecordFitsTwoCacheLines() {
        #expect(MemoryLayout<RawRecord>.stride <= 128)
    }

    /// A repeated request shares its connection's last shape, unless what the shape interprets
    /// beyond the request differs: the lint (a finding depends on the channels that exist) or, for a
    /// broadcast, the app from `:path`. Device and broadcast-side shapes are kept apart.
    @Test func shapesAreSharedOnlyWhenEverythingMatches() {
        var connection = ConnectionMemo(state: MockState(configuration: ServerConfiguration()))
        var request = PushRequest()
        request.topic = "com.example.app"
        request.pushType = "liveactivity"
        request.body = Array(#"{"aps":{}}"#.utf8)
        request.bodyLength = request.body.count
        let finding = LintFinding(.liveActivityUnknownChannel, "no such channel")
        func interpreted(_ topic: String, _ lint: [LintFinding]) -> RawRecord.Interpreted {
            RawRecord.Interpreted(priority: 10, expiration: nil, pushType: .liveactivity, topic: topic, lint: lint)
        }
        func device(_ lint: [LintFinding]) -> RequestShape {
            connection.shapes.device(
                for: request, accepted: true, lint: lint, interpreted: { interpreted("com.example.app", lint) },
                environment: .sandbox, auth: AuthSummary(method: .token), connectionID: 1)
        }
        func broadcast(_ topic: String, _ lint: [LintFinding]) -> RequestShape {
            connection.shapes.broadcastSide(
                for: request, interpreted: interpreted(topic, lint), environment: .sandbox,
                auth: AuthSummary(method: .token), connectionID: 1)
        }
        let first = device([finding])
        #expect(device([finding]) === first)
        let afterTheChannelCame = device([])
        #expect(afterTheChannelCame !== first && afterTheChannelCame.interpreted?.lint == [])
        let sent = broadcast("com.example.app", [])
        #expect(sent !== afterTheChannelCame)
        #expect(broadcast("com.example.app", []) === sent)
        #expect(broadcast("com.example.other", []) !== sent)
        #expect(device([]) === afterTheChannelCame)
    }
}

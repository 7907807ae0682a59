import Testing
@testable import APNSMockCore

@Test func reasonStatus() { #expect(Reason.payloadTooLarge.status == 413) }

@Test("statuses follow Apple's table", arguments: [
    (Reason.badCollapseId, 400), (.topicDisallowed, 400), (.invalidProviderToken, 403),
    (.badEnvironmentKeyIdInToken, 403), (.badPath, 404), (.methodNotAllowed, 405), (.unregistered, 410),
    (.expiredToken, 410), (.payloadTooLarge, 413), (.tooManyRequests, 429), (.internalServerError, 500),
    (.shutdown, 503),
])
func reasonStatusTable(reason: Reason, status: Int) {
    #expect(reason.status == status)
}

@Test func onlyGoneReasonsCarryATimestamp() {
    #expect(Rejection(.badTopic, timestamp: 5).timestamp == nil)
    #expect(Rejection(.unregistered, timestamp: 5).timestamp == 5)
    #expect(String(decoding: ErrorBody.bytes(for: .shutdown), as: UTF8.self) == #"{"reason":"Shutdown"}"#)
}

import Testing
@testable import APNSMockCore
@Test func reasonStatus() { #expect(Reason.payloadTooLarge.status == 413) }

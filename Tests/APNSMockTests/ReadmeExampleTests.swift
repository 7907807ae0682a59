import APNSMock
import APNSMockTesting
import Foundation
import Testing

// The README's Swift example ("Asserting from your tests"): ReadmeExamplesAreTheFilesTests holds
// the README's block to this file.
@Test func theServiceSendsAWelcomePush() async throws {
    try await MockHarness.withRunningMock { mock in
        let token = String(repeating: "a1", count: 32)
        // What your service does, with its own client (here curl): push to mock.baseURL,
        // trusting mock.caPath, with a provider token for the demo key.
        let answer = try await Curl.send(
            url: "\(mock.baseURL)/3/device/\(token)", caPath: mock.caPath,
            headers: ["apns-topic": "com.example.app", "apns-push-type": "alert"],
            body: Data(#"{"aps":{"alert":{"title":"Welcome"}}}"#.utf8))
        #expect(answer.status == 200)

        let records = try await mock.admin.waitFor(RecordQuery(token: token), count: 1, timeout: 5)
        #expect(records[0].payload?["aps"]?["alert"]?["title"] == .string("Welcome"))
        #expect(records[0].headers["apns-push-type"] == "alert")
    }
}

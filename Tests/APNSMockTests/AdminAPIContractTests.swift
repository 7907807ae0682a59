@testable import APNSMock
import APNSMockCore
import APNSMockTesting
import Foundation
import Testing

/// The admin API's OpenAPI document (Sources/APNSMock/Admin/openapi.json) is its contract: every
/// route the router has is in it and every operation in it is a route, it is what
/// `/v1/openapi.json` serves, and Hummingbird's own answers (no route, wrong method, a body too
/// large) come in the API's error shape. scripts/openapi checks the live answers against it with
/// schemathesis; the cases it turned up are rows here.
@Suite("The admin API's OpenAPI contract", .timeLimit(.minutes(2)))
struct AdminAPIContractTests {
    static func routes() -> [String] {
        let configuration = ServerConfiguration()
        return AdminAPI(
            state: MockState(configuration: configuration), validator: Validator(), checksApps: false, maxConcurrentStreams: 1000,
            token: nil, caCertificatePEM: nil, health: { .stopping(nil) }
        ).routeDescriptions()
    }

    /// `/v1/devices/:token` as the document writes it: `/v1/devices/{token}`.
    static func templated(_ path: String) -> String {
        path.split(separator: "/", omittingEmptySubsequences: false).map { segment in
            segment.hasPrefix(":") ? "{\(segment.dropFirst())}" : String(segment)
        }.joined(separator: "/")
    }

    @Test func everyRouteIsDocumentedAndEveryDocumentedOperationIsARoute() {
        let routes = Set(Self.routes().map { route in
            let parts = route.split(separator: " ", maxSplits: 1)
            return "\(parts[0]) \(Self.templated(String(parts[1])))"
        })
        let documented = Set(OpenAPIDocument.routes.map(\.description))
        #expect(!documented.isEmpty)
        #expect(routes.subtracting(documented).sorted() == [], "routes the document lacks")
        #expect(documented.subtracting(routes).sorted() == [], "documented operations no route serves")
    }

    @Test func theDocumentIsOpenAPI31WithEveryOperationNamedAndAnswered() throws {
        let document = try #require(try JSONSerialization.jsonObject(with: Data(OpenAPIDocument.bytes)) as? [String: Any])
        #expect(document["openapi"] as? String == "3.1.0")
        let paths = try #require(document["paths"] as? [String: [String: Any]])
        var operationIDs: [String] = []
        for (path, item) in paths {
            for (method, value) in item {
                let operation = try #require(value as? [String: Any], "\(method) \(path)")
                operationIDs.append(try #require(operation["operationId"] as? String, "\(method) \(path) has no operationId"))
                let responses = try #require(operation["responses"] as? [String: Any])
                #expect(responses.keys.contains { $0.hasPrefix("2") }, "\(method) \(path) documents no success")
                // Every operation that takes the bearer token documents its 401.
                if operation["security"] == nil { #expect(responses["401"] != nil, "\(method) \(path) lacks 401") }
                // And the browser checks' 403 (AdminBrowserGuardMiddleware).
                if operation["security"] == nil { #expect(responses["403"] != nil, "\(method) \(path) lacks 403") }
            }
        }
        #expect(Set(operationIDs).count == operationIDs.count, "operationIds repeat")
    }

    @Test func theServedDocumentIsTheRepositorysAndNeedsNoToken() async throws {
        try await MockHarness.withRunningMock(configure: { $0.admin.token = "s3cret" }) { mock in
            var admin = mock.admin
            admin.token = nil
            let served = try await admin.openAPIDocument()
            #expect(Array(served) == OpenAPIDocument.bytes)
            let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent(
                "../../Sources/APNSMock/Admin/openapi.json")
            #expect(try Data(contentsOf: file) == served)
            // Everything else still needs it.
            #expect(try await admin.request("GET", "/v1/stats").status == 401)
        }
    }

    @Test func hummingbirdsOwnAnswersComeInTheAPIsErrorShape() async throws {
        try await MockHarness.withRunningMock { mock in
            let unknown = try await mock.admin.request("GET", "/v1/nothing")
            #expect(unknown.status == 404)
            #expect(unknown.error?.hasPrefix("path: no endpoint /v1/nothing") == true)
            let method = try await mock.admin.request("PUT", "/v1/clock")
            #expect(method.status == 405)
            #expect(method.error == "method: PUT is not allowed on /v1/clock (allowed: GET, POST)")
            let templated = try await mock.admin.request("GET", "/v1/devices/abcd/unregister")
            #expect(templated.status == 405)
            let large = try await mock.admin.request("POST", "/v1/faults", body: Data(repeating: 0x20, count: AdminAPI.bodyLimit + 1))
            #expect(large.status == 413)
            #expect(large.error?.hasPrefix("body: larger than 1048576 bytes") == true)
        }
    }

    /// What schemathesis found, as rows: each input once gave an answer the document did not allow.
    @Test func whatThePropertyBasedRunFound() async throws {
        try await MockHarness.withRunningMock { mock in
            // A negative unregisteredAt was taken (a device unregistered in 1969).
            let negative = try await mock.admin.request(
                "POST", "/v1/devices", body: Data(#"{"token":"00","unregisteredAt":-1}"#.utf8))
            #expect(negative.status == 400)
            #expect(negative.error?.hasPrefix("unregisteredAt: -1 is before 1970") == true)
            // A null field is an absent one in every body, unregister's included (it said 400).
            let nulls = try await mock.admin.request(
                "POST", "/v1/devices/00/unregister", body: Data(#"{"reason":null,"timestamp":null}"#.utf8))
            #expect(nulls.status == 200)
            let device = try await mock.admin.request(
                "POST", "/v1/devices", body: Data(#"{"token":"0a","topic":null,"environment":null}"#.utf8))
            #expect(device.status == 201)
            // A rule lists every field it was given: connection, afterRequests, maxConcurrentStreams
            // and durationMs were left out.
            let rule = try await mock.admin.addFault(
                json: #"{"match":{"connection":3,"afterRequests":2},"action":"shrink-streams","maxConcurrentStreams":5,"durationMs":100}"#)
            let view = try rule.decode(FaultView.self, expecting: [201])
            #expect(view.match.connection == 3 && view.match.afterRequests == 2)
            #expect(view.maxConcurrentStreams == 5 && view.durationMs == 100)
        }
    }

    /// An event stream whose client goes away gives its place back at once, not at its next write
    /// (up to 15 s later): 100 streams opened and dropped in a row, within the limit of 64.
    @Test func eventStreamsOfClientsThatLeftAreGoneAtOnce() async throws {
        try await MockHarness.withRunningMock { mock in
            for _ in 0..<100 {
                let stream = try await mock.admin.events()
                stream.close()
            }
            // Every one of the 64 places is free again (a client's close reaches the mock within
            // moments; a few tries cover that).
            var streams: [AdminEventStream] = []
            defer { streams.forEach { $0.close() } }
            for _ in 0..<EventStreams.maximumStreams {
                var opened: AdminEventStream?
                for _ in 0..<50 where opened == nil {
                    opened = try? await mock.admin.events()
                    if opened == nil { try await Task.sleep(for: .milliseconds(20)) }
                }
                streams.append(try #require(opened))
            }
            #expect(streams.count == EventStreams.maximumStreams)
        }
    }
}

import APNSMock
import APNSMockCore
import APNSMockTesting
import Foundation
import NIOCore
import Testing

/// The engine end to end: real TLS, real HTTP/2 clients (curl, h2load, swift-nio-ssl with
/// hand-made frames) against an in-process mock on a free port.
@Suite("APNs endpoint over TLS and HTTP/2", .timeLimit(.minutes(2)))
struct EndToEndTests {
    static let payload = Data(#"{"aps":{"alert":"hello"}}"#.utf8)

    @Test func acceptedPushGetsApnsIdAndUniqueIdInSandbox() async throws {
        try await MockHarness.withRunningMock { mock in
            let response = try await Curl.send(
                url: "\(mock.baseURL)/3/device/\(Pushes.token)", caPath: mock.caPath,
                headers: ["apns-topic": "com.example.app"])
            #expect(response.httpVersion == "HTTP/2")
            #expect(response.status == 200)
            #expect(response.body.isEmpty)
            let apnsID = try #require(response.headers["apns-id"])
            #expect(UUID(uuidString: apnsID) != nil)
            #expect(apnsID == apnsID.uppercased())
            let uniqueID = try #require(response.headers["apns-unique-id"])
            #expect(UUID(uuidString: uniqueID) != nil)
            #expect(uniqueID == uniqueID.lowercased())
        }
    }

    @Test func echoesTheClientsApnsIdByteForByte() async throws {
        try await MockHarness.withRunningMock { mock in
            let sent = "123e4567-e89b-12d3-a456-426614174000"
            let response = try await Curl.send(
                url: "\(mock.baseURL)/3/device/\(Pushes.token)", caPath: mock.caPath, headers: ["apns-id": sent, "apns-topic": "com.example.app"])
            #expect(response.status == 200)
            #expect(response.headers["apns-id"] == sent)
        }
    }

    @Test func productionHostGetsNoUniqueId() async throws {
        try await MockHarness.withRunningMock { mock in
            let response = try await Curl.send(
                url: "https://api.push.apple.com:\(mock.apnsPort)/3/device/\(Pushes.token)", caPath: mock.caPath,
                extra: ["--resolve", "api.push.apple.com:\(mock.apnsPort):127.0.0.1"])
            #expect(response.status == 200)
            #expect(response.headers["apns-unique-id"] == nil)
            #expect(response.headers["apns-id"] != nil)
        }
    }

    struct ErrorCase: Sendable, CustomTestStringConvertible {
        var method: String
        var path: String
        var status: Int
        var reason: Reason
        var testDescription: String { "\(method) \(path) → \(status) \(reason.rawValue)" }
    }

    static let errorCases: [ErrorCase] = [
        ErrorCase(method: "GET", path: "/3/device/\(Pushes.token)", status: 405, reason: .methodNotAllowed),
        ErrorCase(method: "POST", path: "/3/devices/\(Pushes.token)", status: 404, reason: .badPath),
        ErrorCase(method: "POST", path: "/", status: 404, reason: .badPath),
        ErrorCase(method: "POST", path: "/3/device/", status: 400, reason: .missingDeviceToken),
        ErrorCase(method: "POST", path: "/3/device/not-hex", status: 400, reason: .badDeviceToken),
        ErrorCase(method: "POST", path: "/3/device/abc", status: 400, reason: .badDeviceToken),
    ]

    @Test(arguments: errorCases)
    func errorsCarryStatusReasonContentTypeAndApnsId(_ errorCase: ErrorCase) async throws {
        try await MockHarness.withRunningMock { mock in
            let response = try await Curl.send(
                url: mock.baseURL + errorCase.path, caPath: mock.caPath, method: errorCase.method,
                body: errorCase.method == "GET" ? nil : Self.payload)
            #expect(response.status == errorCase.status)
            #expect(response.error == CurlResponse.ErrorBody(reason: errorCase.reason.rawValue, timestamp: nil))
            #expect(response.headers["content-type"] == "application/json")
            #expect(response.headers["apns-id"].flatMap(UUID.init(uuidString:)) != nil)
        }
    }

    @Test(arguments: [["--tlsv1.2", "--tls-max", "1.2"], ["--tlsv1.3"]])
    func servesTLS12AndTLS13(_ flags: [String]) async throws {
        try await MockHarness.withRunningMock { mock in
            let response = try await Curl.send(
                url: "\(mock.baseURL)/3/device/\(Pushes.token)", caPath: mock.caPath, extra: flags)
            #expect(response.status == 200)
        }
    }

    @Test func acceptsAClientCertificateWhenOffered() async throws {
        try await MockHarness.withRunningMock { mock in
            let client = mock.certificates.clientCertificatePaths(for: "com.example.app")
            let response = try await Curl.send(
                url: "\(mock.baseURL)/3/device/\(Pushes.token)", caPath: mock.caPath,
                extra: ["--cert", client.certificate, "--key", client.key])
            #expect(response.status == 200)
        }
    }

    @Test func manyStreamsOnOneConnection() async throws {
        // h2load opens its first 100 streams before it reads the server's SETTINGS, so the
        // one-stream-until-authenticated limit is raised (as scripts/bench does).
        try await MockHarness.withRunningMock(configure: { $0.http2.streamsBeforeAuthentication = 1000 }) { mock in
            let load = try await H2Load.push(
                5000, to: mock.baseURL, token: Pushes.token, payload: String(decoding: Self.payload, as: UTF8.self), streams: 200, timeout: 60)
            #expect(load.output.exitCode == 0)
            #expect(load.text.contains("requests: 5000 total, 5000 started, 5000 done, 5000 succeeded, 0 failed"))
            #expect(load.text.contains("status codes: 5000 2xx, 0 3xx, 0 4xx, 0 5xx"))
            #expect(mock.listener.totalConnections == 1)
        }
    }

    @Test func advertisesAPNsSettingsWithOneStreamBeforeAuthentication() async throws {
        try await MockHarness.withRunningMock(configure: { $0.http2.maxConcurrentStreams = 250 }) { mock in
            let client = try await RawClient.connect(port: mock.apnsPort, security: .tls(caPath: mock.caPath, alpn: ["h2"]))
            try await client.send(H2.preface + H2.settings())
            let received = await client.waitUntil { !H2.parse($0).isEmpty }
            let settings = try #require(H2.parse(received).first { $0.type == H2.FrameType.settings.rawValue && $0.flags == 0 })
            var values: [UInt16: UInt32] = [:]
            for offset in stride(from: 0, to: settings.payload.count, by: 6) {
                values[UInt16(settings.payload[offset]) << 8 | UInt16(settings.payload[offset + 1])] = H2.readBE32(settings.payload, offset + 2)
            }
            // A token-auth connection starts with one stream (raised once a token is accepted).
            #expect(values == [1: 4096, 3: 1, 4: 65535, 5: 16384, 6: 8000])
            await client.close()
        }
    }

    @Test func answersPing() async throws {
        try await MockHarness.withRunningMock { mock in
            let client = try await RawClient.connect(port: mock.apnsPort, security: .tls(caPath: mock.caPath, alpn: ["h2"]))
            let opaque: [UInt8] = [1, 2, 3, 4, 5, 6, 7, 8]
            try await client.send(H2.preface + H2.settings() + H2.frame(.ping, payload: opaque))
            let received = await client.waitUntil { bytes in
                H2.parse(bytes).contains { $0.type == H2.FrameType.ping.rawValue }
            }
            let pong = H2.parse(received).first { $0.type == H2.FrameType.ping.rawValue }
            #expect(pong?.flags == H2.ack)
            #expect(pong?.payload == opaque)
            await client.close()
        }
    }
}

import APNSMock
import APNSMockCore
import APNSMockTesting
import Foundation
import Testing

/// Certificate authentication end to end: curl presenting client certificates made by the mock
/// and by the `openssl` command.
@Suite("Certificate authentication", .timeLimit(.minutes(3)))
struct CertificateAuthenticationTests {
    static let deviceToken = String(repeating: "ab", count: 32)

    static func send(
        _ mock: RunningMock, certificate: (certificate: String, key: String), headers: [String: String],
        authorization: String? = nil, host: String = "localhost"
    ) async throws -> CurlResponse {
        var extra = ["--cert", certificate.certificate, "--key", certificate.key]
        if host != "localhost" { extra += ["--resolve", "\(host):\(mock.apnsPort):127.0.0.1"] }
        return try await Curl.send(
            url: "https://\(host):\(mock.apnsPort)/3/device/\(deviceToken)", caPath: mock.caPath,
            headers: headers, authorization: authorization, extra: extra)
    }

    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        var variant: String?
        var headers: [String: String]
        var authorization: String? = nil
        var host = "localhost"
        var status: Int
        var reason: String?
        var testDescription: String { "\(name) → \(status) \(reason ?? "")" }
    }

    static let cases: [Case] = [
        Case(name: "app topic", variant: nil, headers: ["apns-topic": "com.example.app"], status: 200),
        Case(name: "authorization is ignored", variant: nil, headers: ["apns-topic": "com.example.app"], authorization: "bearer nonsense", status: 200),
        Case(name: "voip topic of the certificate", variant: nil, headers: ["apns-topic": "com.example.app.voip", "apns-push-type": "voip"], status: 200),
        Case(name: "multi-topic certificate, no topic", variant: nil, headers: [:], status: 400, reason: "MissingTopic"),
        Case(name: "topic the certificate lacks", variant: nil, headers: ["apns-topic": "com.example.app.push-type.liveactivity", "apns-push-type": "liveactivity"], status: 400, reason: "TopicDisallowed"),
        Case(name: "production certificate in sandbox", variant: "production", headers: ["apns-topic": "com.example.app"], status: 403, reason: "BadCertificateEnvironment"),
        Case(name: "development certificate in production", variant: "development", headers: ["apns-topic": "com.example.app"], host: "api.push.apple.com", status: 403, reason: "BadCertificateEnvironment"),
        Case(name: "development certificate in sandbox", variant: "development", headers: ["apns-topic": "com.example.app"], status: 200),
        Case(name: "production certificate in production", variant: "production", headers: ["apns-topic": "com.example.app"], host: "api.push.apple.com", status: 200),
    ]

    @Test(arguments: cases)
    func certificateAuthentication(_ testCase: Case) async throws {
        try await MockHarness.withRunningMock { mock in
            let certificate = mock.certificates.clientCertificatePaths(for: "com.example.app", variant: testCase.variant)
            let response = try await Self.send(
                mock, certificate: certificate, headers: testCase.headers, authorization: testCase.authorization,
                host: testCase.host)
            #expect(response.status == testCase.status)
            #expect(response.reason == testCase.reason)
        }
    }

    /// Makes a client certificate with the `openssl` command: key, CSR, and a certificate signed by
    /// `ca` (or self-signed), carrying Apple's topic extension with the given topics.
    static func opensslCertificate(
        in directory: URL, name: String, uid: String, topics: [String], signedByMockCA ca: TestCertificates?
    ) async throws -> (certificate: String, key: String) {
        let key = directory.appendingPathComponent("\(name)-key.pem").path
        let csr = directory.appendingPathComponent("\(name).csr").path
        let certificate = directory.appendingPathComponent("\(name).pem").path
        let extensions = directory.appendingPathComponent("\(name).ext").path
        // SEQUENCE { UTF8String topic, SEQUENCE { UTF8String "app" } … } as DER hex.
        func tlv(_ tag: UInt8, _ content: [UInt8]) -> [UInt8] { [tag, UInt8(content.count)] + content }
        let der = tlv(0x30, topics.flatMap { tlv(0x0C, Array($0.utf8)) + tlv(0x30, tlv(0x0C, Array("app".utf8))) })
        let hex = der.map { String(format: "%02X", $0) }.joined()
        try """
            basicConstraints=critical,CA:FALSE
            extendedKeyUsage=clientAuth
            1.2.840.113635.100.6.3.1=DER:0500
            1.2.840.113635.100.6.3.6=DER:\(hex)

            """.write(toFile: extensions, atomically: true, encoding: .utf8)
        let subject = "/UID=\(uid)/CN=Apple Push Services: \(uid)/OU=DEMOTEAM01/O=openssl test"
        var run = try await ExternalTool.run("openssl", ["req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                                                         "-nodes", "-keyout", key, "-out", csr, "-subj", subject])
        #expect(run.exitCode == 0, "\(run.stderr)")
        if let ca {
            run = try await ExternalTool.run("openssl", ["x509", "-req", "-in", csr, "-CA", ca.caPath, "-CAkey", ca.caKeyPath,
                                                         "-CAcreateserial", "-days", "30", "-out", certificate, "-extfile", extensions])
        } else {
            run = try await ExternalTool.run("openssl", ["x509", "-req", "-in", csr, "-signkey", key, "-days", "30",
                                                         "-out", certificate, "-extfile", extensions])
        }
        #expect(run.exitCode == 0, "\(run.stderr)")
        return (certificate, key)
    }

    @Test func singleTopicCertificateFromOpenSSLSuppliesTheTopic() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("apns-mock-openssl-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try await MockHarness.withRunningMock { mock in
            let certificate = try await Self.opensslCertificate(
                in: directory, name: "single", uid: "com.example.app", topics: ["com.example.app"],
                signedByMockCA: mock.certificates)
            let withoutTopic = try await Self.send(mock, certificate: certificate, headers: [:])
            #expect(withoutTopic.status == 200)
            #expect(withoutTopic.reason == nil)
            let otherTopic = try await Self.send(mock, certificate: certificate, headers: ["apns-topic": "com.example.app.voip", "apns-push-type": "voip"])
            #expect(otherTopic.status == 400)
            #expect(otherTopic.reason == "TopicDisallowed")
        }
    }

    @Test func untrustedCertificateIsBadCertificate() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("apns-mock-openssl-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try await MockHarness.withRunningMock { mock in
            let certificate = try await Self.opensslCertificate(
                in: directory, name: "selfsigned", uid: "com.example.app", topics: ["com.example.app"], signedByMockCA: nil)
            // The handshake succeeds; every request is refused.
            let response = try await Self.send(mock, certificate: certificate, headers: ["apns-topic": "com.example.app"])
            #expect(response.status == 403)
            #expect(response.reason == "BadCertificate")
        }
    }
}

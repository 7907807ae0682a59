@testable import APNSMock
import APNSMockCore
import APNSMockTesting
import Foundation
import Testing

/// Extra names for the server certificate the mock issues itself (`tls.hosts`,
/// `APNS_MOCK_TLS_HOSTS`): a client dialling a cluster's service name verifies it.
@Suite("The server certificate's extra names", .timeLimit(.minutes(2)))
struct CertificateHostsTests {
    static let serviceName = "apns-mock.ci.svc.cluster.local"

    /// A certificate made before a name was configured is issued again with it; one the mock's CA
    /// did not issue is left alone.
    @Test func theMocksOwnCertificateIsIssuedAgainWithANewName() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("apns-mock-hosts-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let before = TestCertificates(directory: directory, apps: [], tokenKeys: [])
        try before.ensure()
        let first = try Certificate.read(pem: String(contentsOfFile: before.serverPaths(for: .standard).certificate, encoding: .utf8))
        #expect(first.missingNames([Self.serviceName, "10.1.2.3"]) == [Self.serviceName, "10.1.2.3"])
        #expect(first.missingNames(TestCertificates.defaultDNSNames).isEmpty)

        let after = TestCertificates(directory: directory, extraHosts: [Self.serviceName, "10.1.2.3", "*.apns.test"], apps: [], tokenKeys: [])
        let written = try after.ensure()
        #expect(written.contains(after.serverPaths(for: .standard).certificate))
        let second = try Certificate.read(pem: String(contentsOfFile: after.serverPaths(for: .standard).certificate, encoding: .utf8))
        #expect(second.missingNames([Self.serviceName, "10.1.2.3", "*.apns.test", "localhost", "127.0.0.1"]).isEmpty)
        // Nothing more to do the next time.
        #expect(try after.ensure().isEmpty)
    }

    /// End to end: the variable names the service; curl dials that name and verifies the chain.
    @Test func aClientDiallingTheServiceNameVerifiesTheCertificate() async throws {
        let certs = try Unprivileged.temporaryDirectory("hosts-certs")
        defer { try? FileManager.default.removeItem(at: certs) }
        try await ServerProcess.withRunning(
            environment: ["APNS_MOCK_TLS_HOSTS": "\(Self.serviceName), 10.9.8.7"], arguments: ["--certs", certs.path]
        ) { server in
            let ca = certs.appendingPathComponent("ca.pem").path
            let url = "https://\(Self.serviceName):\(server.apnsPort)/3/device/\(Pushes.token)"
            let response = try await Curl.send(
                url: url, caPath: ca, authorization: nil,
                extra: ["--resolve", "\(Self.serviceName):\(server.apnsPort):127.0.0.1"])
            // Reached and verified: the answer is APNs' (no token sent: 403 MissingProviderToken).
            #expect(response.status == 403)
            #expect(response.reason == "MissingProviderToken")
        }
    }

    @Test(arguments: ["bad_name.example", "-x.example", "a..b", "999.1.1.1", "*"])
    func aBadNameStopsStartUpNamingIt(_ host: String) throws {
        do {
            _ = try Configuration.parse(yaml: "tls: { hosts: ['\(host)'] }", file: "mock.yaml")
            Issue.record("accepted \(host)")
        } catch {
            #expect("\(error)".contains("tls.hosts"), "\(error)")
        }
        var configuration = Configuration()
        #expect(throws: ConfigurationError.self) {
            try EnvironmentVariables(["APNS_MOCK_TLS_HOSTS": "ok.example,\(host)"]).apply(to: &configuration)
        }
    }
}

import APNSMock
import APNSMockTesting
import Foundation
import Testing

/// TLS session resumption is on, as Apple's servers offer it: a client that reconnects (after a
/// GOAWAY, per batch) presents the ticket of its last session and skips the full handshake.
// Three minutes: two handshakes take seconds, but under the whole suite (replicas and PostgreSQL
// beside it) one run took more than one.
@Suite("TLS session resumption", .timeLimit(.minutes(3)))
struct SessionResumptionTests {
    @Test(arguments: ["-tls1_3", "-tls1_2"])
    func aReconnectingClientResumesItsSession(_ version: String) async throws {
        try await MockHarness.withRunningMock { mock in
            let session = FileManager.default.temporaryDirectory.appendingPathComponent("apns-mock-session-\(UUID()).pem").path
            defer { try? FileManager.default.removeItem(atPath: session) }
            let common = "openssl s_client -connect 127.0.0.1:\(mock.apnsPort) -servername localhost -alpn h2"
                + " -CAfile \(mock.caPath) \(version) -verify_return_error"
            // Standard input stays open for a second, so that the client reads the session ticket
            // a TLS 1.3 server sends after the handshake before it closes (with stdin at its end at
            // once, a slow run closed first and saved no session).
            let first = try await ExternalTool.run("sh", ["-c", "sleep 1 | \(common) -sess_out \(session) 2>&1"])
            #expect(first.text.contains("New, TLSv1."), "\(first.text.prefix(600))")
            let second = try await ExternalTool.run("sh", ["-c", "sleep 1 | \(common) -sess_in \(session) 2>&1"])
            #expect(second.text.contains("Reused, TLSv1."), "\(second.text.prefix(600))")
        }
    }

    /// A full handshake sends the server certificate and the CA that issued it, as it did when
    /// OpenSSL built that chain in every handshake; the mock builds it once at start.
    @Test func aFullHandshakeSendsTheCertificateAndItsCA() async throws {
        try await MockHarness.withRunningMock { mock in
            let output = try await ExternalTool.run("sh", ["-c",
                "sleep 1 | openssl s_client -connect 127.0.0.1:\(mock.apnsPort) -servername localhost -alpn h2"
                    + " -CAfile \(mock.caPath) -verify_return_error -showcerts 2>&1"]).text
            #expect(output.components(separatedBy: "-----BEGIN CERTIFICATE-----").count - 1 == 2, "\(output.prefix(600))")
            #expect(output.contains("Verify return code: 0 (ok)"), "\(output.prefix(600))")
        }
    }
}

@testable import APNSMock
import APNSMockTesting
import Foundation
import Testing

@Suite("Generated certificate material")
struct CertificateTests {
    @Test func serverCertificateNamesEveryHostInterfaceMdLists() async throws {
        let material = try MockHarness.sharedCertificates()
        let text = try await ExternalTool.run("openssl", ["x509", "-in", material.serverCertificatePath, "-noout", "-ext", "subjectAltName"]).text
        for name in ["localhost", "apns-mock", "api.push.apple.com", "api.sandbox.push.apple.com", "api.development.push.apple.com"] {
            #expect(text.contains("DNS:\(name)"))
        }
        #expect(text.contains("IP Address:127.0.0.1"))
        #expect(text.contains("IP Address:0:0:0:0:0:0:0:1"))
        let verify = try await ExternalTool.run("openssl", ["verify", "-CAfile", material.caPath, material.serverCertificatePath])
        #expect(verify.exitCode == 0)
    }

    @Test func clientCertificatesCarryApplesExtensions() async throws {
        let material = try MockHarness.sharedCertificates()
        let universal = material.clientCertificatePaths(for: "com.example.app").certificate
        let text = try await ExternalTool.run("openssl", ["x509", "-in", universal, "-noout", "-text"]).text
        #expect(text.contains("1.2.840.113635.100.6.3.1"))
        #expect(text.contains("1.2.840.113635.100.6.3.2"))
        #expect(text.contains("1.2.840.113635.100.6.3.6"))
        #expect(text.contains("UID = com.example.app") || text.contains("UID=com.example.app"))
        let development = material.clientCertificatePaths(for: "com.example.app", variant: "development").certificate
        let devText = try await ExternalTool.run("openssl", ["x509", "-in", development, "-noout", "-text"]).text
        #expect(devText.contains("1.2.840.113635.100.6.3.1"))
        #expect(!devText.contains("1.2.840.113635.100.6.3.2"))
        let verify = try await ExternalTool.run("openssl", ["verify", "-CAfile", material.caPath, "-purpose", "sslclient", universal])
        #expect(verify.exitCode == 0)
    }

    @Test func topicExtensionIsAppleShapedDER() {
        let der = ApplePushTopics.app("com.x").der
        // SEQUENCE { UTF8String "com.x", SEQUENCE { UTF8String "app" }, … }
        #expect(Array(der.prefix(2)) == [0x30, UInt8(der.count - 2)])
        #expect(Array(der[2..<9]) == [0x0C, 5] + Array("com.x".utf8))
        #expect(Array(der[9..<16]) == [0x30, 5, 0x0C, 3] + Array("app".utf8))
    }

    @Test func demoTokenKeyIsPKCS8AndSignsVerifiableTokens() throws {
        let material = try MockHarness.sharedCertificates()
        let path = material.tokenKeyPath(.init(keyID: "DEMOKEY001", teamID: "DEMOTEAM01", path: "AuthKey_DEMOKEY001.p8"))
        let pem = try String(contentsOfFile: path, encoding: .utf8)
        #expect(pem.hasPrefix("-----BEGIN PRIVATE KEY-----"))
        let token = try ProviderTokenSigner.token(keyPEM: pem, teamID: "DEMOTEAM01", keyID: "DEMOKEY001", issuedAt: 1_700_000_000)
        let parts = token.split(separator: ".")
        #expect(parts.count == 3)
        let key = try ECKey.publicKey(pem: try ECKey.privateKey(pem: pem).publicKeyPEM())
        let signature = try #require(Data(base64URL: String(parts[2])))
        #expect(ES256.verify(signature: Array(signature), message: Array("\(parts[0]).\(parts[1])".utf8), with: key))
        var tampered = Array(signature)
        tampered[10] ^= 1
        #expect(!ES256.verify(signature: tampered, message: Array("\(parts[0]).\(parts[1])".utf8), with: key))
    }
}

extension Data {
    init?(base64URL text: String) {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        self.init(base64Encoded: base64)
    }
}

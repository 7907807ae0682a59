import APNSMock
import APNSMockCore
import APNSMockTesting
import Foundation
import Testing

/// The `apns-mock` commands of the README that make credentials, run as a user would.
@Suite("Credential commands", .timeLimit(.minutes(2)))
struct CommandTests {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static func apnsMock(_ arguments: [String]) async throws -> ExternalTool.Output {
        let binary = repository.appendingPathComponent(".build/debug/apns-mock").path
        try #require(FileManager.default.isExecutableFile(atPath: binary), "build first: swift build --build-tests")
        return try await ExternalTool.run(binary, arguments)
    }

    @Test func keysNewAndTokenMakeATokenTheMockAccepts() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("apns-mock-keys-\(UUID())")
        defer { try? FileManager.default.removeItem(at: directory) }
        let created = try await Self.apnsMock(["keys", "new", "--team", "TEAMABCDE1", "--key-id", "KEYABCDE01", "--dir", directory.path])
        #expect(created.exitCode == 0, "\(created.stderr)")
        let keyPath = directory.appendingPathComponent("AuthKey_KEYABCDE01.p8").path
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == ["AuthKey_KEYABCDE01.p8"])
        let mode = try FileManager.default.attributesOfItem(atPath: keyPath)[.posixPermissions] as? Int
        #expect(mode == 0o600)

        let printed = try await Self.apnsMock(["token", "--key", keyPath, "--team", "TEAMABCDE1"])
        #expect(printed.exitCode == 0, "\(printed.stderr)")
        let jwt = printed.text.trimmingCharacters(in: .whitespacesAndNewlines)
        let token = try #require(ProviderToken.parse(authorization: "bearer " + jwt))
        #expect(token.keyID == "KEYABCDE01")
        #expect(token.issuer == "TEAMABCDE1")

        try await MockHarness.withRunningMock(configure: {
            $0.teams = [Configuration.Team(
                teamId: "TEAMABCDE1", apps: ["com.example.app"], keys: [Configuration.Key(keyId: "KEYABCDE01", path: keyPath)])]
        }) { mock in
            let response = try await Curl.send(
                url: "\(mock.baseURL)/3/device/\(String(repeating: "ab", count: 32))", caPath: mock.caPath,
                authorization: "bearer " + jwt)
            #expect(response.status == 200)
            // The harness's demo key is not configured on this mock.
            let demo = try await Curl.send(url: "\(mock.baseURL)/3/device/\(String(repeating: "ab", count: 32))", caPath: mock.caPath)
            #expect(demo.status == 403)
            #expect(demo.reason == "InvalidProviderToken")
        }
    }

    @Test func certsInitWritesClientCertificatesPerEnvironment() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("apns-mock-certs-\(UUID())")
        defer { try? FileManager.default.removeItem(at: directory) }
        let run = try await Self.apnsMock(["certs", "init", "--dir", directory.path, "--log-level", "error"])
        #expect(run.exitCode == 0, "\(run.stderr)")
        let files = Set(try FileManager.default.contentsOfDirectory(atPath: directory.path))
        for variant in ["", "-development", "-production"] {
            #expect(files.contains("client-com.example.app\(variant).pem"))
            #expect(files.contains("client-com.example.app\(variant)-key.pem"))
        }
        #expect(files.contains("AuthKey_DEMOKEY001.p8"))
    }
}

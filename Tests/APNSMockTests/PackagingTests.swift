import Foundation
import Testing
import Yams

/// The repository's packaging files. No Docker engine runs where the tests do, so the compose file
/// is checked by parsing it.
@Suite("Packaging")
struct PackagingTests {
    static let root = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    func load(_ name: String) throws -> String {
        try String(contentsOf: Self.root.appendingPathComponent(name), encoding: .utf8)
    }

    @Test func composeRunsTheMockUnderApplesHostNames() throws {
        let compose = try #require(try Yams.load(yaml: load("docker-compose.yml")) as? [String: Any])
        let services = try #require(compose["services"] as? [String: Any])
        let service = try #require(services["apns-mock"] as? [String: Any])
        #expect(service["build"] as? String == ".")
        let ports = try #require(service["ports"] as? [String])
        #expect(Set(ports) == ["2197:2197", "2198:2198", "2195:2195", "2196:2196"])
        let volumes = try #require(service["volumes"] as? [String])
        #expect(volumes.contains { $0.hasPrefix("./certs:") })
        #expect(volumes.contains { $0.hasPrefix("./fixtures:") })
        let networks = try #require(service["networks"] as? [String: Any])
        let aliases = try #require((networks["default"] as? [String: Any])?["aliases"] as? [String])
        #expect(Set(aliases) == [
            "api.push.apple.com", "api.sandbox.push.apple.com", "api-broadcast.sandbox.push.apple.com",
            "api-manage-broadcast.push.apple.com", "api-manage-broadcast.sandbox.push.apple.com",
        ])
        let command = try #require(service["command"] as? [String])
        #expect(command.first == "serve")
        // Listening on 0.0.0.0 inside the container, or the published ports reach nothing.
        #expect(zip(command, command.dropFirst()).contains { $0 == "--host" && $1 == "0.0.0.0" })
        #expect(zip(command, command.dropFirst()).contains { $0 == "--admin-host" && $1 == "0.0.0.0" })
        #expect(zip(command, command.dropFirst()).contains { $0 == "--broadcast-host" && $1 == "0.0.0.0" })
    }

    @Test func dockerfileBuildsTheCommandAndExposesItsPorts() throws {
        let dockerfile = try load("Dockerfile")
        #expect(dockerfile.contains("libnghttp2-dev"))
        #expect(dockerfile.contains("libssl-dev"))
        #expect(dockerfile.contains("--product apns-mock"))
        #expect(dockerfile.contains("EXPOSE 2197 2198 2195 2196"))
        #expect(dockerfile.contains(#"ENTRYPOINT ["apns-mock"]"#))
    }

    @Test func ciRunsTheReadmeTestCommand() throws {
        let readme = try load("README.md")
        let ci = try load(".ci/run")
        #expect(readme.contains("scripts/test"))
        #expect(ci.contains("scripts/test"))
    }
}

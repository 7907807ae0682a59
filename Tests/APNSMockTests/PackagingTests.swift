import APNSMock
import Foundation
import Testing
import Yams

/// The repository's packaging files, read. They are run for real in ``ContainerTests`` (podman,
/// docker-compose); these checks hold where no container engine is installed.
@Suite("Packaging")
struct PackagingTests {
    static let root = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    func load(_ name: String) throws -> String {
        try String(contentsOf: Self.root.appendingPathComponent(name), encoding: .utf8)
    }

    @Test func composeRunsTheImageUnderEveryAppleHostName() throws {
        let compose = try #require(try Yams.load(yaml: load("docker-compose.yml")) as? [String: Any])
        let services = try #require(compose["services"] as? [String: Any])
        let service = try #require(services["apns-mock"] as? [String: Any])
        #expect(service["image"] as? String == "apns-mock:local")
        #expect(service["build"] as? String == ".")
        let ports = try #require(service["ports"] as? [String])
        #expect(ports.count == 4)
        for port in [2197, 2198, 2195, 2196] {
            #expect(ports.contains { $0.hasPrefix("127.0.0.1:") && $0.hasSuffix(":\(port)") }, "\(port) published on loopback")
        }
        let networks = try #require(service["networks"] as? [String: Any])
        let aliases = try #require((networks["default"] as? [String: Any])?["aliases"] as? [String])
        #expect(Set(aliases) == Set(TestCertificates.defaultDNSNames.filter { $0.hasSuffix(".apple.com") }))
        #expect((service["sysctls"] as? [String])?.contains("net.ipv4.ip_unprivileged_port_start=0") == true)
        // The image listens on every interface by itself (ENV): no command to repeat it.
        #expect(service["command"] == nil)
    }

    /// deploy/compose/replicated.yml (docs/deployment.md): three replicas alike on one database and
    /// one CA, behind the balancer under Apple's host names; run for real in ``ContainerTests``.
    @Test func replicatedComposeSharesOneDatabaseAndOneCA() throws {
        let compose = try #require(try Yams.load(yaml: load("deploy/compose/replicated.yml")) as? [String: Any])
        let services = try #require(compose["services"] as? [String: [String: Any]])
        #expect(Set(services.keys) == ["apns-mock", "apns-mock-1", "apns-mock-2", "apns-mock-3", "certs", "postgres"])
        let replicas = ["apns-mock-1", "apns-mock-2", "apns-mock-3"].compactMap { services[$0] }
        #expect(replicas.count == 3)
        for replica in replicas {
            #expect(replica["image"] as? String == "apns-mock:local")
            let environment = try #require(replica["environment"] as? [String: Any])
            #expect(environment["APNS_MOCK_STATE_URL"] as? String == "postgres://apns_mock:${POSTGRES_PASSWORD:-apns-mock}@postgres:5432/apns_mock")
            #expect(replica["volumes"] as? [String] == ["certs:/var/lib/apns-mock/certs:ro"], "one CA, read-only")
            let dependencies = try #require(replica["depends_on"] as? [String: [String: String]])
            #expect(dependencies["postgres"]?["condition"] == "service_healthy")
            #expect(dependencies["certs"]?["condition"] == "service_completed_successfully")
            #expect(replica["ports"] == nil, "replicas are reached through the balancer")
            let aliases = (((replica["networks"] as? [String: Any])?["default"] as? [String: Any])?["aliases"] as? [String]) ?? []
            #expect(aliases == ["apns-mock-replica"])
        }
        let balancer = try #require(services["apns-mock"])
        #expect(balancer["image"] as? String == "apns-mock-balancer:local")
        let ports = try #require(balancer["ports"] as? [String])
        for port in [2197, 2198, 2195, 2196] {
            #expect(ports.contains { $0.hasPrefix("127.0.0.1:") && $0.hasSuffix(":\(port)") }, "\(port) published on loopback")
        }
        let aliases = (((balancer["networks"] as? [String: Any])?["default"] as? [String: Any])?["aliases"] as? [String]) ?? []
        #expect(Set(aliases) == Set(TestCertificates.defaultDNSNames.filter { $0.hasSuffix(".apple.com") }))
        let postgres = try #require(services["postgres"])
        #expect(postgres["ports"] == nil, "the database is reached only inside the network")
        #expect((services["certs"]?["command"] as? [String])?.prefix(2) == ["certs", "init"])
        let haproxy = try load("deploy/balancer/haproxy.cfg")
        #expect(haproxy.contains("\"${REPLICAS}\":2197"), "the balancer finds the replicas by their alias")
        #expect(try load("deploy/balancer/Containerfile").contains("ENV REPLICAS=apns-mock-replica"))
    }

    @Test func dockerfileRunsUnprivilegedOnApplesPorts() throws {
        let dockerfile = try load("Dockerfile")
        for line in [
            "ARG SWIFT_IMAGE=", "ARG RUNTIME_IMAGE=", "FROM ${SWIFT_IMAGE} AS build", "FROM ${RUNTIME_IMAGE} AS runtime-base",
            "COPY . .", "--static-swift-stdlib", "AS prebuilt", "COPY prebuilt/apns-mock /usr/local/bin/apns-mock",
            "USER 10001:10001", "EXPOSE 443 2197 2198 2195 2196", "APNS_MOCK_ADDITIONAL_PORTS=443", "APNS_MOCK_HOST=0.0.0.0",
            #"HEALTHCHECK"#, #"CMD ["apns-mock", "healthcheck""#, #"ENTRYPOINT ["apns-mock"]"#,
        ] {
            #expect(dockerfile.contains(line), "Dockerfile lacks \(line)")
        }
        // The default target is the full build.
        #expect(dockerfile.split(separator: "\n").last { $0.hasPrefix("FROM ") }?.hasSuffix("AS runtime") == true)
        let ignored = try load(".dockerignore").split(separator: "\n")
        #expect(ignored.contains(".build") && ignored.contains(".venv"))
        #expect(!ignored.contains { $0 == "Tests" || $0 == "Sources" || $0 == "prebuilt" })
    }

    @Test func ciRunsTheReadmeTestCommand() throws {
        let readme = try load("README.md")
        let ci = try load(".ci/run")
        #expect(readme.contains("scripts/test"))
        #expect(ci.contains("scripts/test"))
    }
}

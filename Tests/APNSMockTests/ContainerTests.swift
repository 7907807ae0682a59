import APNSMock
import APNSMockCore
import APNSMockTesting
import Foundation
import Testing

/// The container image (`scripts/image` builds it) and the compose file, run for real with Debian's
/// podman: no Docker engine runs where the suite does, but podman is daemonless, and its
/// Docker-compatible socket (`podman system service`) drives the `docker` CLI and docker-compose
/// as a Docker engine would. scripts/test builds the image and names it in
/// `CONTAINER_IMAGE_UNDER_TEST`; without it (no podman here) the suite does not run.
@Suite(
    "Container image", .serialized, .timeLimit(.minutes(5)),
    .enabled(if: ContainerEngine.image != nil, "set CONTAINER_IMAGE_UNDER_TEST (scripts/test builds the image with scripts/image)"))
struct ContainerTests {
    static let device = String(repeating: "c1", count: 32)

    /// The image as a CI service gets it: default capabilities, its own non-root user, configured
    /// only by environment variables. Its HEALTHCHECK turns healthy, a real client (curl) pushes
    /// through a published port, on 2197 and on 443, trusting the CA the mock serves, and the
    /// admin API shows the record.
    @Test func imageServesAsItsOwnUnprivilegedUser() async throws {
        let image = try #require(ContainerEngine.image)
        let config = try await ContainerEngine.podman(["image", "inspect", "--format", "{{.Config.User}} {{json .Config.Healthcheck.Test}}", image])
        #expect(config.text.hasPrefix("10001:10001 "), "\(config.text)")
        #expect(config.text.contains("healthcheck"), "the image has a HEALTHCHECK: \(config.text)")

        let key = try KeyMaterial.make()
        let name = "apns-mock-test-\(ProcessInfo.processInfo.processIdentifier)-\(UUID().uuidString.prefix(8))"
        let run = try await ContainerEngine.podman([
            "run", "-d", "--name", name,
            "-p", "127.0.0.1::2197", "-p", "127.0.0.1::443", "-p", "127.0.0.1::2198",
            // What Docker sets in every container: ports below 1024 for every user.
            "--sysctl", "net.ipv4.ip_unprivileged_port_start=0",
            "-e", "APNS_MOCK_TEAM_ID=TEAMIMG001", "-e", "APNS_MOCK_KEY_ID=KEYIMG0001", "-e", "APNS_MOCK_KEY_PEM=\(key.pem)",
            image,
        ])
        try #require(run.exitCode == 0, "podman run: \(run.stderr)")
        try await ContainerEngine.removing(name) {
            try await Self.checkServing(name, key: key)
        }
    }

    private static func checkServing(_ name: String, key: KeyMaterial) async throws {
        try await ContainerEngine.waitHealthy(name)
        let status = try await ContainerEngine.podman(["inspect", "--format", "{{.State.Health.Status}}", name])
        #expect(status.text.trimmingCharacters(in: .whitespacesAndNewlines) == "healthy")

        // Inside: its own user, no capability.
        let identity = try await ContainerEngine.podman(["exec", name, "cat", "/proc/1/status"])
        let lines = identity.text.split(separator: "\n")
        #expect(lines.first { $0.hasPrefix("Uid:") }?.split(whereSeparator: \.isWhitespace).dropFirst().allSatisfy { $0 == "10001" } == true,
                "\(identity.text)")
        #expect(lines.first { $0.hasPrefix("CapEff:") }?.hasSuffix("0000000000000000") == true, "\(identity.text)")

        let admin = AdminClient(baseURL: "http://127.0.0.1:\(try await ContainerEngine.hostPort(name, 2198))")
        let health = try await admin.health()
        #expect(health.status == "ok")
        #expect(health.ports?.apns == 2197)
        #expect(health.ports?.apnsAdditional == [443])
        let caDirectory = try Unprivileged.temporaryDirectory("image-ca")
        defer { try? FileManager.default.removeItem(at: caDirectory) }
        let caPath = caDirectory.appendingPathComponent("ca.pem").path
        try Data(try await admin.caCertificate().utf8).write(to: URL(fileURLWithPath: caPath))

        let token = try key.token(team: "TEAMIMG001", keyID: "KEYIMG0001")
        for port in [2197, 443] {
            let hostPort = try await ContainerEngine.hostPort(name, port)
            let response = try await Curl.send(
                url: "https://api.push.apple.com/3/device/\(Self.device)", caPath: caPath, authorization: "bearer " + token,
                extra: ["--connect-to", "api.push.apple.com:443:127.0.0.1:\(hostPort)"])
            #expect(response.status == 200, "port \(port): \(response.status) \(response.reason ?? "")")
        }
        let (page, timedOut) = try await admin.wait(RecordQuery(token: Self.device), count: 2)
        #expect(!timedOut)
        #expect(page.notifications.map(\.environment) == ["production", "production"])
        #expect(page.notifications.allSatisfy { $0.auth.teamId == "TEAMIMG001" })
    }

    /// docker-compose.yml brought up for real (docker-compose against podman's Docker socket), with
    /// a client container on the same network that dials Apple's host names, unmodified, on 443
    /// (and the channel-management hosts on theirs), trusting the CA the mock serves.
    @Test func composeAnswersUnderApplesHostNames() async throws {
        let image = try #require(ContainerEngine.image)
        let client = try await ContainerEngine.clientImage(from: image)
        let key = try KeyMaterial.make()
        let token = try key.token(team: "TEAMCMP001", keyID: "KEYCMP0001")
        let project = "apnsmock\(ProcessInfo.processInfo.processIdentifier)\(UUID().uuidString.prefix(6).lowercased())"
        let directory = try Unprivileged.temporaryDirectory("compose")
        defer { try? FileManager.default.removeItem(at: directory) }
        // The repository's compose file, plus a client service and the mock's configuration.
        let override = directory.appendingPathComponent("test.override.yml")
        try Data("""
            services:
              apns-mock:
                image: \(image)
                environment:
                  APNS_MOCK_TEAM_ID: TEAMCMP001
                  APNS_MOCK_KEY_ID: KEYCMP0001
                  APNS_MOCK_KEY_PEM: |
            \(key.pem.split(separator: "\n").map { "          " + $0 }.joined(separator: "\n"))
              client:
                image: \(client)
                entrypoint: ["/bin/sh", "/client.sh"]
                environment:
                  TOKEN: "\(token)"
                  DEVICE: "\(Self.device)"
                volumes:
                  - \(directory.path)/client.sh:/client.sh:ro
                depends_on: [apns-mock]
            """.utf8).write(to: override)
        try Data(ComposeClient.script.utf8).write(to: directory.appendingPathComponent("client.sh"))

        try await ContainerEngine.withDockerSocket { dockerHost in
            let ports = try await (0..<4).asyncMap { _ in try await SendCLI.closedPort() }
            let environment = [
                "DOCKER_HOST": dockerHost, "MOCK_APNS_PORT": "\(ports[0])", "MOCK_ADMIN_PORT": "\(ports[1])",
                "MOCK_BROADCAST_SANDBOX_PORT": "\(ports[2])", "MOCK_BROADCAST_PRODUCTION_PORT": "\(ports[3])",
            ]
            let compose = ["-p", project, "-f", ServerProcess.repository.appendingPathComponent("docker-compose.yml").path,
                           "-f", override.path]
            try await Self.thenDown(compose, environment: environment) {
                try await Self.checkCompose(compose, environment: environment, adminPort: ports[1])
            }
        }
    }

    /// Runs `check` on a compose project, then takes it down whatever happened (and expects that to
    /// work), then throws what `check` threw.
    private static func thenDown(
        _ compose: [String], environment: [String: String], _ check: () async throws -> Void
    ) async throws {
        let outcome: Result<Void, any Error>
        do {
            try await check()
            outcome = .success(())
        } catch {
            outcome = .failure(error)
        }
        let down = try await ExternalTool.run("docker-compose", compose + ["down", "-v", "-t", "2"], environment: environment, timeout: 120)
        #expect(down.exitCode == 0, "docker-compose down: \(down.stderr)")
        try outcome.get()
    }

    private static func checkCompose(_ compose: [String], environment: [String: String], adminPort: Int) async throws {
        let up = try await ExternalTool.run("docker-compose", compose + ["up", "-d", "--no-build", "apns-mock"], environment: environment, timeout: 180)
        try #require(up.exitCode == 0, "docker-compose up: \(up.stderr)")
        let run = try await ExternalTool.run(
            "docker-compose", compose + ["run", "--rm", "-T", "client"], environment: environment, timeout: 180)
        #expect(run.exitCode == 0, "client: \(run.text) \(run.stderr)")
        let results = ComposeClient.results(run.text)
        #expect(results["api.push.apple.com"] == "200", "\(run.text)")
        #expect(results["api.sandbox.push.apple.com"] == "200", "\(run.text)")
        #expect(results["api.development.push.apple.com"] == "200", "\(run.text)")
        #expect(results["api-manage-broadcast.sandbox.push.apple.com"] == "201", "\(run.text)")
        #expect(results["api-manage-broadcast.push.apple.com"] == "201", "\(run.text)")

        // The records, through the published admin port: each host gave its environment.
        let admin = AdminClient(baseURL: "http://127.0.0.1:\(adminPort)")
        let (page, timedOut) = try await admin.wait(RecordQuery(token: Self.device), count: 3)
        #expect(!timedOut)
        let environments = Dictionary(
            page.notifications.map { ($0.headers[":authority"] ?? $0.headers["host"] ?? "?", $0.environment) },
            uniquingKeysWith: { first, _ in first })
        #expect(environments == [
            "api.push.apple.com": "production", "api.sandbox.push.apple.com": "sandbox",
            "api.development.push.apple.com": "sandbox",
        ])
        #expect(page.notifications.allSatisfy { $0.auth.teamId == "TEAMCMP001" })
    }

    /// deploy/compose/replicated.yml brought up for real: PostgreSQL, three replicas of the image
    /// sharing it (APNS_MOCK_STATE_URL) and one CA, the balancer in front of them as `apns-mock`.
    /// Each replica's APNs and admin ports are published too (the test's override), so that a push
    /// through one replica can be looked for through another's admin API; the records outlive the
    /// replicas being restarted; with PostgreSQL stopped the replicas stay behind the balancer,
    /// degraded, answering pushes.
    @Test(.enabled(if: ContainerEngine.postgresImage != nil && ContainerEngine.balancerImage != nil,
                   "set CONTAINER_POSTGRES_IMAGE_UNDER_TEST and CONTAINER_BALANCER_IMAGE_UNDER_TEST (scripts/test builds them with scripts/replicated-images)"))
    func replicatedComposeSharesOneState() async throws {
        let image = try #require(ContainerEngine.image)
        let postgres = try #require(ContainerEngine.postgresImage)
        let balancer = try #require(ContainerEngine.balancerImage)
        let project = "apnsmockrep\(ProcessInfo.processInfo.processIdentifier)\(UUID().uuidString.prefix(6).lowercased())"
        let directory = try Unprivileged.temporaryDirectory("compose-replicated")
        defer { try? FileManager.default.removeItem(at: directory) }
        // The images under test, and each replica's ports on 127.0.0.1 (the host's own choice).
        let override = directory.appendingPathComponent("test.override.yml")
        let replicaServices = Self.replicaNames.map { name in
            """
              \(name):
                image: \(image)
                ports: ["127.0.0.1::2197", "127.0.0.1::2198"]
            """
        }.joined(separator: "\n")
        try Data("""
            services:
            \(replicaServices)
              certs:
                image: \(image)
              postgres:
                image: \(postgres)
              apns-mock:
                image: \(balancer)
            """.utf8).write(to: override)

        try await ContainerEngine.withDockerSocket { dockerHost in
            let ports = try await (0..<4).asyncMap { _ in try await SendCLI.closedPort() }
            let environment = [
                "DOCKER_HOST": dockerHost, "MOCK_APNS_PORT": "\(ports[0])", "MOCK_ADMIN_PORT": "\(ports[1])",
                "MOCK_BROADCAST_SANDBOX_PORT": "\(ports[2])", "MOCK_BROADCAST_PRODUCTION_PORT": "\(ports[3])",
            ]
            let file = ServerProcess.repository.appendingPathComponent("deploy/compose/replicated.yml").path
            let compose = ["-p", project, "-f", file, "-f", override.path]
            try await Self.thenDown(compose, environment: environment) {
                try await Self.checkReplicated(compose, project: project, environment: environment, balancerPorts: (ports[0], ports[1]))
            }
        }
    }

    static let replicaNames = ["apns-mock-1", "apns-mock-2", "apns-mock-3"]

    private static func checkReplicated(
        _ compose: [String], project: String, environment: [String: String], balancerPorts: (apns: Int, admin: Int)
    ) async throws {
        // PostgreSQL first, turned healthy by running its healthcheck (podman runs healthchecks
        // from systemd timers, which this machine lacks; docker-compose waits for `healthy`
        // before it starts the replicas), and the certificates made.
        let first = try await ExternalTool.run(
            "docker-compose", compose + ["up", "-d", "--no-build", "postgres", "certs"], environment: environment, timeout: 180)
        try #require(first.exitCode == 0, "docker-compose up postgres certs: \(first.stderr)")
        try await ContainerEngine.waitHealthy("\(project)_postgres_1")
        let up = try await ExternalTool.run("docker-compose", compose + ["up", "-d", "--no-build"], environment: environment, timeout: 180)
        try #require(up.exitCode == 0, "docker-compose up: \(up.stderr)")

        let containers = replicaNames.map { "\(project)_\($0)_1" }
        var replicas = try await Self.replicaAdmins(containers)
        try await ContainerEngine.waitHealthy("\(project)_apns-mock_1")
        let front = AdminClient(baseURL: "http://127.0.0.1:\(balancerPorts.admin)")
        for (index, admin) in replicas.enumerated() {
            #expect(try await admin.health().status == "ok", "replica \(index + 1)")
        }
        #expect(try await front.health().status == "ok", "through the balancer")

        // One CA (the certs service's), whichever replica answers.
        let ca = try await front.caCertificate()
        for (index, admin) in replicas.enumerated() {
            #expect(try await admin.caCertificate() == ca, "replica \(index + 1) serves the certs service's CA")
        }
        let caDirectory = try Unprivileged.temporaryDirectory("replicated-ca")
        defer { try? FileManager.default.removeItem(at: caDirectory) }
        let caPath = caDirectory.appendingPathComponent("ca.pem").path
        try Data(ca.utf8).write(to: URL(fileURLWithPath: caPath))

        // One push through replica 1, signed with replica 3's demo key (one key for all), and one
        // through the balancer.
        let token = try await ContainerEngine.podman(["exec", containers[2], "apns-mock", "token"]).text
            .trimmingCharacters(in: .whitespacesAndNewlines)
        for port in [try await ContainerEngine.hostPort(containers[0], 2197), balancerPorts.apns] {
            let response = try await Curl.send(
                url: "https://api.push.apple.com/3/device/\(Self.device)", caPath: caPath, authorization: "bearer " + token,
                extra: ["--connect-to", "api.push.apple.com:443:127.0.0.1:\(port)"])
            #expect(response.status == 200, "through 127.0.0.1:\(port): \(response.status) \(response.reason ?? "")")
        }

        // Both, through every replica's admin API, with the same sequence numbers.
        var seqs: [[UInt64]] = []
        for (index, admin) in replicas.enumerated() {
            let (page, timedOut) = try await admin.wait(RecordQuery(token: Self.device), count: 2, timeout: 10)
            #expect(!timedOut, "replica \(index + 1) shows both pushes: \(page.notifications.count)")
            seqs.append(page.notifications.map(\.seq))
        }
        #expect(Set(seqs).count == 1 && seqs[0].count == 2, "every replica shows the same two records: \(seqs)")

        // The records outlive the replicas: all three restarted, replica 1 shows them again.
        let restart = try await ExternalTool.run(
            "docker-compose", compose + ["restart", "-t", "5"] + replicaNames, environment: environment, timeout: 120)
        try #require(restart.exitCode == 0, "docker-compose restart: \(restart.stderr)")
        replicas = try await Self.replicaAdmins(containers)
        let (again, timedOut) = try await replicas[0].wait(RecordQuery(token: Self.device), count: 2, timeout: 10)
        #expect(!timedOut && again.notifications.map(\.seq) == seqs[0],
                "after a restart, replica 1 shows the records from the database: \(again.notifications.map(\.seq))")
        for (index, admin) in replicas.enumerated() {
            #expect(try await admin.health().status == "ok", "replica \(index + 1) after the restart")
        }

        // PostgreSQL away: the replicas say `degraded` (still 200, so the balancer keeps them) and
        // answer pushes through the balancer; back, they say `ok` again.
        let postgres = "\(project)_postgres_1"
        _ = try await ContainerEngine.podman(["stop", "-t", "5", postgres])
        let degraded = try await Self.waitStatus(front, "degraded")
        #expect(degraded, "through the balancer, /v1/health says degraded while PostgreSQL is away")
        let response = try await Curl.send(
            url: "https://api.push.apple.com/3/device/\(Self.device)", caPath: caPath, authorization: "bearer " + token,
            extra: ["--connect-to", "api.push.apple.com:443:127.0.0.1:\(balancerPorts.apns)"])
        #expect(response.status == 200, "a push through the balancer while PostgreSQL is away: \(response.status)")
        _ = try await ContainerEngine.podman(["start", postgres])
        for (index, admin) in replicas.enumerated() {
            #expect(try await Self.waitStatus(admin, "ok"), "replica \(index + 1) ok again once PostgreSQL is back")
        }
    }

    /// Polls `GET /v1/health` until it says `status` (30 s at most).
    private static func waitStatus(_ admin: AdminClient, _ status: String) async throws -> Bool {
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            if (try? await admin.health().status) == status { return true }
            try await Task.sleep(for: .milliseconds(200))
        }
        return false
    }

    /// Each replica's admin client once it is healthy (its published port, asked again: a restart
    /// may publish another).
    private static func replicaAdmins(_ containers: [String]) async throws -> [AdminClient] {
        var admins: [AdminClient] = []
        for container in containers {
            try await ContainerEngine.waitHealthy(container)
            admins.append(AdminClient(baseURL: "http://127.0.0.1:\(try await ContainerEngine.hostPort(container, 2198))"))
        }
        return admins
    }
}

/// A provider key the test makes, to configure the mock by environment and sign its tokens.
struct KeyMaterial {
    var pem: String

    static func make() throws -> KeyMaterial {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("apns-mock-key-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("key.p8").path
        try TestCertificates.writeTokenKey(to: path)
        return KeyMaterial(pem: try String(contentsOfFile: path, encoding: .utf8))
    }

    func token(team: String, keyID: String) throws -> String {
        try ProviderTokenSigner.token(keyPEM: pem, teamID: team, keyID: keyID, issuedAt: Int(Date().timeIntervalSince1970))
    }
}

/// The client container of the compose test: waits for the mock's health, fetches its CA over
/// HTTP, then dials every Apple host name with curl, as an unmodified client would.
enum ComposeClient {
    static let script = #"""
        set -u
        i=0
        until curl -sf -o /dev/null http://apns-mock:2198/v1/health; do
            i=$((i + 1)); [ "$i" -gt 150 ] && { echo "health: the mock did not turn healthy"; exit 1; }
            sleep 0.2
        done
        curl -sSf -o /tmp/ca.pem http://apns-mock:2198/v1/ca.pem || exit 1
        for host in api.push.apple.com api.sandbox.push.apple.com api.development.push.apple.com; do
            code=$(curl -sS --http2 --cacert /tmp/ca.pem --max-time 20 -o /tmp/body -w '%{http_code}' \
                -H "authorization: bearer $TOKEN" -H 'apns-topic: com.example.app' -H 'apns-push-type: alert' \
                -d '{"aps":{"alert":"from compose"}}' "https://$host/3/device/$DEVICE")
            echo "result $host $code $(cat /tmp/body)"
        done
        for pair in api-manage-broadcast.sandbox.push.apple.com:2195 api-manage-broadcast.push.apple.com:2196; do
            code=$(curl -sS --http2 --cacert /tmp/ca.pem --max-time 20 -o /tmp/body -w '%{http_code}' \
                -H "authorization: bearer $TOKEN" -d '{"message-storage-policy":1,"push-type":"LiveActivity"}' \
                "https://$pair/1/apps/com.example.app/channels")
            echo "result ${pair%%:*} $code $(cat /tmp/body)"
        done
        """#

    /// `host → status` from the script's `result` lines.
    static func results(_ output: String) -> [String: String] {
        var results: [String: String] = [:]
        for line in output.split(separator: "\n") where line.hasPrefix("result ") {
            let fields = line.split(separator: " ")
            if fields.count >= 3 { results[String(fields[1])] = String(fields[2]) }
        }
        return results
    }
}

/// podman, as the container tests use it.
enum ContainerEngine {
    /// The image under test (`CONTAINER_IMAGE_UNDER_TEST`), when the suite is to run.
    static var image: String? {
        ProcessInfo.processInfo.environment["CONTAINER_IMAGE_UNDER_TEST"].flatMap { $0.isEmpty ? nil : $0 }
    }

    /// The replicated variant's PostgreSQL and balancer images (`scripts/replicated-images`), when
    /// its compose test is to run.
    static var postgresImage: String? {
        ProcessInfo.processInfo.environment["CONTAINER_POSTGRES_IMAGE_UNDER_TEST"].flatMap { $0.isEmpty ? nil : $0 }
    }

    static var balancerImage: String? {
        ProcessInfo.processInfo.environment["CONTAINER_BALANCER_IMAGE_UNDER_TEST"].flatMap { $0.isEmpty ? nil : $0 }
    }

    static func podman(_ arguments: [String], timeout: Double = 120) async throws -> ExternalTool.Output {
        try await ExternalTool.run("podman", arguments, timeout: timeout)
    }

    /// Runs `body`, then removes the container, whatever happened.
    static func removing(_ name: String, _ body: () async throws -> Void) async throws {
        let outcome: Result<Void, any Error>
        do {
            try await body()
            outcome = .success(())
        } catch {
            outcome = .failure(error)
        }
        _ = try await podman(["rm", "-f", "-t", "2", name])
        try outcome.get()
    }

    /// Runs the image's HEALTHCHECK until it passes (podman runs it on demand where no systemd
    /// timer does), for up to 60 s.
    static func waitHealthy(_ name: String) async throws {
        let deadline = ContinuousClock.now + .seconds(60)
        var last = ""
        while ContinuousClock.now < deadline {
            let check = try await podman(["healthcheck", "run", name])
            if check.exitCode == 0 { return }
            last = check.text + check.stderr
            try await Task.sleep(for: .milliseconds(300))
        }
        let logs = try await podman(["logs", name])
        Issue.record("\(name) did not turn healthy: \(last)\n\(logs.text)\(logs.stderr)")
        throw CancellationError()
    }

    /// The host port published for the container's `port`.
    static func hostPort(_ name: String, _ port: Int) async throws -> Int {
        let output = try await podman(["port", name, "\(port)/tcp"])
        let text = output.text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard let published = text.split(separator: "\n").first?.split(separator: ":").last.flatMap({ Int($0) }) else {
            throw Unprivileged.SetupFailure(description: "podman port \(name) \(port): \(text) \(output.stderr)")
        }
        return published
    }

    /// The image with curl added, for the compose test's client (apt in the build).
    static func clientImage(from image: String) async throws -> String {
        let tag = "localhost/apns-mock-compose-client:test"
        let directory = try Unprivileged.temporaryDirectory("client-image")
        defer { try? FileManager.default.removeItem(at: directory) }
        try Data("""
            FROM \(image)
            USER root
            RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends curl \\
                && rm -rf /var/lib/apt/lists/*
            USER 10001:10001
            """.utf8).write(to: directory.appendingPathComponent("Containerfile"))
        let build = try await podman(["build", "-q", "-t", tag, directory.path], timeout: 300)
        guard build.exitCode == 0 else {
            throw Unprivileged.SetupFailure(description: "building the client image: \(build.stderr)")
        }
        return tag
    }

    /// Runs `podman system service` on a socket of its own for `body` (the Docker-compatible API
    /// the `docker` CLI, docker-compose and testcontainers talk to), then stops it.
    static func withDockerSocket<T: Sendable>(_ body: (String) async throws -> T) async throws -> T {
        let directory = try Unprivileged.temporaryDirectory("podman")
        defer { try? FileManager.default.removeItem(at: directory) }
        let socket = directory.appendingPathComponent("docker.sock").path
        return try await ExternalTool.runningInBackground("podman", ["system", "service", "--time=0", "unix://\(socket)"]) {
            let deadline = ContinuousClock.now + .seconds(20)
            while !FileManager.default.fileExists(atPath: socket), ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(100))
            }
            return try await body("unix://\(socket)")
        }
    }
}

extension Sequence {
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var results: [T] = []
        for element in self { results.append(try await transform(element)) }
        return results
    }
}

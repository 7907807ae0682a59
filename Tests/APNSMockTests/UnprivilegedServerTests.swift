@testable import APNSMock
import APNSMockCore
import APNSMockTesting
import Foundation
import Testing

/// The mock as users run it: its own process, not root (when the suite is root it drops to
/// `nobody`, see ``Unprivileged``), configured by a file or by `APNS_MOCK_*` variables alone, and
/// watched by `apns-mock healthcheck`.
@Suite("Run as users run it", .timeLimit(.minutes(3)))
struct UnprivilegedServerTests {
    static func device(_ byte: String) -> String { String(repeating: byte, count: 32) }

    /// Every listener serves a process that has no privilege: a push on the APNs port and on an
    /// additional one, a channel on each channel-management port, the admin API, the CA it
    /// publishes, the inbox page and `send`.
    @Test func everyListenerServesWithoutPrivileges() async throws {
        try await ServerProcess.withRunning(arguments: ["--additional-port", "0"]) { mock in
            if Unprivileged.isRoot {
                let identity = try #require(mock.identity)
                #expect(identity.uid == [65534, 65534, 65534, 65534], "uids \(identity.uid)")
                #expect(identity.effectiveCapabilities == 0)
            }
            let additional = try #require(Int(mock.ports["apns-additional"] ?? ""), "listening line: \(mock.ports)")

            // APNs, on both of its ports.
            for (port, byte) in [(mock.apnsPort, "a1"), (additional, "a2")] {
                let response = try await Curl.send(url: "https://localhost:\(port)/3/device/\(Self.device(byte))", caPath: mock.caPath)
                #expect(response.status == 200, "APNs port \(port): \(response.status) \(response.reason ?? "")")
            }
            // Channel management, both environments.
            for environment in [APNSEnvironment.sandbox, .production] {
                let response = try await Curl.send(
                    url: "https://localhost:\(mock.channelManagementPort(environment))/1/apps/com.example.app/channels",
                    caPath: mock.caPath, body: Data(#"{"message-storage-policy":1,"push-type":"LiveActivity"}"#.utf8))
                #expect(response.status == 201, "\(environment): \(response.status) \(response.reason ?? "")")
                #expect(response.headers["apns-channel-id"] != nil)
            }
            // The admin API saw all four.
            let (page, timedOut) = try await mock.admin.wait(RecordQuery(outcome: .all), count: 4)
            #expect(!timedOut)
            #expect(page.notifications.compactMap(\.status).sorted() == [200, 200, 201, 201])

            let health = try await mock.admin.health()
            #expect(health == Health(status: "ok", ports: ListenerPorts(
                apns: mock.apnsPort, apnsAdditional: [additional], broadcastSandbox: mock.channelManagementPort(.sandbox),
                broadcastProduction: mock.channelManagementPort(.production), admin: mock.adminPort)))

            // The CA it publishes is the one it serves under: a client trusting only that gets in.
            let pem = try await mock.admin.caCertificate()
            #expect(pem == (try String(contentsOfFile: mock.caPath, encoding: .utf8)))
            let directory = try Unprivileged.temporaryDirectory("ca")
            defer { try? FileManager.default.removeItem(at: directory) }
            let downloaded = directory.appendingPathComponent("ca.pem")
            try Data(pem.utf8).write(to: downloaded)
            let trusted = try await Curl.send(url: "\(mock.baseURL)/3/device/\(Self.device("a3"))", caPath: downloaded.path)
            #expect(trusted.status == 200)

            // The inbox page.
            let inbox = try await ExternalTool.run("curl", ["-sS", "-i", "--max-time", "20", mock.adminURL + "/"])
            let head = inbox.text.prefix(while: { $0 != "<" }).lowercased()
            #expect(head.hasPrefix("http/1.1 200"), "\(head)")
            #expect(head.contains("content-type: text/html"), "\(head)")

            // `send`, unprivileged too.
            let material = mock.certificates
            let sent = try await SendCLI.run([
                "--device", Self.device("a4"), "--port", String(mock.apnsPort), "--ca", mock.caPath,
                "--key", material.tokenKeyPath(material.tokenKeys[0]), "--team", "DEMOTEAM01", "--timeout", "20",
            ])
            #expect(sent.exitCode == 0, "\(sent.stderr)")
            #expect(sent.field("status") == "200")
            #expect(!mock.log.contains("could not be set up"), "\(mock.log)")
        }
    }

    /// No file at all: team, key (inline PEM), apps, devices, environment and admin token from
    /// `APNS_MOCK_*` variables, as a CI service container gets them.
    @Test func configuredByEnvironmentVariablesAlone() async throws {
        let directory = try Unprivileged.temporaryDirectory("env-key")
        defer { try? FileManager.default.removeItem(at: directory) }
        let keyPath = directory.appendingPathComponent("key.p8").path
        try TestCertificates.writeTokenKey(to: keyPath)
        let pem = try String(contentsOfFile: keyPath, encoding: .utf8)
        let registered = Self.device("e1")
        let environment = [
            "APNS_MOCK_TEAM_ID": "TEAMENV001", "APNS_MOCK_KEY_ID": "KEYENV0001", "APNS_MOCK_KEY_PEM": pem,
            "APNS_MOCK_TOPICS": "com.env.app, com.env.other", "APNS_MOCK_DEVICE_POLICY": "registered",
            "APNS_MOCK_DEVICE_TOKENS": registered, "APNS_MOCK_ENVIRONMENT": "production", "APNS_MOCK_ADMIN_TOKEN": "t0ken",
        ]
        try await ServerProcess.withRunning(yaml: nil, environment: environment) { mock in
            let token = try ProviderTokenSigner.token(
                keyPEM: pem, teamID: "TEAMENV001", keyID: "KEYENV0001", issuedAt: Int(Date().timeIntervalSince1970))
            let accepted = try await Curl.send(
                url: "\(mock.baseURL)/3/device/\(registered)", caPath: mock.caPath,
                headers: ["apns-topic": "com.env.other"], authorization: "bearer " + token)
            #expect(accepted.status == 200)
            let unknown = try await Curl.send(
                url: "\(mock.baseURL)/3/device/\(Self.device("e2"))", caPath: mock.caPath,
                headers: ["apns-topic": "com.env.app"], authorization: "bearer " + token)
            #expect(unknown.reason == "BadDeviceToken")
            // The demo team is not configured any more.
            let demo = try await Curl.send(url: "\(mock.baseURL)/3/device/\(registered)", caPath: mock.caPath)
            #expect(demo.status == 403)

            #expect(try await mock.admin.request("GET", "/v1/notifications").status == 401)
            let admin = AdminClient(baseURL: mock.adminURL, token: "t0ken")
            let record = try #require(try await admin.wait(RecordQuery(token: registered), count: 1).page.notifications.first)
            #expect(record.auth.teamId == "TEAMENV001")
            #expect(record.auth.keyId == "KEYENV0001")
            #expect(record.environment == "production")
            #expect(!FileManager.default.fileExists(atPath: mock.certificates.directory + "/AuthKey_KEYENV0001.p8"))
        }
    }

    /// The whole file in one variable, and a variable over it: variables win over the file.
    @Test func wholeConfigurationInOneVariable() async throws {
        let yaml = """
            devices:
              policy: registered
              tokens: [{ token: \(Self.device("f1")) }]
            server: { streamsBeforeAuthentication: 5 }
            """
        try await ServerProcess.withRunning(yaml: nil, environment: ["APNS_MOCK_CONFIG_YAML": yaml]) { mock in
            let listed = try await Curl.send(url: "\(mock.baseURL)/3/device/\(Self.device("f1"))", caPath: mock.caPath)
            #expect(listed.status == 200)
            let unlisted = try await Curl.send(url: "\(mock.baseURL)/3/device/\(Self.device("f2"))", caPath: mock.caPath)
            #expect(unlisted.reason == "BadDeviceToken")
        }
        try await ServerProcess.withRunning(
            yaml: nil, environment: ["APNS_MOCK_CONFIG_YAML": yaml, "APNS_MOCK_DEVICE_POLICY": "open"]
        ) { mock in
            let unlisted = try await Curl.send(url: "\(mock.baseURL)/3/device/\(Self.device("f2"))", caPath: mock.caPath)
            #expect(unlisted.status == 200)
        }
    }

    struct BadStart: Sendable, CustomTestStringConvertible {
        var environment: [String: String]
        var arguments: [String] = []
        /// What standard error must name.
        var names: String
        var testDescription: String { environment.keys.sorted().joined(separator: "+") + " " + arguments.joined(separator: " ") }
    }

    static let badStarts: [BadStart] = [
        BadStart(environment: ["APNS_MOCK_PORT": "70000"], names: "APNS_MOCK_PORT: 70000 is out of range"),
        BadStart(environment: ["APNS_MOCK_PROT": "2197"], names: "APNS_MOCK_PROT: not an apns-mock variable"),
        BadStart(environment: ["APNS_MOCK_KEY_PEM": "not a key"], names: "APNS_MOCK_KEY_PEM: not a PEM key"),
        BadStart(
            environment: ["APNS_MOCK_KEY_PEM": "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"],
            names: "APNS_MOCK_KEY_PEM: not a PEM key"),
        BadStart(environment: ["APNS_MOCK_CONFIG_YAML": "server: [1"], names: "APNS_MOCK_CONFIG_YAML"),
        BadStart(environment: ["APNS_MOCK_CONFIG_YAML": "server: { prot: 1 }"], names: "APNS_MOCK_CONFIG_YAML:1: server.prot: unknown field"),
        BadStart(environment: ["APNS_MOCK_CONFIG": "/nonexistent/mock.yaml"], names: "/nonexistent/mock.yaml"),
        BadStart(environment: ["APNS_MOCK_CONFIG": "/nonexistent/mock.yaml", "APNS_MOCK_CONFIG_YAML": "{}"],
                 names: "APNS_MOCK_CONFIG and APNS_MOCK_CONFIG_YAML are both set"),
        BadStart(environment: ["APNS_MOCK_THREADS": "0"], names: "APNS_MOCK_THREADS: 0 is out of range"),
        BadStart(environment: ["APNS_MOCK_LOG_LEVEL": "loud"], names: "APNS_MOCK_LOG_LEVEL: \"loud\" is not one of"),
        BadStart(environment: ["APNS_MOCK_ADMIN_PORT": "40123"], arguments: ["--port", "40123"], names: "port 40123 is already server.port"),
    ]

    /// A bad variable stops start-up with exit code 2 and one message naming it; nothing listens.
    @Test("A bad variable stops start-up naming it", arguments: badStarts)
    func badVariableStopsStartUp(_ bad: BadStart) async throws {
        let output = try await Self.serve(environment: bad.environment, arguments: bad.arguments)
        #expect(output.exitCode == 2, "\(output.stderr)")
        #expect(output.stderr.contains(bad.names), "\(output.stderr)")
        #expect(!output.text.contains("apns-mock listening"))
    }

    /// A port below 1024 for a process without the privilege fails with what to do about it
    /// (containers lower `net.ipv4.ip_unprivileged_port_start`; docs/configuration.md).
    @Test func privilegedPortSaysWhatToDo() async throws {
        let floor = Int((try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_unprivileged_port_start", encoding: .utf8))?
            .trimmingCharacters(in: .whitespacesAndNewlines) ?? "") ?? 1024
        let unprivileged = Unprivileged.isRoot || getuid() != 0
        guard unprivileged, floor > 443 else { return }
        let output = try await Self.serve(environment: [:], arguments: ["--additional-port", "443"])
        #expect(output.exitCode == 1, "\(output.stderr)")
        #expect(output.stderr.contains("cannot listen on 127.0.0.1:443 (server.additionalPorts"), "\(output.stderr)")
        #expect(output.stderr.contains("net.ipv4.ip_unprivileged_port_start"), "\(output.stderr)")
        #expect(!output.stderr.contains("Fatal error"), "\(output.stderr)")
        #expect(!output.stderr.contains("Cannot schedule tasks"), "the failed start leaves nothing behind: \(output.stderr)")
    }

    // MARK: healthcheck

    @Test func healthcheckFindsTheAdminListenerAndReportsItsPorts() async throws {
        try await ServerProcess.withRunning(yaml: "admin: { token: s3cret }\n") { mock in
            let byURL = try await Self.apnsMock(["healthcheck", "--admin-url", mock.adminURL])
            #expect(byURL.exitCode == 0, "\(byURL.stderr)")
            #expect(byURL.text.hasPrefix("healthy: ok: apns=\(mock.apnsPort) admin=\(mock.adminPort)"), "\(byURL.text)")
            // As the image's HEALTHCHECK runs it: the port from the environment, no URL.
            let byEnvironment = try await Self.apnsMock(["healthcheck"], environment: ["APNS_MOCK_ADMIN_PORT": String(mock.adminPort)])
            #expect(byEnvironment.exitCode == 0, "\(byEnvironment.stderr)")
        }
    }

    @Test func healthcheckAgainstNothingFailsPromptly() async throws {
        let refusing = try RefusingPort()
        let port = refusing.port
        let output = try await Self.apnsMock(["healthcheck", "--admin-url", "http://127.0.0.1:\(port)"])
        #expect(output.exitCode == 1)
        // Promptly: the refusal itself, not the probe's timeout ("no answer within …"), ends it.
        #expect(output.stderr.hasPrefix("unhealthy: http://127.0.0.1:\(port)/v1/health: cannot connect"), "\(output.stderr)")
        withExtendedLifetime(refusing) {}
        let badURL = try await Self.apnsMock(["healthcheck", "--admin-url", "ftp://127.0.0.1"])
        #expect(badURL.exitCode == 1)
        #expect(badURL.stderr.contains("not an http:// URL"), "\(badURL.stderr)")
        let badVariable = try await Self.apnsMock(["healthcheck"], environment: ["APNS_MOCK_ADMIN_PORT": "x"])
        #expect(badVariable.exitCode == 1)
        #expect(badVariable.stderr.contains("APNS_MOCK_ADMIN_PORT"), "\(badVariable.stderr)")
    }

    /// `/v1/health` is 503 `stopping` once shutdown begins, so that an orchestrator stops sending.
    @Test func healthTurnsToStoppingOnShutdown() async throws {
        try await MockHarness.withRunningMock { mock in
            guard case .ok = mock.listener.health else {
                Issue.record("not healthy while serving: \(mock.listener.health)")
                return
            }
            await mock.listener.shutdown()
            guard case .stopping = mock.listener.health else {
                Issue.record("not stopping after shutdown: \(mock.listener.health)")
                return
            }
        }
    }

    // MARK: helpers

    /// `apns-mock <arguments>` run unprivileged.
    static func apnsMock(_ arguments: [String], environment: [String: String] = [:]) async throws -> ExternalTool.Output {
        let command = Unprivileged.launcher + [try Unprivileged.binary()] + arguments
        return try await ExternalTool.run(command[0], Array(command.dropFirst()), environment: environment, timeout: 60)
    }

    /// `serve` on free ports (unless `arguments` or `environment` set them) in a fresh directory,
    /// expected to stop.
    static func serve(environment: [String: String], arguments: [String]) async throws -> ExternalTool.Output {
        let directory = try Unprivileged.temporaryDirectory("serve")
        defer { try? FileManager.default.removeItem(at: directory) }
        var command = ["serve", "--certs", directory.appendingPathComponent("certs").path] + arguments
        let ports = [
            ("--port", "APNS_MOCK_PORT"), ("--admin-port", "APNS_MOCK_ADMIN_PORT"),
            ("--broadcast-sandbox-port", "APNS_MOCK_BROADCAST_SANDBOX_PORT"),
            ("--broadcast-production-port", "APNS_MOCK_BROADCAST_PRODUCTION_PORT"),
        ]
        for (flag, variable) in ports where !arguments.contains(flag) && environment[variable] == nil {
            command += [flag, "0"]
        }
        let full = Unprivileged.launcher + [try Unprivileged.binary()] + command
        return try await ExternalTool.run(full[0], Array(full.dropFirst()), in: directory, environment: environment, timeout: 60)
    }
}

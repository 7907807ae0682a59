import APNSMock
import APNSMockCore
import APNSMockTesting
import Foundation
import NIOCore
import NIOPosix
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `apns-mock send`, run as a user would (the built executable, unprivileged: see ``Unprivileged``)
/// against a mock in a process of its own, unprivileged too.
@Suite("send command", .timeLimit(.minutes(3)))
struct SendCommandTests {
    static func device(_ byte: String) -> String { String(repeating: byte, count: 32) }

    /// Token auth with the harness's demo key, trusting the harness's CA.
    static func tokenArguments(_ mock: some MockEndpoints) throws -> [String] {
        let material = mock.certificates
        return ["--port", String(mock.apnsPort), "--ca", mock.caPath,
                "--key", material.tokenKeyPath(material.tokenKeys[0]), "--team", "DEMOTEAM01", "--timeout", "20"]
    }

    @Test func flagsPushOnTheDefaultsIsAcceptedAndRecorded() async throws {
        try await ServerProcess.withRunning { mock in
            // The defaults (certs/ca.pem, certs/AuthKey_DEMOKEY001.p8, DEMOTEAM01, 127.0.0.1,
            // com.example.app) from a directory laid out as `apns-mock serve` leaves it.
            let directory = try SendCLI.directoryWithCerts(mock.certificates)
            defer { try? FileManager.default.removeItem(at: directory) }
            let token = Self.device("a1")
            let run = try await SendCLI.run(
                ["--device", token, "--port", String(mock.apnsPort), "--title", "Hello", "--body", "from send",
                 "--badge", "3", "--sound", "default", "--data", #"{"orderId":42,"tags":["a","b"]}"#, "--collapse-id", "c1"],
                in: directory)
            #expect(run.exitCode == 0, "\(run.stderr)")
            #expect(run.stderr.isEmpty)
            #expect(run.field("status") == "200")
            let apnsID = try #require(run.field("apns-id"))
            #expect(run.field("apns-unique-id") != nil, "sandbox answers carry apns-unique-id")

            let (page, timedOut) = try await mock.admin.wait(RecordQuery(token: token), count: 1)
            #expect(!timedOut)
            let record = try #require(page.notifications.first)
            #expect(record.apnsId == apnsID)
            #expect(record.topic == "com.example.app")
            #expect(record.pushType == "alert")
            #expect(record.collapseId == "c1")
            #expect(record.auth.method == .token)
            #expect(record.auth.keyId == "DEMOKEY001")
            #expect(record.payload?["aps"]?["alert"]?["title"] == .string("Hello"))
            #expect(record.payload?["aps"]?["alert"]?["body"] == .string("from send"))
            #expect(record.payload?["aps"]?["badge"] == .integer(3))
            #expect(record.payload?["aps"]?["sound"] == .string("default"))
            #expect(record.payload?["orderId"] == .integer(42))
            #expect(record.payload?["tags"] == .array([.string("a"), .string("b")]))
        }
    }

    @Test func apnsFileNamesTheTopicAndItsBundleKeyIsNotSent() async throws {
        try await ServerProcess.withRunning(yaml: """
            teams: [{ teamId: DEMOTEAM01, apps: [com.example.app, com.example.simulated], keys: [{ keyId: DEMOKEY001 }] }]
            """) { mock in
            let directory = try SendCLI.temporaryDirectory()
            defer { try? FileManager.default.removeItem(at: directory) }
            let file = directory.appendingPathComponent("push.apns")
            try Data(#"{"Simulator Target Bundle":"com.example.simulated","aps":{"alert":{"title":"Sim"},"badge":1},"custom":true}"#.utf8).write(to: file)
            let token = Self.device("b2")
            let run = try await SendCLI.run([file.path, "--device", token] + Self.tokenArguments(mock))
            #expect(run.exitCode == 0, "\(run.stderr)")
            #expect(run.field("status") == "200")

            let record = try #require(try await mock.admin.wait(RecordQuery(token: token), count: 1).page.notifications.first)
            #expect(record.topic == "com.example.simulated")
            #expect(record.payload?["Simulator Target Bundle"] == nil)
            #expect(record.payload?["aps"]?["alert"]?["title"] == .string("Sim"))
            #expect(record.payload?["custom"] == .bool(true))

            // --topic wins over the file's bundle.
            let other = Self.device("b3")
            let overridden = try await SendCLI.run([file.path, "--device", other, "--topic", "com.example.app"] + Self.tokenArguments(mock))
            #expect(overridden.exitCode == 0, "\(overridden.stderr)")
            let second = try #require(try await mock.admin.wait(RecordQuery(token: other), count: 1).page.notifications.first)
            #expect(second.topic == "com.example.app")
        }
    }

    @Test func jsonFileIsSentAsWritten() async throws {
        try await ServerProcess.withRunning { mock in
            let directory = try SendCLI.temporaryDirectory()
            defer { try? FileManager.default.removeItem(at: directory) }
            let file = directory.appendingPathComponent("payload.json")
            let text = "{ \"aps\" : { \"content-available\" : 1 }, \"n\" : 1.50 }\n"
            try Data(text.utf8).write(to: file)
            let token = Self.device("b4")
            let run = try await SendCLI.run([file.path, "--device", token] + Self.tokenArguments(mock))
            #expect(run.exitCode == 0, "\(run.stderr)")
            let record = try #require(try await mock.admin.wait(RecordQuery(token: token), count: 1).page.notifications.first)
            #expect(record.payloadSize == text.utf8.count)
            // content-available alone: a background push, priority 5.
            #expect(record.pushType == "background")
            #expect(record.priority == 5)
        }
    }

    @Test func rejectedPushPrintsStatusReasonAndTimestamp() async throws {
        try await ServerProcess.withRunning { mock in
            let token = Self.device("c3")
            try await mock.admin.request(
                "POST", "/v1/devices/\(token)/unregister", body: Data(#"{"timestamp":1700000000000}"#.utf8)).expect([200, 201, 204])
            let run = try await SendCLI.run(["--device", token] + Self.tokenArguments(mock))
            #expect(run.exitCode == 1, "\(run.stdout) \(run.stderr)")
            #expect(run.field("status") == "410")
            #expect(run.field("reason") == "Unregistered")
            #expect(run.field("timestamp")?.hasPrefix("1700000000000 (2023-11-14T22:13:20") == true)
            #expect(run.field("apns-id") != nil)

            let disallowed = try await SendCLI.run(["--device", Self.device("c4"), "--topic", "com.other.app"] + Self.tokenArguments(mock))
            #expect(disallowed.exitCode == 1)
            #expect(disallowed.field("status") == "400")
            #expect(disallowed.field("reason") == "TopicDisallowed")
        }
    }

    @Test func countRunPrintsTheSummaryAndTheMockRecordsEveryPush() async throws {
        try await ServerProcess.withRunning { mock in
            let token = Self.device("d4")
            let run = try await SendCLI.run(["--device", token, "--count", "200", "--concurrency", "20"] + Self.tokenArguments(mock))
            #expect(run.exitCode == 0, "\(run.stdout) \(run.stderr)")
            let summary = try SendSummary(run.stdout)
            #expect(summary.answered == 200)
            #expect(summary.rate > 0)
            #expect(summary.p50 > 0 && summary.p50 <= summary.p99)
            #expect(summary.responses == ["200": 200])
            #expect(run.stdout.contains("concurrency 20"))
            // Not a terminal: no progress bar.
            #expect(run.stderr.isEmpty)

            let (page, timedOut) = try await mock.admin.wait(RecordQuery(token: token, limit: 1000), count: 200)
            #expect(!timedOut)
            #expect(page.notifications.count == 200)
            #expect(page.notifications.allSatisfy { $0.status == 200 })
            // Long-lived connections: 200 pushes came over at most the connections the summary names.
            #expect(Set(page.notifications.map(\.connectionId)).count <= summary.connections)
        }
    }

    @Test func countRunCountsEachReason() async throws {
        try await ServerProcess.withRunning { mock in
            let token = Self.device("d5")
            try await mock.admin.addFault(json: #"{"match":{"token":"\#(token)"},"respond":{"reason":"TooManyRequests"},"times":7}"#).expect([201])
            let run = try await SendCLI.run(["--device", token, "--count", "50", "--concurrency", "5"] + Self.tokenArguments(mock))
            #expect(run.exitCode == 1, "\(run.stdout) \(run.stderr)")
            let summary = try SendSummary(run.stdout)
            #expect(summary.answered == 50)
            #expect(summary.responses == ["200": 43, "429 TooManyRequests": 7])
        }
    }

    @Test func countRunSendsARefusedPushAgainOnANewConnection() async throws {
        try await ServerProcess.withRunning { mock in
            // GOAWAY refuses the push that triggers it (REFUSED_STREAM): safe to send again.
            let token = Self.device("d6")
            try await mock.admin.addFault(json: #"{"match":{"token":"\#(token)"},"action":"goaway","times":1}"#).expect([201])
            let run = try await SendCLI.run(["--device", token, "--count", "40", "--concurrency", "4"] + Self.tokenArguments(mock))
            #expect(run.exitCode == 0, "\(run.stdout) \(run.stderr)")
            let summary = try SendSummary(run.stdout)
            #expect(summary.responses == ["200": 40])
            let (page, _) = try await mock.admin.wait(RecordQuery(token: token, outcome: .all), count: 41)
            #expect(page.notifications.count == 41)
            #expect(page.notifications.filter { $0.status == 200 }.count == 40)
            let refused = try #require(page.notifications.first { $0.action == "goaway" })
            #expect(!page.notifications.contains { $0.status == 200 && $0.connectionId == refused.connectionId })
            #expect(Set(page.notifications.map(\.connectionId)).count == summary.connections + 1, "a new connection replaced the one that went away")

            // A dropped connection: its pushes in flight may or may not have arrived, so they are
            // counted, not sent again.
            let other = Self.device("d7")
            try await mock.admin.addFault(json: #"{"match":{"token":"\#(other)"},"action":"close","times":1}"#).expect([201])
            let dropped = try await SendCLI.run(["--device", other, "--count", "20", "--concurrency", "1", "--connections", "1"] + Self.tokenArguments(mock))
            #expect(dropped.exitCode == 3, "\(dropped.stdout) \(dropped.stderr)")
            let droppedSummary = try SendSummary(dropped.stdout)
            #expect(droppedSummary.answered == 19)
            #expect(droppedSummary.responses["200"] == 19)
            // The server drops the connection without a word: the client sees the close, or a reset
            // when its last bytes were still unread on the server (the kernel answers those with RST).
            #expect(droppedSummary.responses.keys.contains {
                $0.hasPrefix("no response: connection closed") || ($0.hasPrefix("no response: connection") && $0.contains("reset"))
            }, "\(dropped.stdout)")
        }
    }

    @Test func certificateAuth() async throws {
        try await ServerProcess.withRunning { mock in
            let paths = mock.certificates.clientCertificatePaths(for: "com.example.app")
            let token = Self.device("e5")
            let run = try await SendCLI.run(
                ["--device", token, "--port", String(mock.apnsPort), "--ca", mock.caPath,
                 "--cert", paths.certificate, "--cert-key", paths.key, "--alert", "by certificate"])
            #expect(run.exitCode == 0, "\(run.stderr)")
            #expect(run.field("status") == "200")
            let record = try #require(try await mock.admin.wait(RecordQuery(token: token), count: 1).page.notifications.first)
            #expect(record.auth.method == .certificate)
            #expect(record.auth.teamId == "DEMOTEAM01")
            #expect(record.headers["authorization"] == nil)
            #expect(record.payload?["aps"]?["alert"] == .string("by certificate"))
        }
    }

    @Test func appleTargetsNameApplesHosts() async throws {
        // --production / --sandbox address Apple's hosts; --connect-to sends them to the mock
        // instead, which tells the environment from the host as APNs' hosts do.
        try await ServerProcess.withRunning { mock in
            for (flag, environment, host) in [("--production", "production", "api.push.apple.com"), ("--sandbox", "sandbox", "api.sandbox.push.apple.com")] {
                let token = Self.device(flag == "--production" ? "f6" : "f7")
                let run = try await SendCLI.run(
                    ["--device", token, flag, "--topic", "com.example.app", "--connect-to", "127.0.0.1:\(mock.apnsPort)"]
                        + Self.tokenArguments(mock).filter { $0 != "--port" && $0 != String(mock.apnsPort) })
                #expect(run.exitCode == 0, "\(run.stderr)")
                let record = try #require(try await mock.admin.wait(RecordQuery(token: token), count: 1).page.notifications.first)
                #expect(record.environment == environment)
                #expect(record.headers[":authority"] == host)
                #expect((run.field("apns-unique-id") != nil) == (environment == "sandbox"))
            }
        }
    }

    @Test func badInputEndsWithOneLine() async throws {
        let directory = try SendCLI.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let material = try Unprivileged.certificates()
        let notJSON = directory.appendingPathComponent("broken.apns")
        try Data("aps: hello".utf8).write(to: notJSON)
        let noBundle = directory.appendingPathComponent("nobundle.apns")
        try Data(#"{"aps":{"alert":"x"}}"#.utf8).write(to: noBundle)
        let token = Self.device("ab")
        let trust = ["--ca", material.caPath, "--key", material.tokenKeyPath(material.tokenKeys[0]), "--team", "DEMOTEAM01"]
        let refusing = try RefusingPort()
        let closedPort = refusing.port

        let cases: [(arguments: [String], code: Int32, line: String)] = [
            (["--device", token, "--key", directory.appendingPathComponent("AuthKey_NOPE000001.p8").path, "--team", "DEMOTEAM01", "--ca", material.caPath],
             2, "error: token key \(directory.path)/AuthKey_NOPE000001.p8 does not exist"),
            ([notJSON.path, "--device", token] + trust, 2, "error: \(notJSON.path) is not JSON: "),
            ([noBundle.path, "--device", token] + trust, 2, "error: \(noBundle.path): no \"Simulator Target Bundle\" key and no --topic"),
            (["--device", "not-a-token"] + trust, 2, "error: --device \"not-a-token\" is not a device token"),
            (["--device", "abc"] + trust, 2, "error: --device \"abc\" is not a device token"),
            (["--device", token, "--port", String(closedPort)] + trust, 3, "error: cannot connect to 127.0.0.1:\(closedPort): Connection refused"),
            (["--device", token, "--data", "[1]"] + trust, 2, "error: --data must be a JSON object"),
            (["--device", token, "--sandbox"], 2, "error: --key and --team (token auth) or --cert (certificate auth) are needed to send to Apple"),
        ]
        for (arguments, code, line) in cases {
            let run = try await SendCLI.run(arguments, in: directory)
            #expect(run.exitCode == code, "\(arguments): \(run.stderr)")
            let lines = run.stderr.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
            #expect(lines.count == 1, "\(arguments): \(run.stderr)")
            #expect(run.stderr.hasPrefix(line), "\(arguments): \(run.stderr)")
            #expect(run.stdout.isEmpty, "\(arguments): \(run.stdout)")
        }
        withExtendedLifetime(refusing) {}

        // The demo defaults, missing: named with what to do about it.
        let missing = try await SendCLI.run(["--device", token], in: directory)
        #expect(missing.exitCode == 2)
        #expect(missing.stderr.hasPrefix("error: ") && missing.stderr.contains("certs/"), "\(missing.stderr)")
        #expect(missing.stderr.split(separator: "\n").count == 1)
    }

    @Test func untrustedServerIsOneLine() async throws {
        try await ServerProcess.withRunning { mock in
            // A certificate that is not the mock's CA: the server's chain does not verify.
            let wrongCA = mock.certificates.clientCertificatePaths(for: "com.example.app").certificate
            var arguments = try Self.tokenArguments(mock)
            arguments[arguments.firstIndex(of: mock.caPath)!] = wrongCA
            let run = try await SendCLI.run(["--device", Self.device("ac")] + arguments)
            #expect(run.exitCode == 3)
            #expect(run.stderr.hasPrefix("error: TLS with 127.0.0.1:\(mock.apnsPort) failed: "), "\(run.stderr)")
            #expect(run.stderr.split(separator: "\n").count == 1, "\(run.stderr)")
        }
    }
}

/// Running the built executable with `send`.
enum SendCLI {
    struct Output: Sendable {
        var exitCode: Int32
        var stdout: String
        var stderr: String

        /// The value of a `name: value` line of the output.
        func field(_ name: String) -> String? {
            for line in stdout.split(separator: "\n") where line.hasPrefix(name + ": ") {
                return String(line.dropFirst(name.count + 2))
            }
            return nil
        }
    }

    /// Runs `apns-mock send <arguments>` in `directory`, unprivileged when the tests are root,
    /// killing it after `timeout` seconds. Through swift-subprocess, as ``ExternalTool``
    /// (Foundation's `Process` is not safe here).
    static func run(_ arguments: [String], in directory: URL? = nil, timeout: Double = 90) async throws -> Output {
        let command = Unprivileged.launcher + [try Unprivileged.binary(), "send"] + arguments
        let output = try await ExternalTool.run(command[0], Array(command.dropFirst()), in: directory, timeout: timeout)
        return Output(exitCode: output.exitCode, stdout: output.text, stderr: output.stderr)
    }

    /// A new directory the unprivileged `send` may read and write.
    static func temporaryDirectory() throws -> URL {
        try Unprivileged.temporaryDirectory("send")
    }

    /// A directory whose `certs/` is the harness's material, as `apns-mock serve` leaves `certs/`.
    static func directoryWithCerts(_ material: TestCertificates) throws -> URL {
        let directory = try temporaryDirectory()
        try FileManager.default.createSymbolicLink(
            at: directory.appendingPathComponent("certs"), withDestinationURL: URL(fileURLWithPath: material.directory))
        return directory
    }

    /// A port that is free now: bound to find one, then closed (another process may take it
    /// later; for a port that stays refused, use ``RefusingPort``).
    static func closedPort() async throws -> Int {
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .bind(host: "127.0.0.1", port: 0).get()
        let port = try #require(channel.localAddress?.port)
        try await channel.close()
        return port
    }
}


/// The summary `send --count` prints.
struct SendSummary {
    var answered: Int
    var connections: Int
    var rate: Double
    var p50: Double
    var p99: Double
    var responses: [String: Int] = [:]

    struct Unparsable: Error, CustomStringConvertible {
        var description: String
    }

    init(_ text: String) throws {
        func number(after label: String, in line: Substring) -> Double? {
            guard let range = line.range(of: label) else { return nil }
            return Double(line[range.upperBound...].trimmingCharacters(in: .whitespaces).split(separator: " ").first ?? "")
        }
        var answered: Int?, connections: Int?, rate: Double?, p50: Double?, p99: Double?
        var inResponses = false
        for line in text.split(separator: "\n") {
            if line.hasPrefix("answered:") {
                answered = number(after: "answered:", in: line).map { Int($0) }
            } else if line.hasPrefix("pushes:") {
                connections = number(after: " over ", in: line).map { Int($0) }
            } else if line.hasPrefix("rate:") {
                rate = number(after: "rate:", in: line)
                if !line.hasSuffix(" req/s") { throw Unparsable(description: "rate line: \(line)") }
            } else if line.hasPrefix("latency:") {
                p50 = number(after: "p50 ", in: line)
                p99 = number(after: "p99 ", in: line)
            } else if line == "responses:" {
                inResponses = true
            } else if inResponses, line.hasPrefix("  ") {
                let fields = line.trimmingCharacters(in: .whitespaces)
                guard let last = fields.lastIndex(of: " "), let count = Int(fields[fields.index(after: last)...]) else {
                    throw Unparsable(description: "response line: \(line)")
                }
                responses[fields[..<last].trimmingCharacters(in: .whitespaces)] = count
            }
        }
        guard let answered, let connections, let rate, let p50, let p99 else {
            throw Unparsable(description: "summary: \(text)")
        }
        self.answered = answered
        self.connections = connections
        self.rate = rate
        self.p50 = p50
        self.p99 = p99
    }
}

import APNSMockTesting
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// What `apns-mock serve` does with its start-up inputs, run as its own process: a bad input stops
/// it with the field named, and the mock creates only the files that are its own.
@Suite("Start-up checks")
struct StartupTests {
    /// Runs `serve` on free ports with `yaml` and a fresh certificate directory; returns its exit
    /// code, standard error and the directory (removed by the caller).
    private static func serve(yaml: String, extra: [String] = []) async throws -> (ExternalTool.Output, URL) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("apns-mock-startup-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let config = directory.appendingPathComponent("mock.yaml")
        try Data(yaml.utf8).write(to: config)
        let output = try await ExternalTool.run(ServerProcess.binary, [
            "serve", "--config", config.path, "--certs", directory.appendingPathComponent("certs").path,
            "--port", "0", "--admin-port", "0", "--broadcast-sandbox-port", "0", "--broadcast-production-port", "0",
        ] + extra, timeout: 60)
        return (output, directory)
    }

    /// Runs `serve` with `arguments` (and free ports for the listeners they do not name) in a fresh
    /// directory, expected to stop.
    private static func serve(arguments: [String], environment: [String: String] = [:]) async throws -> ExternalTool.Output {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("apns-mock-startup-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        var command = ["serve", "--certs", directory.appendingPathComponent("certs").path] + arguments
        for flag in ["--port", "--admin-port", "--broadcast-sandbox-port", "--broadcast-production-port"] where !arguments.contains(flag) {
            command += [flag, "0"]
        }
        return try await ExternalTool.run(ServerProcess.binary, command, in: directory, environment: environment, timeout: 60)
    }

    /// The admin port taken stops start-up naming the address, the port and every way to set it,
    /// as the other listeners do (it said only "bind(descriptor:ptr:bytes:): Address already in use").
    @Test func aTakenAdminPortIsNamedWithItsSetting() async throws {
        let taken = try RefusingPort()
        let output = try await Self.serve(arguments: ["--admin-port", "\(taken.port)"])
        #expect(output.exitCode == 1, "\(output.stderr)")
        for part in ["127.0.0.1:\(taken.port)", "admin.port", "--admin-port", "APNS_MOCK_ADMIN_PORT", "the admin listener", "Address already in use"] {
            #expect(output.stderr.contains(part), "\(part): \(output.stderr)")
        }
        withExtendedLifetime(taken) {}
    }

    /// A configuration path that is not a regular file is named for what it is, with the option
    /// or variable that gave it (Foundation said "You don't have permission" for /dev/null and a
    /// FIFO, and "(NSCocoaErrorDomain error 256.)" for a directory).
    @Test func aConfigurationPathThatIsNotAFileSaysWhatItIs() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("apns-mock-config-kinds-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let fifo = directory.appendingPathComponent("config.fifo").path
        #expect(mkfifo(fifo, 0o600) == 0)
        let cases: [(path: String, says: String)] = [
            ("/dev/null", "character device"), (directory.path, "a directory"), (fifo, "FIFO"),
            (directory.appendingPathComponent("absent.yaml").path, "no such file"),
        ]
        for (path, says) in cases {
            let output = try await Self.serve(arguments: ["--config", path])
            #expect(output.exitCode == 2, "\(path): \(output.stderr)")
            #expect(output.stderr.contains("--config \(path): "), "\(output.stderr)")
            #expect(output.stderr.contains(says), "\(says): \(output.stderr)")
            #expect(!output.stderr.contains("permission") && !output.stderr.contains("NSCocoaErrorDomain"), "\(output.stderr)")
        }
        let variable = try await Self.serve(arguments: [], environment: ["APNS_MOCK_CONFIG": "/dev/null"])
        #expect(variable.exitCode == 2)
        #expect(variable.stderr.contains("APNS_MOCK_CONFIG /dev/null: it is a character device"), "\(variable.stderr)")
    }

    /// A token that no header can carry stops start-up naming the variable or field, not the token.
    @Test func anAdminTokenWithWhitespaceStopsStartUp() async throws {
        let variable = try await Self.serve(arguments: [], environment: ["APNS_MOCK_ADMIN_TOKEN": "top secret"])
        #expect(variable.exitCode == 2, "\(variable.stderr)")
        #expect(variable.stderr.contains("APNS_MOCK_ADMIN_TOKEN: contains whitespace"), "\(variable.stderr)")
        #expect(!variable.stderr.contains("secret"), "\(variable.stderr)")
        let (file, directory) = try await Self.serve(yaml: "admin: { token: \"top\\u0007secret\" }\n")
        defer { try? FileManager.default.removeItem(at: directory) }
        #expect(file.exitCode == 2, "\(file.stderr)")
        #expect(file.stderr.contains("admin.token: contains a control character"), "\(file.stderr)")
    }

    /// A key whose configuration names a file that is not there stops start-up naming the field
    /// and the file, and no key is made up in its place.
    @Test func missingKeyFileStopsStartUp() async throws {
        let missing = FileManager.default.temporaryDirectory.appendingPathComponent("apns-mock-no-key-\(UUID())/AuthKey_TEAMKEY001.p8").path
        let (output, directory) = try await Self.serve(yaml: """
            teams:
              - teamId: TEAM000001
                apps: [com.example.app]
                keys: [{ keyId: TEAMKEY001, path: \(missing) }]
            """)
        defer { try? FileManager.default.removeItem(at: directory) }
        #expect(output.exitCode == 2, "\(output.stderr)")
        #expect(output.stderr.contains("teams[0].keys[0].path"), "\(output.stderr)")
        #expect(output.stderr.contains("does not exist"), "\(output.stderr)")
        #expect(!FileManager.default.fileExists(atPath: missing))
    }

    /// A recording capacity past the cap stops start-up naming the field (it once aborted on an
    /// allocation failure); the command-line flag has the same bound.
    @Test func recordingCapacityPastTheCapStopsStartUp() async throws {
        let (output, directory) = try await Self.serve(yaml: "recording: { capacity: 1000000000000 }\n")
        defer { try? FileManager.default.removeItem(at: directory) }
        #expect(output.exitCode == 2, "\(output.stderr)")
        #expect(output.stderr.contains("recording.capacity"), "\(output.stderr)")
        let (flag, flagDirectory) = try await Self.serve(yaml: "", extra: ["--recording-capacity", "1000000000000"])
        defer { try? FileManager.default.removeItem(at: flagDirectory) }
        #expect(flag.exitCode != 0)
        #expect(flag.stderr.contains("--recording-capacity"), "\(flag.stderr)")
    }

    /// The largest ring costs address space, not resident memory, until records arrive (its tags
    /// alone, written out, would be 80 MB on top of the mock's usual 50).
    @Test func largestRingIsNotResidentBeforeRecords() async throws {
        try await ServerProcess.withRunning(yaml: "recording: { capacity: 10000000 }\n") { mock in
            #expect(mock.residentKiB < 100 * 1024, "resident \(mock.residentKiB / 1024) MiB with an empty ring of ten million")
        }
    }
}

import APNSMockTesting
import Foundation
import Testing

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

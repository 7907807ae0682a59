import APNSMock
import APNSMockCore
import APNSMockTesting
import Foundation
import Logging
import Subprocess
import Synchronization
import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// `apns-mock serve` run as a separate process (the debug binary `swift build` made), as users run
/// it: unprivileged (when the suite is root it runs as `nobody`, see ``Unprivileged``), configured
/// by a file or by `APNS_MOCK_*` variables. Also for what an in-process mock cannot show: a process
/// out of file descriptors (its limit lowered with prlimit), its CPU use and resident memory
/// measured alone, whether it is still alive.
struct ServerProcess: MockEndpoints {
    let pid: Int32
    /// Every listener's port, from the line `apns-mock listening …`.
    let ports: [String: String]
    /// Where the process writes its log (stderr).
    let logPath: String
    let certificates: TestCertificates

    var apnsPort: Int { Int(ports["apns"] ?? "") ?? 0 }
    var adminPort: Int { Int(ports["admin"] ?? "") ?? 0 }
    func channelManagementPort(_ environment: APNSEnvironment) -> Int {
        Int(ports[environment == .sandbox ? "broadcast-sandbox" : "broadcast-production"] ?? "") ?? 0
    }

    static let repository = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static var binary: String { repository.appendingPathComponent(".build/debug/apns-mock").path }

    struct StartFailure: Error, CustomStringConvertible {
        var description: String
    }

    /// Starts the mock on free ports with the test certificates and `yaml` as its configuration
    /// file (none when `yaml` is nil), `environment` added to its environment, its descriptor
    /// limit set to `descriptorLimit` when given; runs `body`, then stops it with SIGTERM.
    /// `errorOutput`: where its stderr goes instead of a file (a pipe nobody reads, say); the
    /// descriptor is closed once the process has it.
    static func withRunning<T: Sendable>(
        yaml: String? = "", environment: [String: String] = [:], descriptorLimit: Int? = nil, arguments: [String] = [],
        errorOutput: FileDescriptor? = nil, _ body: (ServerProcess) async throws -> T
    ) async throws -> T {
        let binary = try Unprivileged.binary()
        let certificates = try Unprivileged.certificates()
        let directory = try Unprivileged.temporaryDirectory("process")
        defer { try? FileManager.default.removeItem(at: directory) }
        let outPath = directory.appendingPathComponent("out.txt").path
        let logPath = directory.appendingPathComponent("err.txt").path
        let out = try FileDescriptor.open(
            FilePath(outPath), .writeOnly, options: [.create, .truncate], permissions: .ownerReadWrite)
        let err = try errorOutput ?? FileDescriptor.open(
            FilePath(logPath), .writeOnly, options: [.create, .truncate], permissions: .ownerReadWrite)
        var command = Unprivileged.launcher + [binary, "serve", "--port", "0", "--admin-port", "0",
                       "--broadcast-sandbox-port", "0", "--broadcast-production-port", "0",
                       "--certs", certificates.directory, "--threads", "2", "--log-level", "info"]
        if let yaml {
            let configPath = directory.appendingPathComponent("mock.yaml").path
            try Data(yaml.utf8).write(to: URL(fileURLWithPath: configPath))
            command += ["--config", configPath]
        }
        command += arguments
        if let descriptorLimit {
            command = ["/usr/bin/prlimit", "--nofile=\(descriptorLimit):\(descriptorLimit)"] + command
        }
        let result = try await Subprocess.run(
            .path(FilePath(command[0])), arguments: Arguments(Array(command.dropFirst())),
            environment: ExternalTool.environment(environment), workingDirectory: FilePath(directory.path),
            input: .none, output: .fileDescriptor(out, closeAfterSpawningProcess: true),
            error: .fileDescriptor(err, closeAfterSpawningProcess: true)
        ) { execution -> Result<T, any Error> in
            let pid = execution.processIdentifier.value
            defer { _ = kill(pid, SIGTERM) }
            do {
                let ports = try await waitForPorts(outPath: outPath, logPath: logPath, pid: pid)
                let server = ServerProcess(pid: pid, ports: ports, logPath: logPath, certificates: certificates)
                return .success(try await body(server))
            } catch {
                return .failure(error)
            }
        }
        return try result.closureResult.get()
    }

    /// The keys and values of the listening line, once it is printed.
    private static func waitForPorts(outPath: String, logPath: String, pid: Int32) async throws -> [String: String] {
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            let text = (try? String(contentsOfFile: outPath, encoding: .utf8)) ?? ""
            for line in text.split(separator: "\n") where line.hasPrefix("apns-mock listening ") {
                let ports = parseListeningLine(line)
                if ports["apns"] != nil, ports["admin"] != nil { return ports }
            }
            if !ProcessStatus.isAlive(pid) {
                let log = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
                throw StartFailure(description: "apns-mock exited before listening:\n\(log)")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw StartFailure(description: "apns-mock did not print its ports within 60 s")
    }

    /// `key=value` fields of `apns-mock listening apns=… admin=…`.
    static func parseListeningLine(_ line: Substring) -> [String: String] {
        var ports: [String: String] = [:]
        for field in line.split(separator: " ") {
            guard let equals = field.firstIndex(of: "=") else { continue }
            ports[String(field[..<equals])] = String(field[field.index(after: equals)...])
        }
        return ports
    }

    var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }
    var isAlive: Bool { ProcessStatus.isAlive(pid) }
    /// CPU time (user + system) the process has used so far, in seconds.
    var cpuSeconds: Double { ProcessStatus.cpuSeconds(pid) }
    /// Resident memory in KiB.
    var residentKiB: Int { ProcessStatus.residentKiB("/proc/\(pid)/status") }
    /// Descriptors the process has open.
    var openDescriptors: Int { (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count) ?? 0 }

    /// Sets the process's soft descriptor limit (its hard limit stays), with prlimit run as the
    /// process's own user: lowering a hard limit could not be undone without CAP_SYS_RESOURCE,
    /// which even root may lack in a container.
    func setDescriptorLimit(_ soft: Int) async throws -> ExternalTool.Output {
        let command = Unprivileged.launcher + ["/usr/bin/prlimit", "--pid", "\(pid)", "--nofile=\(soft):"]
        return try await ExternalTool.run(command[0], Array(command.dropFirst()))
    }

    /// CPU seconds the process uses over `duration`.
    func cpuUse(over duration: Duration) async throws -> Double {
        let before = cpuSeconds
        try await Task.sleep(for: duration)
        return cpuSeconds - before
    }

    /// The process's user IDs (real, effective, saved, file system) and effective capabilities.
    var identity: (uid: [Int], effectiveCapabilities: UInt64)? { Unprivileged.identity(of: pid) }
}

/// What /proc says about a process.
enum ProcessStatus {
    /// Alive and not a zombie.
    static func isAlive(_ pid: Int32) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")")
        else { return false }
        let state = stat[stat.index(close, offsetBy: 2)...].first
        return state != "Z" && state != "X"
    }

    static func cpuSeconds(_ pid: Int32) -> Double {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")")
        else { return 0 }
        // Fields after the command: state is field 3; utime and stime are fields 14 and 15.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// VmRSS of a /proc status file, in KiB (`/proc/self/status` for the test process itself).
    static func residentKiB(_ path: String = "/proc/self/status") -> Int {
        guard let status = try? String(contentsOfFile: path, encoding: .utf8) else { return 0 }
        for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            return Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
        }
        return 0
    }
}

/// A log handler that keeps every message, for tests that check what the mock logged.
struct CapturingLogHandler: LogHandler {
    final class Store: Sendable {
        private let lines = Mutex<[String]>([])
        var all: [String] { lines.withLock { $0 } }
        func append(_ line: String) { lines.withLock { $0.append(line) } }
        func contains(_ text: String) -> Bool { all.contains { $0.contains(text) } }
    }

    let store: Store
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .info

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let merged = metadata.merging(event.metadata ?? [:]) { $1 }
        let rendered = merged.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        store.append("\(event.level) \(event.message) \(rendered)")
    }

    /// A logger writing into a new store.
    static func logger() -> (Logger, Store) {
        let store = Store()
        return (Logger(label: "apns-mock-test") { _ in CapturingLogHandler(store: store) }, store)
    }
}

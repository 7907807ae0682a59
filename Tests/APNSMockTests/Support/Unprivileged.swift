import APNSMock
import APNSMockCore
import APNSMockTesting
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Runs the mock's processes as users run them: not as root.
///
/// CI runs the suite as root, and a server run as root hides what needs a privilege: it once set
/// SO_DEBUG (CAP_NET_ADMIN) on every accepted socket, which dropped every connection of an
/// unprivileged server and no test saw it. So when the suite is root, the `apns-mock` processes
/// it starts (``ServerProcess``, `send`) run as `nobody` through util-linux's `setpriv`, with no
/// supplementary groups, no capabilities and no way to gain privileges. Their files are set up
/// for that user: the binary in a directory it can reach (a fresh clone may sit under a home
/// directory it cannot enter) and a copy of the test certificates it owns.
enum Unprivileged {
    static let uid: uid_t = 65534
    static let gid: gid_t = 65534

    /// Whether the tests run as root, so that processes must be started as ``uid``.
    static var isRoot: Bool { getuid() == 0 }

    /// The command prefix that drops to ``uid`` (empty when the suite is not root).
    static var launcher: [String] {
        guard isRoot else { return [] }
        return ["/usr/bin/setpriv", "--reuid=\(uid)", "--regid=\(gid)", "--clear-groups", "--inh-caps=-all", "--no-new-privs"]
    }

    struct SetupFailure: Error, CustomStringConvertible {
        var description: String
    }

    /// A directory of this test process that ``uid`` may enter and write: 0755, owned by it.
    static func directory(_ name: String) throws -> URL {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("apns-mock-unprivileged-\(ProcessInfo.processInfo.processIdentifier)")
            .appendingPathComponent(name)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try handOver(directory.deletingLastPathComponent())
        try handOver(directory)
        return directory
    }

    /// Gives `url` (a file or directory, not recursively) to ``uid`` when the suite is root, so
    /// that an unprivileged process can read and write what the test prepared there.
    static func handOver(_ url: URL) throws {
        guard isRoot else { return }
        guard chown(url.path, uid, gid) == 0 else {
            throw SetupFailure(description: "chown \(url.path): \(String(cString: strerror(errno)))")
        }
    }

    /// Gives a directory and everything in it to ``uid``.
    static func handOverTree(_ url: URL) throws {
        guard isRoot else { return }
        try handOver(url)
        guard let files = FileManager.default.enumerator(at: url, includingPropertiesForKeys: nil) else {
            throw SetupFailure(description: "cannot list \(url.path)")
        }
        for case let file as URL in files {
            try handOver(file)
        }
    }

    /// The `apns-mock` binary `swift build` made, linked (or copied) into a directory every user
    /// can reach. The same for the whole test process.
    static func binary() throws -> String {
        try binaryPath.get()
    }

    private static let binaryPath = Result<String, any Error> {
        let built = ServerProcess.repository.appendingPathComponent(".build/debug/apns-mock").path
        guard FileManager.default.isExecutableFile(atPath: built) else {
            throw SetupFailure(description: "build first: swift build --build-tests (no \(built))")
        }
        guard isRoot else { return built }
        let directory = try Unprivileged.directory("bin")
        let target = directory.appendingPathComponent("apns-mock").path
        try? FileManager.default.removeItem(atPath: target)
        if link(built, target) != 0 {
            try FileManager.default.copyItem(atPath: built, toPath: target)
        }
        return target
    }

    /// The harness's test certificates (same CA, keys and client certificates, so that clients
    /// trusting either copy trust both), copied into a directory ``uid`` owns. Clients of the
    /// tests, run as root, read them too.
    static func certificates() throws -> TestCertificates {
        try certificateCopy.get()
    }

    private static let certificateCopy = Result<TestCertificates, any Error> {
        let shared = try MockHarness.sharedCertificates()
        guard isRoot else { return shared }
        let directory = try Unprivileged.directory("certs")
        for name in try FileManager.default.contentsOfDirectory(atPath: shared.directory) {
            let target = directory.appendingPathComponent(name)
            try? FileManager.default.removeItem(at: target)
            try FileManager.default.copyItem(atPath: shared.directory + "/" + name, toPath: target.path)
        }
        try handOverTree(directory)
        return TestCertificates(
            directory: directory.path, extraHosts: shared.extraHosts, apps: shared.apps,
            tokenKeys: shared.tokenKeys.map {
                TestCertificates.TokenKey(keyID: $0.keyID, teamID: $0.teamID, path: ($0.path as NSString).lastPathComponent)
            })
    }

    /// A fresh temporary directory the unprivileged processes can use (their working directory,
    /// files the test writes for them).
    static func temporaryDirectory(_ prefix: String) throws -> URL {
        try directory("\(prefix)-\(UUID())")
    }

    /// The real and effective user IDs and the effective capabilities of a running process, from
    /// /proc (to check that it runs unprivileged).
    static func identity(of pid: Int32) -> (uid: [Int], effectiveCapabilities: UInt64)? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        var uids: [Int] = []
        var capabilities: UInt64?
        for line in status.split(separator: "\n") {
            let fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            if fields.first == "Uid:" { uids = fields.dropFirst().compactMap { Int($0) } }
            if fields.first == "CapEff:", fields.count > 1 { capabilities = UInt64(fields[1], radix: 16) }
        }
        guard let capabilities, !uids.isEmpty else { return nil }
        return (uids, capabilities)
    }
}

/// What the tests need of a running mock, in-process (``RunningMock``) or its own process
/// (``ServerProcess``): where it listens and what to trust.
protocol MockEndpoints: Sendable {
    var apnsPort: Int { get }
    var adminPort: Int { get }
    /// The material it serves and trusts: CA, server chain, demo key, client certificates.
    var certificates: TestCertificates { get }
    func channelManagementPort(_ environment: APNSEnvironment) -> Int
}

extension MockEndpoints {
    var caPath: String { certificates.caPath }
    /// `https://localhost:<port>` — `localhost` is among the server certificate's names.
    var baseURL: String { "https://localhost:\(apnsPort)" }
    var adminURL: String { "http://127.0.0.1:\(adminPort)" }
    var admin: AdminClient { AdminClient(baseURL: adminURL) }
}

extension RunningMock: MockEndpoints {}

import APNSMockTesting
import Foundation
import Subprocess
import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// Runs a command-line client (curl, nghttp, h2load, openssl…) and collects what it printed.
///
/// Built on swift-subprocess (posix_spawn, descriptors closed with `closefrom`), not Foundation's
/// `Process`, whose descriptor scan of /proc/self/fd reads past its buffer and crashed test runs
/// that had many sockets open.
struct ExternalTool {
    struct Output: Sendable {
        var exitCode: Int32
        var stdout: Data
        var stderr: String
        var text: String { String(decoding: stdout, as: UTF8.self) }
    }

    /// This process's environment with `overrides` set.
    static func environment(_ overrides: [String: String]) -> Environment {
        .inherit.updating(Dictionary(uniqueKeysWithValues: overrides.compactMap { name, value in
            Environment.Key(rawValue: name).map { ($0, Optional(value)) }
        }))
    }

    /// Output kept per stream; the tools the tests run print far less.
    static let outputLimit = 64 << 20

    /// Runs `executable` (looked up on PATH, or a path) with `arguments`, killing it after
    /// `timeout` seconds (the output is then what it printed so far is lost; `exitCode` is -1 and
    /// `stderr` says so).
    ///
    /// The timeout is a backstop for a tool that hangs, not a limit on the mock: the clients carry
    /// their own (curl `--max-time 20`, nghttp `-t 20`), and a slow answer fails the test through
    /// them. It is long because under the whole suite (some twenty mock processes and many clients
    /// on two cores) a tool's exit was twice seen here more than 30 s late while the tool's own
    /// 20 s limit had not fired; where that delay arises was not found.
    static func run(
        _ executable: String, _ arguments: [String], stdin: Data? = nil, in directory: URL? = nil,
        environment: [String: String] = [:], timeout: Double = 90
    ) async throws -> Output {
        let program: Executable = executable.contains("/") ? .path(FilePath(executable)) : .name(executable)
        let workingDirectory = directory.map { FilePath($0.path) }
        let environment = Self.environment(environment)
        return try await withThrowingTaskGroup(of: Output?.self) { group in
            group.addTask {
                let result: ExecutionResult<Void, BytesOutput, BytesOutput>
                if let stdin {
                    result = try await Subprocess.run(
                        program, arguments: Arguments(arguments), environment: environment, workingDirectory: workingDirectory,
                        input: .array([UInt8](stdin)),
                        output: .bytes(limit: outputLimit), error: .bytes(limit: outputLimit))
                } else {
                    result = try await Subprocess.run(
                        program, arguments: Arguments(arguments), environment: environment, workingDirectory: workingDirectory,
                        input: .none,
                        output: .bytes(limit: outputLimit), error: .bytes(limit: outputLimit))
                }
                let code: Int32
                switch result.terminationStatus {
                case .exited(let status): code = Int32(status)
                case .signaled(let signal): code = 128 + Int32(signal)
                }
                return Output(
                    exitCode: code, stdout: Data(result.standardOutput),
                    stderr: String(decoding: result.standardError, as: UTF8.self))
            }
            group.addTask {
                try? await Task.sleep(for: .seconds(timeout))
                return nil
            }
            defer { group.cancelAll() }
            while let finished = try await group.next() {
                if let output = finished { return output }
                // The timer fired first: cancelling the run kills the process.
                group.cancelAll()
                return Output(exitCode: -1, stdout: Data(), stderr: "\(executable) timed out after \(timeout) s")
            }
            return Output(exitCode: -1, stdout: Data(), stderr: "\(executable) did not run")
        }
    }
}

extension ExternalTool {
    /// Starts `executable` (a service: `podman system service`), runs `body` while it runs, then
    /// stops it with SIGTERM. Its output is discarded.
    static func runningInBackground<T: Sendable>(
        _ executable: String, _ arguments: [String], _ body: () async throws -> T
    ) async throws -> T {
        let result = try await Subprocess.run(
            .name(executable), arguments: Arguments(arguments), input: .none, output: .discarded, error: .discarded
        ) { execution -> Result<T, any Error> in
            defer { _ = kill(execution.processIdentifier.value, SIGTERM) }
            do {
                return .success(try await body())
            } catch {
                return .failure(error)
            }
        }
        return try result.closureResult.get()
    }
}

/// One HTTP response as curl reported it, with the APNs error body decoded.
struct CurlResponse: Sendable {
    var status: Int
    var httpVersion: String
    var headers: [String: String]
    var body: Data

    struct ErrorBody: Decodable, Equatable {
        var reason: String
        var timestamp: Int64?
    }

    /// The decoded `{"reason":…}` body, or nil when the body is empty or not that JSON.
    var error: ErrorBody? { try? JSONDecoder().decode(ErrorBody.self, from: body) }
    var reason: String? { error?.reason }
}

enum Curl {
    /// `bearer <the harness's demo token>`: what requests carry unless a test says otherwise, so
    /// that tests of other checks pass authentication as a real provider's requests do.
    static var demoAuthorization: String? {
        (try? MockHarness.demoToken()).map { "bearer " + $0 }
    }

    /// Sends one request with curl over HTTP/2 and TLS, trusting `caPath`. `authorization` is
    /// sent unless `nil` or `headers` has its own.
    static func send(
        url: String, caPath: String, method: String = "POST", headers: [String: String] = ["apns-topic": "com.example.app"],
        authorization: String? = demoAuthorization,
        body: Data? = Data(#"{"aps":{"alert":"hello"}}"#.utf8), extra: [String] = []
    ) async throws -> CurlResponse {
        var arguments = ["-sS", "--http2", "--cacert", caPath, "-i", "-X", method, "--max-time", "20"]
        var headers = headers
        if let authorization, headers["authorization"] == nil {
            headers["authorization"] = authorization
        }
        for (name, value) in headers.sorted(by: { $0.key < $1.key }) {
            arguments += ["-H", "\(name): \(value)"]
        }
        if body != nil {
            arguments += ["--data-binary", "@-"]
        }
        arguments += extra
        arguments.append(url)
        let output = try await ExternalTool.run("curl", arguments, stdin: body)
        guard output.exitCode == 0 else {
            throw CurlFailure(exitCode: output.exitCode, stderr: output.stderr)
        }
        return try parse(output.stdout)
    }

    struct CurlFailure: Error, CustomStringConvertible {
        var exitCode: Int32
        var stderr: String
        var description: String { "curl exited \(exitCode): \(stderr)" }
    }

    static func parse(_ data: Data) throws -> CurlResponse {
        let separator = Data("\r\n\r\n".utf8)
        guard let range = data.range(of: separator) else {
            throw CurlFailure(exitCode: 0, stderr: "no header block in curl output")
        }
        let head = String(decoding: data[..<range.lowerBound], as: UTF8.self)
        var lines = head.components(separatedBy: "\r\n")
        let statusLine = lines.removeFirst().split(separator: " ")
        guard statusLine.count >= 2, let status = Int(statusLine[1]) else {
            throw CurlFailure(exitCode: 0, stderr: "bad status line in curl output")
        }
        var headers: [String: String] = [:]
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return CurlResponse(
            status: status, httpVersion: String(statusLine[0]), headers: headers,
            body: Data(data[range.upperBound...]))
    }
}

extension Curl {
    /// One request of ``sequence(url:caPath:requests:extra:)``: its headers (authorization
    /// included, none is added) and what came back.
    struct Exchange: Sendable {
        var status: Int
        var reason: String?
        /// Whether curl opened a new connection for it (false: it reused the previous one).
        var newConnection: Bool
    }

    /// Sends several requests to `url` with one curl process, one after the other on one
    /// connection (`--next` keeps curl's connection cache), each with its own headers.
    static func sequence(
        url: String, caPath: String, requests: [[String: String]], extra: [String] = []
    ) async throws -> [Exchange] {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("apns-mock-curl-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        var arguments: [String] = []
        for (index, headers) in requests.enumerated() {
            if index > 0 { arguments.append("--next") }
            arguments += ["-sS", "--http2", "--cacert", caPath, "-X", "POST", "--max-time", "20",
                          "-d", #"{"aps":{"alert":"hello"}}"#, "-o", directory.appendingPathComponent("\(index)").path,
                          "-w", "%{http_code} %{num_connects}\\n"] + extra
            for (name, value) in headers.sorted(by: { $0.key < $1.key }) {
                arguments += ["-H", "\(name): \(value)"]
            }
            arguments.append(url)
        }
        let output = try await ExternalTool.run("curl", arguments)
        guard output.exitCode == 0 else { throw CurlFailure(exitCode: output.exitCode, stderr: output.stderr) }
        let lines = output.text.split(separator: "\n")
        guard lines.count == requests.count else {
            throw CurlFailure(exitCode: 0, stderr: "expected \(requests.count) results, got: \(output.text)")
        }
        return try lines.enumerated().map { index, line in
            let fields = line.split(separator: " ")
            guard fields.count == 2, let status = Int(fields[0]), let connects = Int(fields[1]) else {
                throw CurlFailure(exitCode: 0, stderr: "bad write-out line \(line)")
            }
            let body = (try? Data(contentsOf: directory.appendingPathComponent("\(index)"))) ?? Data()
            let reason = (try? JSONDecoder().decode(CurlResponse.ErrorBody.self, from: body))?.reason
            return Exchange(status: status, reason: reason, newConnection: connects > 0)
        }
    }
}

import APNSMockTesting
import Foundation

/// Load from h2load (Debian's nghttp2-client): `count` device pushes with the demo token's
/// authorization, the same payload each, to `/3/device/<token>`.
enum H2Load {
    struct Run: Sendable {
        var output: ExternalTool.Output
        var text: String { output.text }
        /// Whether every request was answered (any status), as h2load counts them.
        func allSucceeded(_ count: Int) -> Bool { text.contains("\(count) succeeded") }
        /// Whether every answer was 2xx.
        func all2xx(_ count: Int) -> Bool { text.contains("status codes: \(count) 2xx") }
    }

    /// `baseURL` is the mock's `https://host:port`; `clients` connections with at most `streams`
    /// requests each in flight, over `threads` h2load threads; the demo token and app unless
    /// `authorization` and `topic` say otherwise.
    static func push(
        _ count: Int, to baseURL: String, token: String, payload: String = #"{"aps":{"alert":"load"}}"#,
        clients: Int = 1, streams: Int = 100, threads: Int = 1, timeout: Double = 120,
        authorization: String? = Curl.demoAuthorization, topic: String = "com.example.app"
    ) async throws -> Run {
        guard let authorization else { throw H2LoadError("no provider token") }
        let payloadFile = FileManager.default.temporaryDirectory.appendingPathComponent("apns-mock-h2load-\(UUID()).json")
        try Data(payload.utf8).write(to: payloadFile)
        defer { try? FileManager.default.removeItem(at: payloadFile) }
        let output = try await ExternalTool.run("h2load", [
            "-n", String(count), "-c", String(clients), "-m", String(streams), "-t", String(threads),
            "-d", payloadFile.path,
            "-H", "apns-topic: \(topic)", "-H", "authorization: \(authorization)",
            "\(baseURL)/3/device/\(token)",
        ], timeout: timeout)
        return Run(output: output)
    }

    struct H2LoadError: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }
}

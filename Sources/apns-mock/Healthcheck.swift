import APNSMock
import APNSMockCommandLine
import APNSMockCore
import ArgumentParser
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix

/// `apns-mock healthcheck`: asks a running mock's admin listener `GET /v1/health` and exits 0 when
/// it answers healthy (every listener bound), 1 with the reason otherwise — for a container's
/// HEALTHCHECK, a CI service's health command, a script waiting for start-up. It finds the admin
/// listener the way `serve` does (`--config`, the `APNS_MOCK_*` variables, the defaults) unless
/// `--admin-url` says where it is.
struct Healthcheck: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Exit 0 when a running apns-mock answers healthy on its admin listener (GET /v1/health), else 1 with the reason.")

    @Option(help: "The admin listener, e.g. http://127.0.0.1:2198 (default: found as serve finds it).")
    var adminURL: String?

    @Option(help: "Configuration file, to find the admin listener (APNS_MOCK_CONFIG and the other APNS_MOCK_* variables are read too).")
    var config: String?

    @Option(help: "Seconds to wait for the answer, connecting included (default 5).")
    var timeout: Double = 5

    func validate() throws {
        guard timeout > 0, timeout <= 300 else { throw ValidationError("--timeout must be more than 0 and at most 300 seconds") }
    }

    func run() async throws {
        // Only errors are logged: a bad configuration says why before the exit.
        let logger = LoggingOptions.bootstrap(level: .error, format: .text)
        let target: (url: URL, token: String?)
        do {
            target = try resolveTarget(logger: logger)
        } catch {
            // Exit code 2 is reserved by Docker's HEALTHCHECK; every failure here is 1.
            Self.fail("cannot tell where the admin listener is: \(error)")
        }
        let answer: HealthAnswer
        do {
            answer = try await HealthProbe.get(target.url, token: target.token, timeout: .milliseconds(Int64(timeout * 1000)))
        } catch {
            Self.fail("\(target.url.absoluteString): \(error)")
        }
        guard answer.status == 200 else {
            Self.fail("\(target.url.absoluteString) answered \(answer.status): \(answer.summary)")
        }
        Console.line("healthy: \(answer.summary)")
    }

    private static func fail(_ reason: String) -> Never {
        FileHandle.standardError.write(Data("unhealthy: \(reason)\n".utf8))
        Foundation.exit(1)
    }

    /// `--admin-url`, or `http://<admin.host>:<admin.port>/v1/health` of the configuration `serve`
    /// would run with (a wildcard host is dialled on loopback).
    private func resolveTarget(logger: Logger) throws -> (url: URL, token: String?) {
        let environment = try EnvironmentVariables(ProcessInfo.processInfo.environment)
        let token = environment["APNS_MOCK_ADMIN_TOKEN"]
        if let adminURL {
            guard var components = URLComponents(string: adminURL), components.scheme == "http", components.host?.isEmpty == false else {
                throw HealthcheckError("--admin-url \(adminURL) is not an http:// URL")
            }
            components.path = (components.path.hasSuffix("/") ? String(components.path.dropLast()) : components.path) + "/v1/health"
            guard let url = components.url else { throw HealthcheckError("--admin-url \(adminURL) is not a URL") }
            return (url, token)
        }
        let configuration: Configuration
        do {
            configuration = try ConfigurationFile.load(config, environment: environment, logger: logger)
        } catch {
            throw HealthcheckError("the configuration is not valid (see above)")
        }
        guard configuration.admin.port != 0 else {
            throw HealthcheckError("admin.port is 0 (any free port): pass --admin-url with the port serve printed")
        }
        var host = configuration.admin.host
        if host == "0.0.0.0" { host = "127.0.0.1" }
        if host == "::" || host == "[::]" { host = "::1" }
        if host.contains(":"), !host.hasPrefix("[") { host = "[\(host)]" }
        guard let url = URL(string: "http://\(host):\(configuration.admin.port)/v1/health") else {
            throw HealthcheckError("admin.host \(configuration.admin.host) does not make a URL")
        }
        return (url, configuration.admin.token ?? token)
    }
}

struct HealthcheckError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// What `GET /v1/health` answered.
struct HealthAnswer: Sendable {
    var status: Int
    var body: String

    /// `apns=2197 admin=2198 …` from the body's ports, or the body itself when it is not the
    /// health document.
    var summary: String {
        struct Document: Decodable {
            var status: String
            var ports: ListenerPorts?
        }
        guard let document = try? JSONDecoder().decode(Document.self, from: Data(body.utf8)) else {
            return body.isEmpty ? "(no body)" : String(body.prefix(500))
        }
        guard let ports = document.ports else { return document.status }
        return "\(document.status): " + ListeningLine.fields(ports, admin: ports.admin.map(String.init) ?? "-")
    }
}

/// One HTTP/1.1 GET over NIO, with a deadline for the whole exchange.
enum HealthProbe {
    /// The largest body read; the health document is a few hundred bytes.
    static let bodyLimit = 64 << 10

    static func get(_ url: URL, token: String?, timeout: TimeAmount) async throws -> HealthAnswer {
        guard let host = url.host, let port = url.port ?? (url.scheme == "http" ? 80 : nil) else {
            throw HealthcheckError("\(url) names no host")
        }
        let group = MultiThreadedEventLoopGroup.singleton
        let loop = group.next()
        let answer = loop.makePromise(of: HealthAnswer.self)
        let deadline = loop.scheduleTask(in: timeout) {
            answer.fail(HealthcheckError("no answer within \(timeout.nanoseconds / 1_000_000) ms"))
        }
        defer {
            deadline.cancel()
            // A promise must be completed before it is dropped; when it already is, this does nothing.
            answer.fail(HealthcheckError("abandoned"))
        }
        let bootstrap = ClientBootstrap(group: loop)
            .connectTimeout(timeout)
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    try channel.pipeline.syncOperations.addHandler(ResponseCollector(answer: answer))
                }
            }
        let channel: any Channel
        do {
            channel = try await bootstrap.connect(host: host.trimmingCharacters(in: CharacterSet(charactersIn: "[]")), port: port).get()
        } catch {
            throw HealthcheckError("cannot connect: \(error)")
        }
        defer { channel.close(promise: nil) }
        var head = HTTPRequestHead(version: .http1_1, method: .GET, uri: url.path.isEmpty ? "/" : url.path)
        head.headers.add(name: "host", value: "\(host):\(port)")
        head.headers.add(name: "user-agent", value: "apns-mock-healthcheck")
        head.headers.add(name: "connection", value: "close")
        if let token { head.headers.add(name: "authorization", value: "Bearer \(token)") }
        channel.write(HTTPClientRequestPart.head(head), promise: nil)
        channel.writeAndFlush(HTTPClientRequestPart.end(nil), promise: nil)
        return try await answer.futureResult.get()
    }

    /// Collects one response; the connection closing early fails it.
    private final class ResponseCollector: ChannelInboundHandler {
        typealias InboundIn = HTTPClientResponsePart

        private let answer: EventLoopPromise<HealthAnswer>
        private var status: Int?
        private var body = ByteBuffer()

        init(answer: EventLoopPromise<HealthAnswer>) {
            self.answer = answer
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch Self.unwrapInboundIn(data) {
            case .head(let head):
                status = Int(head.status.code)
            case .body(var part):
                if body.readableBytes + part.readableBytes <= HealthProbe.bodyLimit { body.writeBuffer(&part) }
            case .end:
                answer.succeed(HealthAnswer(status: status ?? 0, body: String(buffer: body)))
                context.close(promise: nil)
            }
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            answer.fail(HealthcheckError("\(error)"))
            context.close(promise: nil)
        }

        func channelInactive(context: ChannelHandlerContext) {
            answer.fail(HealthcheckError("the connection closed before a whole answer"))
            context.fireChannelInactive()
        }
    }
}

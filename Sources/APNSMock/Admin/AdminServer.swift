import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import ServiceLifecycle

/// Runs the admin API (``AdminAPI``) as a Hummingbird application in a service group of its own,
/// on its own task, so that the APNs listener's `start()`/`shutdown()` can bring it up and down
/// with it. Stopping is a graceful shutdown of that group (in-flight admin requests finish), not a
/// cancellation.
final class AdminServer: Sendable {
    let port: Int
    private let task: Task<Void, any Error>
    private let services: ServiceGroup
    /// The records whose waiters and streams end on shutdown.
    let records: RecordStore

    private init(port: Int, task: Task<Void, any Error>, services: ServiceGroup, records: RecordStore) {
        self.port = port
        self.task = task
        self.services = services
        self.records = records
    }

    /// Binds `settings.host:settings.port` (0 picks a free port) and returns once listening.
    static func start(api: AdminAPI, settings: AdminSettings, logger: Logger) async throws -> AdminServer {
        let (ports, continuation) = AsyncThrowingStream.makeStream(of: Int.self)
        var adminLogger = logger
        adminLogger[metadataKey: "listener"] = "admin"
        // The admin listener's defences (docs/architecture.md, "Limits and defences"): a connection
        // limit and timeouts, around Hummingbird's HTTP/1.1 channel. Hummingbird binds through NIO's
        // async bootstrap, whose AcceptBackoffHandler cannot be replaced from here and does not stop
        // a listener whose first accept fails (see AcceptPauseHandler); the descriptor budget
        // (`serve`) is what keeps this listener away from EMFILE.
        let limiter = ConnectionLimiter(
            listener: "admin", limit: settings.maxConnections, setting: "admin.maxConnections", memory: api.state.memory,
            logger: adminLogger)
        let timeouts = AdminTimeouts(settings)
        let server = HTTPServerBuilder { responder in
            GuardedHTTP1Channel(inner: HTTP1Channel(responder: responder), limiter: limiter, timeouts: timeouts)
        }
        let app = Application(
            router: api.router(),
            server: server,
            configuration: .init(address: .hostname(settings.host, port: settings.port), serverName: "apns-mock"),
            onServerRunning: { channel in
                continuation.yield(channel.localAddress?.port ?? settings.port)
                continuation.finish()
            },
            logger: adminLogger)
        let services = ServiceGroup(
            configuration: .init(services: [app], gracefulShutdownSignals: [], logger: adminLogger))
        let task = Task {
            do {
                try await services.run()
                continuation.finish()
            } catch {
                continuation.finish(throwing: error)
                throw error
            }
        }
        var port: Int?
        for try await bound in ports {
            port = bound
        }
        guard let port else {
            task.cancel()
            throw AdminStartError()
        }
        logger.info("admin listener up", metadata: ["host": "\(settings.host)", "port": "\(port)"])
        return AdminServer(port: port, task: task, services: services, records: api.state.records)
    }

    /// Stops listening; waits for the application to finish. Event streams end and waiters answer
    /// with what they have first: a graceful shutdown waits for every request in flight, and
    /// those would otherwise hold it for minutes.
    func shutdown() async {
        records.closeSubscriptions()
        await services.triggerGracefulShutdown()
        _ = await task.result
    }
}

struct AdminStartError: Error, CustomStringConvertible {
    var description: String { "the admin listener stopped before it was listening" }
}

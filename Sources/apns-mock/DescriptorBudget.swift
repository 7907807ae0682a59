import APNSMock
import APNSMockCore
import Logging

#if canImport(Glibc)
import Glibc
#endif

/// Fits the listeners' connection limits into the file descriptors the process may open, so that
/// connections alone can never exhaust them (docs/configuration.md, `maxConnections`).
///
/// Each connection holds one descriptor. The process itself needs some more: standard streams,
/// three per event-loop thread (epoll, eventfd, timerfd), files it opens (keys, certificates), the
/// runtime's own. At start the soft RLIMIT_NOFILE is raised to the hard limit; then the limits
/// that were left at their defaults are lowered until both fit, and limits given explicitly that
/// do not fit stop start-up, naming the fields.
enum DescriptorBudget {
    struct Overcommitted: Error, CustomStringConvertible {
        var description: String
    }

    /// Descriptors kept for the process itself besides `reservePerThread` per event-loop thread.
    static let reserve = 64
    static let reservePerThread = 4
    /// The admin listener's share when its default has to be lowered.
    static let adminShare = 8

    /// Raises the soft descriptor limit to the hard one; returns the limit now in force.
    static func raiseLimit() -> Int {
        #if canImport(Glibc)
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return Int.max }
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 {
                limit = raised
            }
        }
        return limit.rlim_cur == rlim_t.max ? Int.max : Int(clamping: limit.rlim_cur)
        #else
        return Int.max
        #endif
    }

    /// Applies the budget to `server` (whose limits come from `file`, unless the command line
    /// overrode nothing of them). `source` names the configuration file in messages.
    static func apply(
        to server: inout ServerConfiguration, file: Configuration, threads: Int, source: String, logger: Logger
    ) throws(Overcommitted) {
        let available = raiseLimit()
        guard available != Int.max else { return }
        let budget = available - reserve - reservePerThread * threads
        let apnsExplicit = file.server.maxConnections != nil
        let adminExplicit = file.admin.maxConnections != nil
        guard server.maxConnections + server.admin.maxConnections > budget else { return }
        if apnsExplicit && adminExplicit || budget < 2 {
            throw Overcommitted(description: message(server, available: available, budget: budget, source: source))
        }
        var apns = server.maxConnections
        var admin = server.admin.maxConnections
        // Lowered only, and only as far as needed: the admin listener first, to no less than its
        // share of the budget, then the TLS listeners to what is left.
        if !adminExplicit {
            admin = max(1, min(admin, max(budget - apns, budget / adminShare)))
        }
        if !apnsExplicit {
            apns = min(apns, budget - admin)
        }
        guard apns >= 1, admin >= 1, apns + admin <= budget else {
            throw Overcommitted(description: message(server, available: available, budget: budget, source: source))
        }
        logger.notice(
            "lowered the connection limits to fit the descriptor limit",
            metadata: [
                "RLIMIT_NOFILE": "\(available)", "server.maxConnections": "\(apns)", "admin.maxConnections": "\(admin)",
            ])
        server.maxConnections = apns
        server.admin.maxConnections = admin
    }

    private static func message(_ server: ServerConfiguration, available: Int, budget: Int, source: String) -> String {
        "\(source): server.maxConnections (\(server.maxConnections)) and admin.maxConnections "
            + "(\(server.admin.maxConnections)) need more file descriptors than this process may open: "
            + "RLIMIT_NOFILE is \(available), of which \(max(0, budget)) are left for connections; "
            + "lower them or raise the limit (ulimit -n)"
    }
}

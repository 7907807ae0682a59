import ServiceLifecycle

/// Keeps the shared state's tasks (``PostgresSharedState``) running while the mock runs, and stops
/// them once the listeners it serves have stopped (services stop in reverse order, and this one is
/// listed before them).
struct SharedStateService: Service {
    let engine: PostgresSharedState

    func run() async throws {
        try? await gracefulShutdown()
        // The records answered while the listeners drained go out before the tasks stop.
        await engine.records.sync(seconds: 5)
        engine.stop()
    }
}

import Synchronization

/// Wakes one waiting task: a signal given while nobody waits is kept (once) for the next wait, so
/// a change announced between two passes of a loop is never missed.
final class WakeSignal: Sendable {
    private struct State {
        var pending = false
        var waiter: CheckedContinuation<Void, Never>?
    }

    private let state = Mutex(State())

    func signal() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            if let waiter = state.waiter {
                state.waiter = nil
                return waiter
            }
            state.pending = true
            return nil
        }
        waiter?.resume()
    }

    /// Returns at the next signal (at once if one is pending).
    func wait() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLock { state -> Bool in
                if state.pending {
                    state.pending = false
                    return true
                }
                state.waiter = continuation
                return false
            }
            if now { continuation.resume() }
        }
    }
}

/// Runs `operation` with a deadline: its result, or `nil` once `seconds` passed (the operation is
/// cancelled then, and left to finish on its own: a PostgreSQL request waiting for a connection
/// that does not come ignores cancellation until its pool gives up).
func withDeadline<T: Sendable>(seconds: Double, _ operation: @escaping @Sendable () async throws -> T) async throws -> T? {
    let box = OnceContinuation<T?>()
    return try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T?, any Error>) in
        box.slot.withLock { $0 = continuation }
        let work = Task {
            do {
                let value = try await operation()
                box.slot.withLock { $0.take() }?.resume(returning: value)
            } catch {
                box.slot.withLock { $0.take() }?.resume(throwing: error)
            }
        }
        Task {
            try? await Task.sleep(for: .milliseconds(Int(seconds * 1000)))
            if let waiting = box.slot.withLock({ $0.take() }) {
                work.cancel()
                waiting.resume(returning: nil)
            }
        }
    }
}

/// A continuation resumed by whichever comes first (``withDeadline(seconds:_:)``).
private final class OnceContinuation<T: Sendable>: Sendable {
    let slot = Mutex<CheckedContinuation<T, any Error>?>(nil)
}

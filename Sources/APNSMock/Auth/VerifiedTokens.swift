import Synchronization

/// Provider tokens whose signature and claims this mock has verified, shared by every connection
/// of a listener's APIs.
///
/// A client that opens a connection per push, per batch or after every GOAWAY sends the same token
/// on each for up to an hour, and verifying it (ES256) was a fifth of a new connection's
/// instructions. A token is found only by its whole text, so nothing but the very string verified
/// before skips the check; the verdict kept depends on that text and the keys alone, which are
/// loaded once at start. What changes with time (the token's age, an expiry told on another
/// connection) is checked on every request as before. Only valid tokens are kept, so a stream of
/// made-up tokens cannot push the real ones out. Bounded: ``capacity`` tokens, the oldest replaced
/// first.
final class VerifiedTokens: Sendable {
    /// More distinct valid tokens than this at once (one per key that signs, usually) are
    /// verified again when they come back after being replaced.
    static let capacity = 32

    private struct Entries {
        var tokens: [(token: String, verdict: ConnectionAuth.Verdict)] = []
        /// Where the next token goes once ``capacity`` is reached.
        var next = 0
    }

    private let entries = Mutex(Entries())

    /// The verdict on `token` if it was verified valid before.
    func verdict(for token: String) -> ConnectionAuth.Verdict? {
        entries.withLock { entries in
            entries.tokens.first { $0.token == token }?.verdict
        }
    }

    /// Keeps a valid verdict on `token`.
    func remember(_ token: String, _ verdict: ConnectionAuth.Verdict) {
        guard case .valid = verdict else { return }
        entries.withLock { entries in
            guard !entries.tokens.contains(where: { $0.token == token }) else { return }
            if entries.tokens.count < Self.capacity {
                entries.tokens.append((token, verdict))
            } else {
                entries.tokens[entries.next] = (token, verdict)
                entries.next = (entries.next + 1) % Self.capacity
            }
        }
    }

    /// Forgets `token` (its key's team was removed since it was verified).
    func forget(_ token: String) {
        entries.withLock { entries in
            entries.tokens.removeAll { $0.token == token }
            entries.next = entries.next % max(1, min(entries.tokens.count, Self.capacity))
        }
    }
}

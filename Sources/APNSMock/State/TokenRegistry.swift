import Synchronization

/// What the mock knows about each provider token across connections: when it first saw it (on the
/// mock's clock) and whether it was answered ExpiredProviderToken.
///
/// A token's expiry is a property of the token, not of the connection that carried it: APNs
/// answers ExpiredProviderToken for a token over an hour old, which is as old on every connection.
/// So a token answered ExpiredProviderToken — by its age, or by a fault rule — is expired
/// everywhere (a client sharing one token across connections, as node-apn does across its push
/// and channel-management sessions, gets the same answer on both), and whichever connection it was
/// bound to may take its replacement at once. The mock's clock ages tokens too: a token is as old
/// as its `iat` says plus however far the clock was moved since the mock first saw it, so moving
/// the clock an hour ahead expires the tokens clients hold, while the ones they sign afterwards are
/// fresh.
///
/// The request path reads ``generation`` (one atomic load) and looks further only when it moved;
/// registering a token takes the lock once per new token on a connection, not per request.
/// Bounded: the oldest entries are forgotten past ``capacity`` (a forgotten token counts as first
/// seen when it comes back).
final class TokenRegistry: Sendable {
    static let capacity = 16_384

    private struct Entry {
        /// The mock clock's offset when the token was first presented.
        var offsetAtFirstSight: Int64
        var expired = false
    }

    private struct State {
        var entries: [String: Entry] = [:]
        /// Token ids in the order they were first seen, for forgetting the oldest.
        var order: [String] = []
        var head = 0
    }

    private let state = Mutex(State())
    private let expiries = Atomic<UInt64>(0)

    /// Moves whenever a token is expired (or the registry is reset): a connection that saw the same
    /// generation before need not look its token up again.
    var generation: UInt64 { expiries.load(ordering: .acquiring) }

    /// Notes a token presented with the clock at `offset`; returns the offset at which it was first
    /// seen and whether it was expired.
    func register(_ tokenId: String, offset: Int64) -> (offsetAtFirstSight: Int64, expired: Bool) {
        state.withLock { state in
            let entry = Self.entry(tokenId, offset: offset, in: &state)
            return (entry.offsetAtFirstSight, entry.expired)
        }
    }

    /// Whether the token was answered ExpiredProviderToken anywhere.
    func isExpired(_ tokenId: String) -> Bool {
        state.withLock { $0.entries[tokenId]?.expired ?? false }
    }

    /// Expires a token on every connection.
    func expire(_ tokenId: String, offset: Int64) {
        let changed = state.withLock { state -> Bool in
            guard !Self.entry(tokenId, offset: offset, in: &state).expired else { return false }
            state.entries[tokenId]?.expired = true
            return true
        }
        if changed { expiries.add(1, ordering: .releasing) }
    }

    /// The entry of `tokenId`, made (first seen at `offset`) when there is none; the oldest entry is
    /// forgotten when the registry is full.
    private static func entry(_ tokenId: String, offset: Int64, in state: inout State) -> Entry {
        if let entry = state.entries[tokenId] { return entry }
        if state.order.count - state.head >= capacity {
            state.entries[state.order[state.head]] = nil
            state.head += 1
            if state.head >= capacity {
                state.order.removeFirst(state.head)
                state.head = 0
            }
        }
        let entry = Entry(offsetAtFirstSight: offset)
        state.entries[tokenId] = entry
        state.order.append(tokenId)
        return entry
    }

    /// Forgets every token (`/v1/reset`).
    func reset() {
        state.withLock { $0 = State() }
        expiries.add(1, ordering: .releasing)
    }
}

import APNSMockCore
import Synchronization

/// The live device registry, shared by every connection and changed by the admin API.
///
/// Requests read it far more often than it changes, so readers do not take the lock per request:
/// each connection keeps a snapshot (``Snapshot``) and refreshes it only when the store's version
/// has moved, which costs one atomic load per request.
final class DeviceStore: Sendable {
    private let registry: Mutex<DeviceRegistry>
    private let version = Atomic<UInt64>(0)
    let initial: DeviceRegistry

    init(_ registry: DeviceRegistry) {
        self.initial = registry
        self.registry = Mutex(registry)
    }

    /// Applies `change` and makes it visible to every connection's next request.
    func update<T>(_ change: (inout DeviceRegistry) throws -> T) rethrows -> T {
        let result = try registry.withLock { try change(&$0) }
        version.add(1, ordering: .releasing)
        return result
    }

    /// The registry as it is now (a copy-on-write value).
    var current: DeviceRegistry { registry.withLock { $0 } }

    /// A per-connection cached copy.
    struct Snapshot {
        private(set) var registry: DeviceRegistry
        private var version: UInt64

        init(_ store: DeviceStore) {
            version = store.version.load(ordering: .acquiring)
            registry = store.current
        }

        /// The registry, refreshed from `store` if it changed since the last call.
        mutating func refreshed(from store: DeviceStore) -> DeviceRegistry {
            let latest = store.version.load(ordering: .acquiring)
            if latest != version {
                version = latest
                registry = store.current
            }
            return registry
        }
    }
}

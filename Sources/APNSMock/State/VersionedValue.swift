import APNSMockCore
import Synchronization

/// A value every connection reads and few requests change (the device registry, the broadcast
/// channels): changes take a lock and move a version counter; readers do not take the lock per
/// request. Each connection keeps a ``Snapshot`` and refreshes it only when the version has moved,
/// which costs one atomic load per request.
final class VersionedValue<Value: Sendable>: Sendable {
    private let value: Mutex<Value>
    private let changes = Atomic<UInt64>(0)
    /// What ``reset()`` returns to.
    let initial: Value

    init(_ value: Value) {
        initial = value
        self.value = Mutex(value)
    }

    /// Applies `change` and makes it visible to every connection's next request.
    func update<T>(_ change: (inout Value) throws -> T) rethrows -> T {
        let result = try value.withLock { try change(&$0) }
        changes.add(1, ordering: .releasing)
        return result
    }

    /// Moves on every change.
    var version: UInt64 { changes.load(ordering: .acquiring) }

    /// The value as it is now (a copy-on-write value).
    var current: Value { value.withLock { $0 } }

    /// Back to ``initial``.
    func reset() {
        update { $0 = initial }
    }
}

/// The live device registry, shared by every connection and changed by the admin API.
typealias DeviceStore = VersionedValue<DeviceRegistry>

/// A connection's cached copy of a shared value (``VersionedBackend``): refreshed only when the
/// value's version moved, which costs one atomic load per request.
struct VersionedSnapshot<Value: Sendable> {
    private(set) var value: Value
    /// The store's version the value was read at.
    private(set) var version: UInt64

    init(_ store: some VersionedBackend<Value>) {
        version = store.version
        value = store.current
    }

    /// The value, refreshed from `store` if it changed since the last call.
    mutating func refreshed(from store: some VersionedBackend<Value>) -> Value {
        let latest = store.version
        if latest != version {
            version = latest
            value = store.current
        }
        return value
    }
}

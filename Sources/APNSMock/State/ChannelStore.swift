import APNSMockCore
import Synchronization

/// The live broadcast channels, shared by every connection and changed by channel-management
/// requests and the admin API.
///
/// Broadcasts read it far more often than it changes, so, as for the device registry, readers keep
/// a per-connection snapshot refreshed only when the store's version moves: a channel lookup on
/// the request path is one atomic load and a dictionary look-up, with no lock.
final class ChannelStore: Sendable {
    private struct State {
        var registry: ChannelRegistry
        /// Mixed into every generated ID, so that an ID is never handed out twice, however many
        /// channels are created and deleted.
        var created: UInt64 = 0
        var random = FastRandom()
    }

    private let state: Mutex<State>
    private let version = Atomic<UInt64>(0)
    let settings: BroadcastSettings

    init(settings: BroadcastSettings) {
        self.settings = settings
        state = Mutex(State(registry: ChannelRegistry(settings.channels)))
    }

    /// The channels as they are now (a copy-on-write value).
    var current: ChannelRegistry { state.withLock { $0.registry } }

    /// Why a channel could not be created.
    enum CreateError: Error, Equatable {
        /// The app has ``BroadcastSettings/channelLimit`` channels in the environment already.
        case limitReached
        /// The ID asked for exists already (admin API only: clients cannot choose IDs).
        case duplicate
    }

    /// Creates a channel with a new random ID (or `id`, from the admin API), within the app's limit.
    func create(
        bundleID: String, environment: APNSEnvironment, policy: MessageStoragePolicy, id: String? = nil
    ) -> Result<BroadcastChannel, CreateError> {
        let result = state.withLock { state -> Result<BroadcastChannel, CreateError> in
            guard state.registry.count(bundleID: bundleID, environment: environment) < settings.channelLimit else {
                return .failure(.limitReached)
            }
            let channelID: String
            if let id {
                guard state.registry.channel(id: id) == nil else { return .failure(.duplicate) }
                channelID = id
            } else {
                state.created &+= 1
                channelID = Self.newID(count: state.created, random: &state.random)
            }
            let channel = BroadcastChannel(bundleID: bundleID, environment: environment, id: channelID, storagePolicy: policy)
            state.registry.insert(channel)
            return .success(channel)
        }
        if case .success = result { version.add(1, ordering: .releasing) }
        return result
    }

    /// A new channel ID: 24 base64 characters (valid base64, as Apple's are) drawn only from
    /// letters and digits, so that it needs no escaping in a URL such as
    /// `DELETE /v1/channels/<id>`. The first 11 encode the creation count, which makes every ID of
    /// a run unique, however many channels come and go; the other 13 are random, so IDs are not
    /// predictable and two runs do not hand out the same ones.
    static func newID(count: UInt64, random: inout FastRandom) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789".utf8)
        var characters: [UInt8] = []
        var remaining = count
        for _ in 0..<11 {
            characters.append(alphabet[Int(remaining % 62)])
            remaining /= 62
        }
        for _ in 0..<13 {
            characters.append(alphabet[Int(random.next() % 62)])
        }
        return String(decoding: characters, as: UTF8.self)
    }

    /// Deletes a channel; `nil` when it does not exist.
    @discardableResult
    func delete(id: String, bundleID: String, environment: APNSEnvironment) -> BroadcastChannel? {
        let removed = state.withLock { $0.registry.remove(id: id, bundleID: bundleID, environment: environment) }
        if removed != nil { version.add(1, ordering: .releasing) }
        return removed
    }

    /// Deletes a channel of any app or environment (admin API).
    func delete(id: String) -> BroadcastChannel? {
        let removed = state.withLock { state -> BroadcastChannel? in
            guard let channel = state.registry.channel(id: id) else { return nil }
            return state.registry.remove(id: id, bundleID: channel.bundleID, environment: channel.environment)
        }
        if removed != nil { version.add(1, ordering: .releasing) }
        return removed
    }

    /// Back to the configured channels (`/v1/reset`).
    func reset() {
        state.withLock { $0.registry = ChannelRegistry(settings.channels) }
        version.add(1, ordering: .releasing)
    }

    /// A per-connection cached copy.
    struct Snapshot {
        private(set) var registry: ChannelRegistry
        private var version: UInt64

        init(_ store: ChannelStore) {
            version = store.version.load(ordering: .acquiring)
            registry = store.current
        }

        /// The channels, refreshed from `store` if they changed since the last call.
        mutating func refreshed(from store: ChannelStore) -> ChannelRegistry {
            let latest = store.version.load(ordering: .acquiring)
            if latest != version {
                version = latest
                registry = store.current
            }
            return registry
        }
    }
}

import APNSMockCore
import Synchronization

/// The live broadcast channels, shared by every connection and changed by channel-management
/// requests and the admin API.
///
/// Broadcasts read them far more often than they change, so, as for the device registry, readers
/// keep a per-connection snapshot (``VersionedValue``): a channel lookup on the request path is one
/// atomic load and a dictionary look-up, with no lock.
final class ChannelStore: Sendable {
    let registry: any VersionedBackend<ChannelRegistry>
    /// Channels created this run (mixed into every generated ID, so that an ID is never handed out
    /// twice, however many channels are created and deleted) and the random part's generator.
    private let generator = Mutex((created: UInt64(0), random: FastRandom()))
    let settings: BroadcastSettings

    init(settings: BroadcastSettings) {
        self.settings = settings
        registry = VersionedValue(ChannelRegistry(settings.channels))
    }

    /// Why a channel could not be created.
    enum CreateError: Error, Equatable {
        /// The app has ``BroadcastSettings/channelLimit`` channels in the environment already.
        case limitReached
        /// The ID asked for exists already (admin API only: clients cannot choose IDs).
        case duplicate
    }

    /// Creates a channel with a new random ID (or `id`, from the admin API), within the app's limit.
    func create(
        bundleID: String, environment: APNSEnvironment, policy: MessageStoragePolicy, id: String?
    ) -> Result<BroadcastChannel, CreateError> {
        registry.update { registry -> Result<BroadcastChannel, CreateError> in
            guard registry.count(bundleID: bundleID, environment: environment) < settings.channelLimit else {
                return .failure(.limitReached)
            }
            let channelID: String
            if let id {
                guard registry.channel(id: id) == nil else { return .failure(.duplicate) }
                channelID = id
            } else {
                channelID = generator.withLock { generator in
                    generator.created &+= 1
                    return Self.newID(count: generator.created, random: &generator.random)
                }
            }
            let channel = BroadcastChannel(bundleID: bundleID, environment: environment, id: channelID, storagePolicy: policy)
            registry.insert(channel)
            return .success(channel)
        }
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
        registry.update { $0.remove(id: id, bundleID: bundleID, environment: environment) }
    }

    /// Deletes a channel of any app or environment (admin API).
    func delete(id: String) -> BroadcastChannel? {
        registry.update { registry -> BroadcastChannel? in
            guard let channel = registry.channel(id: id) else { return nil }
            return registry.remove(id: id, bundleID: channel.bundleID, environment: channel.environment)
        }
    }

    /// Back to the configured channels (`/v1/reset`).
    func reset() {
        registry.reset()
    }
}

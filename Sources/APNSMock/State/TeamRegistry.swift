import APNSMockCore
import Synchronization

/// The mock's teams, each with its namespace (``TeamSpace``), and their keys: the configured teams
/// from the start, more added and removed at run time (`/v1/teams`).
///
/// The request path does not come here per request: a connection reaches its team through the key
/// its token was verified with (``TokenKey/space``), and a token is verified once (``verified``).
/// Looking a key up takes the lock, once per token a connection has not seen; the admin API takes
/// it to add, remove and list.
final class TeamRegistry: Sendable {
    /// Teams held at once (configured ones included).
    static let limit = 1_000

    private struct Table {
        var spaces: [String: TeamSpace] = [:]
        /// Team IDs in the order they came: configured first.
        var order: [String] = []
        var keys: [String: TokenKey] = [:]
        /// Which team each app belongs to.
        var appOwners: [String: String] = [:]

        /// Registers `space`, its apps and its `keys` (loaded, of its team).
        mutating func insert(_ space: TeamSpace, keys: [TokenKeys.Loaded]) {
            spaces[space.teamID] = space
            order.append(space.teamID)
            for app in space.appList { appOwners[app] = space.teamID }
            for loaded in keys {
                self.keys[loaded.key.keyId] = TokenKey(
                    team: loaded.team, key: loaded.key, publicKey: loaded.publicKey, space: space)
            }
        }
    }

    private let table: Mutex<Table>
    let globalClock: any ClockBackend
    let faultSeed: UInt64?
    /// Tokens verified on any connection, so that a new connection repeating one skips ES256. A
    /// token whose key's team was removed since is verified again (``Authenticator``).
    let verified = VerifiedTokens()
    private let changes = Atomic<UInt64>(0)

    /// Moves whenever a team is added or removed: one atomic load.
    var version: UInt64 { changes.load(ordering: .acquiring) }

    /// Why a team cannot be added.
    enum AddError: Error, Equatable {
        case teamExists
        case keyInUse(keyID: String, team: String)
        case appInUse(app: String, team: String)
        case limitReached
    }

    enum RemoveError: Error, Equatable {
        case unknown
        case configured
    }

    init(configured teams: [Configuration.Team], keys: TokenKeys, globalClock: any ClockBackend, faultSeed: UInt64?) {
        self.globalClock = globalClock
        self.faultSeed = faultSeed
        var table = Table()
        for team in teams {
            table.insert(
                TeamSpace(
                    teamID: team.teamId, apps: team.apps, keys: team.keys, source: .configuration, devices: nil,
                    globalClock: globalClock, faultSeed: faultSeed),
                keys: keys.loaded.filter { $0.team.teamId == team.teamId })
        }
        self.table = Mutex(table)
    }

    /// The team's space; `nil` when there is no such team.
    func space(_ teamID: String) -> TeamSpace? {
        table.withLock { $0.spaces[teamID] }
    }

    /// The key with this ID, of a team that exists.
    func key(_ keyID: String) -> TokenKey? {
        table.withLock { $0.keys[keyID] }
    }

    /// Every team, configured first, then in the order they were added.
    var all: [TeamSpace] {
        table.withLock { table in table.order.compactMap { table.spaces[$0] } }
    }

    /// Every app of every team.
    var apps: Set<String> {
        table.withLock { Set($0.appOwners.keys) }
    }

    /// Adds a team whose keys were loaded (`keys`: the ``TokenKeys`` of just this team), all or
    /// nothing.
    func add(
        _ team: Configuration.Team, devices: Configuration.Devices?, keys: TokenKeys
    ) -> Result<TeamSpace, AddError> {
        table.withLock { table -> Result<TeamSpace, AddError> in
            guard table.spaces[team.teamId] == nil else { return .failure(.teamExists) }
            guard table.spaces.count < Self.limit else { return .failure(.limitReached) }
            for key in team.keys {
                if let owner = table.keys[key.keyId]?.space.teamID { return .failure(.keyInUse(keyID: key.keyId, team: owner)) }
            }
            for app in team.apps {
                if let owner = table.appOwners[app] { return .failure(.appInUse(app: app, team: owner)) }
            }
            let space = TeamSpace(
                teamID: team.teamId, apps: team.apps, keys: team.keys, source: .api, devices: devices,
                globalClock: globalClock, faultSeed: faultSeed)
            table.insert(space, keys: keys.loaded)
            changes.add(1, ordering: .releasing)
            return .success(space)
        }
    }

    /// Removes a team added at run time: its keys verify nothing from now on, and its space is
    /// retired (connections bound to its keys are refused from their next request).
    func remove(_ teamID: String) -> Result<TeamSpace, RemoveError> {
        let result = table.withLock { table -> Result<TeamSpace, RemoveError> in
            guard let space = table.spaces[teamID] else { return .failure(.unknown) }
            guard space.source == .api else { return .failure(.configured) }
            table.spaces[teamID] = nil
            table.order.removeAll { $0 == teamID }
            table.keys = table.keys.filter { $0.value.space !== space }
            table.appOwners = table.appOwners.filter { $0.value != teamID }
            return .success(space)
        }
        if case .success(let space) = result {
            space.retire()
            changes.add(1, ordering: .releasing)
        }
        return result
    }
}

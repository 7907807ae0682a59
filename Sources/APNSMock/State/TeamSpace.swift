import APNSMockCore
import Synchronization

/// One developer team's namespace (docs/teams.md): what a team's pushes see beneath the whole
/// mock's state, and what the admin API changes when a call names the team (`?team=`,
/// `APNS-Mock-Team`).
///
/// A push belongs to the team of the token or certificate that authenticated it (its record's
/// `auth.teamId`); the connection reaches the team's space through its key (``TokenKey/space``),
/// so the request path looks nothing up. The whole mock's devices, fault rules and clock apply
/// beneath the team's own: a team's device entry wins over the global one of the same token, its
/// fault rules are tried before the global rules, its clock runs ahead of the global clock by its
/// own offset. Every configured team has a space from the start; `POST /v1/teams` adds more.
final class TeamSpace: Sendable {
    enum Source: String, Sendable {
        /// From the configuration file: it can be reset, not deleted.
        case configuration
        /// Added through `POST /v1/teams`.
        case api
    }

    let teamID: String
    let apps: Set<String>
    /// The apps in the order the team gave them, for listings.
    let appList: [String]
    let source: Source
    /// The team's keys, as `GET /v1/teams` shows them (no key material).
    let keys: [Configuration.Key]
    /// The team's own device policy, replacing the mock's for its pushes; `nil`: the mock's.
    let devicePolicy: DevicePolicy?
    /// The team's own device entries, over the mock's (``DeviceRegistry/overlaid(by:policy:)``).
    let devices: DeviceStore
    /// Whether the team started with device entries or a policy of its own.
    private let startsWithDevices: Bool
    /// The team's own fault rules, tried before the mock's.
    let faults: FaultStore
    let clock: TeamClock
    /// The team's provider tokens: first sightings on its clock, and expiries.
    let tokens: TokenRegistry
    /// The team's request counts (`/v1/stats?team=`), kept besides the mock's.
    let counts = TeamCounts()
    private let retiredFlag = Atomic<Bool>(false)
    /// The team's connections: bound to one of its keys, or with one of its certificates.
    private let openConnections = Atomic<Int>(0)
    private let totalConnections = Atomic<Int>(0)

    /// The most fault rules a team holds (the whole mock holds up to ``FaultStore/defaultMaxRules``).
    static let maxFaultRules = 10_000

    init(
        teamID: String, apps: [String], keys: [Configuration.Key], source: Source,
        devices: Configuration.Devices?, globalClock: any ClockBackend, faultSeed: UInt64?
    ) {
        self.teamID = teamID
        appList = apps
        self.apps = Set(apps)
        self.keys = keys
        self.source = source
        devicePolicy = devices.flatMap { $0.policySet ? $0.policy : nil }
        self.devices = DeviceStore(DeviceRegistry(policy: devices?.policy ?? .open, entries: devices?.tokens ?? []))
        startsWithDevices = devicePolicy != nil || !(devices?.tokens.isEmpty ?? true)
        faults = FaultStore([], seed: faultSeed, maxRules: Self.maxFaultRules)
        clock = TeamClock(global: globalClock)
        tokens = TokenRegistry()
    }

    /// Whether the team's pushes see anything of its own devices: a policy or entries it started
    /// with, or any change since (one atomic load); while not, they see the mock's registry as it is.
    var hasOwnDevices: Bool { startsWithDevices || devices.version != 0 }

    /// Deleted (`DELETE /v1/teams/{teamId}`): its keys verify nothing from now on, and connections
    /// bound to them are answered InvalidProviderToken, as for a revoked key.
    var isRetired: Bool { retiredFlag.load(ordering: .relaxed) }

    func retire() { retiredFlag.store(true, ordering: .releasing) }

    /// The team's own state back to what it started with: devices as given, no fault rules, its
    /// clock level with the mock's, its tokens forgotten (its records and counts are the
    /// ``MockState``'s to clear: ``MockState/removeRecords(team:)``).
    func reset() {
        devices.reset()
        faults.reset()
        clock.reset()
        tokens.reset()
    }

    func connectionOpened() {
        openConnections.wrappingAdd(1, ordering: .relaxed)
        totalConnections.wrappingAdd(1, ordering: .relaxed)
    }

    func connectionClosed() {
        openConnections.wrappingSubtract(1, ordering: .relaxed)
    }

    var connections: (open: Int, total: Int) {
        (openConnections.load(ordering: .relaxed), totalConnections.load(ordering: .relaxed))
    }
}

/// A team's time: the mock's clock (``MockClock``, moved by an unscoped `POST /v1/clock`) plus the
/// team's own offset (a ``MockClock`` of its own, moved by `POST /v1/clock?team=`).
final class TeamClock: Sendable {
    let global: any ClockBackend
    private let own = MockClock()

    init(global: any ClockBackend) {
        self.global = global
    }

    /// The team's own part of the offset.
    var teamOffsetSeconds: Int64 { own.offsetSeconds }

    var offsetSeconds: Int64 { global.offsetSeconds + own.offsetSeconds }

    func nowMilliseconds() -> Int64 {
        own.nowMilliseconds() + global.offsetSeconds * 1000
    }

    func nowSeconds() -> Int64 {
        own.nowSeconds() + global.offsetSeconds
    }

    /// Moves the team's clock `seconds` ahead; the new total offset, or `nil` (nothing changed) when
    /// the total would pass ``MockClock/maximumOffsetSeconds``.
    func advance(seconds: Int64) -> Int64? {
        let global = global.offsetSeconds
        return own.advance(seconds: seconds, above: global).map { global + $0 }
    }

    func reset() {
        own.reset()
    }
}

extension TeamClock: ClockBackend {}

extension DeviceRegistry {
    /// The registry a team's pushes see: this one (the mock's) with the team's entries over it,
    /// and the team's policy when it set one.
    func overlaid(by team: DeviceRegistry, policy: DevicePolicy?) -> DeviceRegistry {
        var merged = self
        for entry in team.entries { merged.register(entry) }
        if let policy { merged.policy = policy }
        return merged
    }
}

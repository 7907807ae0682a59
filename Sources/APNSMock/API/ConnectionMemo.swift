import APNSMockCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What a request's connection contributes to deciding it.
struct ConnectionContext: Sendable {
    var connectionID: UInt64
    /// The connection's number since start or the last `/v1/reset`, from 1 (fault rules'
    /// `match.connection`).
    var connectionNumber: Int = 1
    /// The environment named by the TLS SNI host, if it was one of Apple's.
    var sniEnvironment: APNSEnvironment?
}

/// What a connection keeps between its requests so that deciding and recording one needs no
/// shared state. Never shared between connections, so it needs no lock.
struct ConnectionMemo {
    var random = FastRandom()
    var devices: LayeredDevices
    var channels: VersionedSnapshot<ChannelRegistry>
    var memo = ValidationMemo()
    /// The validator's context for the request being decided (``DeviceAPI``), kept between
    /// requests and updated in place.
    var validation = ValidationContext(environment: .production)
    /// The channel registry's version `validation.channels` was taken at (`.max`: not yet).
    var validationChannelsVersion = UInt64.max
    var shapes = RecordShapes()
    /// When the connection's current batch of input was read (see ``readTime()``).
    var readMilliseconds: Int64?
    var lastAuthority: String?
    var lastAuthorityEnvironment: APNSEnvironment?
    var auth = ConnectionAuth()
    /// Requests this connection has carried.
    var requestCount = 0
    /// A fault rule with `times` that the request being decided matched, waiting for its claim in
    /// the shared state: set by the ``Policy``, taken by the ``Pipeline``; `nil` between requests.
    var faultClaim: FaultClaim?
    /// The request that waits for that claim, for the connection to finish (``AwaitingClaim``):
    /// set by the ``Pipeline``, taken by the connection; `nil` between requests.
    var awaitingClaim: AwaitingClaim?

    init(state: MockState) {
        devices = LayeredDevices(VersionedSnapshot(state.devices))
        channels = VersionedSnapshot(state.channels.registry)
    }

    /// Wall-clock milliseconds when the bytes being processed were read: taken once per read
    /// (one clock call for the tens of requests a read usually carries), so a record's
    /// `receivedAt` is exact to the time it takes to process one read.
    mutating func readTime() -> Int64 {
        if let readMilliseconds { return readMilliseconds }
        let now = MockClock.wallMilliseconds()
        readMilliseconds = now
        return now
    }

    /// The environment of one request: the `:authority` the client addressed, else the TLS SNI
    /// host, else `fallback` (docs/apns.md, "Environments").
    mutating func environment(
        of request: borrowing PushRequest, context: ConnectionContext, fallback: APNSEnvironment
    ) -> APNSEnvironment {
        if let authority = request.authority {
            // The same `:authority` arrives on every request of a connection; decide it once.
            if authority != lastAuthority {
                lastAuthority = authority
                lastAuthorityEnvironment = APNSEnvironment(host: authority)
            }
            if let environment = lastAuthorityEnvironment {
                return environment
            }
        }
        return context.sniEnvironment ?? fallback
    }
}

/// The device registry a connection's requests see: the mock's (a ``VersionedSnapshot``) with the
/// request's team's own entries over it (``DeviceRegistry/overlaid(by:policy:)``). The two are
/// merged only when either changed or the team did; a request pays two atomic loads and an
/// identity check.
struct LayeredDevices {
    private var global: VersionedSnapshot<DeviceRegistry>
    /// The team the merged registry is for, and its devices' version then.
    private var team: TeamSpace?
    private var teamVersion: UInt64 = 0
    private var globalVersion: UInt64 = 0
    private var merged: DeviceRegistry?

    init(_ global: VersionedSnapshot<DeviceRegistry>) {
        self.global = global
    }

    /// The registry for a request of `team` (`nil`: no team), refreshed from `store` and the team's
    /// devices if either changed.
    @inline(__always)
    mutating func refreshed(from store: some VersionedBackend<DeviceRegistry>, team: Unmanaged<TeamSpace>?) -> DeviceRegistry {
        let base = global.refreshed(from: store)
        guard let team, team._withUnsafeGuaranteedRef(\.hasOwnDevices) else { return base }
        return merged(base, team: team.takeUnretainedValue())
    }

    /// The merged registry of a team with devices of its own, merged again when either changed.
    private mutating func merged(_ base: DeviceRegistry, team space: TeamSpace) -> DeviceRegistry {
        let version = space.devices.version
        if let merged, space === self.team, version == teamVersion, global.version == globalVersion {
            return merged
        }
        let result = base.overlaid(by: space.devices.current, policy: space.devicePolicy)
        self.team = space
        teamVersion = version
        globalVersion = global.version
        merged = result
        return result
    }
}

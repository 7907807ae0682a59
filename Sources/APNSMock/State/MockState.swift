import APNSMockCore
import Synchronization

/// Everything about the mock that outlives a connection and that the admin API can read or change:
/// the device registry, the broadcast channels, the fault rules, the records, the request counts,
/// the connection counts and the rate limiter's allowances. Owned by the server; the APNs side reads and records into it, the
/// admin API manages it, and neither reaches it through the other.
///
/// Each part carries its own synchronisation (atomics on the request path, a lock only where a
/// change must be all-or-nothing); see each type.
public final class MockState: Sendable {
    let devices: any VersionedBackend<DeviceRegistry>
    let faults: any FaultBackend
    /// The records the admin API reads: the same ring as ``recording`` in memory; with a shared
    /// state, the shared records of every replica in their shared order (``SharedRecords``).
    let records: RecordStore
    /// The counts the admin API reads, which summarise ``records``; also this process's
    /// connection-level counts (GOAWAYs, refused streams, latency).
    let statistics: RequestStatistics
    /// Where the request path appends its records: ``records`` in memory; with a shared state, this
    /// process's queue of records on their way to the database.
    let recording: RecordStore
    /// Where the request path counts outcomes: ``statistics`` in memory; with a shared state, this
    /// process's own counts, while ``statistics`` counts the shared records as they arrive.
    let counting: RequestStatistics
    /// Whether the request path counts into its team's ``TeamSpace/counts`` (in memory), or the
    /// shared records do as they arrive.
    let countsTeams: Bool
    /// The shared state's engine, when `state.url` names one; `nil` in memory.
    let shared: (any SharedStateEngine)?
    let connections: ConnectionRegistry
    let channels: any ChannelBackend
    /// The mock's time (`/v1/clock`), read by every time rule.
    let clock: any ClockBackend
    /// The teams and their namespaces (provider tokens seen and expired are kept per team).
    let teams: TeamRegistry
    /// Gives freed heap back after this mock's bursts of connections and large admin responses.
    let memory = MemoryReturn()
    /// The connection count at the last reset: a connection's number for fault rules is its id
    /// minus this.
    private let connectionBase = Atomic<UInt64>(0)
    /// Per device token; `nil` inside when no rate limit is configured, and then never locked.
    let rateLimiter: Mutex<RateLimiter?>
    let isRateLimited: Bool

    /// The parts of the state a second backend may provide (docs/architecture.md, "Where state
    /// lives, and a second backend"); the records, counts and connections stay in this process.
    struct Parts: Sendable {
        var devices: any VersionedBackend<DeviceRegistry>
        var faults: any FaultBackend
        var channels: any ChannelBackend
        var clock: any ClockBackend

        /// Today's: every part in this process's memory.
        static func inMemory(_ configuration: ServerConfiguration) -> Parts {
            Parts(
                devices: DeviceStore(configuration.devices),
                faults: FaultStore(configuration.faults, seed: configuration.faultSeed),
                channels: ChannelStore(settings: configuration.broadcast), clock: MockClock())
        }
    }

    /// The state of a mock whose configured teams' keys are `tokenKeys` (``TokenKeys/load(_:)``).
    convenience init(configuration: ServerConfiguration, tokenKeys: TokenKeys = .empty) {
        self.init(configuration: configuration, parts: .inMemory(configuration), tokenKeys: tokenKeys)
    }

    init(configuration: ServerConfiguration, parts: Parts, tokenKeys: TokenKeys, shared: (any SharedStateEngine)? = nil) {
        self.shared = shared
        devices = parts.devices
        faults = parts.faults
        channels = parts.channels
        clock = parts.clock
        teams = TeamRegistry(
            configured: configuration.teams, keys: tokenKeys, globalClock: parts.clock, faultSeed: configuration.faultSeed)
        records = RecordStore(capacity: configuration.recordingCapacity)
        statistics = RequestStatistics(droppedLogLines: configuration.droppedLogLines)
        if let shared {
            recording = RecordStore(capacity: shared.queueCapacity)
            counting = RequestStatistics()
            countsTeams = false
        } else {
            recording = records
            counting = statistics
            countsTeams = true
        }
        connections = ConnectionRegistry()
        let limit = configuration.validation.rateLimit
        let clock = parts.clock
        rateLimiter = Mutex(limit.map { RateLimiter(limit: $0, clock: Self.rateClock(clock)) })
        isRateLimited = limit != nil
    }

    /// Streams held unanswered by `hang` faults, across connections, and their cap: a hung stream
    /// costs its connection's state, so a rule that hangs everything must not exhaust the server.
    private let heldStreamCount = Atomic<Int>(0)
    static let heldStreamLimit = 10_000

    /// Takes one of the held-stream places; false when all are taken.
    func holdStream() -> Bool {
        heldStreamCount.increment(below: Self.heldStreamLimit)
    }

    func releaseHeldStreams(_ count: Int) {
        heldStreamCount.subtract(count, ordering: .relaxed)
    }

    var heldStreams: Int { heldStreamCount.load(ordering: .relaxed) }

    /// The number of the connection with `id` since start or the last reset (1-based).
    func connectionNumber(of id: UInt64) -> Int {
        Int(clamping: id &- connectionBase.load(ordering: .relaxed))
    }

    /// Back to the configuration's state (`POST /v1/reset`): records forgotten, devices, channels and
    /// faults as configured, rate allowances full again, connection numbers
    /// (``connectionNumber(of:)``) counted from 1 again, the clock back to the wall clock, the tokens
    /// seen forgotten; every team's own state too (teams added at run time stay).
    func reset() {
        connectionBase.store(connections.total, ordering: .relaxed)
        removeRecords()
        for space in teams.all { space.reset() }
        devices.reset()
        faults.reset()
        channels.reset()
        rateLimiter.withLock { limiter in
            if let limit = limiter?.limit { limiter = RateLimiter(limit: limit, clock: Self.rateClock(clock)) }
        }
        clock.reset()
    }

    /// One team back to how it started (`POST /v1/reset?team=`): its records hidden from every
    /// view, its counts (and their part of the mock's) from zero, its own devices, fault rules,
    /// clock offset and tokens as new, the channels of its apps deleted.
    func reset(team space: TeamSpace) {
        removeRecords(team: space)
        space.reset()
        for channel in channels.current.all where space.apps.contains(channel.bundleID) {
            _ = channels.delete(id: channel.id)
        }
    }

    /// Forgets every record (`DELETE /v1/notifications`): the counts that summarise them start
    /// again, the mock's and every team's. With a shared state the shared records are cleared, on
    /// every replica, once this replica's queue has gone out before the clearing
    /// (``SharedStateEngine/clearRecords(team:)``).
    func removeRecords() {
        if let shared {
            guard !SharedReplay.isFromAnotherReplica else { return }
            shared.clearRecords(team: nil)
            return
        }
        applyRemoveRecords()
    }

    /// ``removeRecords()`` on this process's copy.
    func applyRemoveRecords() {
        records.removeAll()
        statistics.resetCounts()
        for space in teams.all { _ = space.counts.resetCounts() }
    }

    /// Forgets one team's records (`DELETE /v1/notifications?team=`), and its counts with them.
    func removeRecords(team space: TeamSpace) {
        if let shared {
            guard !SharedReplay.isFromAnotherReplica else { return }
            shared.clearRecords(team: space.teamID)
            return
        }
        applyRemoveRecords(team: space)
    }

    /// ``removeRecords(team:)`` on this process's copy.
    func applyRemoveRecords(team space: TeamSpace) {
        let last = records.lastSeq
        statistics.forget(space.counts.resetCounts())
        records.hideTeam(space.teamID, through: last)
    }

    /// Removes a team added at run time (`DELETE /v1/teams/{teamId}`) and everything it left: its
    /// records, counts and channels; nil when it was refused.
    func remove(team teamID: String) -> Result<TeamSpace, TeamRegistry.RemoveError> {
        let result = teams.remove(teamID)
        if case .success(let space) = result {
            // With a shared state the team's records are cleared by a mark the mirror applies
            // later: until then it needs the team's counts (``space(forRecordsOf:)``).
            if shared != nil { retired.withLock { $0[teamID] = space } }
            reset(team: space)
        }
        return result
    }

    /// Teams removed whose records the shared state has yet to clear (at most one per team).
    private let retired = Mutex<[String: TeamSpace]>([:])

    /// The team whose counts a shared record of `teamID` goes into: the registered one, or one
    /// removed whose clearing has not arrived yet.
    func space(forRecordsOf teamID: String) -> TeamSpace? {
        teams.space(teamID) ?? retired.withLock { $0[teamID] }
    }

    /// The shared state's clearing of `teamID`'s records arrived: hides them and takes their
    /// counts out of the mock's, for a team registered or removed.
    func applySharedClearing(team teamID: String) {
        if let space = retired.withLock({ $0.removeValue(forKey: teamID) }) ?? teams.space(teamID) {
            applyRemoveRecords(team: space)
        } else {
            records.hideTeam(teamID, through: records.lastSeq)
        }
    }

    /// The rate limiter's time: monotonic, plus the mock clock's offset, so that moving the clock
    /// refills allowances as the time passing would.
    private static func rateClock(_ clock: any ClockBackend) -> @Sendable () -> Duration {
        let origin = ContinuousClock.now
        return { ContinuousClock.now - origin + .seconds(clock.offsetSeconds) }
    }
}

/// Counts connections and hands out their ids, from any event loop without a lock.
final class ConnectionRegistry: Sendable {
    private let nextID = Atomic<UInt64>(0)
    private let openCount = Atomic<Int>(0)

    /// Counts a new connection in and returns its id, unless `limit` connections are open on the
    /// TLS listeners already (`server.maxConnections`, docs/architecture.md "Limits and defences").
    func opened(limit: Int) -> UInt64? {
        guard openCount.increment(below: limit) else { return nil }
        return nextID.add(1, ordering: .relaxed).newValue
    }

    func closed() {
        openCount.subtract(1, ordering: .relaxed)
    }

    var open: Int { openCount.load(ordering: .relaxed) }
    var total: UInt64 { nextID.load(ordering: .relaxed) }
}

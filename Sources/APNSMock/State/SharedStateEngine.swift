import APNSMockCore
import NIOCore

/// What the rest of the mock asks of a shared state (`state.url`: replicas on one PostgreSQL,
/// docs/replicas.md). ``MockState/shared`` holds one when configured; in memory it is `nil` and
/// nothing below is ever called.
///
/// The request path never waits for it, with one exception argued in docs/replicas.md: a fault
/// rule with `times` is claimed (``claimFault(key:times:on:)``) so that it fires exactly as often
/// as it says across replicas.
protocol SharedStateEngine: AnyObject, Sendable {
    /// Records this process's queue holds on their way to the database (``MockState/recording``).
    var queueCapacity: Int { get }
    /// Clears the shared records of `team` (`nil`: every record) on every replica, after this
    /// replica's records queued before the call (`DELETE /v1/notifications`, `/v1/reset`).
    func clearRecords(team: String?)
    /// Claims one firing of the fault rule `key` that fires `times` times in all: succeeds with
    /// `true` when this request may fire it, `false` when every firing was claimed; with
    /// `nil` when the database cannot answer (the rule then counts down in this process alone).
    func claimFault(key: String, times: Int, on loop: any EventLoop) -> EventLoopFuture<Bool?>
    /// Tells the other replicas what the request path changed here, without waiting: a provider
    /// token expired after an ExpiredProviderToken answer, a channel created or deleted through the
    /// channel-management port.
    func tokenExpired(team: String, tokenId: String, offset: Int64)
    func channelCreated(_ channel: BroadcastChannel)
    func channelDeleted(_ channel: BroadcastChannel)
}

/// Whether the admin change being applied came from another replica (``SharedAdminLog`` applies
/// every replica's changes, in one order, on each): a change to the shared records is made once,
/// by the replica that received the request.
enum SharedReplay {
    @TaskLocal static var fromAnotherReplica = false
    /// Whether a change from the shared log is being applied (the admin API's log middleware and
    /// its bearer token let it through: it was checked where it was received).
    @TaskLocal static var applying = false
    /// The position of the change being applied in the shared log (0 outside one): a fault rule
    /// added by it takes its claim key from it, the same on every replica.
    @TaskLocal static var entry: Int64 = 0

    static var isFromAnotherReplica: Bool { fromAnotherReplica }
}

import APNSMockCore

// The mock's shared state as the policy stage, deciding and the admin API see it: one protocol
// per part, with today's in-memory implementations (``VersionedValue``, ``ChannelStore``,
// ``FaultStore``, ``TokenRegistry``, ``MockClock``). ``MockState`` holds each part through its
// protocol, so that another implementation (state shared by several replicas in a database) plugs
// in through ``MockState/Parts`` without touching the code that decides requests
// (docs/architecture.md, "Where state lives, and a second backend").
//
// Every call on the request path is synchronous and must not block: the request path runs on an
// event loop. The reads are cheap by contract (a version or generation number that moves on every
// change, then a local copy); a backend over a network keeps local copies and refreshes them in
// the background. Which writes a replica backend would have to make asynchronous is argued in
// docs/architecture.md.

/// A value every connection reads through its own snapshot and few requests change (the device
/// registry, the broadcast channels).
protocol VersionedBackend<Value>: AnyObject, Sendable {
    associatedtype Value: Sendable
    /// What ``reset()`` returns to.
    var initial: Value { get }
    /// Moves on every change; one atomic load (a snapshot compares it before copying ``current``).
    var version: UInt64 { get }
    /// The value as it is now.
    var current: Value { get }
    /// Applies `change`; every connection's next request sees it.
    func update<T>(_ change: (inout Value) throws -> T) rethrows -> T
    /// Back to ``initial`` (`/v1/reset`).
    func reset()
}

/// The broadcast channels: read through a snapshot of ``registry``, changed by channel-management
/// requests (the policy stage) and the admin API.
protocol ChannelBackend: AnyObject, Sendable {
    var registry: any VersionedBackend<ChannelRegistry> { get }
    var settings: BroadcastSettings { get }
    /// Creates a channel with a new ID (or `id`, from the admin API), within the app's limit.
    func create(
        bundleID: String, environment: APNSEnvironment, policy: MessageStoragePolicy, id: String?
    ) -> Result<BroadcastChannel, ChannelStore.CreateError>
    /// Deletes an app's channel; `nil` when it does not exist.
    @discardableResult
    func delete(id: String, bundleID: String, environment: APNSEnvironment) -> BroadcastChannel?
    /// Deletes a channel of any app or environment (admin API).
    func delete(id: String) -> BroadcastChannel?
    func reset()
}

extension ChannelBackend {
    /// The channels as they are now (a copy-on-write value).
    var current: ChannelRegistry { registry.current }

    func create(bundleID: String, environment: APNSEnvironment, policy: MessageStoragePolicy) -> Result<BroadcastChannel, ChannelStore.CreateError> {
        create(bundleID: bundleID, environment: environment, policy: policy, id: nil)
    }
}

/// A fault rule as the admin API lists it.
typealias FaultRuleEntry = FaultStore.Entry

/// The fault rules: matched by the policy stage, managed by the admin API.
protocol FaultBackend: AnyObject, Sendable {
    /// The configured rules, what ``reset()`` returns to.
    var initial: [FaultRule] { get }
    /// Whether any rule exists: one atomic load, so that a request pays nothing more while none does.
    var hasRules: Bool { get }
    /// The rule a request with these facts triggers, its `times` counted down and its probability
    /// rolled as one step (`times: 1` fires once under concurrency); `nil` when none. With a
    /// `claimScope` (a shared state) and `times` in the rule, it is returned uncounted with `claim`
    /// set: it fires only once the shared state grants the claim (``settle(_:granted:)``).
    func apply(_ request: FaultRule.Facts, claimScope: String?, claim: inout FaultClaim?) -> FaultRule?
    /// Whether the rule of `claim` fires, given the shared state's answer to it (`nil`: no answer),
    /// counted here as it fires; ``FaultStore/settle(_:granted:)`` says how.
    func settle(_ claim: FaultClaim, granted: Bool?) -> Bool
    func add(_ rule: FaultRule) -> FaultRuleEntry
    /// All or none: `nil` when they would pass the rule limit.
    func add(_ rules: [FaultRule]) -> [FaultRuleEntry]?
    var entries: [FaultRuleEntry] { get }
    var count: Int { get }
    /// Rules held at once; ``add(_:)-([FaultRule])`` refuses more.
    var maxRules: Int { get }
    func remove(id: String) -> Bool
    func removeAll()
    func reset()
}

extension FaultBackend {
    /// The rule a request with these facts triggers, counted in this process
    /// (``apply(_:claimScope:claim:)`` without a shared state).
    func apply(_ request: FaultRule.Facts) -> FaultRule? {
        var claim: FaultClaim?
        return apply(request, claimScope: nil, claim: &claim)
    }
}

/// Provider tokens across connections: first sightings (on the mock's clock) and expiries.
protocol TokenBackend: AnyObject, Sendable {
    /// Moves whenever a token is expired (or on reset): one atomic load per request.
    var generation: UInt64 { get }
    /// Notes a token presented with the clock at `offset`; returns when it was first seen and
    /// whether it is expired.
    func register(_ tokenId: String, offset: Int64) -> (offsetAtFirstSight: Int64, expired: Bool)
    func isExpired(_ tokenId: String) -> Bool
    /// Expires a token on every connection.
    func expire(_ tokenId: String, offset: Int64)
    func reset()
}

/// The mock's time: the wall clock plus an offset that `/v1/clock` moves ahead.
protocol ClockBackend: AnyObject, Sendable {
    var offsetSeconds: Int64 { get }
    func nowMilliseconds() -> Int64
    func nowSeconds() -> Int64
    /// Moves the clock ahead; the new offset, or `nil` when it would pass the limit.
    func advance(seconds: Int64) -> Int64?
    func reset()
}

extension VersionedValue: VersionedBackend {}
extension ChannelStore: ChannelBackend {}
extension FaultStore: FaultBackend {}
extension TokenRegistry: TokenBackend {}
extension MockClock: ClockBackend {}

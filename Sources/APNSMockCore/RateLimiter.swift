/// How many requests one device token may receive in a time window before APNs answers
/// 429 TooManyRequests.
///
/// Apple publishes no figure ("too many requests were made consecutively to the same device
/// token"), so the limit is off unless configured.
public struct RateLimit: Sendable, Equatable {
    /// Requests allowed per ``interval``; also the largest burst.
    public let requests: Int
    public let interval: Duration

    /// `nil` unless `requests > 0` and `interval > .zero`: anything else would admit nothing or
    /// divide by zero.
    public init?(requests: Int, interval: Duration) {
        guard requests > 0, interval > .zero else { return nil }
        self.requests = requests
        self.interval = interval
    }
}

/// Per-device-token rate limiting: the one validation step that needs state.
///
/// Validation proper (``Validator``) is pure so that it can run without a lock on any thread; this
/// step runs after it, on a decision the validator already accepted, so that rejected requests do
/// not use up a device's allowance (mock's choice). The server keeps one `RateLimiter` behind its
/// lock and calls ``apply(to:)`` — the check is a dictionary lookup, cheap enough to hold the lock
/// for.
///
/// The algorithm is GCRA (a token bucket stored as one "theoretical arrival time" per device):
/// ``RateLimit/requests`` requests may arrive at once, after which they are admitted at the rate of
/// `requests` per `interval`. Time comes from an injected clock, so tests can step it.
public struct RateLimiter: Sendable {
    public let limit: RateLimit
    private let now: @Sendable () -> Duration
    private var arrival: [String: Duration] = [:]
    private var sweepThreshold = RateLimiter.minimumSweepThreshold

    /// - Parameters:
    ///   - limit: The allowance per device token.
    ///   - clock: Monotonic time since any fixed origin. Defaults to the continuous clock.
    public init(limit: RateLimit, clock: (@Sendable () -> Duration)? = nil) {
        self.limit = limit
        if let clock {
            self.now = clock
        } else {
            let origin = ContinuousClock.now
            self.now = { ContinuousClock.now - origin }
        }
    }

    /// Spacing between admitted requests once the burst is used up.
    private var emissionInterval: Duration { limit.interval / limit.requests }

    /// Counts one request to `token` now; whether it is within the allowance.
    public mutating func admit(token: String) -> Bool {
        admit(token: token, at: now())
    }

    /// Counts one request to `token` at time `now`; whether it is within the allowance. A refused
    /// request is not counted, so a client that backs off recovers at the configured rate.
    public mutating func admit(token: String, at now: Duration) -> Bool {
        let key = DeviceToken.canonical(token)
        let step = emissionInterval
        let tolerance = limit.interval - step
        let theoretical = max(arrival[key] ?? now, now)
        guard theoretical - tolerance <= now else { return false }
        arrival[key] = theoretical + step
        if arrival.count >= sweepThreshold {
            sweep(at: now)
        }
        return true
    }

    /// The final validation step: an accepted decision whose device token is over its allowance
    /// becomes 429 TooManyRequests; any other decision passes through uncounted.
    public mutating func apply(to decision: Decision) -> Decision {
        guard case .accepted(let push) = decision else { return decision }
        return admit(token: push.token) ? decision : .rejected(Rejection(.tooManyRequests))
    }

    /// Devices tracked at the moment; for tests and metrics.
    public var trackedDevices: Int { arrival.count }

    /// Forgets devices whose allowance is full again (their entry says nothing an absent entry would
    /// not). Runs when the table has doubled since the last sweep, so its cost stays constant per
    /// request however many devices are pushed to.
    private mutating func sweep(at now: Duration) {
        arrival = arrival.filter { $0.value > now }
        sweepThreshold = max(Self.minimumSweepThreshold, arrival.count * 2)
    }

    private static let minimumSweepThreshold = 1024
}

import APNSMockCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Logging
import Synchronization

/// What a request's connection contributes to deciding it.
struct ConnectionContext: Sendable {
    var connectionID: UInt64
    /// The environment named by the TLS SNI host, if it was one of Apple's.
    var sniEnvironment: APNSEnvironment?
}

/// Decides every request: validation, then the response that goes with the verdict.
///
/// Shared by all connections on all event loops. Configuration is immutable; the device registry
/// is read through a per-connection snapshot (see ``DeviceStore``); the only lock on the request
/// path is the rate limiter's, and only when a rate limit is configured.
final class Responder: Sendable {
    let validator: Validator
    let defaultEnvironment: APNSEnvironment
    let allowedTopics: AllowedTopics
    let devices: DeviceStore
    let authenticator: Authenticator
    /// `nil` inside when no rate limit is configured; then the lock is never taken.
    private let rateLimiter: Mutex<RateLimiter?>
    private let isRateLimited: Bool
    let logger: Logger
    /// Recording, faults and counts (issue 5): see Responder+Admin.swift.
    let records: RecordStore
    let faults: FaultStore
    let statistics: RequestStatistics

    init(
        validator: Validator, defaultEnvironment: APNSEnvironment, allowedTopics: AllowedTopics = .any,
        devices: DeviceStore = DeviceStore(DeviceRegistry()), tokenKeys: TokenKeys = .empty,
        tokenUpdateInterval: Int64 = 1200, records: RecordStore = RecordStore(capacity: 0),
        faults: FaultStore = FaultStore([]), statistics: RequestStatistics = RequestStatistics(), logger: Logger
    ) {
        self.records = records
        self.faults = faults
        self.statistics = statistics
        self.validator = validator
        self.defaultEnvironment = defaultEnvironment
        self.allowedTopics = allowedTopics
        self.devices = devices
        self.authenticator = Authenticator(
            keys: tokenKeys, settings: validator.settings, tokenUpdateInterval: tokenUpdateInterval,
            fallbackTopics: allowedTopics, narrowsTopics: allowedTopics != .any)
        self.rateLimiter = Mutex(validator.settings.rateLimit.map { RateLimiter(limit: $0) })
        self.isRateLimited = validator.settings.rateLimit != nil
        self.logger = logger
    }

    convenience init(configuration: ServerConfiguration, tokenKeys: TokenKeys, logger: Logger) {
        self.init(
            validator: Validator(settings: configuration.validation),
            defaultEnvironment: configuration.environment,
            allowedTopics: configuration.allowedTopics,
            devices: DeviceStore(configuration.devices),
            tokenKeys: tokenKeys,
            tokenUpdateInterval: configuration.tokenUpdateInterval,
            records: RecordStore(capacity: configuration.recordingCapacity),
            faults: FaultStore(configuration.faults, seed: configuration.faultSeed),
            logger: logger)
    }

    /// The request's credentials against the connection's (token or client certificate); see
    /// ``Authenticator``. `result.summary` is what a record of the request shows as `auth`.
    func authenticate(_ request: PushRequest, environment: APNSEnvironment, state: inout ConnectionState) -> AuthenticationResult {
        authenticator.authenticate(
            authorization: request.authorization, environment: environment, now: Int64(time(nil)),
            state: &state.auth)
    }

    /// The environment of one request: the `:authority` the client addressed, else the TLS SNI
    /// host, else the server's default (apns-behavior.md section 8).
    func environment(of request: PushRequest, connection: ConnectionContext, state: inout ConnectionState) -> APNSEnvironment {
        if let authority = request.authority {
            // The same `:authority` arrives on every request of a connection; decide it once.
            if authority != state.lastAuthority {
                state.lastAuthority = authority
                state.lastAuthorityEnvironment = APNSEnvironment(host: authority)
            }
            if let environment = state.lastAuthorityEnvironment {
                return environment
            }
        }
        return connection.sniEnvironment ?? defaultEnvironment
    }

    func respond(
        to request: borrowing PushRequest,
        streamID: Int32,
        connection: ConnectionContext,
        state: inout ConnectionState
    ) -> Answer {
        let environment = environment(of: request, connection: connection, state: &state)
        let auth = authenticate(request, environment: environment, state: &state)
        let context = RequestContext(
            environment: environment, allowedTopics: auth.allowedTopics, certificateTopic: auth.certificateTopic,
            authenticationFailure: auth.failure, devices: state.devices.refreshed(from: devices))
        var decision = validator.validate(request, context: context, memo: &state.memo)
        if isRateLimited, decision.isAccepted {
            let checked = decision
            decision = rateLimiter.withLock { limiter in limiter?.apply(to: checked) ?? checked }
        }
        let apnsID: APNSResponse.RequestID
        if let sent = request.apnsID, HeaderSyntax.isCanonicalUUID(sent) {
            apnsID = .echoed(sent)
        } else {
            apnsID = .generated(UUIDValue.random(using: &state.random))
        }
        let response: APNSResponse
        switch decision {
        case .accepted:
            let uniqueID = environment == .sandbox ? UUIDValue.random(using: &state.random) : nil
            response = .accepted(apnsID: apnsID, uniqueID: uniqueID)
        case .rejected(let rejection):
            let rejectedResponse = APNSResponse.rejected(rejection, apnsID: apnsID)
            logger.info(
                "rejected request",
                metadata: [
                    "connection": "\(connection.connectionID)",
                    "stream": "\(streamID)",
                    "apns-id": "\(rejectedResponse.apnsIDText)",
                    "status": "\(rejection.status)",
                    "reason": "\(rejection.wireReason)",
                ])
            response = rejectedResponse
        }
        return conclude(
            request, decision: decision, response: response, environment: environment, auth: auth.summary,
            streamID: streamID, connection: connection, state: &state)
    }
}

/// What a connection keeps between its requests so that answering one needs no shared state.
struct ConnectionState {
    var random = FastRandom()
    var devices: DeviceStore.Snapshot
    var memo = ValidationMemo()
    /// The shape of the connection's last record, shared by the records that repeat it.
    var recordShape: RequestShape?
    /// When the connection's current batch of input was read (see ``readTime()``).
    var readMilliseconds: Int64?
    var lastAuthority: String?
    var lastAuthorityEnvironment: APNSEnvironment?
    var auth = AuthState()

    init(devices: DeviceStore) {
        self.devices = DeviceStore.Snapshot(devices)
    }

    /// Wall-clock milliseconds when the bytes being processed were read: taken once per read
    /// (one clock call for the tens of requests a read usually carries), so a record's
    /// `receivedAt` is exact to the time it takes to process one read.
    mutating func readTime() -> Int64 {
        if let readMilliseconds { return readMilliseconds }
        let now = Responder.nowMilliseconds()
        readMilliseconds = now
        return now
    }

    /// The last record's shape if `request` fits it, else a new one (kept for the next record).
    mutating func recordShape(
        for request: PushRequest, decision: Decision, environment: APNSEnvironment, auth: AuthSummary,
        connectionID: UInt64
    ) -> RequestShape {
        if let shape = recordShape,
           shape.matches(request, accepted: decision.isAccepted, environment: environment, auth: auth) {
            return shape
        }
        let shape = RequestShape(
            request, accepted: decision.acceptedPush, environment: environment, auth: auth, connectionID: connectionID)
        recordShape = shape
        return shape
    }
}

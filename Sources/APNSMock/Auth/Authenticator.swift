import APNSMockCore

/// The authenticator's verdict on one request, for the validator and the record.
struct AuthenticationResult {
    /// The refusal, reported by the validator at ``ValidationStep/authentication``.
    var failure: Rejection?
    /// What the sender may push to (its key's apps or its certificate's topics).
    var allowedTopics: AllowedTopics
    /// The topic of a single-topic client certificate, for a request without `apns-topic`.
    var certificateTopic: String?
    /// How the request was authenticated, as its record shows it.
    var summary: AuthSummary
    /// The request carried the connection's first accepted provider token: the connection then
    /// announces its full MAX_CONCURRENT_STREAMS (the ``Policy`` stage makes it an effect).
    var acceptedFirstToken = false
}

/// What a connection remembers about its credentials between requests. Never shared between
/// connections, so it needs no lock.
struct ConnectionAuth {
    /// The client certificate, read once at the end of the handshake; set means certificate auth.
    var certificate: ClientCertificateIdentity? {
        didSet {
            certificateTopics = certificate?.allowedTopics ?? .any
            certificateSummary = AuthSummary(method: .certificate, teamId: certificate?.teamID)
        }
    }
    /// Derived from ``certificate`` once, so that requests build no Set and no summary.
    private(set) var certificateTopics: AllowedTopics = .any
    private(set) var certificateSummary = AuthSummary.none
    /// The token the connection is bound to (the last one accepted), with its key.
    var binding: Binding?
    /// A one-entry verification cache: the last token string that was not the bound one, with
    /// its verdict, so that a client repeating a refused (or newer) token costs no ES256 either.
    var lastToken: String?
    var lastVerdict: Verdict = .invalid
    /// The ``TeamRegistry/version`` ``lastVerdict`` was reached at: a team added or removed since
    /// may change it.
    var lastVerdictTeamsVersion: UInt64 = 0
    /// The ``TokenRegistry/generation`` the bound token was last checked against.
    var checkedGeneration: UInt64 = 0
    /// The team of the request being decided (its record's `auth.teamId`, when that team exists):
    /// its namespace, which the policy stage and the recorder use. Set by every authentication.
    ///
    /// Unretained, so that the request path pays no reference counting for it (each retain and
    /// release is an atomic operation: five pairs of them per request cost about 6% of a push's
    /// CPU). It is always a space this same value holds strongly while a request reads it — its
    /// ``binding``'s, its ``certificateSpace``, or the key of its ``lastVerdict`` — since every
    /// authentication sets it from one of them, and nothing changes them until the next one.
    var team: Unmanaged<TeamSpace>?

    /// ``team``, retained (for what is not on the request path).
    var space: TeamSpace? { team?.takeUnretainedValue() }

    /// Points ``team`` at `space` (one this value holds).
    mutating func setTeam(_ space: TeamSpace?) {
        team = space.map { Unmanaged.passUnretained($0) }
    }
    /// The certificate's team, looked up again when ``TeamRegistry/version`` moved
    /// (``certificateTeamsVersion``: the version it was looked up at; `.max`: not yet).
    var certificateSpace: TeamSpace?
    var certificateTeamsVersion = UInt64.max

    /// Whether the connection has not yet accepted a provider token (token auth): its streams are
    /// limited to `server.streamsBeforeAuthentication` meanwhile.
    var isAwaitingToken: Bool { certificate == nil && binding == nil }

    /// The connection was answered ExpiredProviderToken (by its token's age, or a fault rule said
    /// so): its token is expired on every connection from now on (``TokenRegistry``).
    /// Expires the connection's token everywhere; says which, the first time (for the other
    /// replicas of a shared state).
    @discardableResult
    mutating func tokenExpired() -> (team: String, tokenId: String, offset: Int64)? {
        guard let binding, !binding.expired else { return nil }
        binding.expired = true
        let offset = binding.space.clock.offsetSeconds
        binding.space.tokens.expire(binding.tokenId, offset: offset)
        return (binding.space.teamID, binding.tokenId, offset)
    }

    /// A class, so that checking the bound token on every request copies one reference rather
    /// than the token, the key and the summary.
    final class Binding {
        let token: String
        let key: TokenKey
        /// The key's team (``TokenKey/space``), kept here so that a request reaches it in one step.
        let space: TeamSpace
        /// ``space``, unretained (``key`` holds it): the request path reads it without reference
        /// counting.
        let team: Unmanaged<TeamSpace>
        /// The token's `iat` on the mock's clock: its `iat` plus the clock's offset when the mock
        /// first saw it (``TokenRegistry``).
        let issuedAt: Int64
        /// When this token was accepted, on the mock's clock, for TooManyProviderTokenUpdates.
        let acceptedAt: Int64
        /// What the connection's requests record as `auth`: the key's, with the token's identity.
        let summary: AuthSummary
        /// Answered ExpiredProviderToken, here or on another connection.
        var expired: Bool

        init(token: String, key: TokenKey, issuedAt: Int64, acceptedAt: Int64, summary: AuthSummary, expired: Bool = false) {
            self.token = token
            self.key = key
            space = key.space
            team = Unmanaged.passUnretained(key.space)
            self.issuedAt = issuedAt
            self.acceptedAt = acceptedAt
            self.summary = summary
            self.expired = expired
        }

        var tokenId: String { summary.tokenId ?? "" }
    }

    /// A verified token: its key and what the record shows of it (``AuthSummary`` with `iat`, the
    /// form of `iat` and of the signature, and the token's fingerprint).
    enum Verdict: Sendable {
        case invalid
        case valid(TokenKey, iat: Int64, summary: AuthSummary)
    }
}

/// Decides authentication (docs/authentication.md): stateful,
/// because a connection binds to its first accepted token's key and remembers verified tokens.
///
/// The common case, the bound token repeated, is one string comparison (the connection reuses the
/// header's String storage when the bytes repeat, so it is usually an identity check), one atomic
/// load (has any token expired since?) and two integer comparisons: no ES256, no allocation, no
/// lock. Time is the token's team's (``TeamClock``); whether a token expired is its team's, across
/// connections (``TokenRegistry``).
struct Authenticator: Sendable {
    /// The teams and their keys.
    let teams: TeamRegistry
    let settings: ValidationSettings
    /// Seconds a connection must keep a token before it may switch to a new one (Apple: 20 min).
    let tokenUpdateInterval: Int64
    /// The topics a request may name when authentication does not narrow them (topic policy `any`
    /// keeps every topic allowed; otherwise the key or certificate decides).
    let fallbackTopics: AllowedTopics
    let narrowsTopics: Bool
    /// Tokens verified on any connection, so that a new connection repeating one skips ES256.
    var verified: VerifiedTokens { teams.verified }

    /// Authenticates one request on the connection whose memory is `state`, at the time of the
    /// token's team's clock (`now`: another time, in seconds, for tests of time).
    func authenticate(
        authorization: String?, environment: APNSEnvironment, now fixedNow: Int64? = nil, state: inout ConnectionAuth
    ) -> AuthenticationResult {
        if let certificate = state.certificate {
            // The certificate's team, looked up again whenever the teams changed (it may be added
            // after the connection's first request, or removed and added again).
            let teamsVersion = teams.version
            if state.certificateTeamsVersion != teamsVersion {
                state.certificateTeamsVersion = teamsVersion
                let space = certificate.teamID.flatMap(teams.space)
                if space !== state.certificateSpace {
                    state.certificateSpace?.connectionClosed()
                    space?.connectionOpened()
                    state.certificateSpace = space
                }
            }
            state.team = state.certificateSpace.map { Unmanaged.passUnretained($0) }
            return authenticate(
                certificate: certificate, topics: state.certificateTopics, summary: state.certificateSummary,
                environment: environment)
        }
        guard let authorization else {
            state.team = nil
            return refuse(.missingProviderToken, summary: .none)
        }
        // A bound token whose team was removed is verified again below: refused as a revoked key
        // is, unless the team came back with the same key.
        if let binding = state.binding, binding.token == authorization, !binding.team._withUnsafeGuaranteedRef(\.isRetired) {
            let team = binding.team
            state.team = team
            if isExpired(binding, state: &state) {
                return refuse(.expiredProviderToken, summary: binding.summary)
            }
            return check(
                key: binding.key, issuedAt: binding.issuedAt, summary: binding.summary, environment: environment,
                now: fixedNow ?? team._withUnsafeGuaranteedRef { $0.clock.nowSeconds() })
        }
        var verdict: ConnectionAuth.Verdict
        let teamsVersion = teams.version
        if let last = state.lastToken, last == authorization, state.lastVerdictTeamsVersion == teamsVersion {
            verdict = state.lastVerdict
        } else {
            verdict = verify(authorization)
        }
        if case .valid(let key, _, _) = verdict, key.space.isRetired {
            // Verified with a key whose team was removed since: with the keys as they are now.
            verified.forget(authorization)
            verdict = verify(authorization)
        }
        state.lastToken = authorization
        state.lastVerdict = verdict
        state.lastVerdictTeamsVersion = teamsVersion
        guard case .valid(let key, let iat, let summary) = verdict, !key.space.isRetired else {
            state.team = nil
            return refuse(.invalidProviderToken, summary: AuthSummary(method: .token))
        }
        let space = key.space
        // Held by `state.lastVerdict` until the binding below holds it.
        state.setTeam(space)
        let now = fixedNow ?? space.clock.nowSeconds()
        let seen = space.tokens.register(summary.tokenId ?? "", offset: space.clock.offsetSeconds)
        if seen.expired {
            return refuse(.expiredProviderToken, summary: summary)
        }
        let issuedAt = iat &+ seen.offsetAtFirstSight
        var result = check(key: key, issuedAt: issuedAt, summary: summary, environment: environment, now: now)
        guard result.failure == nil else { return result }
        // A connection whose bound key's team was removed starts again with this token.
        if let binding = state.binding, !binding.space.isRetired {
            // "The key ID in the provider token isn't related to the key ID of the token used in
            // the first push of this connection": the bound key, or its related key.
            if !TokenKeys.relates(binding.key, key) {
                return refuse(.unrelatedKeyIdInToken, summary: summary)
            }
            // A client may replace its token once the update interval has passed, and at once when
            // its current token has expired: by its age, or answered ExpiredProviderToken on this
            // or any other connection.
            let currentExpired = isExpired(binding, state: &state)
                || ProviderToken.timeProblem(issuedAt: binding.issuedAt, now: now) == .expiredProviderToken
            if now - binding.acceptedAt < tokenUpdateInterval, !currentExpired {
                return refuse(.tooManyProviderTokenUpdates, summary: summary)
            }
        } else {
            result.acceptedFirstToken = true
        }
        if let previous = state.binding?.space, previous !== space {
            previous.connectionClosed()
            space.connectionOpened()
        } else if state.binding == nil {
            space.connectionOpened()
        }
        state.binding = ConnectionAuth.Binding(
            token: authorization, key: key, issuedAt: issuedAt, acceptedAt: now, summary: summary)
        state.checkedGeneration = space.tokens.generation
        state.lastToken = nil
        state.lastVerdict = .invalid
        return result
    }

    /// Whether the bound token was expired on any connection; looked up only when some token was
    /// expired since the connection last looked.
    private func isExpired(_ binding: ConnectionAuth.Binding, state: inout ConnectionAuth) -> Bool {
        if binding.expired { return true }
        let generation = binding.team._withUnsafeGuaranteedRef { $0.tokens.generation }
        guard generation != state.checkedGeneration else { return false }
        state.checkedGeneration = generation
        binding.expired = binding.space.tokens.isExpired(binding.tokenId)
        return binding.expired
    }

    /// Parses and verifies a token: the only place ES256 runs, once per token while it stays in
    /// ``verified``.
    func verify(_ authorization: String) -> ConnectionAuth.Verdict {
        if let verdict = verified.verdict(for: authorization) { return verdict }
        let verdict = verifyAnew(authorization)
        verified.remember(authorization, verdict)
        return verdict
    }

    private func verifyAnew(_ authorization: String) -> ConnectionAuth.Verdict {
        guard let token = ProviderToken.parse(authorization: authorization),
              !settings.strictProviderTokens || (token.issuedAtForm == .integer && token.signatureForm == .jose),
              let key = teams.key(token.keyID),
              key.teamID == token.issuer,
              ES256.verify(signature: token.signature, message: token.signingInput, with: key.publicKey)
        else { return .invalid }
        let summary = AuthSummary(
            method: key.summary.method, teamId: key.summary.teamId, keyId: key.summary.keyId,
            iatForm: token.issuedAtForm, iat: token.issuedAt,
            tokenId: ES256.fingerprint(authorization.utf8.dropFirst("bearer ".count)),
            signatureForm: token.signatureForm)
        return .valid(key, iat: token.issuedAt, summary: summary)
    }

    /// The checks that depend on the request, done for every request, cached token or not.
    private func check(
        key: TokenKey, issuedAt: Int64, summary: AuthSummary, environment: APNSEnvironment, now: Int64
    ) -> AuthenticationResult {
        if let problem = ProviderToken.timeProblem(issuedAt: issuedAt, now: now) {
            return refuse(problem, summary: summary)
        }
        guard key.environment.allows(environment) else {
            return refuse(.badEnvironmentKeyIdInToken, summary: summary)
        }
        return AuthenticationResult(
            failure: nil, allowedTopics: narrowsTopics ? key.allowedTopics : fallbackTopics,
            certificateTopic: nil, summary: summary)
    }

    private func authenticate(
        certificate: ClientCertificateIdentity, topics: AllowedTopics, summary: AuthSummary, environment: APNSEnvironment
    ) -> AuthenticationResult {
        if certificate.problem != nil {
            return refuse(.badCertificate, summary: summary)
        }
        guard certificate.allows(environment) else {
            return refuse(.badCertificateEnvironment, summary: summary)
        }
        return AuthenticationResult(
            failure: nil, allowedTopics: narrowsTopics ? topics : fallbackTopics,
            certificateTopic: certificate.defaultTopic, summary: summary)
    }

    private func refuse(_ reason: Reason, summary: AuthSummary) -> AuthenticationResult {
        AuthenticationResult(
            failure: settings.rejection(reason), allowedTopics: fallbackTopics, certificateTopic: nil, summary: summary)
    }
}

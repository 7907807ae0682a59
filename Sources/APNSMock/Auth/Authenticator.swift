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
}

/// What a connection remembers about its credentials between requests. Never shared between
/// connections, so it needs no lock.
struct AuthState {
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
    /// Set when the connection's first token is accepted: the connection then announces its full
    /// MAX_CONCURRENT_STREAMS (``APNSConnection`` clears it).
    var streamLimitRaisePending = false
    /// Set once the connection was answered ExpiredProviderToken (by the token's age or by a fault
    /// rule): the client is then expected to sign a new token, which is accepted however soon it
    /// comes (see ``noteAnswered(_:)``).
    var refreshInvited = false

    /// A class, so that checking the bound token on every request copies one reference rather
    /// than the token, the key and the summary.
    final class Binding {
        let token: String
        let key: TokenKey
        let issuedAt: Int64
        /// When this token was accepted (UNIX seconds), for TooManyProviderTokenUpdates.
        let acceptedAt: Int64
        /// What the connection's requests record as `auth`: the key's, with the token's `iat` form.
        let summary: AuthSummary

        init(token: String, key: TokenKey, issuedAt: Int64, acceptedAt: Int64, summary: AuthSummary) {
            self.token = token
            self.key = key
            self.issuedAt = issuedAt
            self.acceptedAt = acceptedAt
            self.summary = summary
        }
    }

    enum Verdict {
        case invalid
        case valid(TokenKey, issuedAt: Int64, form: ProviderToken.IssuedAtForm)
    }

    /// Tells the state what the connection was answered: after ExpiredProviderToken the next new
    /// token is not a TooManyProviderTokenUpdates (clients refresh their token on that reason and
    /// retry at once, on the same connection).
    mutating func noteAnswered(_ reason: Reason?) {
        if reason == .expiredProviderToken, binding != nil {
            refreshInvited = true
        }
    }
}

/// Decides authentication (docs/authentication.md): stateful,
/// because a connection binds to its first token's team and remembers verified tokens.
///
/// The common case, the bound token repeated, is one string comparison (the connection reuses the
/// header's String storage when the bytes repeat, so it is usually an identity check) plus two
/// integer comparisons: no ES256, no allocation, no lock.
struct Authenticator: Sendable {
    let keys: TokenKeys
    let settings: ValidationSettings
    /// Seconds a connection must keep a token before it may switch to a new one (Apple: 20 min).
    let tokenUpdateInterval: Int64
    /// The topics a request may name when authentication does not narrow them (topic policy `any`
    /// keeps every topic allowed; otherwise the key or certificate decides).
    let fallbackTopics: AllowedTopics
    let narrowsTopics: Bool

    func authenticate(
        authorization: String?, environment: APNSEnvironment, now: Int64, state: inout AuthState
    ) -> AuthenticationResult {
        if let certificate = state.certificate {
            return authenticate(
                certificate: certificate, topics: state.certificateTopics, summary: state.certificateSummary,
                environment: environment)
        }
        guard let authorization else {
            return refuse(.missingProviderToken, summary: .none)
        }
        if let binding = state.binding, binding.token == authorization {
            return check(
                key: binding.key, issuedAt: binding.issuedAt, summary: binding.summary, environment: environment, now: now)
        }
        let verdict: AuthState.Verdict
        if let last = state.lastToken, last == authorization {
            verdict = state.lastVerdict
        } else {
            verdict = verify(authorization)
            state.lastToken = authorization
            state.lastVerdict = verdict
        }
        guard case .valid(let key, let issuedAt, let form) = verdict else {
            return refuse(.invalidProviderToken, summary: AuthSummary(method: .token))
        }
        var summary = key.summary
        summary.iatForm = form
        let result = check(key: key, issuedAt: issuedAt, summary: summary, environment: environment, now: now)
        guard result.failure == nil else { return result }
        if let binding = state.binding {
            if binding.key.teamID != key.teamID {
                return refuse(.unrelatedKeyIdInToken, summary: summary)
            }
            // A client may replace its token once the update interval has passed, at once when its
            // current token has expired or the connection was told so (``AuthState/refreshInvited``).
            let currentExpired = ProviderToken.timeProblem(issuedAt: binding.issuedAt, now: now) == .expiredProviderToken
            if now - binding.acceptedAt < tokenUpdateInterval, !currentExpired, !state.refreshInvited {
                return refuse(.tooManyProviderTokenUpdates, summary: summary)
            }
        } else {
            state.streamLimitRaisePending = true
        }
        state.binding = AuthState.Binding(
            token: authorization, key: key, issuedAt: issuedAt, acceptedAt: now, summary: summary)
        state.refreshInvited = false
        state.lastToken = nil
        state.lastVerdict = .invalid
        return result
    }

    /// Parses and verifies a token: the only place ES256 runs.
    func verify(_ authorization: String) -> AuthState.Verdict {
        guard let token = ProviderToken.parse(authorization: authorization),
              !settings.strictProviderTokens || token.issuedAtForm == .integer,
              let key = keys.byID[token.keyID],
              key.teamID == token.issuer,
              ES256.verify(signature: token.signature, message: token.signingInput, with: key.publicKey)
        else { return .invalid }
        return .valid(key, issuedAt: token.issuedAt, form: token.issuedAtForm)
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

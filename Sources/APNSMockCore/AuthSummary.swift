/// How a request was authenticated, as the record of it shows (`"auth"` in the record of docs/admin-api.md
/// shape): the method, and the team and key ID of a provider token, or the team of a client
/// certificate.
public struct AuthSummary: Sendable, Equatable, Codable {
    public enum Method: String, Sendable, Codable {
        case token
        case certificate
    }

    /// `nil` when the request carried no usable credentials.
    public var method: Method?
    public var teamId: String?
    public var keyId: String?
    /// How the provider token wrote its `iat` (token auth with a token that verified), so that a
    /// team sees its client's spelling; `nil` otherwise.
    public var iatForm: ProviderToken.IssuedAtForm?
    /// The token's `iat` as the mock read it, whole UNIX seconds (token auth with a token that
    /// verified).
    public var iat: Int64?
    /// A short fingerprint of the token (the first 12 hex digits of the SHA-256 of the JWT), the
    /// same for every request that carried the same token: a test tells "the retry used a new
    /// token" by it changing.
    public var tokenId: String?
    /// How the token's signature was encoded (`jose` or `der`).
    public var signatureForm: ProviderToken.SignatureForm?

    public init(
        method: Method? = nil, teamId: String? = nil, keyId: String? = nil, iatForm: ProviderToken.IssuedAtForm? = nil,
        iat: Int64? = nil, tokenId: String? = nil, signatureForm: ProviderToken.SignatureForm? = nil
    ) {
        self.method = method
        self.teamId = teamId
        self.keyId = keyId
        self.iatForm = iatForm
        self.iat = iat
        self.tokenId = tokenId
        self.signatureForm = signatureForm
    }

    /// No credentials (yet): what a request gets before authentication is decided.
    public static let none = AuthSummary()
}

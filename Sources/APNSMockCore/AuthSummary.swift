/// How a request was authenticated, as the record of it shows (`"auth"` in the record of docs/admin-api.md
/// shape): the method, and the team and key ID of a provider token, or the team of a client
/// certificate.
///
/// A value with one reference inside: the fields live in an immutable object, so that the request
/// path, which hands a connection's summary to every request's verdict and record, copies a
/// reference rather than four strings (about 200 instructions a request), and a record's shape
/// compares it with its own by identity first. Setting a field makes a new object.
public struct AuthSummary: Sendable, Equatable, Codable {
    public enum Method: String, Sendable, Codable, CaseIterable {
        case token
        case certificate
    }

    private final class Fields: Sendable {
        let method: Method?
        let teamId: String?
        let keyId: String?
        let iatForm: ProviderToken.IssuedAtForm?
        let iat: Int64?
        let tokenId: String?
        let signatureForm: ProviderToken.SignatureForm?

        init(
            method: Method?, teamId: String?, keyId: String?, iatForm: ProviderToken.IssuedAtForm?, iat: Int64?,
            tokenId: String?, signatureForm: ProviderToken.SignatureForm?
        ) {
            self.method = method
            self.teamId = teamId
            self.keyId = keyId
            self.iatForm = iatForm
            self.iat = iat
            self.tokenId = tokenId
            self.signatureForm = signatureForm
        }
    }

    private var fields: Fields

    /// `nil` when the request carried no usable credentials.
    public var method: Method? {
        get { fields.method }
        set { self = AuthSummary(copying: self, method: newValue) }
    }
    public var teamId: String? {
        get { fields.teamId }
        set { self = AuthSummary(copying: self, teamId: newValue) }
    }
    public var keyId: String? {
        get { fields.keyId }
        set { self = AuthSummary(copying: self, keyId: newValue) }
    }
    /// How the provider token wrote its `iat` (token auth with a token that verified), so that a
    /// team sees its client's spelling; `nil` otherwise.
    public var iatForm: ProviderToken.IssuedAtForm? {
        get { fields.iatForm }
        set { self = AuthSummary(copying: self, iatForm: newValue) }
    }
    /// The token's `iat` as the mock read it, whole UNIX seconds (token auth with a token that
    /// verified).
    public var iat: Int64? {
        get { fields.iat }
        set { self = AuthSummary(copying: self, iat: newValue) }
    }
    /// A short fingerprint of the token (the first 12 hex digits of the SHA-256 of the JWT), the
    /// same for every request that carried the same token: a test tells "the retry used a new
    /// token" by it changing.
    public var tokenId: String? {
        get { fields.tokenId }
        set { self = AuthSummary(copying: self, tokenId: newValue) }
    }
    /// How the token's signature was encoded (`jose` or `der`).
    public var signatureForm: ProviderToken.SignatureForm? {
        get { fields.signatureForm }
        set { self = AuthSummary(copying: self, signatureForm: newValue) }
    }

    public init(
        method: Method? = nil, teamId: String? = nil, keyId: String? = nil, iatForm: ProviderToken.IssuedAtForm? = nil,
        iat: Int64? = nil, tokenId: String? = nil, signatureForm: ProviderToken.SignatureForm? = nil
    ) {
        fields = Fields(
            method: method, teamId: teamId, keyId: keyId, iatForm: iatForm, iat: iat, tokenId: tokenId,
            signatureForm: signatureForm)
    }

    /// `summary` with the given fields replaced.
    public init(
        copying summary: AuthSummary, method: Method?? = nil, teamId: String?? = nil, keyId: String?? = nil,
        iatForm: ProviderToken.IssuedAtForm?? = nil, iat: Int64?? = nil, tokenId: String?? = nil,
        signatureForm: ProviderToken.SignatureForm?? = nil
    ) {
        let old = summary.fields
        self.init(
            method: method ?? old.method, teamId: teamId ?? old.teamId, keyId: keyId ?? old.keyId,
            iatForm: iatForm ?? old.iatForm, iat: iat ?? old.iat, tokenId: tokenId ?? old.tokenId,
            signatureForm: signatureForm ?? old.signatureForm)
    }

    /// No credentials (yet): what a request gets before authentication is decided.
    public static let none = AuthSummary()

    public static func == (lhs: AuthSummary, rhs: AuthSummary) -> Bool {
        if lhs.fields === rhs.fields { return true }
        let l = lhs.fields, r = rhs.fields
        return l.method == r.method && l.teamId == r.teamId && l.keyId == r.keyId && l.iatForm == r.iatForm
            && l.iat == r.iat && l.tokenId == r.tokenId && l.signatureForm == r.signatureForm
    }

    /// The JSON keys: what a synthesized Codable gave the plain struct this was. Public so that a
    /// record can nest the same fields under its own `"auth"`.
    public enum CodingKeys: String, CodingKey {
        case method, teamId, keyId, iatForm, iat, tokenId, signatureForm
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            method: try c.decodeIfPresent(Method.self, forKey: .method),
            teamId: try c.decodeIfPresent(String.self, forKey: .teamId),
            keyId: try c.decodeIfPresent(String.self, forKey: .keyId),
            iatForm: try c.decodeIfPresent(ProviderToken.IssuedAtForm.self, forKey: .iatForm),
            iat: try c.decodeIfPresent(Int64.self, forKey: .iat),
            tokenId: try c.decodeIfPresent(String.self, forKey: .tokenId),
            signatureForm: try c.decodeIfPresent(ProviderToken.SignatureForm.self, forKey: .signatureForm))
    }

    /// Each field under its name, absent when nil (as the synthesized Codable wrote it).
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try encode(into: &c, nilAsNull: false)
    }

    /// Writes every field into `container`; a nil one as `null` with `nilAsNull` (a record spells
    /// every key), else not at all.
    public func encode(into container: inout KeyedEncodingContainer<CodingKeys>, nilAsNull: Bool) throws {
        func put<Value: Encodable>(_ value: Value?, _ key: CodingKeys) throws {
            if nilAsNull {
                try container.encode(value, forKey: key)
            } else {
                try container.encodeIfPresent(value, forKey: key)
            }
        }
        try put(method, .method)
        try put(teamId, .teamId)
        try put(keyId, .keyId)
        try put(iatForm, .iatForm)
        try put(iat, .iat)
        try put(tokenId, .tokenId)
        try put(signatureForm, .signatureForm)
    }
}

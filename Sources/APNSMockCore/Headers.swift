/// Header names APNs reads, spelled once. HTTP/2 header names arrive lowercase.
public enum HeaderName {
    public static let method = ":method"
    public static let path = ":path"
    public static let authority = ":authority"
    public static let scheme = ":scheme"
    public static let status = ":status"
    public static let authorization = "authorization"
    public static let contentType = "content-type"
    public static let apnsID = "apns-id"
    public static let apnsUniqueID = "apns-unique-id"
    public static let apnsExpiration = "apns-expiration"
    public static let apnsPriority = "apns-priority"
    public static let apnsTopic = "apns-topic"
    public static let apnsCollapseID = "apns-collapse-id"
    public static let apnsPushType = "apns-push-type"
}

/// The APNs environment a request is addressed to.
public enum APNSEnvironment: String, Sendable, Codable, CaseIterable {
    case sandbox
    case production

    /// The environment named by the host a client dialled (TLS SNI or `:authority`), or `nil` when
    /// the host is not one of Apple's, in which case the server's default applies.
    ///
    /// A port suffix (`api.push.apple.com:443`) and letter case are ignored.
    public init?(host: some StringProtocol) {
        var name = Substring(host)
        if let colon = name.lastIndex(of: ":"), !name.hasSuffix("]") {
            name = name[..<colon]
        }
        switch name.lowercased() {
        case "api.push.apple.com":
            self = .production
        case "api.sandbox.push.apple.com", "api.development.push.apple.com":
            self = .sandbox
        default:
            return nil
        }
    }
}

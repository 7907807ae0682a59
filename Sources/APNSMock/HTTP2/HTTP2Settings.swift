/// The SETTINGS apns-mock advertises, with production APNs' values as defaults
/// (docs/apns.md, "Transport").
public struct HTTP2Settings: Sendable, Equatable {
    public var headerTableSize: UInt32 = 4096
    /// Streams a client may have open at once once it is allowed its full share.
    public var maxConcurrentStreams: UInt32 = 1000
    public var initialWindowSize: UInt32 = 65535
    public var maxFrameSize: UInt32 = 16384
    /// Advertised and enforced: once a request's header fields (name + value + 32 per field, as
    /// RFC 9113 counts them; trailers count on from the header block) pass this, the session drops
    /// the rest of them and the body, and hands the request over as oversized when it ends; the
    /// connection answers it 431 (RFC 6585, RFC 9113 §10.5.1) and records it. The rest of the
    /// connection carries on.
    public var maxHeaderListSize: UInt32 = 8000
    /// MAX_CONCURRENT_STREAMS of a token-auth connection until a request carries a valid token
    /// (APNs: 1). Certificate-auth connections get ``maxConcurrentStreams`` at once. Load tools
    /// that open many streams before reading the server's SETTINGS (h2load) need this raised, or
    /// their first streams are refused (RST_STREAM REFUSED_STREAM).
    public var streamsBeforeAuthentication: UInt32 = 1

    public init(maxConcurrentStreams: UInt32 = 1000) {
        self.maxConcurrentStreams = maxConcurrentStreams
    }
}

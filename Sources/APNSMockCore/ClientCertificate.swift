/// What certificate authentication needs to know about a client certificate, extracted once per
/// connection when the TLS handshake completes (the server reads the X509; this is pure data).
public struct ClientCertificateIdentity: Sendable, Equatable {
    /// The subject's UID: the bundle ID the certificate was issued for.
    public var uid: String?
    /// The subject's OU, which Apple sets to the team ID (for the record's `auth.teamId`).
    public var teamID: String?
    /// The topics of Apple's extension 1.2.840.113635.100.6.3.6; empty when it is absent.
    public var topics: [String]
    /// Environment markers: 1.2.840.113635.100.6.3.1 (development) and …6.3.2 (production).
    public var development: Bool
    public var production: Bool
    /// Why the certificate is not accepted (untrusted chain, expired, unreadable topic extension),
    /// or `nil` when it is. Requests then get 403 BadCertificate.
    public var problem: String?

    public init(
        uid: String?, teamID: String?, topics: [String], development: Bool, production: Bool, problem: String? = nil
    ) {
        self.uid = uid
        self.teamID = teamID
        self.topics = topics
        self.development = development
        self.production = production
        self.problem = problem
    }

    /// The topic used when a request has none: the UID of a certificate with at most one topic.
    /// A multi-topic certificate has none, so a request without `apns-topic` is MissingTopic.
    public var defaultTopic: String? {
        topics.count <= 1 ? (uid ?? topics.first) : nil
    }

    /// The exact topics the certificate may push to: its extension's topics plus its UID.
    public var allowedTopics: AllowedTopics {
        var all = Set(topics)
        if let uid { all.insert(uid) }
        return .topics(all)
    }

    /// Whether the certificate may be used in `environment`. A certificate with neither marker is
    /// accepted in both (mock's choice: nothing says otherwise).
    public func allows(_ environment: APNSEnvironment) -> Bool {
        if development == production { return true }
        return environment == .sandbox ? development : production
    }
}

/// Apple's topic extension (OID 1.2.840.113635.100.6.3.6): DER `SEQUENCE { UTF8String topic,
/// SEQUENCE { UTF8String type… }, UTF8String topic, SEQUENCE {…}, … }`.
public enum AppleTopicExtension {
    /// The topics in the extension's DER value, or `nil` when it is not that shape.
    public static func topics(der: [UInt8]) -> [String]? {
        var reader = DERReader(der)
        guard let content = reader.element(tag: 0x30), reader.isAtEnd else { return nil }
        var inner = DERReader(content)
        var topics: [String] = []
        while !inner.isAtEnd {
            guard let topic = inner.element(tag: 0x0C), let types = inner.element(tag: 0x30) else { return nil }
            var typeReader = DERReader(types)
            while !typeReader.isAtEnd {
                guard typeReader.element(tag: 0x0C) != nil else { return nil }
            }
            let text = String(decoding: topic, as: UTF8.self)
            guard text.utf8.elementsEqual(topic) else { return nil }  // not valid UTF-8
            topics.append(text)
        }
        return topics
    }
}

/// Reads definite-length DER elements one after the other.
struct DERReader {
    private let bytes: ArraySlice<UInt8>
    private var index: Int

    init(_ bytes: some Collection<UInt8>) {
        self.bytes = ArraySlice(bytes)
        index = self.bytes.startIndex
    }

    var isAtEnd: Bool { index == bytes.endIndex }

    /// The content of the next element if its tag is `tag`; `nil` (and no progress) otherwise.
    mutating func element(tag: UInt8) -> ArraySlice<UInt8>? {
        var cursor = index
        guard cursor < bytes.endIndex, bytes[cursor] == tag else { return nil }
        cursor += 1
        guard cursor < bytes.endIndex else { return nil }
        var length = Int(bytes[cursor])
        cursor += 1
        if length & 0x80 != 0 {
            let count = length & 0x7F
            guard (1...4).contains(count), bytes.endIndex - cursor >= count else { return nil }
            length = 0
            for _ in 0..<count {
                length = length << 8 | Int(bytes[cursor])
                cursor += 1
            }
        }
        guard bytes.endIndex - cursor >= length else { return nil }
        index = cursor + length
        return bytes[cursor..<index]
    }
}

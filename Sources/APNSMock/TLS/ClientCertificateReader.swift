internal import COpenSSL
internal import CAPNSMockShims
import APNSMockCore

extension PeerCertificate {
    /// Everything certificate authentication needs, read from the X509 once, when the handshake
    /// completes, so that requests never touch OpenSSL.
    var identity: ClientCertificateIdentity {
        let name = X509_get_subject_name(pointer)
        var problem: String? = isTrusted ? nil : verifyResultDescription
        var topics: [String] = []
        if let der = extensionValue(AppleOID.topics) {
            if let parsed = AppleTopicExtension.topics(der: der) {
                topics = parsed
            } else {
                problem = problem ?? "the topic extension \(AppleOID.topics) is not a list of topics"
            }
        }
        return ClientCertificateIdentity(
            uid: Self.entry(name, NID_userId),
            teamID: Self.entry(name, NID_organizationalUnitName),
            topics: topics,
            development: extensionValue(AppleOID.development) != nil,
            production: extensionValue(AppleOID.production) != nil,
            problem: problem)
    }

    /// The DER content of the extension `oid`, if the certificate has it.
    private func extensionValue(_ oid: String) -> [UInt8]? {
        OpenSSLError.clearQueue()
        defer { OpenSSLError.clearQueue() }
        guard let object = OBJ_txt2obj(oid, 1) else { return nil }
        defer { ASN1_OBJECT_free(object) }
        let index = X509_get_ext_by_OBJ(pointer, object, -1)
        guard index >= 0, let ext = X509_get_ext(pointer, index), let data = X509_EXTENSION_get_data(ext) else {
            return nil
        }
        let count = Int(ASN1_STRING_length(data))
        guard count >= 0, let bytes = ASN1_STRING_get0_data(data) else { return count == 0 ? [] : nil }
        return Array(UnsafeBufferPointer(start: bytes, count: count))
    }

    /// The first subject entry with `nid`, as UTF-8.
    private static func entry(_ name: OpaquePointer?, _ nid: Int32) -> String? {
        guard let name else { return nil }
        let index = X509_NAME_get_index_by_NID(name, nid, -1)
        guard index >= 0, let entry = X509_NAME_get_entry(name, index), let data = X509_NAME_ENTRY_get_data(entry) else {
            return nil
        }
        var utf8: UnsafeMutablePointer<UInt8>?
        let count = ASN1_STRING_to_UTF8(&utf8, data)
        guard count >= 0, let utf8 else { return nil }
        defer { CAPNSMockShims_OPENSSL_free(utf8) }
        return String(decoding: UnsafeBufferPointer(start: utf8, count: Int(count)), as: UTF8.self)
    }
}

internal import COpenSSL
internal import CAPNSMockShims
import Foundation

/// Owner of an `X509*`, and the builder that issues the mock's test certificates through OpenSSL.
final class Certificate {
    let pointer: OpaquePointer

    init(owning pointer: OpaquePointer) {
        self.pointer = pointer
    }

    deinit {
        X509_free(pointer)
    }

    static func read(pem: String) throws -> Certificate {
        OpenSSLError.clearQueue()
        let bytes = Array(pem.utf8)
        guard let bio = BIO_new_mem_buf(bytes, Int32(bytes.count)) else {
            throw OpenSSLError.drain("reading a PEM certificate")
        }
        defer { BIO_free(bio) }
        guard let certificate = PEM_read_bio_X509(bio, nil, nil, nil) else {
            throw OpenSSLError.drain("reading a PEM certificate")
        }
        return Certificate(owning: certificate)
    }

    func pem() throws -> String {
        try PEMWriter.write("writing a certificate") { bio in
            PEM_write_bio_X509(bio, pointer)
        }
    }

    /// Which of `hosts` (names, `*.` wildcards, IP addresses) the certificate does not name, each
    /// compared as written (a wildcard entry must be in the certificate as that wildcard).
    func missingNames(_ hosts: [String]) -> [String] {
        hosts.filter { host in
            let isAddress = host.contains(":") || host.allSatisfy { $0.isNumber || $0 == "." }
            if isAddress {
                return X509_check_ip_asc(pointer, host, 0) != 1
            }
            return X509_check_host(pointer, host, host.utf8.count, UInt32(X509_CHECK_FLAG_NO_WILDCARDS), nil) != 1
        }
    }

    /// Whether `issuer` issued this certificate (its name and key).
    func isIssued(by issuer: Certificate) -> Bool {
        X509_check_issued(issuer.pointer, pointer) == X509_V_OK
    }
}

/// What a certificate to be issued says about itself.
struct CertificateRequest {
    enum Kind {
        /// A root or intermediate CA; `pathLength` CAs may stand below it.
        case certificateAuthority(pathLength: Int = 0)
        case server(dnsNames: [String], ipAddresses: [String])
        /// An APNs provider certificate: Apple's topic extension and environment markers.
        case apnsClient(topics: ApplePushTopics, development: Bool, production: Bool)
    }

    /// Subject attributes in order, as (short name, value), e.g. ("CN", "apns-mock test CA").
    var subject: [(String, String)]
    var kind: Kind
    var validDays: Int = 825
    /// Days from now to the start of validity (an hour before now when 0); a negative start with a
    /// short validity makes an expired certificate.
    var validFromDays: Int = 0
}

/// The content of Apple's topic extension (OID 1.2.840.113635.100.6.3.6): topic strings, each
/// followed by the list of push types it serves, e.g. `com.x` [app], `com.x.voip` [voip].
struct ApplePushTopics {
    var entries: [(topic: String, types: [String])]

    /// The topics an app certificate for `bundleID` carries in production: the app itself, its
    /// VoIP topic and its complication topic.
    static func app(_ bundleID: String) -> ApplePushTopics {
        ApplePushTopics(entries: [
            (bundleID, ["app"]),
            (bundleID + ".voip", ["voip"]),
            (bundleID + ".complication", ["complication"]),
        ])
    }

    /// DER: SEQUENCE { UTF8String topic, SEQUENCE { UTF8String type… }, … }.
    var der: [UInt8] {
        var content: [UInt8] = []
        for entry in entries {
            content += DER.utf8String(entry.topic)
            content += DER.sequence(entry.types.flatMap(DER.utf8String))
        }
        return DER.sequence(content)
    }
}

/// The handful of DER encodings the topic extension needs.
enum DER {
    static func length(_ count: Int) -> [UInt8] {
        if count < 0x80 { return [UInt8(count)] }
        var bytes: [UInt8] = []
        var remaining = count
        while remaining > 0 {
            bytes.insert(UInt8(remaining & 0xFF), at: 0)
            remaining >>= 8
        }
        return [0x80 | UInt8(bytes.count)] + bytes
    }

    static func utf8String(_ text: String) -> [UInt8] {
        let bytes = Array(text.utf8)
        return [0x0C] + length(bytes.count) + bytes
    }

    static func sequence(_ content: [UInt8]) -> [UInt8] {
        [0x30] + length(content.count) + content
    }

    static let null: [UInt8] = [0x05, 0x00]
}

/// Apple's object identifiers for provider certificates.
enum AppleOID {
    static let topics = "1.2.840.113635.100.6.3.6"
    static let development = "1.2.840.113635.100.6.3.1"
    static let production = "1.2.840.113635.100.6.3.2"
}

/// Issues certificates with OpenSSL's X509 API (no shelling out to the openssl command).
enum CertificateIssuer {
    /// Issues a certificate for `key`, signed by `issuer` (or self-signed when `issuer` is nil).
    static func issue(
        _ request: CertificateRequest, key: ECKey, issuer: (certificate: Certificate, key: ECKey)?
    ) throws -> Certificate {
        OpenSSLError.clearQueue()
        guard let x509 = X509_new() else { throw OpenSSLError.drain("creating a certificate") }
        let certificate = Certificate(owning: x509)
        guard X509_set_version(x509, 2) == 1 else { throw OpenSSLError.drain("setting the version") }

        // 128 random bits, top bit clear so the serial stays positive.
        guard let serial = BN_new() else { throw OpenSSLError.drain("creating a serial") }
        defer { BN_free(serial) }
        guard BN_rand(serial, 127, -1, 0) == 1,
              BN_to_ASN1_INTEGER(serial, X509_get_serialNumber(x509)) != nil
        else { throw OpenSSLError.drain("setting the serial number") }

        let start = request.validFromDays * 86_400 - 3600
        guard X509_gmtime_adj(X509_getm_notBefore(x509), start) != nil,
              X509_gmtime_adj(X509_getm_notAfter(x509), start + 3600 + request.validDays * 86_400) != nil
        else { throw OpenSSLError.drain("setting the validity") }
        guard X509_set_pubkey(x509, key.pointer) == 1 else { throw OpenSSLError.drain("setting the public key") }

        let name = X509_get_subject_name(x509)
        for (field, value) in request.subject {
            guard X509_NAME_add_entry_by_txt(name, field, MBSTRING_UTF8, value, -1, -1, 0) == 1 else {
                throw OpenSSLError.drain("setting subject \(field)")
            }
        }
        let issuerName = issuer.map { X509_get_subject_name($0.certificate.pointer) } ?? name
        guard X509_set_issuer_name(x509, issuerName) == 1 else { throw OpenSSLError.drain("setting the issuer") }

        var context = X509V3_CTX()
        X509V3_set_ctx(&context, issuer?.certificate.pointer ?? x509, x509, nil, nil, 0)
        func add(_ nid: Int32, _ value: String) throws {
            guard let ext = X509V3_EXT_conf_nid(nil, &context, nid, value) else {
                throw OpenSSLError.drain("adding extension \(value)")
            }
            defer { X509_EXTENSION_free(ext) }
            guard X509_add_ext(x509, ext, -1) == 1 else { throw OpenSSLError.drain("adding extension \(value)") }
        }
        func addRaw(_ oid: String, _ der: [UInt8]) throws {
            guard let object = OBJ_txt2obj(oid, 1) else { throw OpenSSLError.drain("parsing OID \(oid)") }
            defer { ASN1_OBJECT_free(object) }
            guard let octets = ASN1_OCTET_STRING_new() else { throw OpenSSLError.drain("creating \(oid)") }
            defer { ASN1_OCTET_STRING_free(octets) }
            guard ASN1_OCTET_STRING_set(octets, der, Int32(der.count)) == 1,
                  let ext = X509_EXTENSION_create_by_OBJ(nil, object, 0, octets)
            else { throw OpenSSLError.drain("creating extension \(oid)") }
            defer { X509_EXTENSION_free(ext) }
            guard X509_add_ext(x509, ext, -1) == 1 else { throw OpenSSLError.drain("adding extension \(oid)") }
        }

        try add(NID_subject_key_identifier, "hash")
        if issuer != nil {
            try add(NID_authority_key_identifier, "keyid:always")
        }
        switch request.kind {
        case .certificateAuthority(let pathLength):
            try add(NID_basic_constraints, "critical,CA:TRUE,pathlen:\(pathLength)")
            try add(NID_key_usage, "critical,keyCertSign,cRLSign")
        case .server(let dnsNames, let ipAddresses):
            try add(NID_basic_constraints, "critical,CA:FALSE")
            try add(NID_key_usage, "critical,digitalSignature,keyEncipherment")
            try add(NID_ext_key_usage, "serverAuth")
            let names = dnsNames.map { "DNS:\($0)" } + ipAddresses.map { "IP:\($0)" }
            try add(NID_subject_alt_name, names.joined(separator: ","))
        case .apnsClient(let topics, let development, let production):
            try add(NID_basic_constraints, "critical,CA:FALSE")
            try add(NID_key_usage, "critical,digitalSignature")
            try add(NID_ext_key_usage, "clientAuth")
            if development { try addRaw(AppleOID.development, DER.null) }
            if production { try addRaw(AppleOID.production, DER.null) }
            try addRaw(AppleOID.topics, topics.der)
        }

        let signingKey = issuer?.key ?? key
        guard X509_sign(x509, signingKey.pointer, EVP_sha256()) > 0 else {
            throw OpenSSLError.drain("signing the certificate")
        }
        return certificate
    }
}

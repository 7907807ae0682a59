internal import COpenSSL
internal import CAPNSMockShims
import Foundation

/// Owner of an OpenSSL key (`EVP_PKEY*`): a P-256 key for certificates and ES256 tokens.
final class ECKey {
    let pointer: OpaquePointer

    private init(owning pointer: OpaquePointer) {
        self.pointer = pointer
    }

    deinit {
        EVP_PKEY_free(pointer)
    }

    static func generateP256() throws -> ECKey {
        OpenSSLError.clearQueue()
        guard let key = CAPNSMockShims_EC_P256_generate() else {
            throw OpenSSLError.drain("generating a P-256 key")
        }
        return ECKey(owning: key)
    }

    /// Reads a private key (PKCS#8 `.p8`, or traditional PEM) from PEM text.
    static func privateKey(pem: String) throws -> ECKey {
        try withMemoryBIO(pem) { bio in
            PEM_read_bio_PrivateKey(bio, nil, nil, nil)
        }
    }

    /// Reads a public key (`BEGIN PUBLIC KEY`), or the public half of a private key, from PEM.
    static func publicKey(pem: String) throws -> ECKey {
        if pem.contains("PRIVATE KEY") {
            return try privateKey(pem: pem)
        }
        return try withMemoryBIO(pem) { bio in
            PEM_read_bio_PUBKEY(bio, nil, nil, nil)
        }
    }

    private static func withMemoryBIO(
        _ text: String, _ read: (OpaquePointer) -> OpaquePointer?
    ) throws -> ECKey {
        OpenSSLError.clearQueue()
        let bytes = Array(text.utf8)
        guard let bio = BIO_new_mem_buf(bytes, Int32(bytes.count)) else {
            throw OpenSSLError.drain("reading a PEM key")
        }
        defer { BIO_free(bio) }
        guard let key = read(bio) else {
            throw OpenSSLError.drain("reading a PEM key")
        }
        return ECKey(owning: key)
    }

    /// The private key as PKCS#8 PEM (`BEGIN PRIVATE KEY`), the format of Apple's `.p8` files.
    func privateKeyPEM() throws -> String {
        try PEMWriter.write("writing a private key") { bio in
            PEM_write_bio_PrivateKey(bio, pointer, nil, nil, 0, nil, nil)
        }
    }

    /// The public key as PEM (`BEGIN PUBLIC KEY`).
    func publicKeyPEM() throws -> String {
        try PEMWriter.write("writing a public key") { bio in
            PEM_write_bio_PUBKEY(bio, pointer)
        }
    }
}

/// Collects PEM output from OpenSSL into a Swift string through a memory BIO.
enum PEMWriter {
    static func write(_ operation: String, _ body: (OpaquePointer) -> Int32) throws -> String {
        OpenSSLError.clearQueue()
        guard let bio = BIO_new(BIO_s_mem()) else {
            throw OpenSSLError.drain(operation)
        }
        defer { BIO_free(bio) }
        guard body(bio) == 1 else {
            throw OpenSSLError.drain(operation)
        }
        var data: UnsafeMutablePointer<CChar>?
        let count = CAPNSMockShims_BIO_get_mem_data(bio, &data)
        guard let data, count > 0 else {
            throw OpenSSLError.drain(operation)
        }
        return String(decoding: UnsafeRawBufferPointer(start: data, count: count), as: UTF8.self)
    }
}

// An ECKey never changes after creation, and OpenSSL 3 allows concurrent use of one EVP_PKEY for
// verification (each call builds its own EVP_MD_CTX), so the loaded token keys are shared by
// every event loop.
extension ECKey: @unchecked Sendable {}

extension ECKey {
    /// Whether this is a key on the P-256 curve, the only one ES256 uses.
    var isP256: Bool {
        guard EVP_PKEY_get_base_id(pointer) == EVP_PKEY_EC, EVP_PKEY_get_bits(pointer) == 256 else { return false }
        var name = [CChar](repeating: 0, count: 64)
        var length = 0
        guard EVP_PKEY_get_group_name(pointer, &name, name.count, &length) == 1 else { return false }
        let group = String(decoding: name.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return group == "prime256v1" || group == "P-256"
    }
}

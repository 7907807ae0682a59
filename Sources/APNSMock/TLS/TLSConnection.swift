internal import COpenSSL
internal import CAPNSMockShims
import NIOCore

/// Owner of one connection's `SSL` object, driven entirely through memory BIOs.
///
/// The network never touches OpenSSL directly: ciphertext from the socket goes in with
/// ``receive(_:)``, plaintext comes out of ``read(_:)`` (lent to a closure), plaintext goes in with
/// ``append(_:)`` (coalesced into records, encrypted by ``flush()``), and ciphertext for the socket
/// comes out of ``drainCiphertext(into:)``. This keeps TLS sans-I/O,
/// so tests can drive a connection without sockets, and lets SwiftNIO own all the I/O.
final class TLSConnection {
    enum HandshakeResult {
        case complete
        case needsMoreData
        case failed(OpenSSLError)
    }

    enum ReadResult {
        case bytes(Int)
        case needsMoreData
        /// The peer sent close_notify.
        case closed
        case failed(OpenSSLError)
    }

    private let ssl: OpaquePointer
    /// Network → SSL. Owned by `ssl` after `SSL_set_bio`.
    private let networkIn: OpaquePointer
    /// SSL → network. Owned by `ssl` after `SSL_set_bio`.
    private let networkOut: OpaquePointer
    private(set) var isHandshakeComplete = false

    /// Plaintext from `SSL_read` on its way to the caller, and plaintext from the caller coalesced
    /// here so that many small HTTP/2 frames become few TLS records (one `SSL_write` per 16 KiB).
    private let plaintextIn: UnsafeMutableRawBufferPointer
    private let plaintextOut: UnsafeMutableRawBufferPointer
    @exclusivity(unchecked) private var plaintextOutCount = 0
    /// The largest TLS record's plaintext.
    static let recordSize = 16 * 1024

    init(context: TLSContext) throws {
        OpenSSLError.clearQueue()
        guard let ssl = SSL_new(context.pointer) else {
            throw OpenSSLError.drain("creating a TLS connection")
        }
        guard let networkIn = BIO_new(BIO_s_mem()), let networkOut = BIO_new(BIO_s_mem()) else {
            SSL_free(ssl)
            throw OpenSSLError.drain("creating memory BIOs")
        }
        // An empty input BIO must read as "retry later", not as end of file.
        _ = CAPNSMockShims_BIO_set_mem_eof_return(networkIn, -1)
        SSL_set_bio(ssl, networkIn, networkOut)
        SSL_set_accept_state(ssl)
        self.ssl = ssl
        self.networkIn = networkIn
        self.networkOut = networkOut
        plaintextIn = .allocate(byteCount: Self.recordSize, alignment: 16)
        plaintextOut = .allocate(byteCount: Self.recordSize, alignment: 16)
    }

    deinit {
        SSL_free(ssl)
        plaintextIn.deallocate()
        plaintextOut.deallocate()
    }

    /// Hands ciphertext received from the peer to OpenSSL.
    func receive(_ buffer: ByteBuffer) {
        buffer.withUnsafeReadableBytes { bytes in
            guard let base = bytes.baseAddress, bytes.count > 0 else { return }
            // A memory BIO grows as needed and accepts every byte.
            _ = BIO_write(networkIn, base, Int32(bytes.count))
        }
    }

    func handshake() -> HandshakeResult {
        OpenSSLError.clearQueue()
        let rc = SSL_do_handshake(ssl)
        if rc == 1 {
            isHandshakeComplete = true
            return .complete
        }
        switch SSL_get_error(ssl, rc) {
        case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE:
            return .needsMoreData
        default:
            return .failed(OpenSSLError.drain("TLS handshake"))
        }
    }

    /// Decrypts the next run of application data (at most a record) and hands it to `body`, valid
    /// only during the call. `.bytes` says how many; call again until it says otherwise.
    func read(_ body: (UnsafeRawBufferPointer) -> Void) -> ReadResult {
        OpenSSLError.clearQueue()
        let rc = SSL_read(ssl, plaintextIn.baseAddress, Int32(plaintextIn.count))
        if rc > 0 {
            body(UnsafeRawBufferPointer(rebasing: plaintextIn[..<Int(rc)]))
            return .bytes(Int(rc))
        }
        switch SSL_get_error(ssl, rc) {
        case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE:
            return .needsMoreData
        case SSL_ERROR_ZERO_RETURN:
            return .closed
        default:
            return .failed(OpenSSLError.drain("TLS read"))
        }
    }

    /// Queues plaintext for encryption, coalescing it with what is already queued; a full record
    /// is encrypted at once. Returns false when encrypting failed (the connection is broken).
    func append(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var chunk = bytes
        while !chunk.isEmpty {
            let room = plaintextOut.count - plaintextOutCount
            if room == 0 {
                guard flush() else { return false }
                continue
            }
            let count = min(room, chunk.count)
            (plaintextOut.baseAddress! + plaintextOutCount).copyMemory(from: chunk.baseAddress!, byteCount: count)
            plaintextOutCount += count
            chunk = UnsafeRawBufferPointer(rebasing: chunk[count...])
        }
        return true
    }

    /// Encrypts whatever plaintext is queued. Returns false when encrypting failed.
    func flush() -> Bool {
        guard plaintextOutCount > 0 else { return true }
        let written = write(UnsafeRawBufferPointer(rebasing: plaintextOut[..<plaintextOutCount]))
        plaintextOutCount = 0
        return written
    }

    /// Encrypts `bytes`. The output BIO is memory, so the whole write always succeeds unless the
    /// connection is already broken.
    private func write(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return true }
        OpenSSLError.clearQueue()
        var offset = 0
        while offset < bytes.count {
            let rc = SSL_write(ssl, base + offset, Int32(bytes.count - offset))
            guard rc > 0 else {
                OpenSSLError.clearQueue()
                return false
            }
            offset += Int(rc)
        }
        return true
    }

    /// Queues a close_notify alert.
    func shutdown() {
        OpenSSLError.clearQueue()
        _ = SSL_shutdown(ssl)
        OpenSSLError.clearQueue()
    }

    var pendingCiphertextCount: Int {
        Int(CAPNSMockShims_BIO_pending(networkOut))
    }

    /// Moves every byte of pending ciphertext into `buffer`.
    func drainCiphertext(into buffer: inout ByteBuffer) {
        let pending = pendingCiphertextCount
        guard pending > 0 else { return }
        let out = networkOut
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: pending) { pointer in
            let rc = BIO_read(out, pointer.baseAddress, Int32(pointer.count))
            return rc > 0 ? Int(rc) : 0
        }
    }

    /// The protocol the client selected through ALPN; `nil` when it offered none.
    var negotiatedALPN: String? {
        var data: UnsafePointer<UInt8>?
        var length: UInt32 = 0
        SSL_get0_alpn_selected(ssl, &data, &length)
        guard let data, length > 0 else { return nil }
        return String(decoding: UnsafeBufferPointer(start: data, count: Int(length)), as: UTF8.self)
    }

    /// The host name the client sent through SNI, if any.
    var serverName: String? {
        guard let name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name) else { return nil }
        return String(cString: name)
    }

    var protocolVersion: String {
        String(cString: SSL_get_version(ssl))
    }

    /// The client's certificate, when it presented one, with OpenSSL's verdict on its chain.
    var peerCertificate: PeerCertificate? {
        guard let certificate = SSL_get1_peer_certificate(ssl) else { return nil }
        let result = SSL_get_verify_result(ssl)
        return PeerCertificate(owning: certificate, verifyResult: Int(result))
    }
}

/// Owner of a client certificate (`X509*`) kept from the handshake for certificate auth.
final class PeerCertificate {
    let pointer: OpaquePointer
    /// `X509_V_OK` (0) when the chain verified against the configured client CA.
    let verifyResult: Int

    init(owning pointer: OpaquePointer, verifyResult: Int) {
        self.pointer = pointer
        self.verifyResult = verifyResult
    }

    deinit {
        X509_free(pointer)
    }

    var isTrusted: Bool { verifyResult == Int(X509_V_OK) }

    /// OpenSSL's explanation of ``verifyResult``.
    var verifyResultDescription: String {
        String(cString: X509_verify_cert_error_string(verifyResult))
    }
}

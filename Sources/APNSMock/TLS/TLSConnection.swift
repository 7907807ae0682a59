internal import COpenSSL
internal import CAPNSMockShims
import NIOCore

/// Owner of one connection's `SSL` object, driven entirely through an in-memory transport BIO.
///
/// The network never touches OpenSSL directly: ciphertext from the socket is lent to OpenSSL by
/// ``receiving(_:_:)`` while the handshake and ``read(_:)`` (plaintext lent to a closure) run,
/// plaintext goes in with ``append(_:)`` (coalesced into records, encrypted by ``flush()``), and
/// ciphertext for the socket comes out of ``drainCiphertext(into:)``. This keeps TLS sans-I/O,
/// so tests can drive a connection without sockets, and lets SwiftNIO own all the I/O. The BIO
/// (`CAPNSMockTransport`, in the C shim) copies ciphertext once each way, where a pair of memory
/// BIOs copied it twice and zeroed a buffer on every write.
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
    /// Network ⇄ SSL, both directions. Owned by `ssl` after `SSL_set_bio`.
    private let transport: OpaquePointer
    private(set) var isHandshakeComplete = false

    /// Plaintext from `SSL_read` on its way to the caller, and plaintext from the caller coalesced
    /// here so that many small HTTP/2 frames become few TLS records (one `SSL_write` per 16 KiB).
    /// Allocated on first use and given back by ``releaseBuffers()`` while the connection is quiet.
    // Unchecked: only the connection's event loop touches them, in the copy loop of every read and write.
    @exclusivity(unchecked) private var plaintextIn: UnsafeMutableRawBufferPointer?
    @exclusivity(unchecked) private var plaintextOut: UnsafeMutableRawBufferPointer?
    @exclusivity(unchecked) private var plaintextOutCount = 0
    /// The largest TLS record's plaintext.
    static let recordSize = 16 * 1024

    init(context: TLSContext) throws {
        OpenSSLError.clearQueue()
        guard let ssl = SSL_new(context.pointer) else {
            throw OpenSSLError.drain("creating a TLS connection")
        }
        guard let transport = CAPNSMockTransport_new() else {
            SSL_free(ssl)
            throw OpenSSLError.drain("creating the transport BIO")
        }
        // One BIO for both directions: SSL_set_bio takes the single reference.
        SSL_set_bio(ssl, transport, transport)
        SSL_set_accept_state(ssl)
        self.ssl = ssl
        self.transport = transport
    }

    deinit {
        SSL_free(ssl)
        plaintextIn?.deallocate()
        plaintextOut?.deallocate()
    }

    /// Whether the plaintext buffers are allocated (they are taken with OpenSSL's on the first read
    /// or write after ``releaseBuffers()``).
    var holdsBuffers: Bool { plaintextIn != nil || plaintextOut != nil }

    /// Gives back the buffers a quiet connection does not need, which an idle connection would
    /// otherwise hold for as long as it stays open (tens of kB each): OpenSSL's record buffers
    /// (`SSL_free_buffers`, which keeps them while a record is partly read or written), the
    /// transport's empty queues and the plaintext buffers. The next read or write allocates them
    /// again. Call it between bursts, not after every record: `SSL_MODE_RELEASE_BUFFERS` does the
    /// latter, and slows a busy connection down.
    /// Returns whether they were given back (not during the handshake or while a write is under way).
    func releaseBuffers() -> Bool {
        guard isHandshakeComplete, plaintextOutCount == 0 else { return false }
        _ = SSL_free_buffers(ssl)
        CAPNSMockTransport_releaseBuffers(transport)
        plaintextIn?.deallocate()
        plaintextIn = nil
        plaintextOut?.deallocate()
        plaintextOut = nil
        return true
    }

    private static func allocateRecordBuffer() -> UnsafeMutableRawBufferPointer {
        .allocate(byteCount: recordSize, alignment: 16)
    }

    /// Lends ciphertext received from the peer to OpenSSL while `body` runs: ``handshake()`` and
    /// ``read(_:)`` called inside it read from `buffer` directly. Bytes OpenSSL has not read when
    /// `body` returns are copied and read first next time. Returns false when there was no memory
    /// to keep them (the connection cannot go on).
    func receiving(_ buffer: ByteBuffer, _ body: () -> Void) -> Bool {
        buffer.withUnsafeReadableBytes { bytes in
            CAPNSMockTransport_lend(transport, bytes.baseAddress, bytes.count)
            body()
            return CAPNSMockTransport_endLoan(transport) == 1
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
        let plaintextIn = self.plaintextIn ?? Self.allocateRecordBuffer()
        self.plaintextIn = plaintextIn
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
        let plaintextOut = self.plaintextOut ?? Self.allocateRecordBuffer()
        self.plaintextOut = plaintextOut
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
        guard plaintextOutCount > 0, let plaintextOut else { return true }
        let written = write(UnsafeRawBufferPointer(rebasing: plaintextOut[..<plaintextOutCount]))
        plaintextOutCount = 0
        return written
    }

    /// Encrypts `bytes`. The transport gathers all output in memory, so the whole write always
    /// succeeds unless the connection is already broken.
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

    /// Moves every byte of pending ciphertext into `buffer`.
    func drainCiphertext(into buffer: inout ByteBuffer) {
        var bytes: UnsafeRawPointer?
        let pending = CAPNSMockTransport_output(transport, &bytes)
        guard pending > 0, let bytes else { return }
        buffer.writeBytes(UnsafeRawBufferPointer(start: bytes, count: pending))
        CAPNSMockTransport_consumeOutput(transport, pending)
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

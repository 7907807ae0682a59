internal import COpenSSL
internal import CAPNSMockShims

/// Owner of the one `SSL_CTX` every APNs connection is created from.
///
/// Configured once in `init` (certificate, key, client CA, TLS 1.2+, ALPN h2, client certificate
/// requested but not required) and never changed afterwards. OpenSSL documents `SSL_new` on a
/// shared, fully configured `SSL_CTX` as thread-safe (its session cache and reference counts are
/// locked internally), which is why this immutable owner can be shared across event loops.
final class TLSContext: @unchecked Sendable {
    let pointer: OpaquePointer

    /// - Parameters:
    ///   - certificateChainPath: PEM with the server certificate first, then any intermediates.
    ///   - privateKeyPath: PEM private key of the server certificate.
    ///   - clientCAPath: PEM of the CA(s) that client certificates are verified against; their
    ///     names are sent in the CertificateRequest. `nil` still requests a certificate.
    init(certificateChainPath: String, privateKeyPath: String, clientCAPath: String?) throws {
        OpenSSLError.clearQueue()
        guard let ctx = SSL_CTX_new(TLS_server_method()) else {
            throw OpenSSLError.drain("creating the TLS context")
        }
        pointer = ctx
        guard CAPNSMockShims_SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) == 1 else {
            throw OpenSSLError.drain("requiring TLS 1.2 or newer")
        }
        guard SSL_CTX_use_certificate_chain_file(ctx, certificateChainPath) == 1 else {
            throw OpenSSLError.drain("loading the server certificate \(certificateChainPath)")
        }
        guard SSL_CTX_use_PrivateKey_file(ctx, privateKeyPath, SSL_FILETYPE_PEM) == 1 else {
            throw OpenSSLError.drain("loading the server private key \(privateKeyPath)")
        }
        guard SSL_CTX_check_private_key(ctx) == 1 else {
            throw OpenSSLError.drain("matching \(privateKeyPath) to \(certificateChainPath)")
        }
        if let clientCAPath {
            guard SSL_CTX_load_verify_locations(ctx, clientCAPath, nil) == 1 else {
                throw OpenSSLError.drain("loading the client CA \(clientCAPath)")
            }
            if let names = SSL_load_client_CA_file(clientCAPath) {
                SSL_CTX_set_client_CA_list(ctx, names)
            }
        }
        // The chain sent after the certificate is built here once: otherwise OpenSSL builds it from
        // the certificate store (the client CA) in every handshake, verifying its signatures, which
        // was a fifth of a new connection's instructions. The handshake sends the same certificates.
        guard CAPNSMockShims_SSL_CTX_build_chain_once(ctx) == 1 else {
            throw OpenSSLError.drain("building the certificate chain of \(certificateChainPath)")
        }
        // Partial writes let one SSL_write take whatever fits; the transport BIO never refuses, but
        // this keeps the contract explicit. SSL_MODE_RELEASE_BUFFERS is deliberately off: it would
        // save ~34 KiB per idle connection but frees and reallocates the record buffers on every
        // read and write of a busy one, which measurably slows the request path.
        _ = CAPNSMockShims_SSL_CTX_set_mode(
            ctx, Int(SSL_MODE_ENABLE_PARTIAL_WRITE))
        CAPNSMockShims_SSL_CTX_set_server_options(ctx)
        _ = CAPNSMockShims_SSL_CTX_set_session_cache_mode(ctx, Int(SSL_SESS_CACHE_SERVER))
        let sessionContext: [UInt8] = Array("apns-mock".utf8)
        _ = SSL_CTX_set_session_id_context(ctx, sessionContext, UInt32(sessionContext.count))
        CAPNSMockShims_SSL_CTX_install_alpn_h2(ctx)
        CAPNSMockShims_SSL_CTX_request_client_certificate(ctx)
    }

    deinit {
        SSL_CTX_free(pointer)
    }
}

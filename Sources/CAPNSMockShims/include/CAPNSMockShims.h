#ifndef CAPNSMOCKSHIMS_H
#define CAPNSMOCKSHIMS_H

#include <openssl/ssl.h>
#include <openssl/bio.h>
#include <openssl/x509.h>

#include "CAPNSMockPool.h"

/// One-line wrappers for OpenSSL macros Swift cannot import, and the two tiny C callbacks the TLS
/// context installs (ALPN selection and "request, don't require" client-certificate verification).

int CAPNSMockShims_SSL_CTX_set_min_proto_version(SSL_CTX *ctx, int version);
long CAPNSMockShims_SSL_CTX_set_mode(SSL_CTX *ctx, long mode);
long CAPNSMockShims_SSL_CTX_set_session_cache_mode(SSL_CTX *ctx, long mode);
long CAPNSMockShims_BIO_get_mem_data(BIO *bio, char **data);
void CAPNSMockShims_OPENSSL_free(void *ptr);
/// Server options whose constants are built with SSL_OP_BIT, which Swift cannot import:
/// no renegotiation, server cipher preference.
void CAPNSMockShims_SSL_CTX_set_server_options(SSL_CTX *ctx);

/// Builds, once, the certificate chain the handshake sends after the server certificate, when the
/// certificate file held no chain of its own: from the context's certificate store (the client
/// CA), as OpenSSL would otherwise build it in every handshake (a chain verification, an ECDSA
/// verify each time). Verification errors are ignored, as in the handshake: the chain is what could
/// be built. Returns 1, or 0 when it could not be built (nothing changed then).
int CAPNSMockShims_SSL_CTX_build_chain_once(SSL_CTX *ctx);

/// A new P-256 key pair (EVP_EC_gen is a macro over a variadic function).
EVP_PKEY *CAPNSMockShims_EC_P256_generate(void);

/// Installs the ALPN callback: selects "h2" when the client offers it; a client that offers ALPN
/// without "h2" gets the fatal no_application_protocol alert. A client that offers no ALPN never
/// reaches the callback and is served as h2 by the caller.
void CAPNSMockShims_SSL_CTX_install_alpn_h2(SSL_CTX *ctx);

/// Asks for a client certificate without requiring one, and keeps the handshake going whatever
/// the chain verification says; the verification result is read afterwards with
/// SSL_get_verify_result so that the request layer can answer 403 BadCertificate.
void CAPNSMockShims_SSL_CTX_request_client_certificate(SSL_CTX *ctx);

/// A BIO between OpenSSL and SwiftNIO that copies ciphertext once each way. A memory BIO copies
/// received bytes in and out again, and zeroes its buffer on every write; this one lets OpenSSL
/// read straight from the caller's buffer while it is lent, keeps only what OpenSSL left unread
/// when the loan ends, and gathers what OpenSSL writes until the caller drains it. An empty read
/// asks to retry (never end of file). Use one for both directions of an SSL (SSL_set_bio).
BIO *CAPNSMockTransport_new(void);
/// Lends `length` bytes at `bytes` for OpenSSL to read until CAPNSMockTransport_endLoan.
void CAPNSMockTransport_lend(BIO *bio, const void *bytes, size_t length);
/// Ends the loan, copying any unread bytes for later reads; 0 when memory ran out (they are lost).
int CAPNSMockTransport_endLoan(BIO *bio);
/// The ciphertext waiting for the network: sets `*bytes` and returns the count.
size_t CAPNSMockTransport_output(BIO *bio, const void **bytes);
/// Drops the first `count` bytes of the waiting ciphertext (they were sent on).
void CAPNSMockTransport_consumeOutput(BIO *bio, size_t count);
/// Frees the buffer of each direction that holds no bytes (a quiet connection keeps none); the
/// next bytes allocate one again.
void CAPNSMockTransport_releaseBuffers(BIO *bio);

/// Gives free heap pages back to the system (glibc's malloc_trim(0), which Swift's Glibc module
/// does not export); returns 1 when memory was released. Does nothing elsewhere.
int CAPNSMockShims_release_free_memory(void);

/// Asks the CPU to bring the `length` bytes at `address` into cache for writing. A hint only: it
/// never faults, even for an address that is no longer mapped.
static inline void CAPNSMockShims_prefetch_for_write(const void *address, unsigned long length) {
    for (unsigned long offset = 0; offset < length; offset += 64) {
        __builtin_prefetch((const char *)address + offset, 1, 3);
    }
    if (length > 0) __builtin_prefetch((const char *)address + length - 1, 1, 3);
}

#endif

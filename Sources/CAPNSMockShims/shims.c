#include "CAPNSMockShims.h"
#include <string.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <openssl/evp.h>
#include <openssl/ec.h>

int CAPNSMockShims_SSL_CTX_set_min_proto_version(SSL_CTX *ctx, int version) {
    return (int)SSL_CTX_set_min_proto_version(ctx, version);
}

long CAPNSMockShims_SSL_CTX_set_mode(SSL_CTX *ctx, long mode) {
    return SSL_CTX_set_mode(ctx, mode);
}

long CAPNSMockShims_SSL_CTX_set_session_cache_mode(SSL_CTX *ctx, long mode) {
    return SSL_CTX_set_session_cache_mode(ctx, mode);
}

long CAPNSMockShims_BIO_get_mem_data(BIO *bio, char **data) {
    return BIO_get_mem_data(bio, data);
}

void CAPNSMockShims_OPENSSL_free(void *ptr) {
    OPENSSL_free(ptr);
}

void CAPNSMockShims_SSL_CTX_set_server_options(SSL_CTX *ctx) {
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
}

static int capnsmock_alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                                 const unsigned char *in, unsigned int inlen, void *arg) {
    (void)ssl;
    (void)arg;
    unsigned int i = 0;
    while (i < inlen) {
        unsigned int len = in[i];
        if (i + 1 + len > inlen) {
            break;
        }
        if (len == 2 && memcmp(in + i + 1, "h2", 2) == 0) {
            *out = in + i + 1;
            *outlen = 2;
            return SSL_TLSEXT_ERR_OK;
        }
        i += 1 + len;
    }
    return SSL_TLSEXT_ERR_ALERT_FATAL;
}

void CAPNSMockShims_SSL_CTX_install_alpn_h2(SSL_CTX *ctx) {
    SSL_CTX_set_alpn_select_cb(ctx, capnsmock_alpn_select, NULL);
}

static int capnsmock_accept_any_chain(int preverify_ok, X509_STORE_CTX *store) {
    (void)preverify_ok;
    (void)store;
    return 1;
}

void CAPNSMockShims_SSL_CTX_request_client_certificate(SSL_CTX *ctx) {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, capnsmock_accept_any_chain);
}

int CAPNSMockShims_SSL_CTX_build_chain_once(SSL_CTX *ctx) {
    STACK_OF(X509) *chain = NULL;
    STACK_OF(X509) *extra = NULL;
    if (SSL_CTX_get0_chain_certs(ctx, &chain) != 1) return 0;
    SSL_CTX_get_extra_chain_certs_only(ctx, &extra);
    // A chain from the file is sent as it is, and is never built from the store.
    if (sk_X509_num(chain) > 0 || sk_X509_num(extra) > 0) return 1;
    return SSL_CTX_build_cert_chain(ctx, SSL_BUILD_CHAIN_FLAG_IGNORE_ERROR | SSL_BUILD_CHAIN_FLAG_CLEAR_ERROR) > 0;
}

EVP_PKEY *CAPNSMockShims_EC_P256_generate(void) {
    return EVP_EC_gen("P-256");
}

int CAPNSMockShims_release_free_memory(void) {
#if defined(__GLIBC__)
    return malloc_trim(0);
#else
    return 0;
#endif
}

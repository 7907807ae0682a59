#include "CAPNSMockShims.h"
#include <assert.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/// State of one transport BIO: see CAPNSMockTransport in CAPNSMockShims.h.
typedef struct {
    /// Ciphertext lent by the caller for the current receive; not owned.
    const unsigned char *lent;
    size_t lentLength;
    /// Ciphertext OpenSSL left unread when the loan ended, kept for the next read.
    unsigned char *kept;
    size_t keptStart, keptLength, keptCapacity;
    /// Ciphertext written by OpenSSL, waiting to be drained towards the network.
    unsigned char *out;
    size_t outStart, outLength, outCapacity;
} transport_state;

/// Above this, a buffer emptied by a drain is freed rather than kept for the next burst, so an
/// idle connection does not hold a large one.
static const size_t transport_keep_capacity = 64 * 1024;

/// Grows `*buffer` (holding `length` bytes from `*start`) so that `extra` more fit after them,
/// moving the bytes to the front first. Never zeroes: every byte handed out was written.
static int transport_reserve(unsigned char **buffer, size_t *start, size_t length, size_t *capacity, size_t extra) {
    if (*start > 0) {
        if (length > 0) memmove(*buffer, *buffer + *start, length);
        *start = 0;
    }
    if (*capacity - length >= extra) return 1;
    if (extra > SIZE_MAX / 2 - length) return 0;
    size_t wanted = length + extra;
    size_t capacity_new = *capacity < 4096 ? 4096 : *capacity;
    while (capacity_new < wanted) capacity_new *= 2;
    unsigned char *grown = realloc(*buffer, capacity_new);
    if (grown == NULL) return 0;
    *buffer = grown;
    *capacity = capacity_new;
    return 1;
}

static int transport_write(BIO *bio, const char *data, size_t length, size_t *written) {
    transport_state *state = BIO_get_data(bio);
    BIO_clear_retry_flags(bio);
    *written = 0;
    if (length == 0) return 1;
    if (state->outStart + state->outLength + length > state->outCapacity) {
        if (!transport_reserve(&state->out, &state->outStart, state->outLength, &state->outCapacity, length)) return 0;
    }
    memcpy(state->out + state->outStart + state->outLength, data, length);
    state->outLength += length;
    *written = length;
    return 1;
}

static int transport_read(BIO *bio, char *data, size_t size, size_t *read) {
    transport_state *state = BIO_get_data(bio);
    BIO_clear_retry_flags(bio);
    size_t copied = 0;
    if (state->keptLength > 0 && size > 0) {
        size_t count = state->keptLength < size ? state->keptLength : size;
        memcpy(data, state->kept + state->keptStart, count);
        state->keptStart += count;
        state->keptLength -= count;
        if (state->keptLength == 0) state->keptStart = 0;
        copied = count;
    }
    if (state->lentLength > 0 && size > copied) {
        size_t room = size - copied;
        size_t count = state->lentLength < room ? state->lentLength : room;
        memcpy(data + copied, state->lent, count);
        state->lent += count;
        state->lentLength -= count;
        copied += count;
    }
    *read = copied;
    if (copied == 0) {
        // Nothing yet: "retry later", never end of file (the socket's end is told separately).
        BIO_set_retry_read(bio);
        return 0;
    }
    return 1;
}

static long transport_ctrl(BIO *bio, int command, long number, void *pointer) {
    (void)number;
    (void)pointer;
    transport_state *state = BIO_get_data(bio);
    switch (command) {
    case BIO_CTRL_FLUSH:
        return 1;
    case BIO_CTRL_PENDING:
        return (long)(state->keptLength + state->lentLength);
    case BIO_CTRL_WPENDING:
        return (long)state->outLength;
    default:
        return 0;
    }
}

static int transport_create(BIO *bio) {
    transport_state *state = calloc(1, sizeof(transport_state));
    if (state == NULL) return 0;
    BIO_set_data(bio, state);
    BIO_set_init(bio, 1);
    return 1;
}

static int transport_destroy(BIO *bio) {
    transport_state *state = BIO_get_data(bio);
    if (state != NULL) {
        free(state->kept);
        free(state->out);
        free(state);
        BIO_set_data(bio, NULL);
    }
    return 1;
}

static BIO_METHOD *transport_method;
static pthread_once_t transport_method_once = PTHREAD_ONCE_INIT;

static void transport_method_make(void) {
    BIO_METHOD *method = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "apns-mock transport");
    if (method == NULL) return;
    if (!BIO_meth_set_write_ex(method, transport_write) || !BIO_meth_set_read_ex(method, transport_read) ||
        !BIO_meth_set_ctrl(method, transport_ctrl) || !BIO_meth_set_create(method, transport_create) ||
        !BIO_meth_set_destroy(method, transport_destroy)) {
        BIO_meth_free(method);
        return;
    }
    transport_method = method;
}

BIO *CAPNSMockTransport_new(void) {
    pthread_once(&transport_method_once, transport_method_make);
    if (transport_method == NULL) return NULL;
    return BIO_new(transport_method);
}

void CAPNSMockTransport_lend(BIO *bio, const void *bytes, size_t length) {
    transport_state *state = BIO_get_data(bio);
    // One loan at a time: a loan inside another would drop the outer one's unread bytes.
    assert(state->lent == NULL && state->lentLength == 0);
    state->lent = bytes;
    state->lentLength = length;
}

int CAPNSMockTransport_endLoan(BIO *bio) {
    transport_state *state = BIO_get_data(bio);
    int kept = 1;
    if (state->lentLength > 0) {
        if (state->keptStart + state->keptLength + state->lentLength > state->keptCapacity) {
            kept = transport_reserve(&state->kept, &state->keptStart, state->keptLength, &state->keptCapacity, state->lentLength);
        }
        if (kept) {
            memcpy(state->kept + state->keptStart + state->keptLength, state->lent, state->lentLength);
            state->keptLength += state->lentLength;
        }
    }
    state->lent = NULL;
    state->lentLength = 0;
    if (state->keptLength == 0 && state->keptCapacity > transport_keep_capacity) {
        free(state->kept);
        state->kept = NULL;
        state->keptStart = 0;
        state->keptCapacity = 0;
    }
    return kept;
}

size_t CAPNSMockTransport_output(BIO *bio, const void **bytes) {
    transport_state *state = BIO_get_data(bio);
    // Nothing written yet (or a large buffer freed): no buffer, and no offset into one.
    *bytes = state->out != NULL ? state->out + state->outStart : NULL;
    return state->outLength;
}

void CAPNSMockTransport_consumeOutput(BIO *bio, size_t count) {
    transport_state *state = BIO_get_data(bio);
    if (count > state->outLength) count = state->outLength;
    state->outStart += count;
    state->outLength -= count;
    if (state->outLength == 0) {
        state->outStart = 0;
        if (state->outCapacity > transport_keep_capacity) {
            free(state->out);
            state->out = NULL;
            state->outCapacity = 0;
        }
    }
}

#include "CAPNSMockShims.h"
#include <assert.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/// Bytes waiting in order: `length` bytes from `bytes + start`, in a buffer of `capacity`.
typedef struct {
    unsigned char *bytes;
    size_t start, length, capacity;
} byte_queue;

/// State of one transport BIO: see CAPNSMockTransport in CAPNSMockShims.h.
typedef struct {
    /// Ciphertext lent by the caller for the current receive; not owned.
    const unsigned char *lent;
    size_t lentLength;
    /// Ciphertext OpenSSL left unread when the loan ended, kept for the next read.
    byte_queue kept;
    /// Ciphertext written by OpenSSL, waiting to be drained towards the network.
    byte_queue out;
} transport_state;

/// Above this, a queue emptied is freed rather than kept for the next burst, so an idle
/// connection does not hold a large buffer.
static const size_t byte_queue_keep_capacity = 64 * 1024;

/// Appends `count` bytes, growing the buffer (bytes moved to its front first) when they do not
/// fit after the queued ones. Never zeroes: every byte handed out was written. 0 when memory ran
/// out (nothing appended).
static int byte_queue_append(byte_queue *queue, const void *data, size_t count) {
    if (count == 0) return 1;
    if (queue->start + queue->length + count > queue->capacity) {
        if (queue->start > 0) {
            if (queue->length > 0) memmove(queue->bytes, queue->bytes + queue->start, queue->length);
            queue->start = 0;
        }
        if (queue->capacity - queue->length < count) {
            if (count > SIZE_MAX / 2 - queue->length) return 0;
            size_t wanted = queue->length + count;
            size_t capacity = queue->capacity < 4096 ? 4096 : queue->capacity;
            while (capacity < wanted) capacity *= 2;
            unsigned char *grown = realloc(queue->bytes, capacity);
            if (grown == NULL) return 0;
            queue->bytes = grown;
            queue->capacity = capacity;
        }
    }
    memcpy(queue->bytes + queue->start + queue->length, data, count);
    queue->length += count;
    return 1;
}

/// Drops the first `count` bytes (at most all of them); an emptied queue starts again at the
/// front, and gives a large buffer back.
static void byte_queue_consume(byte_queue *queue, size_t count) {
    if (count > queue->length) count = queue->length;
    queue->start += count;
    queue->length -= count;
    if (queue->length > 0) return;
    queue->start = 0;
    if (queue->capacity > byte_queue_keep_capacity) {
        free(queue->bytes);
        queue->bytes = NULL;
        queue->capacity = 0;
    }
}

static int transport_write(BIO *bio, const char *data, size_t length, size_t *written) {
    transport_state *state = BIO_get_data(bio);
    BIO_clear_retry_flags(bio);
    *written = 0;
    if (!byte_queue_append(&state->out, data, length)) return 0;
    *written = length;
    return 1;
}

static int transport_read(BIO *bio, char *data, size_t size, size_t *read) {
    transport_state *state = BIO_get_data(bio);
    BIO_clear_retry_flags(bio);
    size_t copied = 0;
    if (state->kept.length > 0 && size > 0) {
        copied = state->kept.length < size ? state->kept.length : size;
        memcpy(data, state->kept.bytes + state->kept.start, copied);
        byte_queue_consume(&state->kept, copied);
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
        return (long)(state->kept.length + state->lentLength);
    case BIO_CTRL_WPENDING:
        return (long)state->out.length;
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
        free(state->kept.bytes);
        free(state->out.bytes);
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
    int kept = byte_queue_append(&state->kept, state->lent, state->lentLength);
    state->lent = NULL;
    state->lentLength = 0;
    return kept;
}

size_t CAPNSMockTransport_output(BIO *bio, const void **bytes) {
    transport_state *state = BIO_get_data(bio);
    // Nothing written yet (or a large buffer given back): no buffer, and no offset into one.
    *bytes = state->out.bytes != NULL ? state->out.bytes + state->out.start : NULL;
    return state->out.length;
}

void CAPNSMockTransport_releaseBuffers(BIO *bio) {
    transport_state *state = BIO_get_data(bio);
    byte_queue *queues[] = {&state->kept, &state->out};
    for (size_t i = 0; i < sizeof queues / sizeof queues[0]; i++) {
        if (queues[i]->length > 0) continue;
        free(queues[i]->bytes);
        queues[i]->bytes = NULL;
        queues[i]->start = 0;
        queues[i]->capacity = 0;
    }
}

void CAPNSMockTransport_consumeOutput(BIO *bio, size_t count) {
    transport_state *state = BIO_get_data(bio);
    byte_queue_consume(&state->out, count);
}

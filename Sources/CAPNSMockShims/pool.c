#include "CAPNSMockPool.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* Size classes 32 B .. 4 KiB (powers of two, payload bytes). Every block starts with a 16-byte
 * header holding its class (or, for large blocks, LARGE or MAPPED and the payload size), which keeps
 * payloads 16-byte aligned as malloc's are. */
enum { CLASSES = 8, MIN_SHIFT = 5, LARGE = 0xff, MAPPED = 0xfe, HEADER = 16 };
/* Blocks of this many payload bytes or more are mapped on their own, not taken from malloc: the
 * one nghttp2 allocates per session for framing output (16 KiB and a frame header) is mostly never
 * written by a session that sends small frames, and pages of a mapping that are never written
 * cost no memory. From malloc it would usually reuse memory another allocation had written (the
 * handshake's, freed just before the session starts), all of it resident: 12 kB more per idle
 * connection. One mmap and munmap per session; such blocks come only once per session. */
enum { MAPPED_MIN = 16 * 1024 };
/* Free blocks kept per pool, in payload bytes: enough for a few hundred concurrent streams'
 * worth of nghttp2 objects; what a larger burst frees beyond it goes back to malloc. */
enum { FREE_BYTES_LIMIT = 256 * 1024 };

typedef union block_header {
    struct {
        uint32_t size_class;
        uint32_t reserved;
        size_t size; /* payload size of a LARGE or MAPPED block */
    } info;
    union block_header *next; /* while on a free list */
    unsigned char bytes[16];
} block_header;

struct CAPNSMockPool {
    nghttp2_mem mem;
    block_header *free_lists[CLASSES];
    size_t free_bytes;
};

_Static_assert(sizeof(block_header) <= HEADER, "block header must fit in 16 bytes");

static size_t class_size(unsigned c) { return (size_t)1 << (c + MIN_SHIFT); }

static int class_for(size_t size) {
    if (size <= class_size(0)) return 0;
    if (size > class_size(CLASSES - 1)) return -1;
    /* The smallest power of two >= size, as a shift, less MIN_SHIFT. */
    return (int)(sizeof(unsigned long) * 8 - (unsigned)__builtin_clzl((unsigned long)(size - 1))) - MIN_SHIFT;
}

static void *pool_malloc(size_t size, void *user) {
    CAPNSMockPool *pool = user;
    int c = class_for(size);
    block_header *block;
    if (c < 0) {
        if (size > SIZE_MAX - HEADER) return NULL;
        if (size >= MAPPED_MIN) {
            void *mapped = mmap(NULL, HEADER + size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (mapped == MAP_FAILED) return NULL;
            block = mapped;
            block->info.size_class = MAPPED;
        } else {
            block = malloc(HEADER + size);
            if (block == NULL) return NULL;
            block->info.size_class = LARGE;
        }
        block->info.size = size;
    } else if (pool->free_lists[c] != NULL) {
        block = pool->free_lists[c];
        pool->free_lists[c] = block->next;
        /* The next allocation of this class pops the new head and reads its link: fetch that
         * line now, while the caller works (a free list's blocks are rarely still in cache). */
        if (block->next != NULL) __builtin_prefetch(block->next, 1);
        pool->free_bytes -= class_size((unsigned)c);
        block->info.size_class = (uint32_t)c;
    } else {
        block = malloc(HEADER + class_size((unsigned)c));
        if (block == NULL) return NULL;
        block->info.size_class = (uint32_t)c;
    }
    return (char *)block + HEADER;
}

static void pool_free(void *ptr, void *user) {
    if (ptr == NULL) return;
    CAPNSMockPool *pool = user;
    block_header *block = (block_header *)((char *)ptr - HEADER);
    uint32_t c = block->info.size_class;
    if (c == MAPPED) {
        munmap(block, HEADER + block->info.size);
        return;
    }
    if (c == LARGE || pool->free_bytes + class_size(c) > FREE_BYTES_LIMIT) {
        free(block);
        return;
    }
    block->next = pool->free_lists[c];
    pool->free_lists[c] = block;
    pool->free_bytes += class_size(c);
}

static void *pool_calloc(size_t count, size_t size, void *user) {
    if (size != 0 && count > SIZE_MAX / size) return NULL;
    void *ptr = pool_malloc(count * size, user);
    /* A new mapping is zero already: writing its zeros would make every page resident. */
    if (ptr != NULL && ((block_header *)((char *)ptr - HEADER))->info.size_class != MAPPED) memset(ptr, 0, count * size);
    return ptr;
}

static void *pool_realloc(void *ptr, size_t size, void *user) {
    if (ptr == NULL) return pool_malloc(size, user);
    if (size == 0) {
        pool_free(ptr, user);
        return NULL;
    }
    block_header *block = (block_header *)((char *)ptr - HEADER);
    int sized = block->info.size_class == LARGE || block->info.size_class == MAPPED;
    size_t old_size = sized ? block->info.size : class_size(block->info.size_class);
    if (!sized && size <= old_size) return ptr;
    void *moved = pool_malloc(size, user);
    if (moved == NULL) return NULL;
    memcpy(moved, ptr, old_size < size ? old_size : size);
    pool_free(ptr, user);
    return moved;
}

CAPNSMockPool *CAPNSMockPool_create(void) {
    CAPNSMockPool *pool = calloc(1, sizeof(CAPNSMockPool));
    if (pool == NULL) return NULL;
    pool->mem.mem_user_data = pool;
    pool->mem.malloc = pool_malloc;
    pool->mem.free = pool_free;
    pool->mem.calloc = pool_calloc;
    pool->mem.realloc = pool_realloc;
    return pool;
}

void CAPNSMockPool_destroy(CAPNSMockPool *pool) {
    if (pool == NULL) return;
    for (unsigned c = 0; c < CLASSES; c++) {
        block_header *block = pool->free_lists[c];
        while (block != NULL) {
            block_header *next = block->next;
            free(block);
            block = next;
        }
    }
    free(pool);
}

nghttp2_mem *CAPNSMockPool_mem(CAPNSMockPool *pool) { return &pool->mem; }


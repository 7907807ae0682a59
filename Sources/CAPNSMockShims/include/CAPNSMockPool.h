#ifndef CAPNSMOCKPOOL_H
#define CAPNSMOCKPOOL_H

#include <nghttp2/nghttp2.h>

/// A memory pool for one nghttp2 session: free lists by size class, so that the objects nghttp2
/// allocates and frees for every request (stream, outbound item, header buffers) are recycled
/// instead of going through malloc. Not thread-safe: a session, and so its pool, is used from one
/// event loop at a time. The free blocks kept are bounded in bytes, so a burst does not
/// pin memory; allocations above the largest class go to malloc, and those of 16 KiB or more
/// (nghttp2's framing buffer) to a mapping of their own, whose pages cost memory only once written.
typedef struct CAPNSMockPool CAPNSMockPool;

CAPNSMockPool *CAPNSMockPool_create(void);
/// Frees the pool and its free blocks. Every block handed out must have been freed (destroy the
/// nghttp2 session first).
void CAPNSMockPool_destroy(CAPNSMockPool *pool);
/// The allocator to pass to nghttp2_session_server_new3; valid as long as the pool.
nghttp2_mem *CAPNSMockPool_mem(CAPNSMockPool *pool);

#endif

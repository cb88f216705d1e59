/* threadpool.h — splitting work over the library's thread pool. */
#ifndef OPF_CORE_THREADPOOL_H
#define OPF_CORE_THREADPOOL_H

#include <stdint.h>

/* Runs fn(ctx, begin, end) over chunks covering [0, n). Chunks are at least
 * `grain` long (except the last) and begin at multiples of `grain`, so the
 * split depends only on n, grain and the thread count. The caller runs chunks
 * too. Calls made while the pool is busy (from another thread, or nested from
 * inside a chunk) run serially in the calling thread: never a deadlock. */
typedef void (*opf_range_fn)(void *ctx, int64_t begin, int64_t end);
void opf_parallel_for(int64_t n, int64_t grain, opf_range_fn fn, void *ctx);

/* Number of chunks opf_parallel_for uses for n and grain (at most the
 * thread count). */
int64_t opf_parallel_chunks(int64_t n, int64_t grain);

/* opf_parallel_for with at most `max_chunks` chunks, for callers that size
 * per-chunk resources beforehand from opf_parallel_chunks(): the thread
 * count may change in between. */
void opf_parallel_for_max(int64_t n, int64_t grain, int64_t max_chunks, opf_range_fn fn, void *ctx);

#endif

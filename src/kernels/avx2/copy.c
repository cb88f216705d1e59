/* copy.c — streaming copy with 32-byte non-temporal stores (see copy.inc). */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "kernels.h"

void opf_copy_ukernel__avx2_u128(size_t bytes, const void *src, void *dst, const void *pf, size_t pf_bytes, int fence) {
    const char *s = src;
    char *d = dst;
    size_t head = (32 - ((uintptr_t)d & 31)) & 31;
    head = head < bytes ? head : bytes;
    if (head > 0) {
        memcpy(d, s, head);
    }
    s += head, d += head, bytes -= head;
    /* pf's lines, spread evenly over the groups of two lines stored */
    OPF_COPY_PREFETCH_BEGIN(pf, pf_bytes, bytes / 128);
    for (; bytes >= 128; bytes -= 128, s += 128, d += 128) {
        __m256i v0 = _mm256_loadu_si256((const __m256i *)s), v1 = _mm256_loadu_si256((const __m256i *)(s + 32));
        __m256i v2 = _mm256_loadu_si256((const __m256i *)(s + 64)), v3 = _mm256_loadu_si256((const __m256i *)(s + 96));
        _mm256_stream_si256((__m256i *)d, v0);
        _mm256_stream_si256((__m256i *)(d + 32), v1);
        _mm256_stream_si256((__m256i *)(d + 64), v2);
        _mm256_stream_si256((__m256i *)(d + 96), v3);
        OPF_COPY_PREFETCH_STEP();
    }
    if (bytes > 0) {
        memcpy(d, s, bytes);
    }
    OPF_COPY_PREFETCH_END();
    if (fence) {
        _mm_sfence(); /* order the streamed stores before the caller's later stores */
    }
}

/* copy.c — streaming copy with 64-byte non-temporal stores (see copy.inc). */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "kernels.h"

void opf_copy_ukernel__avx512_u256(size_t bytes, const void *src, void *dst, const void *pf, size_t pf_bytes,
                                   int fence) {
    const char *s = src;
    char *d = dst;
    size_t head = opf_line_head(d);
    head = head < bytes ? head : bytes;
    if (head > 0) {
        memcpy(d, s, head);
    }
    s += head, d += head, bytes -= head;
    /* pf's lines, spread evenly over the groups of four lines stored */
    OPF_COPY_PREFETCH_BEGIN(pf, pf_bytes, bytes / 256);
    for (; bytes >= 256; bytes -= 256, s += 256, d += 256) {
        __m512i v0 = _mm512_loadu_si512(s), v1 = _mm512_loadu_si512(s + 64);
        __m512i v2 = _mm512_loadu_si512(s + 128), v3 = _mm512_loadu_si512(s + 192);
        _mm512_stream_si512((__m512i *)d, v0);
        _mm512_stream_si512((__m512i *)(d + 64), v1);
        _mm512_stream_si512((__m512i *)(d + 128), v2);
        _mm512_stream_si512((__m512i *)(d + 192), v3);
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

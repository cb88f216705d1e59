/* copy.c — the plain copy (see copy.inc): memcpy, after asking for pf. */
#include <stdint.h>
#include <string.h>

#include "kernels.h"

void opf_copy_ukernel__scalar(size_t bytes, const void *src, void *dst, const void *pf, size_t pf_bytes, int fence) {
    (void)fence;
    for (size_t b = 0; b < pf_bytes; b += 64) {
        __builtin_prefetch((const void *)((uintptr_t)pf + b), 0, 2);
    }
    memcpy(dst, src, bytes);
}

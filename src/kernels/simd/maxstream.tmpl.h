/* maxstream.tmpl.h — the row-maximum kernel (kernels.h says what it
 * computes), once for every ISA: included after a float32 SIMD vocabulary
 * (simd/<isa>-f32.h), with OPF_MAX_STREAM_NAME defined. The 64 lanes of the
 * maximum are OPF_MAX_STREAM_VECS vectors, element i in lane i % 64 whatever
 * the vector length, as the caller's loop keeps them. */
#include "simd/earlier.h"

#define OPF_MAX_STREAM_VECS (64 / OPF_VEC_LEN)

int64_t OPF_MAX_STREAM_NAME(int64_t n, const float *x, float *m, opf_earlier_row *earlier) {
    opf_vec a[OPF_MAX_STREAM_VECS];
    for (int v = 0; v < OPF_MAX_STREAM_VECS; v++) {
        a[v] = opf_vloadu(m + v * OPF_VEC_LEN);
    }
    opf_earlier_lines lines = opf_earlier_lines_begin(earlier); /* (a share a block) */
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        for (int v = 0; v < OPF_MAX_STREAM_VECS; v++) {
            a[v] = opf_vmax(opf_vloadu(x + i + v * OPF_VEC_LEN), a[v]); /* (x > a ? x : a: NaN x left out) */
        }
        opf_earlier_lines_step(&lines);
    }
    opf_earlier_lines_end(earlier, &lines);
    for (int v = 0; v < OPF_MAX_STREAM_VECS; v++) {
        opf_vstoreu(m + v * OPF_VEC_LEN, a[v]);
    }
    return i;
}

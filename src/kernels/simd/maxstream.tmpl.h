/* maxstream.tmpl.h — the row-maximum kernel (kernels.h says what it
 * computes), once for every ISA: included after a float32 SIMD vocabulary
 * (simd/<isa>-f32.h), with OPF_MAX_STREAM_NAME defined. The 64 lanes of the
 * maximum are OPF_MAX_STREAM_VECS vectors, element i in lane i % 64 whatever
 * the vector length, as the caller's loop keeps them. */
#define OPF_MAX_STREAM_VECS (64 / OPF_VEC_LEN)

int64_t OPF_MAX_STREAM_NAME(int64_t n, const float *x, float *m, opf_earlier_row *earlier) {
    opf_vec a[OPF_MAX_STREAM_VECS];
    for (int v = 0; v < OPF_MAX_STREAM_VECS; v++) {
        a[v] = opf_vloadu(m + v * OPF_VEC_LEN);
    }
    /* the waiting float row's lines (its plan: dst on a line), a share a block */
    const int stores = earlier != NULL && earlier->elem == 4 && earlier->left > 0;
    float *dst = stores ? (float *)(void *)earlier->dst : NULL;
    const float *src = stores ? (const float *)(const void *)earlier->src : NULL;
    const opf_vec f = opf_vset1(stores ? (float)earlier->factor : 0.0f);
    const int64_t share = stores ? earlier->share : 0;
    int64_t left = stores ? earlier->left : 0;
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        for (int v = 0; v < OPF_MAX_STREAM_VECS; v++) {
            a[v] = opf_vmax(opf_vloadu(x + i + v * OPF_VEC_LEN), a[v]); /* (x > a ? x : a: NaN x left out) */
        }
        for (int64_t k = left < share ? left : share; k > 0; k--, left--) {
            for (int v = 0; v < 16 / OPF_VEC_LEN; v++) {
                opf_vstream(dst + v * OPF_VEC_LEN, opf_vmul(opf_vloadu(src + v * OPF_VEC_LEN), f));
            }
            dst += 16;
            src += 16;
        }
    }
    if (stores) {
        earlier->w->stored += earlier->left - left;
        earlier->dst = (char *)(void *)dst;
        earlier->src = (const char *)(const void *)src;
        earlier->left = left;
    }
    for (int v = 0; v < OPF_MAX_STREAM_VECS; v++) {
        opf_vstoreu(m + v * OPF_VEC_LEN, a[v]);
    }
    return i;
}

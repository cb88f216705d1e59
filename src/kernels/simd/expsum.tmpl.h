/* expsum.tmpl.h — the exponential-and-sum kernel (kernels.h says what it
 * computes), once for every ISA: included after a float32 SIMD vocabulary
 * (simd/<isa>-f32.h) that has the exponential's steps, with OPF_EXP_SUM_NAME
 * and OPF_EXP_SUM_BELOW_NAME defined. The 32 partial sums are OPF_EXP_SUM_VECS vectors, lane j of the
 * block in partial sum j whatever the vector length, so that every variant
 * adds the same terms in the same order. */
#include "simd/earlier.h"

#define OPF_EXP_SUM_VECS (32 / OPF_VEC_LEN)

/* e^d: d = (k + f) ln2 / 16 (k in t's low bits), e^d = 2^(k/16) e^r; for
 * d up to OPF_EXP_SUM_MOST (above it, the block's opf_vexp_over). t and k
 * count in the vocabulary's OPF_VEXP_UNIT (1 or 1/16 of a k): every
 * constant is scaled by a power of two, so the products, r and the bits of
 * e are the same whatever the unit. */
static inline opf_vec opf_vexp(opf_vec d, opf_vexp_table table) {
    const float rounder = OPF_EXP_SUM_ROUND * OPF_VEXP_UNIT;
    const opf_vec t = opf_vfma(d, opf_vset1(OPF_EXP_SUM_LOG2E_16 * OPF_VEXP_UNIT), opf_vset1(rounder));
    const opf_vec k = opf_vsub(t, opf_vset1(rounder));
    opf_vec r = opf_vfnma(k, opf_vset1(OPF_EXP_SUM_LN2_16_HI / OPF_VEXP_UNIT), d); /* exact: few bits */
    r = opf_vfnma(k, opf_vset1(OPF_EXP_SUM_LN2_16_LO / OPF_VEXP_UNIT), r);
    const opf_vec q = opf_vfma(opf_vset1(OPF_EXP_SUM_C3), r, opf_vset1(0.5f));
    const opf_vec p = opf_vfma(opf_vmul(r, r), q, r); /* e^r - 1 */
    return opf_vexp_finish(d, opf_vexp_scale(t, k, table), p, OPF_EXP_SUM_LEAST);
}

/* The largest x of a block of 32 (opf_vmax: a lane whose maximum is NaN
 * stays NaN; a NaN x after the first vector may be dropped). */
static inline opf_vec opf_exp_sum_block_max(const float *x) {
    opf_vec xmax = opf_vloadu(x);
    for (int v = 1; v < OPF_EXP_SUM_VECS; v++) {
        xmax = opf_vmax(opf_vloadu(x + v * OPF_VEC_LEN), xmax);
    }
    return xmax;
}

/* One block of 32: e = exp(x - s) stored to y (unless NULL) and added into
 * the partial sums a, the two lines `ahead` bytes past x asked for into L2
 * (as opf_prefetch_at); `checked`: d above OPF_EXP_SUM_MOST is looked for
 * (a constant at each call: the two loops below are two copies). */
static inline void opf_exp_sum_block(const float *x, opf_vec s, float *y, opf_vexp_table table, opf_vec *a,
                                     int64_t ahead, int checked) {
    _mm_prefetch((const char *)x + ahead, _MM_HINT_T1);
    _mm_prefetch((const char *)x + ahead + 64, _MM_HINT_T1);
    /* d above OPF_EXP_SUM_MOST (+inf) is looked for once a block, on the
     * largest x (x - shift rounds monotonically), rather than by a compare
     * and blend per vector: softmax's d is at most 0. The AVX2 kernel went
     * from 8.86 to 8.67 cycles a vector on a Zen 3 (same bits); softmax on
     * rows in cache, 1.02-1.03 times as fast. The maximum starts from the
     * first vector, not from -inf: a lane whose running maximum is NaN stays
     * NaN (opf_vmax keeps b) and sends the block to the per-vector blend,
     * whose compare then finds any d above OPF_EXP_SUM_MOST that the NaN hid;
     * a NaN x dropped from the maximum needs no blend (its e is NaN). A
     * caller's bound on x (opf_exp_sum_blocks_bounded_f32) spares even that
     * maximum: one operation a vector of about 15. */
    int over = 0;
    if (checked) {
        over = opf_vany_above_or_nan(opf_vsub(opf_exp_sum_block_max(x), s), OPF_EXP_SUM_MOST);
    }
    for (int v = 0; v < OPF_EXP_SUM_VECS; v++) {
        const opf_vec d = opf_vsub(opf_vloadu(x + v * OPF_VEC_LEN), s);
        opf_vec e = opf_vexp(d, table);
        if (__builtin_expect(over, 0)) {
            e = opf_vexp_over(d, e, OPF_EXP_SUM_MOST);
        }
        if (y != NULL) {
            opf_vstoreu(y + v * OPF_VEC_LEN, e);
        }
        a[v] = opf_vadd(a[v], e);
    }
}

int64_t OPF_EXP_SUM_NAME(int64_t n, const float *x, float shift, float bound, float *y, int64_t ahead, float *acc) {
    const opf_vexp_table table = opf_vexp_table_load(opf_exp_sum_table);
    const opf_vec s = opf_vset1(shift);
    opf_vec a[OPF_EXP_SUM_VECS];
    for (int v = 0; v < OPF_EXP_SUM_VECS; v++) {
        a[v] = opf_vloadu(acc + v * OPF_VEC_LEN);
    }
    int64_t i = 0;
    /* every d at most OPF_EXP_SUM_MOST, by the caller's bound (false for NaN) */
    const int bounded = bound - shift <= OPF_EXP_SUM_MOST;
    for (; bounded && i + 32 <= n; i += 32) {
        opf_exp_sum_block(x + i, s, y != NULL ? y + i : NULL, table, a, ahead, 0);
    }
    for (; i + 32 <= n; i += 32) {
        opf_exp_sum_block(x + i, s, y != NULL ? y + i : NULL, table, a, ahead, 1);
    }
    for (int v = 0; v < OPF_EXP_SUM_VECS; v++) {
        opf_vstoreu(acc + v * OPF_VEC_LEN, a[v]);
    }
    return i;
}

/* softmax's limit = +inf blocks (e stored to y, two lines of the waiting
 * row a block), from the first while two lines are left: a loop without
 * the per-vector test of y and the step's count, in a function of its own
 * so that the compiler gives the loop its registers. softmax [8192, 4096]
 * float32 at AVX-512 (Intel Xeon, NumPy's offset): 1.06-1.10 times as fast
 * on one thread, 1.06 on two; the same bits. (The same loop written in
 * the kernel beside the general ones made GCC spill the general loop's
 * pointers: log_softmax, which takes that loop, 0.86-0.93 times as fast; a
 * loop of its own for log_softmax, 0.95.) Returns the elements done; acc
 * holds the sums. */
__attribute__((noinline)) static int64_t opf_exp_sum_run_two(int64_t n, const float *x, opf_vec s, float *y,
                                                             int64_t ahead, float *acc, opf_earlier_lines *lines) {
    const opf_vexp_table table = opf_vexp_table_load(opf_exp_sum_table);
    opf_vec a[OPF_EXP_SUM_VECS];
    for (int v = 0; v < OPF_EXP_SUM_VECS; v++) {
        a[v] = opf_vloadu(acc + v * OPF_VEC_LEN);
    }
    opf_earlier_lines l = *lines;
    int64_t i = 0;
    for (; l.left >= 2 && i + 32 <= n; i += 32) {
        opf_exp_sum_block(x + i, s, y + i, table, a, ahead, !OPF_VEXP_OVERFLOWS);
        opf_earlier_lines_two(&l);
    }
    *lines = l;
    for (int v = 0; v < OPF_EXP_SUM_VECS; v++) {
        opf_vstoreu(acc + v * OPF_VEC_LEN, a[v]);
    }
    return i;
}

/* The blocks of 32 from the first while no x - shift of a block is above
 * `limit` (at most OPF_EXP_SUM_MOST), with the waiting row's lines of
 * `earlier` a share a block: softmax's exponentials and its maximum in one
 * pass (kernels.h: opf_exp_sum_below_ukernel). A block whose maximum is NaN
 * stops it too; a NaN x that the maximum drops (opf_vmax keeps b) has e =
 * NaN, as the exponential's. limit = +inf: every block, the sums telling
 * whether an x - shift was above OPF_EXP_SUM_MOST or NaN (an e above 2^127
 * or not finite): with a vocabulary whose exponential gives such e by
 * itself (OPF_VEXP_OVERFLOWS), no block looks for them (one operation a
 * vector of about 15 less, and a compare and branch a block). */
int64_t OPF_EXP_SUM_BELOW_NAME(int64_t n, const float *x, float shift, float limit, float *y, int64_t ahead, float *acc,
                               opf_earlier_row *earlier) {
    const opf_vexp_table table = opf_vexp_table_load(opf_exp_sum_table);
    const opf_vec s = opf_vset1(shift);
    opf_earlier_lines lines = opf_earlier_lines_begin(earlier);
    int64_t i = 0;
    if (limit == (float)__builtin_inff() && y != NULL && lines.share == 2) {
        i = opf_exp_sum_run_two(n, x, s, y, ahead, acc, &lines);
    }
    opf_vec a[OPF_EXP_SUM_VECS];
    for (int v = 0; v < OPF_EXP_SUM_VECS; v++) {
        a[v] = opf_vloadu(acc + v * OPF_VEC_LEN);
    }
    for (; limit == (float)__builtin_inff() && i + 32 <= n; i += 32) {
        opf_exp_sum_block(x + i, s, y != NULL ? y + i : NULL, table, a, ahead, !OPF_VEXP_OVERFLOWS);
        opf_earlier_lines_step(&lines);
    }
    for (; limit <= OPF_EXP_SUM_MOST && i + 32 <= n; i += 32) {
        /* (x - shift rounds monotonically: no d of the block above the maximum's) */
        if (opf_vany_above_or_nan(opf_vsub(opf_exp_sum_block_max(x + i), s), limit)) {
            break;
        }
        opf_exp_sum_block(x + i, s, y != NULL ? y + i : NULL, table, a, ahead, 0);
        opf_earlier_lines_step(&lines);
    }
    opf_earlier_lines_end(earlier, &lines);
    for (int v = 0; v < OPF_EXP_SUM_VECS; v++) {
        opf_vstoreu(acc + v * OPF_VEC_LEN, a[v]);
    }
    return i;
}

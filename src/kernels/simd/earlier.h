/* earlier.h — a waiting float row's lines (OPF_EARLIER_ROW's plan), stored a
 * share at a time by a kernel's loop: included by the kernel templates that
 * take an `opf_earlier_row *` (simd/maxstream.tmpl.h, simd/expsum.tmpl.h)
 * after a float32 SIMD vocabulary (simd/<isa>-f32.h). The plan's
 * destination is on a line (its plan puts it there), each line 16 floats
 * of src times the factor, with non-temporal stores. The loop's state lives
 * in a struct the compiler keeps in registers. */
#ifndef OPF_SIMD_EARLIER_H
#define OPF_SIMD_EARLIER_H

typedef struct opf_earlier_lines {
    float *dst;
    const float *src;
    opf_vec factor;
    int64_t share, left; /* lines a step; lines not stored yet */
} opf_earlier_lines;

/* The plan's lines (none where nothing waits or the row is not of floats). */
static inline opf_earlier_lines opf_earlier_lines_begin(const opf_earlier_row *earlier) {
    const int floats = earlier != NULL && earlier->elem == 4 && earlier->left > 0;
    opf_earlier_lines l;
    l.dst = floats ? (float *)(void *)earlier->dst : NULL;
    l.src = floats ? (const float *)(const void *)earlier->src : NULL;
    l.factor = opf_vset1(floats ? (float)earlier->factor : 0.0f);
    l.share = floats ? earlier->share : 0;
    l.left = floats ? earlier->left : 0;
    return l;
}

/* A step: the next share of the lines. */
static inline void opf_earlier_lines_step(opf_earlier_lines *l) {
    for (int64_t k = l->left < l->share ? l->left : l->share; k > 0; k--, l->left--) {
        for (int v = 0; v < 16 / OPF_VEC_LEN; v++) {
            opf_vstream(l->dst + v * OPF_VEC_LEN, opf_vmul(opf_vloadu(l->src + v * OPF_VEC_LEN), l->factor));
        }
        l->dst += 16;
        l->src += 16;
    }
}

/* A step of two lines, for a caller that has checked that the plan's share
 * is two and that two are left: the lines without the step's count. */
static inline void opf_earlier_lines_two(opf_earlier_lines *l) {
    for (int v = 0; v < 32 / OPF_VEC_LEN; v++) {
        opf_vstream(l->dst + v * OPF_VEC_LEN, opf_vmul(opf_vloadu(l->src + v * OPF_VEC_LEN), l->factor));
    }
    l->dst += 32;
    l->src += 32;
    l->left -= 2;
}

/* Records in the plan (and its waiting row) the lines the steps stored. */
static inline void opf_earlier_lines_end(opf_earlier_row *earlier, const opf_earlier_lines *l) {
    if (l->dst != NULL) {
        earlier->w->stored += earlier->left - l->left;
        earlier->dst = (char *)(void *)l->dst;
        earlier->src = (const char *)(const void *)l->src;
        earlier->left = l->left;
    }
}

#endif

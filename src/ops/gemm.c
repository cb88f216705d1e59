/*
 * gemm.c — a BLIS-style GEMM driver: the loops around the micro-kernel.
 *
 *   for each thread's range of columns of C:
 *     for each MC-tall block of rows (ic):
 *       for each KC-deep slice of k (pc):       pack A[ic, pc] into MR-tall panels
 *         for each NC-wide block of columns (jc): pack B[pc, jc] into NR-wide panels
 *           for each A panel (ir):              (in L1)
 *             for each B panel (jr):            micro-kernel on an MR x NR block of C
 *
 * C is row-major (or any strides), so an A panel's row of tiles is MR rows of
 * C walked along their lines, as a copy walks them; BLIS's order (a B panel
 * held while the A panels below it go by) walks C down its columns, a line of
 * MR rows a page apart each tile. On an Intel Xeon (AVX-512), this order took
 * float32 dense 1.04-1.29 times as fast on one and two threads (256^3 to
 * 8192 x 1024 x 4096, batch 32), float64 1.06-1.10, the same bits: the
 * micro-kernel on a [1024, 1024] C went from 141 to 161-164 GFLOP/s.
 *
 * Both operands are packed by one routine (opf_pack): along the operand's
 * rows where a panel's values lie side by side (B row-major, A transposed),
 * by transposes in registers where a line's steps do (A row-major), so that
 * an operand coming from memory is read as a copy reads it. A packed panel
 * then meets the micro-kernel's loop with constant strides (simd/gemm.tmpl.h).
 *
 * The bias is added by the micro-kernel on the first k-slice and the ReLU
 * applied on the last, so both are fused into stores of C. An epilogue (an
 * authored elementwise kernel) runs on the last slice's results MR rows at a
 * time, right after the micro-kernels stored them (and while they are in
 * cache), rather than in a pass over C of its own. Threads split the columns
 * of C, never k, so results do not depend on the thread count.
 */
#include "gemm.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "kernels.h"
#include "threadpool.h"

/* Cache blocking, sized from the detected caches (see opf_gemm_blocks). */
typedef struct opf_gemm_blocks {
    int64_t kc, mc, nc;
} opf_gemm_blocks;

static int64_t opf_clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

/* KC: a KC x NR micro-panel of B would fill half of L1 (kept as the depth of
 * a k-slice, which fixes the order of each element's sum: the results do not
 * depend on the loops' order). NC: a KC x NC block of B, read once per A
 * panel, fills half of L2, in whole NR panels. MC: an MC x KC block of A,
 * read once per block of B, takes a quarter of L3 (shared with the other
 * cores), in whole MR panels: B is packed again for each block of rows, and
 * blocks of at most 1024 rows (half of L2) made float32 dense 0.92-0.94 times
 * as fast on an Intel Xeon (1024^3 to 8192 x 1024 x 4096, one thread). Each
 * thread's buffer (an A block and a B block) stays the size it had when the
 * B block took the quarter of L3 (6 MiB of float32 on that Xeon). */
static opf_gemm_blocks opf_gemm_blocks_for(const opf_cache_sizes *caches, size_t mr, size_t nr, size_t elem) {
    opf_gemm_blocks b;
    b.kc = opf_clamp64((int64_t)(caches->l1d / 2 / (nr * elem)) / 8 * 8, 64, 1024);
    b.mc =
        opf_clamp64((int64_t)(caches->l3 / 4 / ((size_t)b.kc * elem)), (int64_t)mr, 8192) / (int64_t)mr * (int64_t)mr;
    b.nc =
        opf_clamp64((int64_t)(caches->l2 / 2 / ((size_t)b.kc * elem)), (int64_t)nr, 8192) / (int64_t)nr * (int64_t)nr;
    return b;
}

typedef struct opf_gemm_job {
    const opf_gemm_args *args;
    opf_gemm_blocks blocks;
    /* Whether A and B are packed, or read in place where whole panels allow
     * (small problems, where packing costs as much as the arithmetic). */
    int pack_a, pack_b;
    size_t elem;
    size_t mr, nr;
    opf_any_ukernel ukernel;
    /* Per-task packing buffers, handed out by `next_slot`. */
    char *buffers;
    size_t buffer_bytes, a_bytes;
    atomic_int next_slot;
} opf_gemm_job;

static const char *opf_at(const opf_matrix *m, size_t elem, int64_t row, int64_t col) {
    return (const char *)m->data + (row * m->rs + col * m->cs) * (int64_t)elem;
}

/* The part of `extent` covered by whole panels of `step`. When an operand is
 * read in place, only the rest (a trailing partial panel, which the
 * micro-kernel would read past) is packed. */
static int64_t opf_whole_panels(int64_t extent, int64_t step) { return extent / step * step; }

/* Copies one step of a panel (its values side by side): the widths the
 * micro-kernels have take plain vector moves rather than a call. */
static inline __attribute__((always_inline)) void opf_copy_step(char *dst, const char *src, size_t bytes) {
    switch (bytes) {
    case 64: memcpy(dst, src, 64); break;
    case 128: memcpy(dst, src, 128); break;
    default: memcpy(dst, src, bytes); break;
    }
}

/* 16 bytes of lines' values, as 4 float32 or 2 float64 (copied as bits). */
typedef uint32_t opf_lanes4 __attribute__((vector_size(16)));
typedef uint64_t opf_lanes2 __attribute__((vector_size(16)));

/* A whole panel's steps in groups of 16 / elem (4 float32, 2 float64) from
 * lines whose steps lie side by side (A row-major): each group of as many
 * lines read 16 bytes along each and transposed in registers, one 16-byte
 * load and store a group of values where an element at a time takes one
 * each a value (float32 dense 1.02-1.10 times as fast at 512^3 and 1.00-1.05
 * at 1024^3 on an Intel Xeon, the same at 2048^3). Returns the steps done
 * (the rest, fewer than a group, are left to the caller). */
static inline __attribute__((always_inline)) int64_t opf_pack_transposed(const char *src, int64_t si, int64_t kc,
                                                                         size_t width, char *dst, size_t elem) {
    const int64_t group = (int64_t)(16 / elem), line_bytes = si * (int64_t)elem;
    int64_t p = 0;
    for (; p + group <= kc; p += group) {
        char *out = dst + (size_t)p * width * elem;
        size_t i = 0;
        for (; i + (size_t)group <= width; i += (size_t)group) {
            const char *in = src + (int64_t)i * line_bytes + p * (int64_t)elem;
            if (elem == 4) {
                opf_lanes4 r0, r1, r2, r3;
                memcpy(&r0, in, 16);
                memcpy(&r1, in + line_bytes, 16);
                memcpy(&r2, in + 2 * line_bytes, 16);
                memcpy(&r3, in + 3 * line_bytes, 16);
                const opf_lanes4 t0 = __builtin_shufflevector(r0, r1, 0, 4, 1, 5);
                const opf_lanes4 t1 = __builtin_shufflevector(r0, r1, 2, 6, 3, 7);
                const opf_lanes4 t2 = __builtin_shufflevector(r2, r3, 0, 4, 1, 5);
                const opf_lanes4 t3 = __builtin_shufflevector(r2, r3, 2, 6, 3, 7);
                const opf_lanes4 o0 = __builtin_shufflevector(t0, t2, 0, 1, 4, 5);
                const opf_lanes4 o1 = __builtin_shufflevector(t0, t2, 2, 3, 6, 7);
                const opf_lanes4 o2 = __builtin_shufflevector(t1, t3, 0, 1, 4, 5);
                const opf_lanes4 o3 = __builtin_shufflevector(t1, t3, 2, 3, 6, 7);
                memcpy(out + i * elem, &o0, 16);
                memcpy(out + (width + i) * elem, &o1, 16);
                memcpy(out + (2 * width + i) * elem, &o2, 16);
                memcpy(out + (3 * width + i) * elem, &o3, 16);
            } else {
                opf_lanes2 r0, r1;
                memcpy(&r0, in, 16);
                memcpy(&r1, in + line_bytes, 16);
                const opf_lanes2 o0 = __builtin_shufflevector(r0, r1, 0, 2);
                const opf_lanes2 o1 = __builtin_shufflevector(r0, r1, 1, 3);
                memcpy(out + i * elem, &o0, 16);
                memcpy(out + (width + i) * elem, &o1, 16);
            }
        }
        for (; i < width; i++) { /* the lines after the last whole group (AVX2's 6-tall float32 panels) */
            const char *in = src + (int64_t)i * line_bytes + p * (int64_t)elem;
            for (int64_t t = 0; t < group; t++) {
                memcpy(out + ((size_t)t * width + i) * elem, in + t * (int64_t)elem, elem);
            }
        }
    }
    return p;
}

/* Packs `lines` lines x `kc` steps of an operand into panels `width` lines
 * wide (A: its rows into MR-tall panels, B: its columns into NR-wide ones):
 * panel q holds kc steps of `width` values, line q * width + j at j, zero
 * padded. Element (line i, step p) is at src + (i * si + p * sp) * elem.
 * Where a step's values lie side by side (si == 1: B row-major, A
 * transposed), each step is read once along them, front to back, and handed
 * out `width` values a panel: panel by panel, the reads would jump a whole
 * row of the operand (a page or more) every `width` values, which no
 * prefetcher follows when the operand comes from memory (float32 dense of
 * [32, 4096] x [4096, 4096] went from 27 to 18 ms on one thread of an Intel
 * Xeon). Else element by element, a step at a time (along each line instead,
 * where a line's steps lie side by side: 0.92-0.97 times as fast), whole
 * panels of lines whose steps lie side by side in transposes of 16 bytes.
 * Inlined for each element size so that the element copies are plain moves. */
static inline __attribute__((always_inline)) void opf_pack_sized(const char *src, int64_t si, int64_t sp, int64_t lines,
                                                                 int64_t kc, size_t width, char *dst, size_t elem) {
    const size_t step_bytes = width * elem, panel_bytes = (size_t)kc * step_bytes;
    if (si == 1) {
        const int64_t whole = opf_whole_panels(lines, (int64_t)width), rest = lines - whole;
        char *const last = dst + (size_t)(whole / (int64_t)width) * panel_bytes;
        for (int64_t p = 0; p < kc; p++) {
            const char *from = src + p * sp * (int64_t)elem;
            char *to = dst + (size_t)p * step_bytes;
            for (int64_t i = 0; i < whole; i += (int64_t)width, to += panel_bytes) {
                opf_copy_step(to, from + i * (int64_t)elem, step_bytes);
            }
            if (rest > 0) { /* the last panel's step: its values, then zeros */
                char *step = last + (size_t)p * step_bytes;
                memcpy(step, from + whole * (int64_t)elem, (size_t)rest * elem);
                memset(step + (size_t)rest * elem, 0, step_bytes - (size_t)rest * elem);
            }
        }
        return;
    }
    for (int64_t q = 0; q < lines; q += (int64_t)width, dst += panel_bytes) {
        const int64_t valid = lines - q < (int64_t)width ? lines - q : (int64_t)width;
        if (valid < (int64_t)width) {
            memset(dst, 0, panel_bytes);
        }
        const char *base = src + q * si * (int64_t)elem;
        int64_t p = 0;
        if (sp == 1 && valid == (int64_t)width) {
            p = opf_pack_transposed(base, si, kc, width, dst, elem);
        }
        for (; p < kc; p++) { /* a step at a time, its values from `valid` lines side by side */
            const char *step = base + p * sp * (int64_t)elem;
            for (int64_t i = 0; i < valid; i++) {
                memcpy(dst + ((size_t)p * width + (size_t)i) * elem, step + i * si * (int64_t)elem, elem);
            }
        }
    }
}

static void opf_pack(const opf_gemm_job *job, const char *src, int64_t si, int64_t sp, int64_t lines, int64_t kc,
                     size_t width, char *dst) {
    if (job->elem == sizeof(float)) {
        opf_pack_sized(src, si, sp, lines, kc, width, dst, sizeof(float));
    } else {
        opf_pack_sized(src, si, sp, lines, kc, width, dst, sizeof(double));
    }
}

/* Rows [row0, row0 + rows) x k-slice [p0, p0 + kc) of A into MR-tall panels. */
static void opf_pack_a(const opf_gemm_job *job, int64_t row0, int64_t rows, int64_t p0, int64_t kc, char *dst) {
    const opf_matrix *a = &job->args->a;
    opf_pack(job, opf_at(a, job->elem, row0, p0), a->rs, a->cs, rows, kc, job->mr, dst);
}

/* k-slice [p0, p0 + kc) x columns [col0, col0 + cols) of B into NR-wide panels. */
static void opf_pack_b(const opf_gemm_job *job, int64_t p0, int64_t kc, int64_t col0, int64_t cols, char *dst) {
    const opf_matrix *b = &job->args->b;
    opf_pack(job, opf_at(b, job->elem, p0, col0), b->cs, b->rs, cols, kc, job->nr, dst);
}

/* An operand panel as the micro-kernel reads it: A element (i, p) at
 * data[i*rs + p*cs]; B element (p, j) at data[p*rs + j] (cs unused). */
typedef struct opf_panel {
    const char *data;
    int64_t rs, cs;
} opf_panel;

static void opf_call_ukernel(const opf_gemm_job *job, size_t kc, opf_panel a, opf_panel b, int64_t row, int64_t col,
                             size_t mr, size_t nr, const char *bias, int accumulate, int relu) {
    const opf_gemm_args *g = job->args;
    char *c = (char *)g->c + (row * g->rsc + col * g->csc) * (int64_t)job->elem;
    if (g->dtype == OPF_F32) {
        ((opf_f32_gemm_ukernel)job->ukernel)(kc, (const float *)a.data, a.rs, a.cs, (const float *)b.data, b.rs,
                                             (float *)c, g->rsc, g->csc, mr, nr, (const float *)bias, accumulate, relu);
    } else {
        ((opf_f64_gemm_ukernel)job->ukernel)(kc, (const double *)a.data, a.rs, a.cs, (const double *)b.data, b.rs,
                                             (double *)c, g->rsc, g->csc, mr, nr, (const double *)bias, accumulate,
                                             relu);
    }
}

/* Columns of a row of C gathered into a buffer for one epilogue call, where
 * the row's columns are not contiguous (contiguous ones take one call for
 * the whole row's part in the block). */
enum { OPF_GEMM_EPILOGUE_COLS = 128 };

/* The epilogue on rows [row, row + rows) and columns [col, col + cols) of C,
 * in place: each row's columns in one call where they are contiguous, else
 * gathered into a buffer and scattered back. */
static void opf_gemm_epilogue(const opf_gemm_job *job, int64_t row, int64_t rows, int64_t col, int64_t cols) {
    const opf_gemm_args *g = job->args;
    const size_t elem = job->elem;
    _Alignas(64) char buffer[OPF_GEMM_EPILOGUE_COLS * sizeof(double)];
    for (int64_t i = row; i < row + rows; i++) {
        char *c = (char *)g->c + (i * g->rsc + col * g->csc) * (int64_t)elem;
        if (g->csc == 1 || cols == 1) {
            void *ptr[1] = {c};
            g->epilogue(cols, (const void *const *)ptr, ptr, g->epilogue_attrs);
            continue;
        }
        for (int64_t j0 = 0; j0 < cols; j0 += OPF_GEMM_EPILOGUE_COLS) {
            const int64_t len = cols - j0 < OPF_GEMM_EPILOGUE_COLS ? cols - j0 : OPF_GEMM_EPILOGUE_COLS;
            for (int64_t j = 0; j < len; j++) {
                memcpy(buffer + (size_t)j * elem, c + (j0 + j) * g->csc * (int64_t)elem, elem);
            }
            void *ptr[1] = {buffer};
            g->epilogue(len, (const void *const *)ptr, ptr, g->epilogue_attrs);
            for (int64_t j = 0; j < len; j++) {
                memcpy(c + (j0 + j) * g->csc * (int64_t)elem, buffer + (size_t)j * elem, elem);
            }
        }
    }
}

/* Columns [col_begin, col_end) of C; ranges are in units of NR columns. */
static void opf_gemm_columns(void *ctx, int64_t begin, int64_t end) {
    opf_gemm_job *job = ctx;
    const opf_gemm_args *g = job->args;
    const int64_t nr = (int64_t)job->nr, mr = (int64_t)job->mr;
    const int64_t col_begin = begin * nr, col_end = end * nr < g->n ? end * nr : g->n;
    char *buffer = job->buffers + (size_t)atomic_fetch_add(&job->next_slot, 1) * job->buffer_bytes;
    char *packed_a = buffer, *packed_b = buffer + job->a_bytes;
    const int64_t KC = job->blocks.kc, MC = job->blocks.mc, NC = job->blocks.nc;
    const int64_t k_slices = g->k == 0 ? 1 : (g->k + KC - 1) / KC;

    for (int64_t ic = 0; ic < g->m; ic += MC) {
        const int64_t mc = g->m - ic < MC ? g->m - ic : MC;
        const int64_t a_done = job->pack_a ? 0 : opf_whole_panels(mc, mr);
        for (int64_t slice = 0; slice < k_slices; slice++) {
            const int64_t pc = slice * KC, kc = g->k - pc < KC ? g->k - pc : KC;
            const int first = slice == 0, last = slice == k_slices - 1;
            opf_pack_a(job, ic + a_done, mc - a_done, pc, kc,
                       packed_a + (size_t)(a_done / mr) * (size_t)kc * job->mr * job->elem);
            for (int64_t jc = col_begin; jc < col_end; jc += NC) {
                const int64_t nc = col_end - jc < NC ? col_end - jc : NC;
                const int64_t b_done = job->pack_b ? 0 : opf_whole_panels(nc, nr);
                opf_pack_b(job, pc, kc, jc + b_done, nc - b_done,
                           packed_b + (size_t)(b_done / nr) * (size_t)kc * job->nr * job->elem);
                for (int64_t ir = 0; ir < mc; ir += mr) {
                    const size_t mr_valid = (size_t)(mc - ir < mr ? mc - ir : mr);
                    opf_panel a_panel = {packed_a + (size_t)(ir / mr) * (size_t)kc * job->mr * job->elem, 1, mr};
                    if (ir < a_done) { /* in place: MR rows of A at its own strides */
                        a_panel = (opf_panel){opf_at(&g->a, job->elem, ic + ir, pc), g->a.rs, g->a.cs};
                    }
                    for (int64_t jr = 0; jr < nc; jr += nr) {
                        const size_t nr_valid = (size_t)(nc - jr < nr ? nc - jr : nr);
                        opf_panel b_panel = {packed_b + (size_t)(jr / nr) * (size_t)kc * job->nr * job->elem, nr, 0};
                        if (jr < b_done) { /* in place: NR contiguous columns per row of B */
                            b_panel = (opf_panel){opf_at(&g->b, job->elem, pc, jc + jr), g->b.rs, 0};
                        }
                        const char *bias =
                            first && g->bias != NULL ? (const char *)g->bias + (jc + jr) * (int64_t)job->elem : NULL;
                        opf_call_ukernel(job, (size_t)kc, a_panel, b_panel, ic + ir, jc + jr, mr_valid, nr_valid, bias,
                                         !first, last && g->relu);
                    }
                    if (last && g->epilogue != NULL) { /* the panel's rows of C, done and in cache */
                        opf_gemm_epilogue(job, ic + ir, (int64_t)mr_valid, jc, nc);
                    }
                }
            }
        }
    }
}

/* A copy of the problem in which strides that index nothing are zero: those of
 * a dim of extent 1 (any value is valid there, even INT64_MAX, and only index
 * 0 is used, but stride * index arithmetic must not overflow), and both
 * operands' when k is 0 (A and B are then empty views, whose strides and data
 * are not validated: the micro-kernel reads nothing, so they point at a dummy). */
static opf_gemm_args opf_gemm_normalized(const opf_gemm_args *args) {
    static const double nothing[1] = {0.0};
    opf_gemm_args g = *args;
    if (g.m == 1) {
        g.a.rs = 0;
        g.rsc = 0;
    }
    if (g.n == 1) {
        g.b.cs = 0;
        g.csc = 0;
    }
    if (g.k <= 1) {
        g.a.cs = 0;
        g.b.rs = 0;
    }
    if (g.k == 0) {
        g.a = (opf_matrix){nothing, 0, 0};
        g.b = (opf_matrix){nothing, 0, 0};
    }
    return g;
}

opf_status opf_gemm(const char *op, const opf_gemm_args *problem) {
    if (problem->m == 0 || problem->n == 0) {
        return OPF_OK;
    }
    const opf_gemm_args normalized = opf_gemm_normalized(problem), *args = &normalized;
    const opf_kernels *kernels = opf_kernels_get();
    opf_gemm_job job = {.args = args, .elem = opf_dtype_size(args->dtype)};
    if (args->dtype == OPF_F32) {
        job.ukernel = (opf_any_ukernel)kernels->f32_gemm.ukernel;
        job.mr = kernels->f32_gemm.mr;
        job.nr = kernels->f32_gemm.nr;
    } else {
        job.ukernel = (opf_any_ukernel)kernels->f64_gemm.ukernel;
        job.mr = kernels->f64_gemm.mr;
        job.nr = kernels->f64_gemm.nr;
    }
    job.blocks = opf_gemm_blocks_for(&kernels->caches, job.mr, job.nr, job.elem);
    /* A packed panel is reused once per NR columns of C, a B panel once per
     * MR rows: with few of them, reading the operand in place is cheaper. B
     * in place needs unit column stride (the micro-kernel loads NR at once)
     * and is read from cache: its rows of NR values a row of B apart are
     * beyond the prefetchers' reach, and from memory (a [4096, 4096] float32
     * B under 8 or 24 rows of A, on an Intel Xeon) they took 1.7 times as
     * long as packing; in L2 or L3 (a [1024, 1024] B) 0.84-0.96 times. So
     * only a B that fits in half of L2 is read in place. */
    job.pack_a = args->n > 4 * (int64_t)job.nr;
    job.pack_b = !(args->b.cs == 1 && args->m <= 2 * (int64_t)job.mr &&
                   (size_t)args->k * (size_t)args->n * job.elem <= kernels->caches.l2 / 2);
    const int64_t kc_max = args->k < job.blocks.kc ? (args->k > 0 ? args->k : 1) : job.blocks.kc;
    const int64_t panels = (args->n + (int64_t)job.nr - 1) / (int64_t)job.nr;
    const int64_t nc_max = job.blocks.nc < panels * (int64_t)job.nr ? job.blocks.nc : panels * (int64_t)job.nr;
    const int64_t mc_max = args->m < job.blocks.mc ? args->m : job.blocks.mc;
    /* Enough work per thread to pay for its own packing of A: ~64 columns
     * of a big product, more for small ones. */
    int64_t flops_per_panel = 2 * args->m * (args->k > 0 ? args->k : 1) * (int64_t)job.nr;
    int64_t grain = (1 << 20) / (flops_per_panel > 0 ? flops_per_panel : 1) + 1;
    int64_t tasks = opf_parallel_chunks(panels, grain);

    job.a_bytes =
        ((size_t)((mc_max + (int64_t)job.mr - 1) / (int64_t)job.mr) * job.mr * (size_t)kc_max * job.elem + 63) / 64 *
        64;
    size_t b_bytes = (size_t)((nc_max + (int64_t)job.nr - 1) / (int64_t)job.nr) * job.nr * (size_t)kc_max * job.elem;
    job.buffer_bytes = (job.a_bytes + b_bytes + 63) / 64 * 64;
    job.buffers = aligned_alloc(64, job.buffer_bytes * (size_t)(tasks > 0 ? tasks : 1));
    if (job.buffers == NULL) {
        return opf_error(OPF_E_NOMEM, "%s: cannot allocate %zu bytes of packing buffers", op,
                         job.buffer_bytes * (size_t)tasks);
    }
    atomic_init(&job.next_slot, 0);
    opf_parallel_for_max(panels, grain, tasks > 0 ? tasks : 1, opf_gemm_columns, &job);
    free(job.buffers);
    return OPF_OK;
}

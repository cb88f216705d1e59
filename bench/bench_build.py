#!/usr/bin/env python3
"""Time to get a user's op from C source into PyTorch, from a fresh process.

    python bench/bench_build.py            (make bench-build)

Writes a 50-line op file (one elementwise op and its gradient, the op table
API of include/opforge.h), then, each in a new Python process, times
``opforge.torch.load_ops("myops.c")``: first with an empty cache (it compiles)
and then with the cache filled (it loads). ``import torch`` and ``import
opforge.torch`` are timed apart: they are not the build's cost. Best and
median of $BENCH_RUNS runs (default 5). Not a test: it asserts nothing.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

MYOPS_C = r"""#include <opforge.h>

static int64_t numel(const opf_tensor *t) {
    int64_t n = 1;
    for (int32_t d = 0; d < t->ndim; ++d) n *= t->shape[d];
    return n;
}

static int64_t at(const opf_tensor *t, int64_t i) {
    if (!t->strides) return i;
    int64_t offset = 0;
    for (int32_t d = t->ndim - 1; d >= 0; --d) { offset += (i % t->shape[d]) * t->strides[d]; i /= t->shape[d]; }
    return offset;
}

static double get(const opf_tensor *t, int64_t i) {
    const char *p = (const char *)t->data + t->byte_offset;
    return t->dtype == OPF_F32 ? ((const float *)p)[at(t, i)] : ((const double *)p)[at(t, i)];
}

static void put(const opf_tensor *t, int64_t i, double v) {
    char *p = (char *)t->data + t->byte_offset;
    if (t->dtype == OPF_F32) ((float *)p)[at(t, i)] = (float)v; else ((double *)p)[at(t, i)] = v;
}

static opf_status cube_compute(const opf_tensor *const *in, const opf_tensor *const *out, const opf_attr_value *a) {
    (void)a;
    for (int64_t i = 0, n = numel(in[0]); i < n; ++i) { double x = get(in[0], i); put(out[0], i, x * x * x); }
    return OPF_OK;
}

static opf_status cube_grad_compute(const opf_tensor *const *in, const opf_tensor *const *out, const opf_attr_value *a) {
    (void)a;
    for (int64_t i = 0, n = numel(in[0]); i < n; ++i) { double x = get(in[1], i); put(out[0], i, 3 * x * x * get(in[0], i)); }
    return OPF_OK;
}

static const opf_op_def cube = {
    .name = "cube", .doc = "y = x^3", .flags = OPF_OP_ELEMENTWISE, .dtypes = OPF_DTYPES_F32 | OPF_DTYPES_F64,
    .num_inputs = 1, .inputs = {{.name = "x"}}, .num_outputs = 1, .outputs = {{.name = "y"}},
    .output_shapes = {{.kind = OPF_SHAPE_LIKE, .like = 0}},
    .num_grads = 1, .grads = {{.op = "cube_grad", .num_sources = 2, .sources = {{OPF_FROM_GRAD, 0}, {OPF_FROM_INPUT, 0}},
                               .num_produces = 1, .produces = {0}}},
    .compute = cube_compute,
};
static const opf_op_def cube_grad = {
    .name = "cube_grad", .doc = "dx = 3 x^2 dy", .flags = OPF_OP_ELEMENTWISE, .dtypes = OPF_DTYPES_F32 | OPF_DTYPES_F64,
    .num_inputs = 2, .inputs = {{.name = "dy"}, {.name = "x"}}, .num_outputs = 1, .outputs = {{.name = "dx"}},
    .output_shapes = {{.kind = OPF_SHAPE_LIKE, .like = 0}}, .compute = cube_grad_compute,
};
static const opf_op_def *const rows[] = {&cube, &cube_grad};
static const opf_op_table table = {OPF_TABLE_ABI_VERSION, "myops", 2, rows};
OPF_EXPORT_OP_TABLE(table)
"""

CHILD = """
import time
t0 = time.perf_counter()
import torch
t1 = time.perf_counter()
import opforge.torch as ot
t2 = time.perf_counter()
ops = ot.load_ops("myops.c")
t3 = time.perf_counter()
x = torch.tensor([2.0], requires_grad=True)
ops.cube(x).sum().backward()
assert ops.cube(x).item() == 8.0 and x.grad.item() == 12.0
print(t1 - t0, t2 - t1, t3 - t2)
"""


def main() -> None:
    runs = int(os.environ.get("BENCH_RUNS", "5"))
    with tempfile.TemporaryDirectory() as work:
        Path(work, "myops.c").write_text(MYOPS_C)
        lines = MYOPS_C.count("\n")
        results: dict[str, list[tuple[float, float, float]]] = {"compile (empty cache)": [], "from the cache": []}
        for i in range(runs):
            for label in results:
                cache = Path(work, f"cache{i}")
                env = dict(os.environ, OPFORGE_CACHE_DIR=str(cache))
                out = subprocess.run([sys.executable, "-c", CHILD], cwd=work, env=env, capture_output=True, text=True,
                                     check=True).stdout.split()  # fmt: skip
                results[label].append(tuple(float(v) for v in out))  # type: ignore[arg-type]
        print(f"opforge.torch.load_ops on a {lines}-line op file, each in a fresh process ({runs} runs):")
        for label, times in results.items():
            load = [t[2] for t in times]
            print(f"  {label:22s} load_ops best {min(load) * 1e3:7.1f} ms, median {statistics.median(load) * 1e3:7.1f} ms")
        imports = [t[0] for ts in results.values() for t in ts]
        adapters = [t[1] for ts in results.values() for t in ts]
        print(f"  (not counted: import torch median {statistics.median(imports):.2f} s, "
              f"import opforge.torch median {statistics.median(adapters) * 1e3:.0f} ms)")  # fmt: skip


if __name__ == "__main__":
    main()

"""The machine's limits, measured by ``opforge bench`` itself with the native
loops of ``opforge._probe`` (probe.c): copy bandwidth and FMA peak.

- Copy: ``elements`` float32 copied from one 64-byte aligned buffer to another
  (both allocated and touched once, then reused), split over 1 or N threads,
  with plain stores, non-temporal stores (x86-64) and memcpy. Bandwidth counts
  the bytes read plus the bytes written (2 x 4 x elements), as STREAM does and
  as the elementwise measurements do. The *copy roof* at a thread count is the
  best of the variants: non-temporal stores skip the read-for-ownership of the
  destination, so they can beat plain stores, and opforge uses them for large
  outputs. It is a reference, not a hard bound: an op with more reads per
  write (add) can exceed it, as STREAM's add exceeds its copy. It is
  measured at each size the run compares with it (the elementwise section's
  elements, and the transformer section's N x M): a copy whose buffers fit
  in a large last-level cache in part runs faster than one that does not,
  so a roof measured at another size would not be the roof of that size's
  ops (on an Intel Xeon with a 300 MiB L3, 16M float32 copied at 24-26 GB/s
  and 32M at 20 on one thread).
- FMA peak: independent FMA chains (probe.c explains how many), per ISA level
  the CPU has (avx2: 256-bit, avx512: 512-bit), float32 and float64, on 1 and
  N threads. Each run is calibrated to last about ``target_s``. The *peak* for
  a dtype and thread count is the best over the ISA levels.

The runner measures both before each worker process and after the last, and
keeps the best: on a shared machine another process can hold a core, or the
memory bus, for seconds, and a limit measured low would flatter every ratio.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Optional

from .measure import Progress, Timing, time_native

#: Copy variants of probe.h, by name.
COPY_VARIANTS = {"plain": 0, "nontemporal": 1, "memcpy": 2}
COPY_LABELS = {"plain": "plain stores", "nontemporal": "non-temporal stores", "memcpy": "memcpy"}
#: ISA levels with an FMA loop in probe.c, numbered as opforge's opf_isa.
FMA_ISAS = {"avx2": 2, "avx512": 3}
DTYPE_F64 = {"float32": 0, "float64": 1}


def _probe() -> Any:
    """The ``opforge._probe`` module (ImportError if the package was built without it)."""
    return importlib.import_module("opforge._probe")


def probe_available() -> bool:
    try:
        _probe()
    except ImportError:
        return False
    return True


def cpu_has(feature: str) -> Optional[bool]:
    """Whether the CPU has an x86 feature ("avx2", "fma", "avx512f", ...);
    None when the probe is missing or does not know the name."""
    try:
        lib = _probe().lib
    except ImportError:
        return None
    answer = lib.opfp_cpu_has(feature.encode())
    return None if answer < 0 else bool(answer)


def fma_isas() -> list[str]:
    """The ISA levels whose FMA loop runs on this CPU."""
    try:
        lib = _probe().lib
    except ImportError:
        return []
    return [name for name, isa in FMA_ISAS.items() if lib.opfp_fma_flops_per_iteration(isa, 0) > 0]


@dataclass
class Limit:
    """One measured limit: ``value`` in GB/s (copy) or GFLOP/s (FMA)."""

    kind: str  # "copy" or "fma"
    variant: str  # copy variant, or ISA level for fma
    dtype: str
    threads: int
    value: float
    unit: str
    timing: Timing
    work: float  # bytes or flops per run
    round: int = 1  # rounds are measured before each worker process and after the last
    elements: int = 0  # copy: float32 elements copied (0 for fma)

    def as_json(self) -> dict[str, Any]:
        return {
            "round": self.round,
            "kind": self.kind,
            "variant": self.variant,
            "dtype": self.dtype,
            "threads": self.threads,
            "value": self.value,
            "unit": self.unit,
            "work_per_run": self.work,
            "elements": self.elements,
            **self.timing.as_json(),
        }


class Copier:
    """Copies of ``elements`` float32 (whole 128-byte blocks, which probe.c
    copies) into a buffer of its own, in every variant the machine runs, as
    native callables that return their seconds: the copy roof's runs
    (measure_copy) and the copies timed beside an op
    (measure.time_with_copies).

    The copies read a buffer of their own too, or, given ``source`` (a
    C-contiguous array), that array's bytes from its first 64-byte line: the
    copies beside an op read the op's own input, so that they leave it where
    the op's previous run left it. A copy of two buffers of its own, timed
    after each run of an op over 128 MiB arrays, pushed the op's input out of
    an Intel Xeon's last-level cache (480 MiB in its KVM guest) between its
    runs and made it 12–20% slower than it ran alone (softmax, layer_norm,
    rms_norm on one thread), while the copy itself ran at the same speed from
    either source (docs/performance-history.md, "the copy beside")."""

    def __init__(self, elements: int, source: Optional[Any] = None) -> None:
        probe = _probe()
        self._lib, ffi = probe.lib, probe.ffi
        if source is not None and not source.flags.c_contiguous:
            raise ValueError("opforge bench: a copier's source must be C-contiguous")
        #: The array the copies read, as given (None: a buffer of the copier's own).
        self.source = source
        skip = -source.ctypes.data % 64 if source is not None else 0  # bytes to its first line
        if source is not None and source.nbytes - skip >= 128:
            self._bytes = (source.nbytes - skip) // 128 * 128
            self.elements = self._bytes // 4
            self._src = ffi.cast("void *", source.ctypes.data + skip)
        else:  # (also a source without a 128-byte block past its first line)
            self.elements = copy_elements(elements)
            self._bytes = 4 * self.elements
            self._src = ffi.gc(self._lib.opfp_buffer_new(self._bytes), self._lib.opfp_buffer_free)
        self._dst = ffi.gc(self._lib.opfp_buffer_new(self._bytes), self._lib.opfp_buffer_free)
        if self._src == ffi.NULL or self._dst == ffi.NULL:
            raise MemoryError(f"opforge bench: cannot set up a copy of {self._bytes} bytes")
        #: The variants this machine runs, by name (COPY_VARIANTS).
        self.variants = {name: kind for name, kind in COPY_VARIANTS.items() if self._lib.opfp_copy_available(kind)}

    def run(self, variant: str, threads: int) -> Any:
        """One copy of a variant on ``threads`` threads, as a callable."""
        kind = self.variants[variant]
        return lambda: self._lib.opfp_copy_seconds(kind, self._dst, self._src, self._bytes, threads)

    def runs(self, threads: int) -> list[Any]:
        """One callable per copy variant, on ``threads`` threads."""
        return [self.run(variant, threads) for variant in self.variants]

    def gbs(self, seconds: float) -> float:
        """A copy's bandwidth (bytes read + written per second, in GB/s)."""
        return 2 * self._bytes / seconds / 1e9


def measure_copy(elements: int, thread_counts: list[int], repeats: int, budget_s: float, min_time_s: float,
                 progress: Progress, round_: int = 1) -> list[Limit]:
    """Copy bandwidth of every variant the machine runs, per thread count."""
    copier = Copier(elements)
    limits = []
    for name in copier.variants:
        for threads in thread_counts:
            progress.begin(f"copy {copier.elements} float32, {COPY_LABELS[name]}, {threads} thread(s)")
            timing = time_native(copier.run(name, threads), repeats, budget_s, min_time_s)
            gbs = copier.gbs(timing.best_s)
            progress.end(f"{gbs:8.1f} GB/s")
            limits.append(Limit("copy", name, "float32", threads, gbs, "GB/s", timing, 8.0 * copier.elements,
                                round_, copier.elements))
    return limits


def measure_fma(thread_counts: list[int], repeats: int, budget_s: float, min_time_s: float, target_s: float,
                progress: Progress, round_: int = 1) -> list[Limit]:
    """FMA peak per ISA level the CPU has, per dtype and thread count."""
    lib = _probe().lib
    limits = []
    for isa_name in fma_isas():
        isa = FMA_ISAS[isa_name]
        for dtype, f64 in DTYPE_F64.items():
            flops_per_iteration = lib.opfp_fma_flops_per_iteration(isa, f64)
            iterations = _calibrate(lambda n: lib.opfp_fma_seconds(isa, f64, n, 1), target_s)
            for threads in thread_counts:
                progress.begin(f"FMA peak {dtype} {isa_name}, {threads} thread(s)")
                timing = time_native(lambda: lib.opfp_fma_seconds(isa, f64, iterations, threads), repeats,
                                     budget_s, min_time_s)
                flops = float(flops_per_iteration * iterations * threads)
                gflops = flops / timing.best_s / 1e9
                progress.end(f"{gflops:8.1f} GFLOP/s")
                limits.append(Limit("fma", isa_name, dtype, threads, gflops, "GFLOP/s", timing, flops, round_))
    return limits


def _calibrate(run: Any, target_s: float) -> int:
    """Iterations for which run(iterations) takes about target_s seconds."""
    iterations = 1 << 16
    while True:
        seconds = run(iterations)
        if seconds < 0:
            raise RuntimeError("the FMA probe could not run")
        if seconds >= target_s / 8 or iterations >= 1 << 40:
            return max(1, int(iterations * target_s / max(seconds, 1e-9)))
        iterations *= 4


def copy_elements(elements: int) -> int:
    """The float32 elements measure_copy copies when asked for ``elements``
    (whole 128-byte blocks)."""
    return max(128, (4 * elements + 127) // 128 * 128) // 4


def roofs(limits: list[Limit], copy_size: Optional[int] = None) -> dict[str, dict[str, dict[int, float]]]:
    """The best value per kind, dtype and thread count (over variants and rounds):
    ``{"copy": {"float32": {1: GB/s, N: GB/s}}, "fma": {"float32": {...}, "float64": {...}}}``;
    the copies only of ``copy_size`` elements where given."""
    best: dict[str, dict[str, dict[int, float]]] = {"copy": {}, "fma": {}}
    for limit in limits:
        if limit.kind == "copy" and copy_size is not None and limit.elements != copy_elements(copy_size):
            continue
        per_thread = best[limit.kind].setdefault(limit.dtype, {})
        per_thread[limit.threads] = max(per_thread.get(limit.threads, 0.0), limit.value)
    return best

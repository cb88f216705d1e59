"""One worker process of ``opforge bench``: times one implementation (opforge
at one ISA level, or one framework) and prints its measurements as JSON on
stdout; progress goes to stderr.

A process per implementation keeps them from disturbing each other (thread
pools that spin, allocator state) and is how opforge's ISA level is chosen:
``OPFORGE_ISA`` is read once per process.

Inputs are the same in every worker (fixed seeds): standard normal ``x`` and
``b``; for dense, ``w`` scaled by 1/sqrt(K) so that outputs stay O(1); for
the transformer section, transformer.py's. After timing, each result is
checked on a sample of its elements (rows, for dense and the transformer
ops' [N, M] outputs; their [M] outputs whole) against NumPy in float64; a
failed check is reported, never hidden.
"""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass, field
from typing import Any, Optional

import numpy as np

from . import limits
from . import transformer as tr
from .frameworks import ELTWISE_OPS, ELTWISE_STREAMS, IMPLEMENTATIONS, SCALE_ALPHA, Implementation
from .measure import Progress, Timing, time_best_of, time_with_copies

Shape = tuple[int, int, int]  # dense (N, K, M): x [N,K] @ w [K,M]

#: Bytes of [N, M] arrays a transformer op's in-cache timing touches, at most (in L2).
IN_CACHE_BYTES = 512 << 10
#: Largest sampled error, relative to the largest sampled reference value, that passes.
TOLERANCE = {"float32": 1e-4, "float64": 1e-10}


@dataclass
class Settings:
    """What every worker measures, and how long it may take."""

    elements: int
    dense_shapes: list[Shape]
    dense_shapes_f64: list[Shape]
    repeats: int
    budget_s: float  # timed runs of one measurement stop after this much
    max_call_s: float  # skip a dense measurement predicted to take longer per call
    min_time_s: float = 0.0  # timed runs of one measurement span at least this much (within the budget)
    dtypes: tuple[str, ...] = ("float32", "float64")
    transformer_shape: Optional[tuple[int, int]] = None  # [N, M] float32 of the transformer section; None: none

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class WorkerResult:
    """What a worker prints: its identity and every measurement."""

    impl: str
    builtin: bool
    version: str
    level: Optional[str] = None  # opforge's ISA level in use
    pinned: Optional[int] = None  # a framework confined to this many cores (None: its defaults)
    measurements: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def _eltwise_inputs(n: int, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(20261)
    return rng.standard_normal(n, dtype=np.dtype(dtype).type), rng.standard_normal(n, dtype=np.dtype(dtype).type)


def _dense_inputs(shape: Shape, dtype: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n, k, m = shape
    rng = np.random.default_rng(20262)
    t = np.dtype(dtype).type
    x = rng.standard_normal((n, k), dtype=t)
    w = rng.standard_normal((k, m), dtype=t)
    w *= t(1 / math.sqrt(k))
    return x, w, rng.standard_normal(m, dtype=t)


def _relative_error(result: np.ndarray, reference: np.ndarray) -> float:
    scale = float(np.max(np.abs(reference))) if reference.size else 0.0
    error = float(np.max(np.abs(result.astype(np.float64) - reference))) if reference.size else 0.0
    return error / scale if scale > 0 else error


def _eltwise_check(op: str, x: np.ndarray, b: np.ndarray, result: np.ndarray) -> float:
    step = max(1, x.size // 4096)  # about 4096 sampled elements
    xs, bs = x[::step].astype(np.float64), b[::step].astype(np.float64)
    reference = {"relu": np.maximum(xs, 0), "scale": xs * SCALE_ALPHA, "add": xs + bs}[op]
    return _relative_error(np.asarray(result).reshape(-1)[::step], reference)


def _dense_check(x: np.ndarray, w: np.ndarray, b: np.ndarray, result: np.ndarray) -> float:
    rows = np.unique(np.linspace(0, x.shape[0] - 1, num=min(16, x.shape[0])).astype(int))
    reference = np.maximum(x[rows].astype(np.float64) @ w.astype(np.float64) + b, 0)
    return _relative_error(np.asarray(result)[rows], reference)


class Worker:
    """Runs every measurement of one implementation."""

    def __init__(self, impl: Implementation, settings: Settings, progress: Progress, level: Optional[str],
                 pinned: Optional[int] = None) -> None:
        self.impl = impl
        self.settings = settings
        self.progress = progress
        self.result = WorkerResult(impl.name, impl.builtin, impl.version(), level, pinned)
        self.all_threads = impl.threads("dense") if not impl.builtin else None
        self._cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
        self._copier: Optional[limits.Copier] = None  # the copies timed beside each op (_copier_of)

    def label(self) -> str:
        if self.result.pinned:
            return f"{self.impl.name}[{self.result.pinned} core]"
        return f"{self.impl.name}[{self.result.level}]" if self.result.level else self.impl.name

    def _threads_of(self, threads: Optional[int], section: str) -> Optional[int]:
        """The thread count an entry records: opforge's setting, a pinned
        framework's cores, else what the framework says it uses."""
        return threads or self.result.pinned or self.impl.threads(section)

    def thread_counts(self) -> list[Optional[int]]:
        """opforge: all threads, then 1; a framework: its own default (None)."""
        if self.impl.builtin or not self.all_threads:
            return [None]
        return [self.all_threads] if self.all_threads == 1 else [self.all_threads, 1]

    def _set_threads(self, threads: Optional[int]) -> None:
        """opforge's thread count; on one thread, the calling thread (which
        runs the whole op then) is confined to one core, as a pinned
        framework's worker is, and freed again for more threads."""
        if threads is not None:
            import opforge

            opforge.set_num_threads(threads)
            if self._cores:
                os.sched_setaffinity(0, self._cores[:1] if threads == 1 else self._cores)

    def _time(self, what: str, runner: Any, unit_work: float, unit: str) -> Timing:
        self.progress.begin(f"{self.label()}: {what}")
        timing = time_best_of(runner, self.settings.repeats, self.settings.budget_s, self.settings.min_time_s)
        self.progress.end(f"{unit_work / timing.best_s / 1e9:8.1f} {unit}")
        return timing

    def _time_maybe_beside(self, what: str, runner: Any, nbytes: float, copier: Optional[limits.Copier],
                           threads: Optional[int], section: str) -> tuple[Timing, Optional[float]]:
        """_time of an op that moves nbytes, with a copy of copier's size after
        each run (every variant) where there is a copier, on the op's threads
        (a framework at its default threads: on every core this worker has):
        the op's Timing and the copies' best GB/s (None without copies)."""
        if copier is None:
            return self._time(what, runner, nbytes, "GB/s"), None
        copy_threads = self._threads_of(threads, section) or max(1, len(self._cores))
        self.progress.begin(f"{self.label()}: {what}")
        timing, copies = time_with_copies(runner, copier.runs(copy_threads), self.settings.repeats,
                                          self.settings.budget_s, self.settings.min_time_s)
        copy_gbs = copier.gbs(copies.best_s)
        self.progress.end(f"{nbytes / timing.best_s / 1e9:8.1f} GB/s (copy beside it: {copy_gbs:.1f} GB/s)")
        return timing, copy_gbs

    def _record(self, entry: dict[str, Any], timing: Timing, error: float, dtype: str) -> None:
        entry.update(timing.as_json())
        entry["check_error"] = error
        entry["check_ok"] = bool(error <= TOLERANCE[dtype])
        if not entry["check_ok"]:
            self.progress.note(f"WARNING: {self.label()} {entry['section']} result differs from NumPy by {error:.2e}")
        self.result.measurements.append(entry)

    def run(self) -> WorkerResult:
        for dtype in self.settings.dtypes:
            self._guard(self.eltwise, dtype)
        for dtype in self.settings.dtypes:
            shapes = self.settings.dense_shapes if dtype == "float32" else self.settings.dense_shapes_f64
            self._guard(self.dense, dtype, shapes)
        if self.settings.transformer_shape:
            for op in tr.OPS:
                self._guard(self.transformer, op, self.settings.transformer_shape)
        return self.result

    def _guard(self, section: Any, *args: Any) -> None:
        """Runs a section; an exception becomes an error entry, not a crash."""
        try:
            section(*args)
        except Exception as exc:  # a framework may lack an op or a dtype
            self.progress.end(f"failed: {type(exc).__name__}")
            self.result.errors.append(f"{self.label()} {section.__name__} {args[0]}: {type(exc).__name__}: {exc}")
        finally:
            self._set_threads(self.all_threads)

    def eltwise(self, dtype: str) -> None:
        n = self.settings.elements
        x, b = _eltwise_inputs(n, dtype)
        out = np.empty_like(x)
        out.fill(0)  # touch every page once, before timing
        copier = self._copier_of(x)
        for op in ELTWISE_OPS:
            nbytes = ELTWISE_STREAMS[op] * x.nbytes
            for threads in self.thread_counts():
                self._set_threads(threads)
                what = f"{op} {dtype} {n}" + (f", {threads} thread(s)" if threads else "")
                timing, copy_gbs = self._time_maybe_beside(what, self.impl.eltwise(op, x, b, out), nbytes, copier,
                                                           threads, "elementwise")
                error = _eltwise_check(op, x, b, self.impl.to_numpy(timing.result))
                entry = {
                    "section": "elementwise",
                    "op": op,
                    "dtype": dtype,
                    "elements": n,
                    "impl": self.impl.name,
                    "level": self.result.level,
                    "threads": self._threads_of(threads, "elementwise"),
                    "bytes": nbytes,
                    "gbs": nbytes / timing.best_s / 1e9,
                }
                if copy_gbs is not None:
                    entry["copy_beside_gbs"] = copy_gbs
                self._record(entry, timing, error, dtype)
        self._set_threads(self.all_threads)

    def dense(self, dtype: str, shapes: list[Shape]) -> None:
        rates: dict[Optional[int], float] = {}  # last flop rate per thread count, to predict
        for shape in shapes:
            x, w, b = _dense_inputs(shape, dtype)
            out = np.zeros((shape[0], shape[2]), dtype)
            flops = 2.0 * shape[0] * shape[1] * shape[2]
            name = "x".join(str(d) for d in shape)
            for threads in self.thread_counts():
                what = f"dense {name} {dtype}" + (f", {threads} thread(s)" if threads else "")
                predicted = flops / rates[threads] if threads in rates else 0.0
                if predicted > self.settings.max_call_s:
                    reason = f"about {predicted:.1f} s per call predicted (limit {self.settings.max_call_s:g} s)"
                    self.progress.note(f"{self.label()}: {what}: skipped, {reason}")
                    self.result.skipped.append(
                        {"section": "dense", "shape": list(shape), "dtype": dtype, "impl": self.impl.name,
                         "level": self.result.level, "threads": threads, "reason": reason}
                    )
                    continue
                self._set_threads(threads)
                timing = self._time(what, self.impl.dense(x, w, b, out), flops, "GFLOP/s")
                rates[threads] = flops / timing.best_s
                error = _dense_check(x, w, b, self.impl.to_numpy(timing.result))
                entry = {
                    "section": "dense",
                    "shape": list(shape),
                    "dtype": dtype,
                    "impl": self.impl.name,
                    "level": self.result.level,
                    "threads": self._threads_of(threads, "dense"),
                    "flops": flops,
                    "gflops": flops / timing.best_s / 1e9,
                }
                self._record(entry, timing, error, dtype)
        self._set_threads(self.all_threads)


    def transformer(self, op: str, shape: tuple[int, int]) -> None:
        """One op of the transformer section (transformer.py), float32, if the implementation has it."""
        data = tr.make_data(op, shape)
        runner = self.impl.transformer(data)
        if runner is None:
            return
        nbytes = tr.STREAMS[op] * data.x.nbytes
        in_cache = None if self.impl.builtin else self._in_cache_time(op, shape)
        copier = self._copier_of(tr.copied_input(data))
        for threads in self.thread_counts():
            self._set_threads(threads)
            what = f"{op} float32 {shape[0]}x{shape[1]}" + (f", {threads} thread(s)" if threads else "")
            timing, copy_gbs = self._time_maybe_beside(what, runner, nbytes, copier, threads, "transformer")
            outputs = timing.result if isinstance(timing.result, (tuple, list)) else (timing.result,)
            error = tr.check(data, [self.impl.to_numpy(o) for o in outputs])
            entry = {
                "section": "transformer",
                "op": op,
                "pass": "backward" if tr.is_backward(op) else "forward",
                "shape": list(shape),
                "dtype": "float32",
                "impl": self.impl.name,
                "level": self.result.level,
                "threads": self._threads_of(threads, "transformer"),
                "bytes": nbytes,
                "gbs": nbytes / timing.best_s / 1e9,
            }
            if in_cache is not None:
                entry["in_cache_s"] = in_cache
            if copy_gbs is not None:
                entry["copy_beside_gbs"] = copy_gbs
            self._record(entry, timing, error, "float32")
        self._set_threads(self.all_threads)

    def _copier_of(self, source: np.ndarray) -> Optional[limits.Copier]:
        """The copies timed beside every implementation's elementwise and
        transformer ops: of ``source``, the op's input, into a buffer of the
        copier's own, so that an op's share of the copy roof compares two
        measurements of one moment (on a shared machine the bandwidth moves by
        tens of percent between the limits' rounds and an op's runs), and so
        do opforge's ratios to the frameworks, each measured in its own worker
        at its own moment (report.py: vs_best_builtin_beside). Reading the
        op's own input, the copies leave it where the op's last run did (in
        the last-level cache, where it fits) rather than pushing it out
        between the op's runs (limits.Copier). None without the probe."""
        if not limits.probe_available():
            return None
        if self._copier is None or self._copier.source is not source:
            self._copier = limits.Copier(source.size, source)
        return self._copier

    def _in_cache_time(self, op: str, shape: tuple[int, int]) -> Optional[float]:
        """The op's arithmetic floor: seconds per [N, M] call on one thread,
        from calls on a few rows whose arrays stay in L2 (IN_CACHE_BYTES),
        less a two-row call's (which carries the fixed cost of a call, and
        of its sums over rows: a single row may take a shorter path); None if
        too few rows fit or the difference is lost in noise."""
        n, m = shape
        rows = min(n, IN_CACHE_BYTES // (tr.STREAMS[op] * m * 4))
        if rows < 6:
            return None
        self._set_threads(1)
        timings = []
        for r in (rows, 2):
            runner = self.impl.transformer(tr.make_data(op, (r, m)))
            timings.append(self._time(f"{op} float32 {r}x{m} in cache, 1 thread", runner,
                                      tr.STREAMS[op] * r * m * 4, "GB/s").best_s)
        per_row = (timings[0] - timings[1]) / (rows - 2)
        return per_row * n if per_row > 0 else None


def run_worker(impl_name: str, settings: Settings, progress: Progress, requested_level: Optional[str],
               pinned: Optional[int] = None) -> WorkerResult:
    """Measures one implementation; for opforge, at the level OPFORGE_ISA set
    (the level actually used is reported, and a mismatch is an error entry)."""
    impl = IMPLEMENTATIONS[impl_name]()
    level = None
    if impl_name == "opforge":
        import opforge

        level = str(opforge.info()["isa"])
    worker = Worker(impl, settings, progress, level, pinned)
    if requested_level and level != requested_level:
        worker.result.errors.append(f"asked for ISA level {requested_level}, opforge used {level}")
        progress.note(f"WARNING: asked for ISA level {requested_level}, opforge used {level}")
    return worker.run()

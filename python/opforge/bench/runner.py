"""``opforge bench``: options, and the run that ties the pieces together.

The parent process measures the machine's limits (limits.py), then starts one
worker process per opforge ISA level (with ``OPFORGE_ISA`` set) and one per
installed framework (worker.py), each printing its measurements as one JSON
line on stdout, and finally computes the ratios, prints the table and writes
the JSON and PNG files (report.py, plot.py).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import site
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Optional

from . import limits as limits_mod
from .machine import ISA_LEVELS, installed_frameworks, machine_info, supported_levels
from .measure import Progress
from .frameworks import FRAMEWORKS
from .worker import Settings, Shape, run_worker

#: A worker's stdout line holding its result (frameworks may print other lines).
RESULT_MARKER = "OPFORGE-BENCH-RESULT "
#: A worker to run: the implementation, opforge's ISA level, the cores a framework is pinned to.
Job = tuple[str, Optional[str], Optional[int]]
#: Timed runs per machine-limit measurement, at least (the runs are short).
LIMIT_REPEATS = 10


@dataclass(frozen=True)
class Defaults:
    """What a run measures unless told otherwise."""

    elements: int
    sizes: str
    sizes_f64: str
    repeats: int
    budget_s: float
    max_call_s: float
    min_time_s: float
    fma_s: float  # length of one FMA-peak run
    transformer: str  # N x M of the transformer section


FULL = Defaults(elements=1 << 24, sizes="256,512,1024,2048,32x1024x1024", sizes_f64="1024", repeats=10,
                budget_s=2.0, max_call_s=3.0, min_time_s=0.25, fma_s=0.05, transformer="8192x4096")
QUICK = Defaults(elements=1 << 22, sizes="256,512,32x512x512", sizes_f64="256", repeats=3, budget_s=0.5,
                 max_call_s=1.0, min_time_s=0.0, fma_s=0.02, transformer="1024x4096")


def parse_shapes(text: str) -> list[Shape]:
    """"256,32x1024x512" -> [(256, 256, 256), (32, 1024, 512)]: N, or NxKxM."""
    shapes: list[Shape] = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        dims = [int(d) for d in item.lower().split("x")]
        if len(dims) == 1:
            dims *= 3
        if len(dims) != 3 or min(dims) < 1:
            raise argparse.ArgumentTypeError(f"bad dense shape {item!r}: expected N or NxKxM, all >= 1")
        shapes.append((dims[0], dims[1], dims[2]))
    return shapes


def parse_rows(text: str) -> Optional[tuple[int, int]]:
    """"8192x4096" -> (8192, 4096): N rows of M; "" or "0" -> None (no transformer section)."""
    if text.strip() in ("", "0"):
        return None
    dims = [int(d) for d in text.lower().split("x")]
    if len(dims) != 2 or min(dims) < 1:
        raise argparse.ArgumentTypeError(f"bad transformer shape {text!r}: expected NxM, both >= 1")
    return dims[0], dims[1]


def _rows_text(text: str) -> str:
    parse_rows(text)  # checked now, parsed in settings_from
    return text


def _names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``opforge bench`` (hidden ones are for workers and tests)."""
    parser.add_argument("--json", type=Path, default=Path("opforge-bench.json"), metavar="PATH",
                        help="where to write every measurement and ratio (default: %(default)s)")
    parser.add_argument("--png", type=lambda text: Path(text) if text else None, default=Path("opforge-bench.png"),
                        metavar="PATH",
                        help="where to write the plot, if matplotlib is installed (default: %(default)s; '' for none)")
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run: fewer repeats and sizes (16M -> 4M elements, dense up to 512, "
                             f"transformer {FULL.transformer} -> {QUICK.transformer})")
    parser.add_argument("--transformer", type=_rows_text, metavar="NxM",
                        help=f"float32 shape of the transformer section (default {FULL.transformer}, --quick "
                             f"{QUICK.transformer}; 0 for none)")
    parser.add_argument("--repeats", type=int, metavar="N",
                        help=f"timed runs per measurement at least, best one kept (default {FULL.repeats}, "
                             f"--quick {QUICK.repeats}; fast ones run more, to span {FULL.min_time_s:g} s)")
    parser.add_argument("--levels", type=_names, metavar="L1,L2",
                        help="opforge ISA levels to measure (default: every level this CPU supports)")
    parser.add_argument("--frameworks", type=_names, metavar="F1,F2",
                        help="built-ins to compare with, among numpy,torch,tensorflow,jax "
                             "(default: every one installed; '' for none)")
    hidden = argparse.SUPPRESS
    parser.add_argument("--elements", type=int, help=hidden)
    parser.add_argument("--sizes", type=parse_shapes, help=hidden)
    parser.add_argument("--sizes-f64", type=parse_shapes, help=hidden)
    parser.add_argument("--budget", type=float, help=hidden)
    parser.add_argument("--max-call", type=float, help=hidden)
    parser.add_argument("--min-time", type=float, help=hidden)
    parser.add_argument("--fma-seconds", type=float, help=hidden)
    parser.add_argument("--worker", nargs="?", const="opforge", default=None, help=hidden)
    parser.add_argument("--isa", help=hidden)
    parser.add_argument("--pin", type=int, help=hidden)
    parser.add_argument("--started-at", type=float, help=hidden)


def settings_from(args: argparse.Namespace) -> Settings:
    """Settings from the options, defaults from FULL or QUICK."""
    base = QUICK if args.quick else FULL
    return Settings(
        elements=args.elements if args.elements is not None else base.elements,
        dense_shapes=args.sizes if args.sizes is not None else parse_shapes(base.sizes),
        dense_shapes_f64=args.sizes_f64 if args.sizes_f64 is not None else parse_shapes(base.sizes_f64),
        repeats=args.repeats if args.repeats is not None else base.repeats,
        budget_s=args.budget if args.budget is not None else base.budget_s,
        max_call_s=args.max_call if args.max_call is not None else base.max_call_s,
        min_time_s=args.min_time if args.min_time is not None else base.min_time_s,
        transformer_shape=parse_rows(base.transformer if args.transformer is None else args.transformer),
    )


def _shapes_text(shapes: list[Shape]) -> str:
    return ",".join("x".join(str(d) for d in shape) for shape in shapes) or ","


def worker_command(impl: str, level: Optional[str], settings: Settings, started_at: float,
                   pinned: Optional[int] = None) -> list[str]:
    """The command line of a worker process measuring impl (at level; a
    framework pinned to `pinned` cores, or None for its defaults)."""
    command = [sys.executable, "-m", "opforge", "bench", "--worker", impl,
               "--elements", str(settings.elements), "--sizes", _shapes_text(settings.dense_shapes),
               "--sizes-f64", _shapes_text(settings.dense_shapes_f64), "--repeats", str(settings.repeats),
               "--budget", repr(settings.budget_s), "--max-call", repr(settings.max_call_s),
               "--min-time", repr(settings.min_time_s),
               "--transformer", "x".join(map(str, settings.transformer_shape or (0,))),
               "--started-at", repr(started_at)]
    return command + (["--isa", level] if level else []) + (["--pin", str(pinned)] if pinned else [])


#: Thread-count variables of the libraries frameworks use (OpenMP, BLAS), set for a pinned worker.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def _worker_env(level: Optional[str], pinned: Optional[int] = None) -> dict[str, str]:
    """The parent's environment, with this opforge importable, the level set,
    and for a pinned worker its libraries' thread counts."""
    import opforge

    env = dict(os.environ)
    package_parent = str(Path(opforge.__file__).resolve().parent.parent)
    site_dirs = {str(Path(p).resolve()) for p in [*getattr(site, "getsitepackages", list)(), site.getusersitepackages()]}
    if package_parent not in site_dirs:  # an in-tree build, found through sys.path
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_parent, env.get("PYTHONPATH")]))
    if level:
        env["OPFORGE_ISA"] = level
    if pinned:
        env.update({name: str(pinned) for name in THREAD_VARIABLES})
    return env


def spawn_worker(impl: str, level: Optional[str], settings: Settings, started_at: float,
                 pinned: Optional[int] = None) -> dict[str, Any]:
    """Runs a worker process; its result, or one with an error entry if it failed."""
    command = worker_command(impl, level, settings, started_at, pinned)
    proc = subprocess.run(command, stdout=subprocess.PIPE, text=True, env=_worker_env(level, pinned))
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(RESULT_MARKER):
            return dict(json.loads(line[len(RESULT_MARKER):]))
    failure = f"worker {impl}{'/' + level if level else ''} exited with status {proc.returncode} and no result"
    return {"impl": impl, "builtin": impl != "opforge", "version": None, "level": level, "pinned": pinned,
            "measurements": [], "skipped": [], "errors": [failure]}


def pin_to_cores(count: int) -> None:
    """Confines this process to `count` of the cores it may run on, before any
    framework is imported: every framework then sizes its thread pools to
    them (an affinity mask is the one setting all of them honour; JAX's XLA
    flags for threads, for one, are ignored by its CPU runtime)."""
    os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:count])


def worker_main(args: argparse.Namespace) -> int:
    """``--worker IMPL``: measure and print one JSON result line on stdout."""
    if args.isa and "OPFORGE_ISA" not in os.environ:
        os.environ["OPFORGE_ISA"] = args.isa  # read when opforge first dispatches
    settings = settings_from(args)
    prefix = "  " if args.started_at is not None else ""
    progress = Progress(args.started_at, prefix=prefix)
    if args.pin:
        pin_to_cores(args.pin)
    result = run_worker(args.worker, settings, progress, args.isa, args.pin)
    sys.stdout.write(RESULT_MARKER + json.dumps(asdict(result)) + "\n")
    sys.stdout.flush()
    return 0


def _choose(requested: Optional[list[str]], available: list[str], known: tuple[str, ...], what: str,
            progress: Progress) -> list[str]:
    """The requested names that are available here (a warning for each other)."""
    if requested is None:
        return available
    chosen = []
    for name in requested:
        if name not in known:
            raise SystemExit(f"opforge bench: unknown {what} {name!r}; known: {', '.join(known)}")
        if name in available:
            chosen.append(name)
        else:
            progress.note(f"{what} {name} is not available here: skipped")
    return chosen


def measure_limits(settings: Settings, thread_counts: list[int], fma_target_s: float, progress: Progress,
                   round_: int) -> list[limits_mod.Limit]:
    """One round of machine-limit measurements (none if the probe is missing)."""
    if not limits_mod.probe_available():
        progress.note("opforge._probe is missing (package built without it): no copy or peak measurements")
        return []
    progress.note(f"machine limits, round {round_}")
    repeats = max(LIMIT_REPEATS, settings.repeats)
    # The copy roof of each section at its own size (limits.py says why): the
    # elementwise section's elements and the transformer section's [N, M].
    sizes = [settings.elements] + ([math.prod(settings.transformer_shape)] if settings.transformer_shape else [])
    copies = [limit for elements in dict.fromkeys(map(limits_mod.copy_elements, sizes))
              for limit in limits_mod.measure_copy(elements, thread_counts, repeats, settings.budget_s,
                                                   settings.min_time_s, progress, round_)]
    return (copies
            + limits_mod.measure_fma(thread_counts, repeats, settings.budget_s, settings.min_time_s, fma_target_s,
                                     progress, round_))


def bench_main(args: argparse.Namespace) -> int:
    """``opforge bench``: the whole run. Exit status 1 if a worker failed or a
    result did not match NumPy (the report is written all the same)."""
    if args.worker is not None:
        return worker_main(args)
    from . import plot, report  # the parent only

    started = time.time()
    progress = Progress(started)
    settings = settings_from(args)
    levels = _choose(args.levels, supported_levels(), ISA_LEVELS, "ISA level", progress)
    frameworks = _choose(args.frameworks, installed_frameworks(), FRAMEWORKS, "framework", progress)
    machine = machine_info()
    progress.note(f"opforge bench on {machine['cpu_model']}, {machine['cores']} cores, "
                  f"opforge threads {machine['opforge_threads']}; levels {','.join(levels) or 'none'}; "
                  f"built-ins {','.join(frameworks) or 'none'}")
    all_threads = int(machine["opforge_threads"])
    thread_counts = [1] if all_threads == 1 else [1, all_threads]
    fma_target = args.fma_seconds if args.fma_seconds is not None else (QUICK if args.quick else FULL).fma_s

    # Limits before each worker and after the last, the best kept: the machine's
    # bandwidth and peak, as other processes leave them, change over a run.
    # opforge runs on 1 and all threads; each framework at its defaults and,
    # for the comparison with opforge's 1-thread run, pinned to one core (not
    # NumPy, whose elementwise ufuncs use one thread anyway). The pinned
    # workers skip the dense section.
    jobs: list[Job] = [("opforge", level, None) for level in levels] + [(name, None, None) for name in frameworks]
    if all_threads > 1 and hasattr(os, "sched_setaffinity"):  # (Linux: an affinity mask to pin with)
        jobs += [(name, None, 1) for name in frameworks if name != "numpy"]
    measured: list[limits_mod.Limit] = []
    workers = []
    for round_, (impl, level, pinned) in enumerate(jobs, start=1):
        measured += measure_limits(settings, thread_counts, fma_target, progress, round_)
        if level:
            progress.note(f"opforge at ISA level {level} (a worker process with OPFORGE_ISA={level})")
        else:
            progress.note(f"{impl} built-ins (a worker process{', pinned to one core' if pinned else ''})")
        # The transformer section (long: 22 ops at [8192, 4096]) runs at the best level only.
        best = level is None or level == max(levels, key=ISA_LEVELS.index)
        worker_settings = settings if best else replace(settings, transformer_shape=None)
        if pinned:
            worker_settings = replace(worker_settings, dense_shapes=[], dense_shapes_f64=[])
        workers.append(spawn_worker(impl, level, worker_settings, started, pinned))
    measured += measure_limits(settings, thread_counts, fma_target, progress, len(jobs) + 1)

    result = report.build(machine, settings, args, measured, workers, time.time() - started, fma_target)
    print(report.format_text(result))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1) + "\n")
    progress.note(f"wrote {args.json}")
    if args.png:
        progress.note(plot.write_png(result, args.png))
    progress.note(f"done in {time.time() - started:.1f} s")
    return 1 if result["errors"] else 0

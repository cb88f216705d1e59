"""The results of ``opforge bench``: ratios, the JSON document, the text table.

Ratios (all measured in the same run):

- elementwise GB/s / the copy roof at the same thread count (limits.py);
- transformer ops: GB/s (the [N, M] arrays read and written, transformer.py's
  STREAMS) / the copy roof of [N, M] float32, i.e. a copy's time of the same
  bytes / the op's;
- dense GFLOP/s / the FMA peak for its dtype at the same thread count;
- each / the fastest built-in (any framework) on the same op, dtype and
  size: for the transformer ops, the fastest built-in's time / opforge's.
  opforge on all threads is compared with the frameworks at their default
  threads; opforge on one thread with the frameworks pinned to one core
  (and NumPy's single-threaded ufuncs), where the run has them;
- elementwise and transformer rows also / the copy timed beside them
  (vs_copy_beside: a copy of the op's input, read in place, after each of
  the op's runs, on its threads; worker.py), which the transformer rows'
  bound uses, and the same comparison with the fastest built-in made of those shares
  (vs_best_builtin_beside): every implementation runs in a worker of its
  own, minutes apart, and on a shared machine the bandwidth moves by tens
  of percent between them; the copy beside each moves with it.

A built-in whose thread count is unknown is compared with the roof at all
threads. The JSON keeps every raw time (every timed run) next to the ratios.
"""

from __future__ import annotations

import argparse
import datetime
import math
from typing import Any, Optional, Sequence

from . import limits as limits_mod
from .limits import COPY_LABELS
from .measure import STATISTIC, STATISTIC_TEXT
from .transformer import OPS
from .worker import Settings

SCHEMA = "opforge-bench/1"


def _roof_for(roof: dict[str, float], threads: Optional[int]) -> Optional[float]:
    """The roof at a thread count; the highest thread count's when unknown."""
    if not roof:
        return None
    if threads is not None and str(threads) in roof:
        return roof[str(threads)]
    return roof[max(roof, key=int)]


def _ratio(value: float, base: Optional[float]) -> Optional[float]:
    return value / base if base else None


def _peers(entry: dict[str, Any], builtins: list[dict[str, Any]], all_threads: int) -> list[dict[str, Any]]:
    """The built-in entries (same op/shape and dtype) an entry is compared
    with: those at its own thread count when it runs on fewer than all
    threads (opforge on one thread) or is pinned, if the run has any; else
    those at their default threads."""
    if entry.get("pinned") or (not entry["builtin"] and entry["threads"] != all_threads):
        same = [b for b in builtins if b["threads"] == entry["threads"]]
        if same:
            return same
    return [b for b in builtins if not b.get("pinned")]


def _fastest_peers(entries: list[dict[str, Any]], key: str, value: str,
                   all_threads: int) -> list[tuple[dict[str, Any], Optional[dict[str, Any]]]]:
    """Each entry with the fastest of its _peers by `value` (None without
    peers); built-ins without `value` are no one's peers."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for entry in entries:
        if entry["builtin"] and entry.get(value):
            groups.setdefault((str(entry[key]), entry["dtype"]), []).append(entry)
    pairs = []
    for entry in entries:
        peers = _peers(entry, groups.get((str(entry[key]), entry["dtype"]), []), all_threads)
        pairs.append((entry, max(peers, key=lambda e: float(e[value])) if peers else None))
    return pairs


def _add_ratios(entries: list[dict[str, Any]], key: str, value: str, roofs: dict[str, dict[str, float]],
                roof_name: str, all_threads: int) -> None:
    """Adds vs_<roof_name>, vs_best_builtin and best_builtin (the fastest of
    its _peers) to each entry."""
    for entry, fastest in _fastest_peers(entries, key, value, all_threads):
        roof = _roof_for(roofs.get(entry["dtype"] if roof_name == "peak" else "float32", {}), entry["threads"])
        entry[f"vs_{roof_name}"] = _ratio(entry[value], roof)
        entry["vs_best_builtin"] = _ratio(entry[value], fastest[value]) if fastest else None
        entry["best_builtin"] = entry_label(fastest) if fastest else None


def _add_beside_ratios(entries: list[dict[str, Any]], key: str, all_threads: int) -> None:
    """Adds vs_best_builtin_beside and best_builtin_beside to each entry that
    has a copy timed beside it: vs_best_builtin with each side's speed taken
    relative to its own copy (vs_copy_beside), i.e. the fastest peer's time
    per copy over the entry's. Each implementation runs in its own worker, at
    its own moment; where the machine's bandwidth moved between them, the
    plain ratio of a memory-bound op moves with it and this one does not.
    (An op bound by its arithmetic does not slow down with the bandwidth:
    for it this ratio overcorrects, and the plain one is the figure.)"""
    for entry, fastest in _fastest_peers(entries, key, "vs_copy_beside", all_threads):
        ok = fastest is not None and bool(entry.get("vs_copy_beside"))
        entry["vs_best_builtin_beside"] = _ratio(entry["vs_copy_beside"], fastest["vs_copy_beside"]) if ok else None
        entry["best_builtin_beside"] = entry_label(fastest) if ok else None


_SAME_CALL = ("section", "op", "pass", "shape", "dtype", "impl", "level")


def _add_bounds(entries: list[dict[str, Any]], copy_roof: dict[str, float]) -> None:
    """Adds bound_s and vs_bound to each entry with an in-cache time: the
    slower of the copy roof's time for its bytes (the copy timed beside it
    where there is one) and its in-cache (arithmetic) time spread over its
    threads, and the share of that bound its time reaches (1: as fast as
    either limit allows). An in-cache time (one thread's) longer than the
    run itself spread over its threads, or than the same call's run on one
    thread, is dropped: it measured a path small calls take, not a floor."""
    def call(entry: dict[str, Any]) -> tuple[str, ...]:
        return tuple(str(entry.get(key)) for key in _SAME_CALL)

    one_thread = {call(entry): entry["best_s"] for entry in entries if entry["threads"] == 1}
    for entry in entries:
        in_cache, roof = entry.get("in_cache_s"), entry.get("copy_beside_gbs") or _roof_for(copy_roof, entry["threads"])
        if in_cache is not None and (in_cache / entry["threads"] > entry["best_s"] or
                                     in_cache > one_thread.get(call(entry), in_cache)):
            entry["in_cache_s"] = None  # slower than the whole run: not a floor (a path small calls take)
        if entry.get("in_cache_s") is None or not roof:
            continue
        entry["bound_s"] = max(entry["bytes"] / (roof * 1e9), in_cache / entry["threads"])
        entry["vs_bound"] = entry["bound_s"] / entry["best_s"]


def build(machine: dict[str, Any], settings: Settings, args: argparse.Namespace, measured: list[limits_mod.Limit],
          workers: list[dict[str, Any]], wall_s: float, fma_target_s: float) -> dict[str, Any]:
    """The JSON document of a run, with every ratio computed."""
    best = limits_mod.roofs(measured, settings.elements)
    copy_roof = {str(t): v for t, v in best["copy"].get("float32", {}).items()}
    transformer_roof = copy_roof
    if settings.transformer_shape:
        at_shape = limits_mod.roofs(measured, math.prod(settings.transformer_shape))["copy"].get("float32", {})
        transformer_roof = {str(t): v for t, v in at_shape.items()}
    peaks = {dtype: {str(t): v for t, v in per.items()} for dtype, per in best["fma"].items()}
    sections: dict[str, list[dict[str, Any]]] = {"elementwise": [], "dense": [], "transformer": []}
    skipped: list[dict[str, Any]] = []
    errors: list[str] = []
    for worker in workers:
        for entry in worker["measurements"]:
            entry = dict(entry, builtin=worker["builtin"], version=worker["version"], pinned=worker.get("pinned"))
            sections[entry["section"]].append(entry)
            if not entry["check_ok"]:
                errors.append(f"{entry_label(entry)} {entry['section']} {_what(entry)}: result differs from NumPy "
                              f"(relative error {entry['check_error']:.2e})")
        skipped += worker["skipped"]
        errors += worker["errors"]
    all_threads = int(machine["opforge_threads"])
    _add_ratios(sections["elementwise"], "op", "gbs", {"float32": copy_roof}, "copy", all_threads)
    _add_ratios(sections["transformer"], "op", "gbs", {"float32": transformer_roof}, "copy", all_threads)
    _add_bounds(sections["transformer"], transformer_roof)
    for entry in sections["elementwise"] + sections["transformer"]:
        if entry.get("copy_beside_gbs"):
            entry["vs_copy_beside"] = entry["gbs"] / entry["copy_beside_gbs"]
    _add_beside_ratios(sections["elementwise"], "op", all_threads)
    _add_beside_ratios(sections["transformer"], "op", all_threads)
    _add_ratios(sections["dense"], "shape", "gflops", peaks, "peak", all_threads)
    return {
        "schema": SCHEMA,
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "wall_s": wall_s,
        "statistic": STATISTIC,
        "statistic_text": STATISTIC_TEXT.format(repeats=settings.repeats, min_time=settings.min_time_s,
                                                budget=settings.budget_s),
        "settings": dict(settings.as_json(), quick=bool(args.quick), fma_run_s=fma_target_s),
        "machine": machine,
        "implementations": [
            {**{k: w[k] for k in ("impl", "level", "version", "builtin")}, "pinned": w.get("pinned")}
            for w in workers
        ],
        "limits": {
            "measurements": [limit.as_json() for limit in measured],
            "copy_roof_gbs": copy_roof,  # at the elementwise section's size
            "transformer_copy_roof_gbs": transformer_roof,  # at the transformer section's [N, M]
            "fma_peak_gflops": peaks,
        },
        **sections,
        "skipped": skipped,
        "errors": errors,
    }


# --------------------------------------------------------------------------
# Text
# --------------------------------------------------------------------------


def entry_label(entry: dict[str, Any]) -> str:
    """The implementation of an entry as the tables and the plot name it."""
    if entry.get("pinned"):
        return f"{entry['impl']} ({entry['pinned']} core)"
    return f"{entry['impl']}/{entry['level']}" if entry.get("level") else str(entry["impl"])


def _what(entry: dict[str, Any]) -> str:
    if entry["section"] != "dense":
        return f"{entry['op']} {entry['dtype']}"
    return f"{'x'.join(str(d) for d in entry['shape'])} {entry['dtype']}"


def _pct(ratio: Optional[float]) -> str:
    return "—" if ratio is None else f"{ratio:.0%}"


def _times(ratio: Optional[float], name: Optional[str], own: bool) -> str:
    if ratio is None:
        return "—"
    return f"{ratio:.2f}x" + ("" if own and abs(ratio - 1) < 1e-12 else f" {name}")


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[bool]) -> list[str]:
    """Aligned columns (right-aligned where `right` says), two-space indent."""
    widths = [max(len(str(row[i])) for row in [headers, *rows]) for i in range(len(headers))]

    def line(cells: Sequence[str]) -> str:
        parts = [c.rjust(w) if r else c.ljust(w) for c, w, r in zip(cells, widths, right)]
        return ("  " + "   ".join(parts)).rstrip()

    return [line(headers), *(line(row) for row in rows)]


def _threads(entry: dict[str, Any]) -> str:
    return "default" if entry["threads"] is None else str(entry["threads"])


def _limits_text(result: dict[str, Any]) -> list[str]:
    measurements = result["limits"]["measurements"]
    if not measurements:
        return ["Machine limits: not measured (opforge._probe missing)"]
    thread_counts = sorted({m["threads"] for m in measurements})
    headers = ["measurement", *(f"{t} thread{'s' if t > 1 else ''}" for t in thread_counts)]
    rows: list[list[str]] = []

    def row(label: str, pick: Any, fmt: str) -> None:
        rows.append([label, *(fmt.format(v) if (v := pick(t)) is not None else "—" for t in thread_counts)])

    def value_of(kind: str, variant: str, dtype: str, threads: int, elements: int = 0) -> Optional[float]:
        """The best of the rounds."""
        values = [float(m["value"]) for m in measurements
                  if (m["kind"], m["variant"], m["dtype"], m["threads"], m.get("elements", 0))
                  == (kind, variant, dtype, threads, elements)]
        return max(values) if values else None

    roofs = {"copy_roof_gbs": result["settings"]["elements"]}
    shape = result["settings"].get("transformer_shape")
    if shape:
        roofs["transformer_copy_roof_gbs"] = math.prod(shape)
    sizes = sorted({m["elements"] for m in measurements if m["kind"] == "copy"})
    for elements in sizes:
        of = f" of {elements}" if len(sizes) > 1 else ""
        for variant in dict.fromkeys(m["variant"] for m in measurements if m["kind"] == "copy"):
            row(f"copy{of}, {COPY_LABELS.get(variant, variant)} (GB/s)",
                lambda t: value_of("copy", variant, "float32", t, elements), "{:.1f}")
        for key, size in roofs.items():
            if limits_mod.copy_elements(size) == elements:
                what = "transformer ops" if key.startswith("transformer") else "elementwise ops"
                row(f"copy roof{of}: best of these, for the {what} (GB/s)",
                    lambda t: result["limits"][key].get(str(t)), "{:.1f}")
    for m in measurements:
        if m["kind"] == "fma" and m["threads"] == thread_counts[0] and m["round"] == 1:
            row(f"FMA peak, {m['dtype']} {m['variant']} (GFLOP/s)",
                lambda t: value_of("fma", m["variant"], m["dtype"], t), "{:.1f}")
    rounds = len({m["round"] for m in measurements})
    return [f"Machine limits (measured by this run in {rounds} rounds, before each worker and after the last: "
            f"the best; copies of {' and '.join(map(str, sizes))} float32)",
            *table(headers, rows, [False] + [True] * len(thread_counts))]


BESIDE_TEXT = ("same, per copy beside = that comparison with each one's speed taken relative to the copy timed "
               "beside it: each implementation runs at its own moment, and the machine's bandwidth may differ; for "
               "memory-bound rows, not for those bound by their arithmetic (a high vs bound with a long in-cache time)")


def _beside(e: dict[str, Any]) -> str:
    """The vs_best_builtin_beside column ("—" where there is none)."""
    fastest = e.get("best_builtin_beside")
    return _times(e.get("vs_best_builtin_beside"), fastest, entry_label(e) == fastest)


def _eltwise_text(result: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    for dtype in dict.fromkeys(e["dtype"] for e in result["elementwise"]):
        entries = [e for e in result["elementwise"] if e["dtype"] == dtype]
        rows = [[e["op"], entry_label(e), _threads(e), f"{e['gbs']:.1f}", _pct(e["vs_copy"]),
                 _pct(e.get("vs_copy_beside")),
                 _times(e["vs_best_builtin"], e["best_builtin"], entry_label(e) == e["best_builtin"]),
                 _beside(e) + ("  CHECK FAILED" if not e["check_ok"] else "")] for e in entries]
        lines += ["", f"Elementwise, {dtype}, {entries[0]['elements']} elements "
                      "(GB/s = bytes read + written / time; vs copy beside = vs a copy of the op's input timed "
                      f"after each of the op's runs, on its threads; {BESIDE_TEXT})",
                  *table(["op", "implementation", "threads", "GB/s", "vs copy roof", "vs copy beside",
                          "vs fastest built-in", "same, per copy beside"], rows,
                         [False, False, True, True, True, True, False, False])]
    return lines


def _dense_text(result: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    for dtype in dict.fromkeys(e["dtype"] for e in result["dense"]):
        entries = [e for e in result["dense"] if e["dtype"] == dtype]
        rows = [["x".join(str(d) for d in e["shape"]), entry_label(e), _threads(e), f"{e['gflops']:.1f}",
                 _pct(e["vs_peak"]),
                 _times(e["vs_best_builtin"], e["best_builtin"], entry_label(e) == e["best_builtin"])
                 + ("  CHECK FAILED" if not e["check_ok"] else "")] for e in entries]
        lines += ["", f"Dense, {dtype}: relu(x @ w + b), shape N x K x M (GFLOP/s = 2NKM / time)",
                  *table(["shape", "implementation", "threads", "GFLOP/s", "vs FMA peak", "vs fastest built-in"],
                         rows, [False, False, True, True, True, False])]
    return lines


def _transformer_text(result: dict[str, Any]) -> list[str]:
    entries = result.get("transformer", [])
    if not entries:
        return []
    def in_cache(e: dict[str, Any]) -> str:
        return "—" if e.get("in_cache_s") is None else f"{e['in_cache_s'] / e['threads'] * 1e3:.2f}"

    rows = [[e["op"], entry_label(e), _threads(e), f"{e['best_s'] * 1e3:.2f}", f"{e['gbs']:.1f}", _pct(e["vs_copy"]),
             _pct(e.get("vs_copy_beside")), in_cache(e), _pct(e.get("vs_bound")),
             _times(e["vs_best_builtin"], e["best_builtin"], entry_label(e) == e["best_builtin"]),
             _beside(e) + ("  CHECK FAILED" if not e["check_ok"] else "")] for e in entries]
    rows.sort(key=lambda row: OPS.index(row[0]))  # by op; implementations in run order
    n, m = entries[0]["shape"]
    return ["", f"Transformer ops, float32 [{n}, {m}], forward and gradient rows (GB/s = the [{n}, {m}] arrays "
                "read + written / time; vs copy beside = vs a copy of the op's input (x, dy for a gradient row) "
                "timed after each of its runs, on its threads (the roof of the same moments); in cache = opforge's "
                "arithmetic alone: its time on a few rows that stay in L2, scaled to all rows and spread over the "
                "threads; vs bound = the slower of that copy and that arithmetic, over the time; vs fastest "
                f"built-in = its time / this one's; {BESIDE_TEXT})",
            *table(["op", "implementation", "threads", "ms", "GB/s", "vs copy roof", "vs copy beside", "in cache ms",
                    "vs bound", "vs fastest built-in", "same, per copy beside"], rows,
                   [False, False, True, True, True, True, True, True, True, False, False])]


def format_text(result: dict[str, Any]) -> str:
    """The readable report: header, machine limits, then a table per section."""
    machine = result["machine"]
    versions = machine["versions"]
    others = ", ".join(f"{name} {versions.get(name) or '—'}" for name in ("numpy", "torch", "tensorflow", "jax"))
    environment = " ".join(f"{k}={v}" for k, v in machine["environment"].items()) or "none set"
    load = machine["load_average"]
    lines = [
        f"opforge bench, {result['date']}, wall time {result['wall_s']:.0f} s",
        f"CPU: {machine['cpu_model']} ({machine['architecture']}), {machine['cores']} cores; "
        f"opforge {versions['opforge']}, {machine['opforge_threads']} threads, "
        f"ISA levels {', '.join(machine['isa_levels'])}",
        f"Built-ins: {others}" + (f" (NumPy BLAS: {machine['numpy_blas']})" if machine.get("numpy_blas") else ""),
        f"Environment: {environment}; load average at start: "
        + (" ".join(f"{x:.2f}" for x in load) if load else "unknown"),
        f"Times: {result['statistic_text']}.",
        "Ratios: elementwise and transformer ops vs the copy roof, dense vs the FMA peak, each at the same "
        "thread count (built-ins at their default threads: vs all threads); and vs the fastest built-in: opforge "
        "on all threads vs the frameworks at their defaults, opforge on 1 thread vs the frameworks pinned to one "
        "core (\"(1 core)\"; not dense) and NumPy's one-thread ufuncs. The copy roof is a measured copy, not a "
        "hard bound: ops reading two arrays per one written (add, the gradient rows) may exceed it.",
        "",
        *_limits_text(result),
        *_eltwise_text(result),
        *_dense_text(result),
        *_transformer_text(result),
    ]
    if result["skipped"]:
        lines += ["", "Skipped:"]
        lines += [f"  {s['impl']}/{s['level']} dense {'x'.join(map(str, s['shape']))} {s['dtype']}, "
                  f"{s['threads']} thread(s): {s['reason']}" for s in result["skipped"]]
    if result["errors"]:
        lines += ["", "Problems:", *(f"  {e}" for e in result["errors"])]
    return "\n".join(lines)

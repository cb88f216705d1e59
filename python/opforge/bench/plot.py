"""The PNG of ``opforge bench`` (matplotlib, Agg backend; optional).

Two or three panels, at the all-threads setting of each implementation:

- elementwise GB/s, bars per op and dtype, one per implementation, with the
  copy roof at all threads (solid) and at 1 thread (dashed) as lines;
- dense GFLOP/s, bars per shape and dtype, one per implementation, with the
  FMA peaks (float32 and float64, all threads) as lines;
- if measured, the transformer ops' GB/s, bars per op, with the copy roof of
  their [N, M].
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from .report import entry_label


def _all_threads(entries: list[dict[str, Any]], max_threads: int) -> list[dict[str, Any]]:
    """opforge at all threads, built-ins at their default."""
    return [e for e in entries
            if (e["builtin"] and not e.get("pinned")) or (not e["builtin"] and e["threads"] == max_threads)]


def _bars(axis: Any, entries: list[dict[str, Any]], groups: list[str], group_of: Any, value: str) -> None:
    """Bars of entries[value] per group (x axis, in the given order), one colour per implementation."""
    groups = [g for g in groups if any(group_of(e) == g for e in entries)]
    labels = list(dict.fromkeys(entry_label(e) for e in entries))
    width = 0.8 / max(1, len(labels))
    for i, label in enumerate(labels):
        xs, ys = [], []
        for e in entries:
            if entry_label(e) == label:
                xs.append(groups.index(group_of(e)) + (i - (len(labels) - 1) / 2) * width)
                ys.append(e[value])
        axis.bar(xs, ys, width=width, label=label)
    axis.set_xticks(range(len(groups)))
    axis.set_xticklabels(groups, rotation=30, ha="right", fontsize=8)


def _roof_line(axis: Any, value: Optional[float], label: str, style: str, color: str) -> None:
    if value:
        axis.axhline(value, linestyle=style, color=color, linewidth=1.2, label=f"{label} {value:.0f}")


def _finish(axis: Any, ylabel: str, title: str) -> None:
    """Room above the tallest bar or line for the legend."""
    axis.set_ylim(0, axis.get_ylim()[1] * 1.3)
    axis.set_ylabel(ylabel)
    axis.set_title(title)
    axis.legend(fontsize=7, ncol=2, loc="upper left")


def _shape(shape: list[int]) -> str:
    return "x".join(map(str, shape))


def write_png(result: dict[str, Any], path: Path) -> str:
    """Writes the plot; returns a line saying what was done (or why not)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed: no PNG written (pip install matplotlib)"
    max_threads = int(result["machine"]["opforge_threads"])
    copy_roof = result["limits"]["copy_roof_gbs"]
    peaks = result["limits"]["fma_peak_gflops"]
    transformer = _all_threads(result.get("transformer", []), max_threads)
    figure, axes = plt.subplots(1, 3 if transformer else 2, figsize=(23 if transformer else 15, 6))
    left, right = axes[0], axes[1]
    settings = result["settings"]
    eltwise = _all_threads(result["elementwise"], max_threads)
    op_groups = [f"{op} {dtype}" for dtype in settings["dtypes"] for op in ("relu", "scale", "add")]
    _bars(left, eltwise, op_groups, lambda e: f"{e['op']} {e['dtype']}", "gbs")
    _roof_line(left, copy_roof.get(str(max_threads)), f"copy roof, {max_threads} threads", "-", "black")
    if max_threads != 1:
        _roof_line(left, copy_roof.get("1"), "copy roof, 1 thread", "--", "gray")
    _finish(left, "GB/s (bytes read + written)", f"Elementwise, {settings['elements']} elements")
    dense = _all_threads(result["dense"], max_threads)
    shape_groups = [f"{_shape(s)} float32" for s in settings["dense_shapes"]]
    shape_groups += [f"{_shape(s)} float64" for s in settings["dense_shapes_f64"]]
    _bars(right, dense, shape_groups, lambda e: f"{_shape(e['shape'])} {e['dtype']}", "gflops")
    for dtype, style in (("float32", "-"), ("float64", ":")):
        _roof_line(right, peaks.get(dtype, {}).get(str(max_threads)), f"FMA peak {dtype}", style, "black")
    _finish(right, "GFLOP/s", "Dense relu(x @ w + b), N x K x M")
    if transformer:
        _bars(axes[2], transformer, list(dict.fromkeys(e["op"] for e in transformer)), lambda e: e["op"], "gbs")
        transformer_roof = result["limits"].get("transformer_copy_roof_gbs", copy_roof)
        _roof_line(axes[2], transformer_roof.get(str(max_threads)), f"copy roof, {max_threads} threads", "-",
                   "black")
        n, m = transformer[0]["shape"]
        _finish(axes[2], "GB/s ([N, M] arrays read + written)", f"Transformer ops, float32 [{n}, {m}]")
    machine = result["machine"]
    figure.suptitle(f"opforge bench {result['date']} — {machine['cpu_model']}, {machine['cores']} cores, "
                    f"{max_threads} threads (built-ins: their default); best of {settings['repeats']}+ runs")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return f"wrote {path}"

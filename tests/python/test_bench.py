"""``opforge bench`` and ``opforge info`` end to end, on tiny sizes.

These check what the benchmark produces (JSON structure, ratios present, PNG
written, table printed), never how fast anything is: no timing assertions.
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import json
import os
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any, Optional

import pytest

import numpy as np

import opforge
from opforge import cli
from opforge.bench import report, runner
from opforge.bench import transformer as tr
from opforge.bench.frameworks import OpforgeImpl, Runner
from opforge.bench.machine import machine_info
from opforge.bench.measure import Progress
from opforge.bench.transformer import Data
from opforge.bench.worker import Settings, Worker

TINY = ["--elements", "4096", "--sizes", "32,4x16x8", "--sizes-f64", "16", "--repeats", "2", "--fma-seconds", "0.002",
        "--transformer", "8x64"]  # fmt: skip
#: The transformer ops NumPy has a built-in for.
NUMPY_TRANSFORMER_OPS = {"tanh", "add", "add_grad", "mul", "mul_grad"}


def _env() -> dict[str, str]:
    """This process's environment with the tested opforge importable."""
    env = dict(os.environ)
    parent = str(Path(opforge.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [parent, env.get("PYTHONPATH")]))
    return env


@pytest.fixture(scope="module")
def bench_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = tmp_path_factory.mktemp("bench")
    isa = opforge.info()["isa"]
    command = [sys.executable, "-m", "opforge", "bench", "--quick", "--levels", isa, "--frameworks", "numpy", *TINY,
               "--json", str(out / "bench.json"), "--png", str(out / "bench.png")]
    proc = subprocess.run(command, capture_output=True, text=True, env=_env(), timeout=300)
    return proc, out


def test_bench_runs_and_writes_json(bench_run: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    proc, out = bench_run
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result: dict[str, Any] = json.loads((out / "bench.json").read_text())
    assert result["schema"] == report.SCHEMA
    assert result["statistic"] == "best-of"
    assert result["errors"] == []
    machine = result["machine"]
    for key in ("cpu_model", "cores", "isa_levels", "opforge_threads", "versions", "environment"):
        assert key in machine
    assert machine["versions"]["opforge"] == opforge.__version__
    assert opforge.info()["isa"] in machine["isa_levels"]
    assert {i["impl"] for i in result["implementations"]} == {"opforge", "numpy"}

    threads = machine["opforge_threads"]
    copy_roof = result["limits"]["copy_roof_gbs"]
    assert set(copy_roof) == {"1", str(threads)} and all(v > 0 for v in copy_roof.values())
    # the transformer ops' roof: copies of their own [8, 64], not of the elementwise section's 4096 elements
    transformer_roof = result["limits"]["transformer_copy_roof_gbs"]
    assert set(transformer_roof) == {"1", str(threads)} and all(v > 0 for v in transformer_roof.values())
    copies = [m for m in result["limits"]["measurements"] if m["kind"] == "copy"]
    assert {m["elements"] for m in copies} == {4096, 8 * 64}
    for roof, elements in ((copy_roof, 4096), (transformer_roof, 8 * 64)):
        for t, value in roof.items():
            assert value == max(m["value"] for m in copies if m["elements"] == elements and m["threads"] == int(t))
    if machine["fma_probe_isas"]:
        assert set(result["limits"]["fma_peak_gflops"]) == {"float32", "float64"}
    assert {m["round"] for m in result["limits"]["measurements"]} == {1, 2, 3}  # before each worker, after the last

    eltwise = result["elementwise"]
    keys = {(e["impl"], e["op"], e["dtype"], e["threads"]) for e in eltwise}
    for op in ("relu", "scale", "add"):
        for dtype in ("float32", "float64"):
            assert ("numpy", op, dtype, 1) in keys
            assert ("opforge", op, dtype, threads) in keys and ("opforge", op, dtype, 1) in keys
    for entry in eltwise:
        assert entry["elements"] == 4096 and entry["gbs"] > 0 and entry["check_ok"]
        # a copy of the input's bytes timed beside each run, for every implementation
        assert entry["copy_beside_gbs"] > 0
        assert entry["vs_copy_beside"] == entry["gbs"] / entry["copy_beside_gbs"]
        assert entry["vs_copy"] > 0 and entry["vs_best_builtin"] > 0 and entry["best_builtin"] == "numpy"
        assert entry["best_builtin_beside"] == "numpy" and entry["vs_best_builtin_beside"] > 0
        assert 1 <= len(entry["samples_s"]) <= 2 and entry["best_s"] == min(entry["samples_s"])

    dense = result["dense"]
    assert {(tuple(e["shape"]), e["dtype"]) for e in dense} == {
        ((32, 32, 32), "float32"), ((4, 16, 8), "float32"), ((16, 16, 16), "float64")}
    for entry in dense:
        assert entry["gflops"] > 0 and entry["check_ok"] and entry["vs_best_builtin"] > 0
        assert entry["flops"] == 2 * entry["shape"][0] * entry["shape"][1] * entry["shape"][2]
        assert entry["level"] == (opforge.info()["isa"] if entry["impl"] == "opforge" else None)

    transformer = result["transformer"]
    transformer_keys = {(e["impl"], e["op"], e["threads"]) for e in transformer}
    assert transformer_keys == {("opforge", op, t) for op in tr.OPS for t in {1, threads}} | {
        ("numpy", op, 1) for op in NUMPY_TRANSFORMER_OPS}
    for entry in transformer:
        assert entry["shape"] == [8, 64] and entry["dtype"] == "float32" and entry["check_ok"]
        assert entry["pass"] == ("backward" if entry["op"].endswith("_grad") else "forward")
        assert entry["bytes"] == tr.STREAMS[entry["op"]] * 8 * 64 * 4 and entry["gbs"] > 0
        assert entry["vs_copy"] == entry["gbs"] / transformer_roof[str(entry["threads"] or threads)]
        # a copy of the same [8, 64] timed beside each run, on its threads, for every implementation
        assert entry["copy_beside_gbs"] > 0
        assert entry["vs_copy_beside"] == entry["gbs"] / entry["copy_beside_gbs"]
        if entry["impl"] == "opforge" and entry.get("in_cache_s") is not None:  # None: lost in noise
            assert entry["in_cache_s"] > 0 and entry["vs_bound"] == entry["bound_s"] / entry["best_s"]
            assert entry["bound_s"] == max(entry["bytes"] / (entry["copy_beside_gbs"] * 1e9),
                                           entry["in_cache_s"] / entry["threads"])
        else:
            assert entry.get("in_cache_s") is None and "vs_bound" not in entry
        if entry["op"] in NUMPY_TRANSFORMER_OPS:
            assert entry["best_builtin"] == "numpy" and entry["vs_best_builtin"] > 0
            assert entry["best_builtin_beside"] == "numpy" and entry["vs_best_builtin_beside"] > 0
        else:  # no built-in to compare with
            assert entry["best_builtin"] is None and entry["vs_best_builtin"] is None
            assert entry["best_builtin_beside"] is None and entry["vs_best_builtin_beside"] is None


def test_bench_prints_table_and_progress(bench_run: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    proc, _ = bench_run
    for heading in ("Machine limits", "Elementwise, float32", "Elementwise, float64", "Dense, float32",
                    "Dense, float64", "Transformer ops, float32 [8, 64]", "best of at least 2 timed runs"):
        assert heading in proc.stdout
    assert "vs fastest built-in" in proc.stdout
    progress = [line for line in proc.stderr.splitlines() if line.startswith("[")]
    assert any("relu float32 4096" in line for line in progress)
    assert any("layer_norm_grad float32 8x64" in line for line in progress)
    assert "CHECK FAILED" not in proc.stdout
    assert any("copy" in line and "GB/s" in line for line in progress)


def test_bench_png(bench_run: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    proc, out = bench_run
    if importlib.util.find_spec("matplotlib") is None:
        assert "matplotlib is not installed" in proc.stderr
        assert not (out / "bench.png").exists()
    else:
        assert (out / "bench.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_worker_prints_one_result_line() -> None:
    command = [sys.executable, "-m", "opforge", "bench", "--worker", "numpy", *TINY, "--sizes", "8", "--sizes-f64", ""]
    proc = subprocess.run(command, capture_output=True, text=True, env=_env(), timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.startswith(runner.RESULT_MARKER)]
    assert len(lines) == 1
    result = json.loads(lines[0][len(runner.RESULT_MARKER):])
    assert result["impl"] == "numpy" and result["builtin"] and result["errors"] == []
    assert len(result["measurements"]) == 3 * 2 + 1 + len(NUMPY_TRANSFORMER_OPS)


@pytest.mark.parametrize("framework", ["torch", "jax", "tensorflow"])
def test_framework_transformer_peers_agree(framework: str) -> None:
    """Each framework's peer of each transformer op computes what opforge's row does."""
    if importlib.util.find_spec(framework) is None:
        pytest.skip(f"{framework} is not installed")
    command = [sys.executable, "-m", "opforge", "bench", "--worker", framework, *TINY, "--elements", "64",
               "--sizes", "", "--sizes-f64", "", "--min-time", "0", "--budget", "0.01"]
    proc = subprocess.run(command, capture_output=True, text=True, env=_env(), timeout=300)
    assert proc.returncode == 0, proc.stderr
    line = next(line for line in proc.stdout.splitlines() if line.startswith(runner.RESULT_MARKER))
    result = json.loads(line[len(runner.RESULT_MARKER):])
    assert result["errors"] == []
    transformer = {e["op"]: e for e in result["measurements"] if e["section"] == "transformer"}
    assert set(transformer) == set(tr.OPS)
    assert [op for op, e in transformer.items() if not e["check_ok"]] == []


def _data(op: str) -> Data:
    return tr.make_data(op, (8, 64))


@pytest.mark.parametrize("op", tr.OPS)
def test_transformer_check_catches_a_wrong_result(op: str) -> None:
    """The check passes opforge's result and fails it perturbed by 0.1% (any one output), or misshapen."""
    data = _data(op)
    runner_ = OpforgeImpl().transformer(data)
    assert runner_ is not None
    result = runner_()
    outputs = [np.array(o) for o in (result if isinstance(result, tuple) else (result,))]
    outputs = outputs[: len(tr.CHECKED.get(op, ("y",)))]
    assert tr.check(data, outputs) <= 1e-6
    for i in range(len(outputs)):
        wrong = [o * np.float32(1.001) if j == i else o for j, o in enumerate(outputs)]
        assert tr.check(data, wrong) > 1e-4
    assert tr.check(data, [outputs[0][..., :-1], *outputs[1:]]) == float("inf")
    assert tr.check(data, outputs[:-1]) == float("inf")


class _WrongSoftmax(OpforgeImpl):
    """opforge with a softmax that forgets to normalize."""

    def transformer(self, d: Data) -> Optional[Runner]:
        if d.op == "softmax":
            return lambda: np.exp(d.x - d.x.max(-1, keepdims=True))
        return super().transformer(d)


def test_bench_reports_a_wrong_transformer_result() -> None:
    settings = Settings(elements=64, dense_shapes=[], dense_shapes_f64=[], repeats=1, budget_s=0.01,
                        max_call_s=1.0, dtypes=(), transformer_shape=(8, 64))
    stream = io.StringIO()
    worker = Worker(_WrongSoftmax(), settings, Progress(stream=stream), "test")
    result = worker.run()
    checks = {(e["op"], e["check_ok"]) for e in result.measurements}
    assert ("softmax", False) in checks and ("softmax_grad", True) in checks and ("layer_norm", True) in checks
    assert "WARNING: opforge[test] transformer result differs from NumPy" in stream.getvalue()
    document = report.build(machine_info(), settings, argparse.Namespace(quick=True), [], [asdict(result)], 1.0, 0.01)
    assert len(document["errors"]) == 1 + int(worker.all_threads not in (None, 1))
    assert "softmax float32: result differs from NumPy" in document["errors"][0]
    assert "CHECK FAILED" in report.format_text(document)


def test_copies_beside_an_op_read_its_input() -> None:
    """The copies timed beside an op read the op's own input (its bytes from
    its first 64-byte line, whole 128-byte blocks), so that they do not push
    it out of the cache between the op's runs: x for a forward op, dy for a
    gradient row; a source too small for one block gets a buffer of its own."""
    limits = pytest.importorskip("opforge.bench.limits")
    if not limits.probe_available():
        pytest.skip("opforge bench's native probe is not built")
    probe = limits._probe()
    backing = np.arange(4096 + 8, dtype=np.float32)
    skip = -backing.ctypes.data % 64 // 4
    source = backing[skip + 4 : skip + 4 + 4096]  # 16 bytes past a line, as NumPy's arrays often are
    copier = limits.Copier(source.size, source)
    assert copier.source is source and copier.elements == (4096 - 12) // 32 * 32
    for variant in copier.variants:
        probe.ffi.buffer(copier._dst, 4 * copier.elements)[:] = bytes(4 * copier.elements)
        assert copier.run(variant, 1)() >= 0
        copied = np.frombuffer(probe.ffi.buffer(copier._dst, 4 * copier.elements), np.float32)
        np.testing.assert_array_equal(copied, source[12 : 12 + copier.elements], err_msg=variant)
    small = limits.Copier(8, source[:8])
    assert small.elements == limits.copy_elements(8) and small.run(next(iter(small.variants)), 1)() >= 0
    with pytest.raises(ValueError, match="C-contiguous"):
        limits.Copier(2048, backing[::2])

    settings = Settings(elements=64, dense_shapes=[], dense_shapes_f64=[], repeats=1, budget_s=0.01,
                        max_call_s=1.0, dtypes=(), transformer_shape=(8, 64))
    worker = Worker(OpforgeImpl(), settings, Progress(stream=io.StringIO()), "test")
    for op, name in (("softmax", "x"), ("softmax_grad", "dy"), ("add_grad", "dy"), ("layer_norm", "x")):
        data = tr.make_data(op, (64, 64))
        copier = worker._copier_of(tr.copied_input(data))
        assert copier is not None and copier.source is getattr(data, name), op


def test_bound_is_the_slower_of_memory_and_arithmetic() -> None:
    """vs bound: the copy roof's time for the bytes, or the in-cache time
    spread over the threads, whichever is longer, over the measured time."""
    memory = {"bytes": 100e9, "threads": 2, "best_s": 4.0, "in_cache_s": 2.0}  # roof 50 GB/s: 2 s; arithmetic 1 s
    arithmetic = {"bytes": 100e9, "threads": 1, "best_s": 10.0, "in_cache_s": 8.0}  # roof 25 GB/s: 4 s
    unknown = {"bytes": 100e9, "threads": 1, "best_s": 10.0, "in_cache_s": None}
    slower = {"bytes": 100e9, "threads": 2, "best_s": 10.0, "in_cache_s": 30.0}  # 15 s over 2 threads: no floor
    report._add_bounds([memory, arithmetic, unknown, slower], {"1": 25.0, "2": 50.0})
    assert slower["in_cache_s"] is None and "vs_bound" not in slower
    assert memory["bound_s"] == 2.0 and memory["vs_bound"] == 0.5
    assert arithmetic["bound_s"] == 8.0 and arithmetic["vs_bound"] == 0.8
    assert "vs_bound" not in unknown
    # an in-cache time slower than the same call on one thread: dropped on every thread count
    call = {"section": "transformer", "op": "rms_norm_grad", "shape": [8192, 4096], "impl": "opforge"}
    one = {**call, "bytes": 100e9, "threads": 1, "best_s": 10.0, "in_cache_s": 11.0}
    two = {**call, "bytes": 100e9, "threads": 2, "best_s": 6.0, "in_cache_s": 11.0}  # 5.5 s over 2 threads
    other = {**call, "op": "rms_norm", "bytes": 100e9, "threads": 2, "best_s": 6.0, "in_cache_s": 11.0}
    report._add_bounds([one, two, other], {"1": 25.0, "2": 50.0})
    assert one["in_cache_s"] is None and two["in_cache_s"] is None and "vs_bound" not in two
    assert other["bound_s"] == 5.5  # (no one-thread run of that call to hold it against)


def test_one_thread_runs_are_compared_with_pinned_frameworks() -> None:
    """opforge on all threads against the frameworks' default runs, on one
    thread against the pinned ones (and NumPy's one-thread ufuncs); a pinned
    framework against its pinned peers only."""
    def entry(impl: str, threads: Optional[int], gbs: float, builtin: bool = True,
              pinned: Optional[int] = None) -> dict[str, Any]:
        return {"impl": impl, "op": "gelu", "dtype": "float32", "threads": threads, "gbs": gbs, "builtin": builtin,
                "pinned": pinned}

    ours_all, ours_one = entry("opforge", 2, 10.0, builtin=False), entry("opforge", 1, 6.0, builtin=False)
    torch_default, torch_one = entry("torch", 2, 12.0), entry("torch", 1, 4.0, pinned=1)
    jax_default, numpy = entry("jax", None, 8.0), entry("numpy", 1, 3.0)
    entries = [ours_all, ours_one, torch_default, torch_one, jax_default, numpy]
    report._add_ratios(entries, "op", "gbs", {"float32": {"1": 20.0, "2": 40.0}}, "copy", 2)
    assert ours_all["best_builtin"] == "torch" and ours_all["vs_best_builtin"] == pytest.approx(10 / 12)
    assert ours_one["best_builtin"] == "torch (1 core)" and ours_one["vs_best_builtin"] == pytest.approx(6 / 4)
    assert torch_one["best_builtin"] == "torch (1 core)" and numpy["best_builtin"] == "torch"
    assert jax_default["vs_copy"] == pytest.approx(8 / 40)  # unknown threads: the roof at all threads
    # Without pinned runs, the 1-thread run is compared with the 1-thread built-ins there are (NumPy).
    entries = [ours_one, numpy, torch_default]
    report._add_ratios(entries, "op", "gbs", {"float32": {"1": 20.0, "2": 40.0}}, "copy", 2)
    assert ours_one["best_builtin"] == "numpy" and ours_one["vs_best_builtin"] == pytest.approx(2.0)


def test_ratios_per_copy_beside_cancel_the_machines_bandwidth() -> None:
    """vs_best_builtin_beside compares each side's share of the copy timed
    beside it: an implementation timed while the machine moved memory at half
    speed is not counted slower for it."""
    def entry(impl: str, threads: int, gbs: float, copy_gbs: Optional[float], builtin: bool = True,
              pinned: Optional[int] = None) -> dict[str, Any]:
        e = {"impl": impl, "op": "add", "dtype": "float32", "threads": threads, "gbs": gbs, "builtin": builtin,
             "pinned": pinned}
        if copy_gbs is not None:
            e["vs_copy_beside"] = gbs / copy_gbs
        return e

    # opforge timed in a slow minute (copy at 20 GB/s), torch in a fast one (copy at 40)
    ours_all, ours_one = entry("opforge", 2, 18.0, 20.0, builtin=False), entry("opforge", 1, 9.0, 10.0, builtin=False)
    torch_default, torch_one = entry("torch", 2, 30.0, 40.0), entry("torch", 1, 16.0, 20.0, pinned=1)
    numpy, no_copy = entry("numpy", 1, 17.0, 40.0), entry("jax", 2, 50.0, None)
    entries = [ours_all, ours_one, torch_default, torch_one, numpy, no_copy]
    report._add_ratios(entries, "op", "gbs", {"float32": {"1": 20.0, "2": 40.0}}, "copy", 2)
    report._add_beside_ratios(entries, "op", 2)
    assert ours_all["vs_best_builtin"] == pytest.approx(18 / 50)  # jax's plain figure is the fastest
    assert ours_all["best_builtin_beside"] == "torch"  # jax has no copy beside: not in this comparison
    assert ours_all["vs_best_builtin_beside"] == pytest.approx((18 / 20) / (30 / 40))
    # on one thread NumPy's plain figure is the fastest, measured in a fast minute; per copy, torch's
    assert ours_one["best_builtin"] == "numpy" and ours_one["vs_best_builtin"] == pytest.approx(9 / 17)
    assert ours_one["best_builtin_beside"] == "torch (1 core)"
    assert ours_one["vs_best_builtin_beside"] == pytest.approx((9 / 10) / (16 / 20))
    assert no_copy["vs_best_builtin_beside"] is None and no_copy["best_builtin_beside"] is None
    lines = report._transformer_text({"transformer": [
        dict(e, shape=[8, 64], best_s=1.0, check_ok=True, in_cache_s=None) for e in entries]})
    ours_line = next(line for line in lines if "opforge" in line and " 2 " in line)
    assert ours_line.rstrip().endswith(f"{(18 / 20) / (30 / 40):.2f}x torch")


def test_pinned_worker_runs_on_one_core() -> None:
    """A framework's worker with --pin 1 is confined to one core, its BLAS
    and OpenMP told so, and its entries say 1 thread."""
    settings = runner.settings_from(cli.make_parser().parse_args(["bench", "--quick", *TINY]))
    command = runner.worker_command("numpy", None, settings, 0.0, pinned=1)
    assert command[-2:] == ["--pin", "1"]
    env = runner._worker_env(None, 1)
    assert all(env[name] == "1" for name in runner.THREAD_VARIABLES)
    code = ("import os, sys; from opforge.bench import runner; runner.pin_to_cores(1); "
            "print(len(os.sched_getaffinity(0)))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(), check=True)
    assert proc.stdout.strip() == "1"
    command = [sys.executable, "-m", "opforge", "bench", "--worker", "numpy", *TINY, "--sizes", "", "--pin", "1"]
    proc = subprocess.run(command, capture_output=True, text=True, env=_env(), timeout=120, check=True)
    lines = [line for line in proc.stdout.splitlines() if line.startswith(runner.RESULT_MARKER)]
    result = json.loads(lines[0][len(runner.RESULT_MARKER):])
    assert result["pinned"] == 1 and result["measurements"]
    assert all(m["threads"] == 1 for m in result["measurements"])


def test_parse_shapes() -> None:
    assert runner.parse_shapes("256, 32x1024x512") == [(256, 256, 256), (32, 1024, 512)]
    assert runner.parse_shapes("") == []
    with pytest.raises(Exception):
        runner.parse_shapes("2x3")


def test_transformer_shape_option() -> None:
    parser = argparse.ArgumentParser()
    runner.add_arguments(parser)
    assert runner.settings_from(parser.parse_args([])).transformer_shape == (8192, 4096)
    assert runner.settings_from(parser.parse_args(["--quick"])).transformer_shape == (1024, 4096)
    assert runner.settings_from(parser.parse_args(["--quick", "--transformer", "16x32"])).transformer_shape == (16, 32)
    assert runner.settings_from(parser.parse_args(["--transformer", "0"])).transformer_shape is None
    with pytest.raises(SystemExit):
        parser.parse_args(["--transformer", "16"])


def test_table_aligns_columns() -> None:
    lines = report.table(["a", "value"], [["long name", "1.0"], ["x", "12.5"]], [False, True])
    assert len({line.index("value") + len("value") for line in lines[:1]} | {len(line) for line in lines}) == 1


def test_info(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["info"]) == 0
    text = capsys.readouterr().out
    info = opforge.info()
    assert f"opforge {info['version']}" in text
    assert f"ISA level in use: {info['isa']}" in text
    assert "ISA levels supported here: scalar, portable" in text
    assert f"threads: {info['num_threads']}" in text and f"CUDA devices: {info['cuda_devices']}" in text

"""docs/writing-ops.md is a test: its C files are extracted and loaded in every
installed framework against NumPy references, and its Python blocks run as
written (from a directory holding the C files)."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

TUTORIAL = Path(__file__).resolve().parents[2] / "docs" / "writing-ops.md"
FENCE = re.compile(r"^```(\w+)[ \t]*(\S*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")


def blocks() -> list[tuple[str, str, str]]:
    """(language, file name or "", text) of every fenced block, in order."""
    return [(m.group(1), m.group(2), m.group(3)) for m in FENCE.finditer(TUTORIAL.read_text())]


C_FILES = {name: text for lang, name, text in blocks() if lang == "c" and name}
PYTHON = [text for lang, _, text in blocks() if lang == "python"]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("tutorial")
    for name, text in C_FILES.items():
        (directory / name).write_text(text)
    return directory


def test_the_tutorial_has_its_examples() -> None:
    assert set(C_FILES) == {
        "relu_ops.c", "myop_ops.c", "add_ops.c", "softmax_ops.c", "linear_ops.c",
        "my_parts.h", "act_ops.c", "row_ops.c", "my_lib.c",
    }  # fmt: skip
    assert len(PYTHON) >= 7


@pytest.mark.parametrize("index", range(len(PYTHON)))
def test_python_block_runs(workdir: Path, index: int) -> None:
    code = PYTHON[index]
    for module in re.findall(r"^import (torch|tensorflow|jax)\b", code, re.MULTILINE):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"needs {module}")
    cwd = os.getcwd()
    os.chdir(workdir)
    try:
        exec(compile(code, f"{TUTORIAL.name} block {index}", "exec"), {"__name__": "tutorial"})
    finally:
        os.chdir(cwd)


# --------------------------------------------------------------------------
# Every C file in every framework
# --------------------------------------------------------------------------

FRAMEWORKS = ["numpy", "torch", "tensorflow", "jax"]


class Framework:
    """Loads an op file and calls its ops with NumPy arrays in, NumPy out."""

    def __init__(self, name: str, workdir: Path) -> None:
        self.name, self.workdir = name, workdir
        if name != "numpy" and importlib.util.find_spec(name) is None:
            pytest.skip(f"{name} is not installed")

    def ops(self, file: str, *more: str) -> Callable[[str], Callable[..., Any]]:
        """The ops of ``file`` (and of ``more`` files, built into one library with it)."""
        path: Any = [self.workdir / f for f in (file, *more)] if more else self.workdir / file
        table = file.removesuffix(".c")
        if self.name == "numpy":
            import opforge.numpy as onp

            namespace: Any = onp.load_ops(path)
            return lambda op: getattr(namespace, op)
        if self.name == "torch":
            import torch

            import opforge.torch as ot

            ot.load_ops(path)
            ops = getattr(torch.ops, table)
            return lambda op: lambda *a, **k: getattr(ops, op)(*[torch.from_numpy(np.asarray(v)) for v in a], **k)
        if self.name == "tensorflow":
            import tensorflow as tf

            import opforge.tensorflow as otf

            prefix = "Tutorial" + "".join(part.title() for part in table.split("_"))
            namespace = otf.load_ops(path, prefix=prefix)
            return lambda op: lambda *a, **k: getattr(namespace, op)(*[tf.constant(v) for v in a], **k)
        import jax.numpy as jnp

        import opforge.jax as oj

        namespace = oj.load_ops(path)
        return lambda op: lambda *a, **k: getattr(namespace, op)(*[jnp.asarray(v) for v in a], **k)


@pytest.fixture(params=FRAMEWORKS)
def framework(request: pytest.FixtureRequest, workdir: Path) -> Framework:
    return Framework(request.param, workdir)


def close(got: Any, want: np.ndarray, rtol: float = 1e-6) -> None:
    got = np.asarray(got)
    if got.dtype == np.float32:  # JAX computes in float32 unless x64 is enabled
        rtol, want = max(rtol, 1e-5), want.astype(np.float32)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=1e-6 if got.dtype == np.float32 else 1e-12)


def test_relu_everywhere(framework: Framework) -> None:
    op = framework.ops("relu_ops.c")
    x = np.array([[-1.5, 0.0, 2.0], [3.0, -0.25, 7.0]])
    close(op("my_relu")(x), np.maximum(x, 0))
    close(op("my_relu_grad")(np.ones_like(x), x), (x > 0).astype(x.dtype))


def test_my_op_everywhere(framework: Framework) -> None:
    op = framework.ops("myop_ops.c")
    for dtype in (np.float32, np.float64):
        x = np.arange(6, dtype=dtype).reshape(2, 3)
        close(op("my_op")(x, factor=0.5), x * 0.5)


def test_simple_add_everywhere(framework: Framework) -> None:
    op = framework.ops("add_ops.c")
    close(op("simple_add")(np.ones((2, 3)), np.full((2, 3), 2.0)), np.full((2, 3), 3.0))
    with pytest.raises(Exception, match=r"add_ops(\.|::)simple_add: shape mismatch: a is \[2,3\], b is \[3,2\]"):
        np.asarray(op("simple_add")(np.ones((2, 3)), np.ones((3, 2))))
    x, b = np.random.default_rng(4).standard_normal((4, 1, 3)), np.random.default_rng(5).standard_normal((2, 1))
    close(op("bias_add")(x, b), x + b)
    close(op("sum_back")(np.ones((4, 2, 3)), b), np.full((2, 1), 12.0))
    close(op("sum_back")(b, np.ones((4, 2, 3))), np.broadcast_to(b, (4, 2, 3)))
    with pytest.raises(Exception, match=r"add_ops(\.|::)bias_add: shape mismatch: x is \[2,3\], b is \[2\]"):
        np.asarray(op("bias_add")(np.ones((2, 3)), np.ones(2)))


def test_softmax_everywhere(framework: Framework) -> None:
    op = framework.ops("softmax_ops.c")
    x = np.random.default_rng(0).standard_normal((3, 4, 9))
    e = np.exp(x - x.max(-1, keepdims=True))
    y = e / e.sum(-1, keepdims=True)
    close(op("softmax")(x), y, rtol=1e-12)
    dy = np.random.default_rng(1).standard_normal(x.shape)
    close(op("softmax_grad")(dy, y), y * (dy - (dy * y).sum(-1, keepdims=True)), rtol=1e-10)


def test_linear_everywhere(framework: Framework) -> None:
    op = framework.ops("linear_ops.c")
    x, w = np.random.default_rng(2).standard_normal((3, 4)), np.random.default_rng(3).standard_normal((4, 5))
    close(op("linear")(x, w), x @ w, rtol=1e-12)
    b = np.random.default_rng(4).standard_normal(5)
    z = x @ w + b
    close(op("linear_gelu")(x, w, b), 0.5 * z * (1 + np.tanh(np.sqrt(2 / np.pi) * (z + 0.044715 * z**3))), rtol=1e-12)


def test_a_library_in_several_files_everywhere(framework: Framework) -> None:
    op = framework.ops("my_lib.c", "act_ops.c", "row_ops.c")
    x = np.random.default_rng(8).standard_normal((3, 5))
    close(op("softsign")(x), x / (1 + np.abs(x)))
    close(op("softsign_grad")(np.ones_like(x), x), 1 / (1 + np.abs(x)) ** 2)
    close(op("center")(x), x - x.mean(axis=-1, keepdims=True))

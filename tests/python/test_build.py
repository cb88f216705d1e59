"""Building op libraries from C sources: the cache and its upkeep, errors,
concurrency, reloads in NumPy, the ``opforge build/new/config/cache``
commands, and C build systems (pkg-config, CMake) consuming the installed
package."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Iterator

import numpy as np
import pytest
from oplib import compile_op_library
from partslib import SCALE_C, SHIFT_C, write_parts
from reloadlib import times_source

import opforge
import opforge.numpy as onp
from opforge import _build, _cache

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None and shutil.which("cc") is None, reason="needs a C compiler")

OPFORGE = [sys.executable, "-m", "opforge"]


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Every test builds into a cache of its own."""
    directory = tmp_path / "cache"
    monkeypatch.setenv("OPFORGE_CACHE_DIR", str(directory))
    yield directory


def libraries(cache: Path) -> list[Path]:
    return sorted((cache / "ops").glob("lib*.so"))


# -- building and the cache ---------------------------------------------------


def test_a_source_file_is_built_once_then_taken_from_the_cache(tmp_path: Path, cache: Path) -> None:
    source = tmp_path / "mine.c"
    source.write_text(times_source("mine", 2.0))
    first = opforge.build(source)
    assert first.compiled and first.path.parent == cache / "ops" and first.path.name.startswith("libmine-")
    again = opforge.build(source)
    assert again == _build.Built(first.path, first.digest, compiled=False)
    ops = onp.load_ops(source)
    np.testing.assert_array_equal(ops.times(np.arange(3.0)), [0.0, 2.0, 4.0])
    assert libraries(cache) == [first.path]


def test_the_cache_dir_defaults_to_the_users_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("OPFORGE_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert _build.cache_dir() == tmp_path / "xdg" / "opforge"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert _build.cache_dir() == Path.home() / ".cache" / "opforge"


def test_source_text_is_built_too(cache: Path) -> None:
    ops = onp.load_ops(times_source("fromtext", -1.5), name="fromtext")
    np.testing.assert_array_equal(ops.times(np.ones(2)), [-1.5, -1.5])
    (library,) = libraries(cache)
    assert library.name.startswith("libfromtext-")
    (source,) = (cache / "ops" / "src").glob("fromtext-*.c")  # kept, for the compiler's messages
    assert "FACTOR -1.5" in source.read_text()


def test_the_key_covers_source_local_headers_flags_and_compiler(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    header = tmp_path / "factor.h"
    header.write_text("#define MY_FACTOR 2.0\n")
    source = tmp_path / "keyed.c"
    source.write_text('#include "factor.h"\n' + times_source("keyed", 1.0).replace("#define FACTOR 1.0", "#define FACTOR MY_FACTOR"))
    x = np.ones(2)
    builds = [opforge.build(source)]
    np.testing.assert_array_equal(onp.load_ops(source).times(x), [2.0, 2.0])
    header.write_text("#define MY_FACTOR 3.0\n")  # only the header changes
    builds.append(opforge.build(source))
    np.testing.assert_array_equal(onp.load_ops(source).times(x), [3.0, 3.0])
    builds.append(opforge.build(source, cflags=["-DUNUSED_FLAG"]))
    monkeypatch.setenv("CC", "gcc -DANOTHER_COMPILER_COMMAND")
    builds.append(opforge.build(source))
    assert all(b.compiled for b in builds)
    assert len({b.path for b in builds}) == 4 == len(libraries(cache))
    monkeypatch.delenv("CC")
    header.write_text("#define MY_FACTOR 2.0\n")  # back to the first: the first library again
    assert opforge.build(source) == _build.Built(builds[0].path, builds[0].digest)


def test_the_key_covers_the_opforge_version(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = tmp_path / "versioned.c"
    source.write_text(times_source("versioned", 1.0))
    first = opforge.build(source)
    monkeypatch.setattr(_build, "_opforge_version", lambda: "99.0.0")
    assert opforge.build(source).path != first.path


def test_a_compile_error_raises_build_error_with_the_compilers_messages(tmp_path: Path) -> None:
    source = tmp_path / "broken.c"
    source.write_text("#include <opforge.h>\n\nstatic int f(void) { return undeclared_name; }\n")
    with pytest.raises(opforge.BuildError) as caught:
        onp.load_ops(source)
    error = caught.value
    assert isinstance(error, RuntimeError)
    assert f"{source}:3:" in str(error) and "undeclared_name" in str(error) and "error" in str(error)
    assert error.output in str(error) and error.source == str(source) and "-Wall" in error.command
    assert not list((tmp_path / "cache" / "ops").glob("*.so")), "nothing is cached from a failed build"


def test_compiler_warnings_are_reported(tmp_path: Path) -> None:
    source = tmp_path / "warns.c"
    source.write_text(times_source("warns", 1.0).replace("(void)attrs;", "(void)attrs; int unused_here;", 1))
    with pytest.warns(opforge.BuildWarning, match=r"warns\.c:\d+:\d+: warning: unused variable .unused_here"):
        opforge.build(source)


TEAM_OPS = """
#include <opforge.h>

OPF_ROW_KERNEL(scaled, (x, w), (y), {
    for (int64_t i = 0; i < n; i++) {
        y[i] = x[i] * w[i];
    }
})
OPF_ROW_KERNEL_TEAM(scaled_team, scaled, TEAM_ARGS, {
    OPF_TEAM_FOR(i, n) { y[i] = x[i] * w[i]; }
})

static const opf_op_decl teamops[] = {
    {"scaled(x[..., M], w[M]) -> y[..., M]", .doc = "x * w per row, a team per row on CUDA.", .row = &scaled_team},
    {0},
};
OPF_EXPORT_OPS("teamops", teamops)
"""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ("(w, x), (y)", r"input w is not where its kernel \(an OPF_ROW_KERNEL\) takes it"),
        ("(x), (y)", "the team body must take as many inputs as its kernel"),
        ("(x, w), (y, z)", "the team body must take as many outputs as its kernel"),
        ("(x, v), (y)", "no member named .v."),
    ],
)
def test_a_team_body_must_name_its_kernels_arguments_in_order(tmp_path: Path, args: str, message: str) -> None:
    """A team body (run on CUDA only, on long rows) whose arguments differ from
    its kernel's would compute garbage there while every CPU test passes: it
    is a compile error wherever it is compiled."""
    good = tmp_path / "teamops.c"
    good.write_text(TEAM_OPS.replace("TEAM_ARGS", "(x, w), (y)"))
    ops = onp.load_ops(good)
    x = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(ops.scaled(x, np.array([1.0, 2.0, 3.0])), x * [1.0, 2.0, 3.0])
    bad = tmp_path / "badteam.c"
    bad.write_text(TEAM_OPS.replace("TEAM_ARGS", args))
    with pytest.raises(opforge.BuildError, match=message):
        opforge.build(bad)


def test_a_missing_source_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="missing.c"):
        onp.load_ops(tmp_path / "missing.c")


def test_build_options_do_not_apply_to_a_library(tmp_path: Path) -> None:
    library = compile_op_library(tmp_path, "plain", times_source("plain", 1.0))
    with pytest.raises(TypeError, match="build options"):
        onp.load_ops(library, cflags=["-O0"])


def test_the_make_rule_parser_keeps_escaped_spaces() -> None:
    text = "x.o: /a/x.c /a/my\\ dir/h.h \\\n /b/c.h\n"
    assert _build._parse_deps(text) == ["/a/x.c", "/a/my dir/h.h", "/b/c.h"]


CONCURRENT_BUILD = """
import sys, time
from pathlib import Path
import opforge
start = float(sys.argv[2])
time.sleep(max(0.0, start - time.time()))
built = opforge.build(Path(sys.argv[1]))
print(built.compiled, built.path)
"""


def test_concurrent_processes_build_one_library(tmp_path: Path, cache: Path) -> None:
    source = tmp_path / "shared.c"
    source.write_text(times_source("shared", 4.0))
    start = f"{time.time() + 2.0}"  # every process starts building at once (after its import)
    runs = [
        subprocess.Popen([sys.executable, "-c", CONCURRENT_BUILD, str(source), start], stdout=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    outputs = [run.communicate(timeout=120)[0].split() for run in runs]
    assert all(run.returncode == 0 for run in runs)
    assert sorted(compiled for compiled, _ in outputs) == ["False", "False", "False", "True"]  # one compiled
    (library,) = libraries(cache)
    assert {path for _, path in outputs} == {str(library)}
    assert not [p for p in (cache / "ops").iterdir() if p.name.startswith(".tmp")], "temporary files left"
    np.testing.assert_array_equal(onp.load_ops(source).times(np.ones(1)), [4.0])


CUDA_OPS = r"""
#include <opforge.h>

__global__ void twice_kernel(const float *x, float *y, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2 * x[i];
}

static int64_t numel(const opf_tensor *t) {
    int64_t n = 1;
    for (int32_t d = 0; d < t->ndim; ++d) n *= t->shape[d];
    return n;
}

static opf_status twice_cpu(const opf_tensor *const *in, const opf_tensor *const *out, const opf_attr_value *) {
    for (int64_t i = 0, n = numel(in[0]); i < n; ++i) ((float *)out[0]->data)[i] = 2 * ((const float *)in[0]->data)[i];
    return OPF_OK;
}

static opf_status twice_cuda(const opf_tensor *const *in, const opf_tensor *const *out, const opf_attr_value *,
                             void *stream) {
    int64_t n = numel(in[0]);
    twice_kernel<<<(unsigned)((n + 255) / 256), 256, 0, (cudaStream_t)stream>>>(
        (const float *)in[0]->data, (float *)out[0]->data, n);
    return cudaGetLastError() == cudaSuccess ? OPF_OK : OPF_E_DEVICE;
}

static const opf_op_def twice = {
    .name = "twice", .doc = "y = 2x", .flags = OPF_OP_ELEMENTWISE, .dtypes = OPF_DTYPES_F32,
    .num_inputs = 1, .inputs = {{.name = "x"}},
    .num_outputs = 1, .outputs = {{.name = "y"}},
    .output_shapes = {{.kind = OPF_SHAPE_LIKE, .like = 0}},
    .compute = twice_cpu, .compute_cuda = twice_cuda,
};
static const opf_op_def *const rows[] = {&twice};
static const opf_op_table table = {OPF_TABLE_ABI_VERSION, "cudaops", 1, rows};
extern "C" {
OPF_EXPORT_OP_TABLE(table)
}
"""


def have_nvcc() -> bool:
    try:
        _build.cuda_compiler()
    except opforge.BuildError:
        return False
    return True


@pytest.mark.skipif(not have_nvcc(), reason="needs nvcc")
def test_a_cuda_source_is_built_with_nvcc(tmp_path: Path, recwarn: pytest.WarningsRecorder) -> None:
    source = tmp_path / "cudaops.cu"
    source.write_text(CUDA_OPS)
    ops = onp.load_ops(source)  # its CPU kernel; the CUDA one runs where a GPU is (the adapters' GPU tests)
    np.testing.assert_array_equal(ops.twice(np.arange(3, dtype=np.float32)), [0.0, 2.0, 4.0])
    assert not [w for w in recwarn if issubclass(w.category, opforge.BuildWarning)], [str(w.message) for w in recwarn]
    assert opforge.build(source).compiled is False
    source.write_text(CUDA_OPS.replace("__global__", "__global__ not_a_type"))
    with pytest.raises(opforge.BuildError, match=r"cudaops\.cu\(\d+\): error"):
        opforge.build(source)


EXAMPLE_OPS = Path(__file__).resolve().parents[2] / "examples" / "ops" / "myops.c"


@pytest.mark.skipif(not have_nvcc(), reason="needs nvcc")
def test_the_examples_ops_built_by_nvcc_have_cuda_builds_of_their_row_kernels() -> None:
    """examples/ops/myops.c through the CUDA build path (nvcc, as CUDA C++):
    its elementwise and row kernels get CUDA builds, which a libopforge with
    CUDA runs (a compute_cuda on the row); the CPU builds still compute rowsum.
    (tests/cuda/test_cuda.c runs these rows on a device or the emulator.)"""
    from opforge._capi import ffi, lib

    ops = onp.load_ops(EXAMPLE_OPS, cuda=True)
    table = ops.__opforge_table__
    cuda_library = lib.opf_op_find(lib.opf_builtin_ops(), b"relu").compute_cuda != ffi.NULL
    for op in table.ops:
        row = op.cdata
        kernel = row.eltwise if op.kind == "eltwise" else row.row
        assert kernel.cuda != ffi.NULL, f"{op.qualname}: its {op.kind} kernel has no CUDA build"
        assert (row.compute_cuda != ffi.NULL) == cuda_library, op.qualname
    assert {op.name for op in table.ops if op.kind == "row"} == {"rowsum", "rowsum_grad"}
    x = np.random.default_rng(5).standard_normal((3, 4, 37))
    np.testing.assert_allclose(ops.rowsum(x), x.sum(-1), rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(ops.rowsum(x.transpose(2, 1, 0)), x.transpose(2, 1, 0).sum(-1), rtol=1e-13, atol=1e-13)
    np.testing.assert_array_equal(ops.rowsum(np.ones((2, 0))), [0.0, 0.0])


# -- a library built from several files ----------------------------------------

def objects(cache: Path) -> list[str]:
    return sorted(path.name.rsplit("-", 1)[0] for path in (cache / "ops" / "objects").glob("*.o"))


def test_a_library_of_several_files_is_linked_from_an_object_per_file(tmp_path: Path, cache: Path) -> None:
    files = write_parts(tmp_path)
    first = opforge.build(files)
    assert first.compiled and first.path.name.startswith("libtable-") and first.path.parent == cache / "ops"
    assert objects(cache) == ["table.scale", "table.shift", "table.table"]
    assert opforge.build(files) == _build.Built(first.path, first.digest, compiled=False)
    ops = onp.load_ops(files)
    assert [op.name for op in ops.__opforge_table__.ops] == ["scale3", "shift_scale"]  # the parts' rows, in order
    x = np.linspace(-2.0, 2.0, 7)
    np.testing.assert_array_equal(ops.scale3(x), 3 * x)
    np.testing.assert_array_equal(ops.shift_scale(x), 3 * x + 1.0)
    # one file edited: that file alone is compiled again, and the library linked again
    (tmp_path / "shift.c").write_text(SHIFT_C.replace("x + (T)SHIFT", "3 * x + (T)5.0"))
    scale_object = next((cache / "ops" / "objects").glob("table.scale-*.o")).stat().st_mtime_ns
    edited = opforge.build(files)
    assert edited.compiled and edited.path != first.path
    assert objects(cache) == ["table.scale", "table.shift", "table.shift", "table.table"]
    assert next((cache / "ops" / "objects").glob("table.scale-*.o")).stat().st_mtime_ns == scale_object
    np.testing.assert_array_equal(onp.load_ops(files).shift_scale(x), 3 * x + 5.0)
    # a header the files share is part of each file's key
    (tmp_path / "parts.h").write_text((tmp_path / "parts.h").read_text() + "#define UNUSED_HERE 1\n")
    assert opforge.build(files).compiled
    assert opforge.build(files, name="other").path.name.startswith("libother-")


def test_a_compile_error_in_any_file_names_that_file(tmp_path: Path, cache: Path) -> None:
    files = write_parts(tmp_path)
    files[2].write_text(SHIFT_C.replace("x + (T)SHIFT", "x + undeclared_shift"))
    with pytest.raises(opforge.BuildError) as caught:
        opforge.build(files)
    assert f"{files[2]}:" in str(caught.value) and "undeclared_shift" in str(caught.value)
    assert caught.value.source == str(files[2]) and str(files[1]) not in str(caught.value)
    files[1].write_text(SCALE_C.replace("3 * x", "3 * x +"))  # two files wrong: both named
    with pytest.raises(opforge.BuildError) as caught:
        opforge.build(files)
    assert f"{files[1]}:" in str(caught.value) and f"{files[2]}:" in str(caught.value)
    assert not list((cache / "ops").glob("*.so")), "nothing is linked from a failed build"


def test_two_files_that_export_a_table_do_not_link(tmp_path: Path) -> None:
    files = write_parts(tmp_path)
    files[1].write_text(SCALE_C + 'OPF_EXPORT_OPS("scales", scale_ops)\n')
    with pytest.raises(opforge.BuildError, match=r"(?s)cannot link table from .*table\.c.*opforge_op_table"):
        opforge.build(files)


def test_a_list_of_files_is_checked(tmp_path: Path) -> None:
    files = write_parts(tmp_path)
    with pytest.raises(FileNotFoundError, match="nowhere.c"):
        opforge.build([*files, tmp_path / "nowhere.c"])
    with pytest.raises(ValueError, match="appears twice"):
        opforge.build([*files, files[1]])
    with pytest.raises(ValueError, match=r"parts\.h: a library built from several files takes \.c and \.cu"):
        opforge.build([*files, tmp_path / "parts.h"])
    with pytest.raises(ValueError, match="at least one file"):
        opforge.build([])
    assert opforge.build([tmp_path / "scale.c"]).path.name.startswith("libscale-")  # one file: as build(file)
    library = compile_op_library(tmp_path, "plainlib", times_source("plainlib", 1.0))
    with pytest.raises(ValueError, match=r"plainlib\.so: a library built from several files takes \.c and \.cu"):
        onp.load_ops([library])  # a shared library goes alone, not in a list


def test_a_library_of_c_and_cuda_files_is_linked_by_nvcc(tmp_path: Path) -> None:
    if not have_nvcc():
        pytest.skip("needs nvcc")
    files = write_parts(tmp_path)
    cuda_table, cuda_part = tmp_path / "table.cu", tmp_path / "shift.cu"
    files[0].rename(cuda_table)  # OPF_EXPORT_OP_PARTS as C++
    files[2].rename(cuda_part)
    ops = onp.load_ops([cuda_table, files[1], cuda_part])  # the CPU builds; test_cuda runs CUDA builds on a device
    x = np.arange(4.0, dtype=np.float32)
    np.testing.assert_array_equal(ops.shift_scale(x), 3 * x + 1.0)
    table = ops.__opforge_table__
    from opforge._capi import ffi

    kinds = {op.name: op.cdata.eltwise.cuda != ffi.NULL for op in table.ops}
    assert kinds == {"scale3": False, "shift_scale": True}  # nvcc compiled the .cu file's kernel for the device


# -- reloading in NumPy -------------------------------------------------------


def test_numpy_runs_the_new_code_of_a_changed_source(tmp_path: Path) -> None:
    source = tmp_path / "edited.c"
    source.write_text(times_source("edited", 2.0))
    before = onp.load_ops(source)
    source.write_text(times_source("edited", 5.0))
    after = onp.load_ops(source)
    np.testing.assert_array_equal(after.times(np.ones(2)), [5.0, 5.0])
    np.testing.assert_array_equal(before.times(np.ones(2)), [2.0, 2.0])  # a namespace keeps its code


def test_numpy_runs_the_new_code_of_a_library_rebuilt_at_the_same_path(tmp_path: Path, cache: Path) -> None:
    library = compile_op_library(tmp_path, "rebuilt", times_source("rebuilt", 2.0))
    np.testing.assert_array_equal(onp.load_ops(library).times(np.ones(1)), [2.0])
    np.testing.assert_array_equal(onp.load_ops(library).times(np.ones(1)), [2.0])
    assert not (cache / "libs").exists()  # the same file again: loaded from where it is
    compile_op_library(tmp_path, "rebuilt", times_source("rebuilt", 7.0))  # same path, new contents
    np.testing.assert_array_equal(onp.load_ops(library).times(np.ones(1)), [7.0])
    (copy,) = (cache / "libs").glob("librebuilt-*.so")  # loaded from a copy named by its contents


# -- the cache's upkeep -----------------------------------------------------------

HOUR = 3600.0


def age(path: Path, hours: float) -> None:
    """Sets a file's access and modification times ``hours`` back."""
    then = time.time() - hours * HOUR
    os.utime(path, (then, then))


def age_all(cache: Path, hours: float) -> None:
    for path in cache.rglob("*"):
        if path.is_file():
            age(path, hours)


def cache_files(cache: Path) -> set[str]:
    return {str(p.relative_to(cache)) for p in cache.rglob("*") if p.is_file()}


def test_a_cache_hit_marks_the_library_used_and_keeps_its_build_time(tmp_path: Path, cache: Path) -> None:
    source = tmp_path / "used.c"
    source.write_text(times_source("used", 2.0))
    built = opforge.build(source)
    (manifest,) = (cache / "ops").glob("used-*.deps.json")
    age(built.path, 48)
    age(manifest, 48)
    built_at = built.path.stat().st_mtime
    assert not opforge.build(source).compiled
    for path in (built.path, manifest):
        st = path.stat()
        assert time.time() - st.st_atime < 60, f"{path.name}: its use was not recorded"
    assert built.path.stat().st_mtime == built_at


def test_a_build_trims_the_cache_to_its_limit_least_recently_used_first(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = ["old", "older", "recent"]
    built = {}
    for name in names:
        (tmp_path / f"{name}.c").write_text(times_source(name, 2.0))
        built[name] = opforge.build(tmp_path / f"{name}.c")
    age_all(cache, 2)
    for path in cache.rglob("*"):
        if path.is_file() and path.name.startswith(("older", "libolder")):
            age(path, 3)
    for path in cache.rglob("*"):
        if path.is_file() and path.name.startswith(("recent", "librecent")):
            age(path, 1.5)
    library_size = built["old"].path.stat().st_size
    total = sum(p.stat().st_size for p in cache.rglob("*") if p.is_file())
    # room for what is there and one more library, less a little: the next build goes over
    monkeypatch.setenv("OPFORGE_CACHE_SIZE", str(int(total + library_size * 0.5)))
    (tmp_path / "new.c").write_text(times_source("new", 2.0))
    new = opforge.build(tmp_path / "new.c")
    assert new.compiled and new.path.exists()
    left = {p.name.split("-")[0] for p in libraries(cache)}
    assert left == {"libold", "librecent", "libnew"}, "the least recently used library goes first"
    assert opforge.build(tmp_path / "older.c").compiled, "taken out of the cache: compiled again"


def test_trim_leaves_files_used_within_the_hour_and_stops_at_90_percent(cache: Path) -> None:
    ops = cache / "ops"
    ops.mkdir(parents=True)
    for i, hours in enumerate([5, 4, 3, 2, 0.5]):
        path = ops / f"lib{i}-0123456789abcdef.so"
        path.write_bytes(b"x" * 1000)
        age(path, hours)
    assert _cache.trim(cache, 10_000) == (0, 0), "under the limit: nothing goes"
    # over 3000: down to 2700 at most, the oldest first: 0, 1 and 2 go
    assert _cache.trim(cache, 3000) == (3, 3000)
    assert sorted(p.name[:4] for p in ops.iterdir()) == ["lib3", "lib4"]
    # 0 bytes allowed, but the file used half an hour ago stays
    assert _cache.trim(cache, 1) == (1, 1000)
    assert [p.name[:4] for p in ops.iterdir()] == ["lib4"]
    assert _cache.trim(cache, 0) == (0, 0), "0: no limit"


def test_clean_removes_everything_or_what_was_not_used_for_a_while(cache: Path) -> None:
    for section, name, hours in [
        ("ops", "liba-0123456789abcdef.so", 30 * 24), ("ops", "a-0123456789abcdef.deps.json", 30 * 24),
        ("ops/objects", "t.a-0123456789abcdef.o", 1), ("ops/src", "ops-0123456789abcdef.c", 50),
        ("libs", "libc-0123456789abcdef.so", 2), ("adapters", "libopforge_torch-0123456789abcdef.so", 24 * 8),
        ("ops", ".tmp-a-x1y2z3.so", 0.1),
    ]:  # fmt: skip
        (cache / section).mkdir(parents=True, exist_ok=True)
        (cache / section / name).write_bytes(b"y" * 10)
        age(cache / section / name, hours)
    assert _cache.clean(cache, 48 * HOUR) == (4, 40)
    assert cache_files(cache) == {
        "ops/objects/t.a-0123456789abcdef.o", "libs/libc-0123456789abcdef.so", "ops/.tmp-a-x1y2z3.so"
    }  # fmt: skip
    assert _cache.clean(cache) == (2, 20)
    assert cache_files(cache) == {"ops/.tmp-a-x1y2z3.so"}, "a build's temporary file may still be written"
    with pytest.raises(ValueError, match="expected seconds"):
        _cache.clean(cache, -1.0)


@pytest.mark.parametrize(
    "text, limit",
    [("", 2 << 30), ("0", 0), ("4096", 4096), ("500M", 500 << 20), ("2g", 2 << 30), ("1.5G", 3 << 29),
     ("64KiB", 64 << 10), ("1T", 1 << 40)],
)  # fmt: skip
def test_the_cache_limit_is_read_from_opforge_cache_size(
    monkeypatch: pytest.MonkeyPatch, text: str, limit: int
) -> None:
    monkeypatch.setenv("OPFORGE_CACHE_SIZE", text)
    assert _cache.cache_limit() == limit


def test_a_wrong_cache_limit_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPFORGE_CACHE_SIZE", "lots")
    (tmp_path / "limited.c").write_text(times_source("limited", 2.0))
    with pytest.raises(ValueError, match=r"OPFORGE_CACHE_SIZE='lots': expected a size such as 500M"):
        opforge.build(tmp_path / "limited.c")
    result = subprocess.run([*OPFORGE, "cache"], capture_output=True, text=True)
    assert result.returncode == 2 and "OPFORGE_CACHE_SIZE='lots'" in result.stderr


# -- the command line -----------------------------------------------------------


def test_opforge_build_lists_the_ops(tmp_path: Path) -> None:
    source = tmp_path / "listed.c"
    source.write_text(times_source("listed", 2.0, shift=True))
    output = tmp_path / "liblisted.so"
    result = subprocess.run([*OPFORGE, "build", str(source), "-o", str(output)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert f"{output} (compiled)" in result.stdout
    assert "table 'listed': 2 ops" in result.stdout
    assert "times(x, *, shift: float = 0.0) -> y" in result.stdout
    assert "float32, float64; elementwise; gradient: times_grad" in result.stdout
    assert "times_grad(dy) -> dx" in result.stdout and "not differentiable" in result.stdout
    np.testing.assert_array_equal(onp.load_ops(output).times(np.ones(1), shift=1.0), [3.0])
    again = subprocess.run([*OPFORGE, "build", str(source)], capture_output=True, text=True)
    assert again.returncode == 0 and "(from the cache)" in again.stdout


def test_opforge_build_links_several_files(tmp_path: Path) -> None:
    files = write_parts(tmp_path)
    result = subprocess.run([*OPFORGE, "build", *map(str, files), "--name", "parted"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "libparted-" in result.stdout and "(compiled)" in result.stdout
    assert "table 'parted': 2 ops" in result.stdout and "shift_scale(x) -> y" in result.stdout


def test_opforge_build_shows_compile_errors(tmp_path: Path) -> None:
    source = tmp_path / "bad.c"
    source.write_text("int f(void) { return 1 }\n")
    result = subprocess.run([*OPFORGE, "build", str(source)], capture_output=True, text=True)
    assert result.returncode == 1
    assert f"{source}:1:" in result.stderr and "error" in result.stderr


def test_opforge_cache_shows_and_cleans_the_cache(tmp_path: Path, cache: Path) -> None:
    source = tmp_path / "shown.c"
    source.write_text(times_source("shown", 2.0))
    library = opforge.build(source).path
    files = [p for p in (cache / "ops").iterdir() if p.is_file()]
    size = sum(p.stat().st_size for p in files)
    shown = subprocess.run([*OPFORGE, "cache"], capture_output=True, text=True)
    assert shown.returncode == 0, shown.stderr
    assert f"cache: {cache} (OPFORGE_CACHE_DIR sets it)" in shown.stdout and "limit: 2.0 GiB" in shown.stdout
    (ops_line,) = [line.split() for line in shown.stdout.splitlines() if line.split()[:1] == ["ops"]]
    assert ops_line[1] == str(len(files)) and "just now" in " ".join(ops_line)
    assert f"{size / 1024:.1f} KiB" in " ".join(ops_line)
    kept = subprocess.run([*OPFORGE, "cache", "clean", "--unused-for", "1"], capture_output=True, text=True)
    assert kept.returncode == 0 and "removed 0 files unused for 1 days" in kept.stdout and library.exists()
    cleaned = subprocess.run([*OPFORGE, "cache", "clean"], capture_output=True, text=True)
    assert cleaned.returncode == 0 and f"removed {len(files)} files" in cleaned.stdout
    assert not library.exists() and opforge.build(source).compiled
    bad = subprocess.run([*OPFORGE, "cache", "clean", "--unused-for", "-2"], capture_output=True, text=True)
    assert bad.returncode == 2 and "expected days, 0 or more" in bad.stderr


def test_opforge_config_prints_flags_and_dirs() -> None:
    def config(*flags: str) -> str:
        return subprocess.run([*OPFORGE, "config", *flags], capture_output=True, text=True, check=True).stdout.strip()

    include, libdir = opforge.get_include(), opforge.get_library_dir()
    assert config("--cflags", "--libs") == f"-I{include} -L{libdir} -lopforge -Wl,-rpath,{libdir}"
    assert config("--includedir") == include and config("--libdir") == libdir
    assert (Path(config("--cmakedir")) / "opforgeConfig.cmake").is_file()
    assert (Path(config("--pkgconfigdir")) / "opforge.pc").is_file()
    assert subprocess.run([*OPFORGE, "config"], capture_output=True).returncode == 2


def test_opforge_new_writes_a_project_whose_tests_pass(tmp_path: Path) -> None:
    result = subprocess.run([*OPFORGE, "new", "myops"], cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    project = tmp_path / "myops"
    assert sorted(p.name for p in project.iterdir()) == ["README.md", "myops.c", "test_myops.py"]
    assert 'OPF_EXPORT_OPS("myops", ops)' in (project / "myops.c").read_text()
    tests = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs"],
        cwd=project, capture_output=True, text=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
    )  # fmt: skip
    assert tests.returncode == 0, tests.stdout + tests.stderr
    assert "5 passed" in tests.stdout or "skipped" in tests.stdout
    refused = subprocess.run([*OPFORGE, "new", "myops"], cwd=tmp_path, capture_output=True, text=True)
    assert refused.returncode == 1 and "already exists" in refused.stderr
    bad = subprocess.run([*OPFORGE, "new", "My-Ops"], cwd=tmp_path, capture_output=True, text=True)
    assert bad.returncode == 1 and "lower_snake_case" in bad.stderr


# -- C build systems against the installed package --------------------------------

REPO_ROOT = Path(__file__).resolve().parents[2]
CONSUMER_C = REPO_ROOT / "tests" / "pkgconfig" / "main.c"


@pytest.mark.skipif(shutil.which("pkg-config") is None, reason="needs pkg-config")
def test_pkg_config_consumer_of_the_package(tmp_path: Path) -> None:
    env = dict(os.environ, PKG_CONFIG_PATH=str(Path(opforge.get_library_dir()) / "pkgconfig"))
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "opforge"], env=env, capture_output=True, text=True,
                           check=True).stdout.split()  # fmt: skip
    version = subprocess.run(["pkg-config", "--modversion", "opforge"], env=env, capture_output=True, text=True)
    assert version.stdout.strip() == opforge.__version__
    program = tmp_path / "consumer"
    subprocess.run(["cc", "-std=c11", "-Wall", "-Wextra", "-Werror", str(CONSUMER_C), "-o", str(program), *flags],
                   check=True)  # fmt: skip
    env.pop("LD_LIBRARY_PATH", None)
    result = subprocess.run([str(program)], capture_output=True, text=True, env=env)  # found through the rpath
    assert result.returncode == 0 and "opf_relu ok" in result.stdout, result.stderr


CMAKE_PROJECT = """
cmake_minimum_required(VERSION 3.16)
project(opforge_consumer C)
find_package(opforge {version} REQUIRED)
add_executable(consumer main.c)
target_link_libraries(consumer PRIVATE opforge::opforge)
add_library(cmakeops MODULE cmakeops.c)
target_link_libraries(cmakeops PRIVATE opforge::opforge)
"""


@pytest.mark.skipif(shutil.which("cmake") is None, reason="needs cmake")
def test_cmake_consumer_of_the_package(tmp_path: Path) -> None:
    project, build = tmp_path / "project", tmp_path / "build"
    project.mkdir()
    shutil.copy(CONSUMER_C, project / "main.c")
    (project / "cmakeops.c").write_text(times_source("cmakeops", 6.0))
    (project / "CMakeLists.txt").write_text(CMAKE_PROJECT.format(version=opforge.__version__))
    cmakedir = subprocess.run([*OPFORGE, "config", "--cmakedir"], capture_output=True, text=True, check=True)
    subprocess.run(["cmake", "-S", str(project), "-B", str(build), f"-Dopforge_DIR={cmakedir.stdout.strip()}"],
                   check=True, capture_output=True)  # fmt: skip
    subprocess.run(["cmake", "--build", str(build)], check=True, capture_output=True)
    result = subprocess.run([str(build / "consumer")], capture_output=True, text=True)
    assert result.returncode == 0 and "opf_relu ok" in result.stdout, result.stderr
    np.testing.assert_array_equal(onp.load_ops(build / "libcmakeops.so").times(np.ones(1)), [6.0])
    too_new = project / "CMakeLists.txt"
    too_new.write_text(CMAKE_PROJECT.format(version="99.0"))
    failed = subprocess.run(["cmake", "-S", str(project), "-B", str(tmp_path / "build2"),
                             f"-Dopforge_DIR={cmakedir.stdout.strip()}"], capture_output=True, text=True)  # fmt: skip
    assert failed.returncode != 0 and "opforge" in failed.stderr


def test_adapters_json_names_the_framework_of_each_bundled_adapter() -> None:
    lib = Path(opforge.get_library_dir())
    recorded = json.loads((lib / "adapters.json").read_text())
    assert set(recorded) == {p.stem.removeprefix("libopforge_") for p in lib.glob("libopforge_*.so")}
    assert sorted(p.name for p in (Path(opforge.__file__).parent / "adapters").glob("*.c")) == [
        "tensorflow.c", "torch.c", "xla.c",
    ]  # fmt: skip

"""Compiling C (and CUDA) sources into the libraries opforge loads: users' op
libraries and, when no matching prebuilt one is bundled, the framework
adapters.

Every build goes to a content-addressed cache (``cache_dir()``:
``$OPFORGE_CACHE_DIR``, else ``$XDG_CACHE_HOME/opforge``, else
``~/.cache/opforge``). A library's key covers its source text (and, for a
source file, its directory), the local headers it includes (from the
compiler's ``-MMD`` dependency list, recorded per source in a small manifest
and re-hashed on each lookup), the compiler's identity, every flag, and the
opforge version. The library's file name carries the key
(``lib<name>-<key>.so``), so each build has a path of its own: a process that
loads an edited source gets a new library, never the handle of the old one.

Concurrent builds are safe: a build holds an ``flock`` on a lock file per
source, compiles into a temporary file in the cache directory and renames it
into place; a process that waited on the lock finds the finished library.

A library built from several files compiles each into an object of its
own (cached the same way, keyed per file: editing one file recompiles that
file only), the files in parallel (one compiler process per CPU), then links
the objects; the link is cached by the objects' keys.

The cache is kept under a size limit, least recently used files first
(``_cache``: ``OPFORGE_CACHE_SIZE``, ``opforge cache``).

A failed compile raises ``BuildError`` (a RuntimeError) carrying the
compiler's own messages (file:line: error: ...); a successful one with
compiler warnings issues a ``BuildWarning``.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import warnings
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Union

if TYPE_CHECKING:
    from ._table import OpTable

__all__ = ["BuildError", "BuildWarning", "Built", "Source", "build", "cache_dir", "library_for", "load_user_table"]

#: A path: of a ``.c`` or ``.cu`` file, or of an already built shared library.
SourcePath = Union[str, "os.PathLike[str]"]
#: A source: a path, C source text (a str with a newline in it), or a list of
#: ``.c``/``.cu`` files built into one library (OPF_EXPORT_OP_PARTS).
Source = Union[str, "os.PathLike[str]", Sequence[SourcePath]]

#: Flags of every C compile (user ops), before the include paths.
C_COMPILE_FLAGS = ("-std=c11", "-O3", "-fPIC", "-fno-math-errno", "-fno-trapping-math", "-Wall", "-Wextra")
#: Flags of every C build of a library from one source: its compile, and -shared.
C_FLAGS = (*C_COMPILE_FLAGS, "-shared")
#: Flags of every CUDA compile (nvcc; the host compiler gets -fPIC and the warnings).
#: -fmad=false and -ffp-contract=off: a*b + c rounds twice, as in the C build, so
#: the device and every CPU build agree bit for bit (see opforge_cuda.h).
CUDA_COMPILE_FLAGS = (
    "-x", "cu", "-std=c++17", "-O3", "-fmad=false",
    "-Xcompiler=-fPIC,-fno-math-errno,-ffp-contract=off,-Wall,-Wextra,-Wno-missing-field-initializers",
)  # fmt: skip
CUDA_FLAGS = (*CUDA_COMPILE_FLAGS, "-shared")

_PACKAGE_DIR = Path(__file__).resolve().parent
_KEY_LENGTH = 16  # hex digits of a key in file names


class BuildError(RuntimeError):
    """A compile or link failed. ``output`` is what the compiler printed
    (its messages name the file and line); ``command`` is what was run."""

    def __init__(self, message: str, *, source: str = "", command: Sequence[str] = (), output: str = "") -> None:
        super().__init__(message)
        self.source = source
        self.command = list(command)
        self.output = output


class BuildWarning(UserWarning):
    """A compile succeeded with warnings (the message holds them)."""


@dataclass(frozen=True)
class Built:
    """A library ready to load: its path, a digest of its bytes and whether
    this call compiled it."""

    path: Path
    digest: str
    compiled: bool = False


def cache_dir() -> Path:
    """Where built libraries are kept (created on first use)."""
    configured = os.environ.get("OPFORGE_CACHE_DIR")
    if configured:
        return Path(configured).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "opforge"


def _hash(*parts: Union[str, bytes]) -> str:
    digest = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return digest.hexdigest()


def _file_hash(path: Union[str, Path]) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _opforge_version() -> str:
    from . import __version__

    return __version__


# --------------------------------------------------------------------------
# Compilers
# --------------------------------------------------------------------------


def c_compiler() -> list[str]:
    """The C compiler command: ``$CC`` (may hold flags), else cc, gcc or clang."""
    configured = os.environ.get("CC")
    if configured:
        return shlex.split(configured)
    for name in ("cc", "gcc", "clang"):
        if shutil.which(name):
            return [name]
    raise BuildError("opforge: no C compiler found (looked for cc, gcc and clang on PATH); set CC")


def cuda_compiler() -> list[str]:
    """nvcc: ``$NVCC``, else on PATH, else under ``$CUDA_HOME`` or /usr/local/cuda."""
    configured = os.environ.get("NVCC")
    if configured:
        return shlex.split(configured)
    found = shutil.which("nvcc")
    if found:
        return [found]
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home and os.access(os.path.join(home, "bin", "nvcc"), os.X_OK):
            return [os.path.join(home, "bin", "nvcc")]
    raise BuildError("opforge: building a .cu source needs nvcc (not on PATH nor in $CUDA_HOME/bin); set NVCC")


@functools.lru_cache(maxsize=None)
def _compiler_identity(command: tuple[str, ...]) -> str:
    """The resolved compiler executable and its ``--version`` text (part of every key)."""
    executable = shutil.which(command[0]) or command[0]
    try:
        result = subprocess.run([*command, "--version"], capture_output=True, text=True, timeout=60)
    except OSError as exc:
        raise BuildError(f"opforge: cannot run the compiler {command[0]!r}: {exc}") from exc
    return f"{os.path.realpath(executable)}\n{result.stdout}"


# --------------------------------------------------------------------------
# The cache
# --------------------------------------------------------------------------


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Holds an exclusive flock on ``path`` (created if needed)."""
    with open(path, "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _write_atomically(path: Path, data: bytes, mode: int = 0o644) -> None:
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".tmp-{path.name}-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        _remove(temp)
        raise


def _remove(path: Union[str, Path]) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _mark_used(*paths: Path) -> None:
    from . import _cache  # (imported here: setup.py loads this file on its own)

    _cache.mark_used(*paths)


def _trim() -> None:
    from . import _cache

    _cache.trim(cache_dir())


def _parse_deps(text: str) -> list[str]:
    """The prerequisites of a make rule written by ``-MMD`` (escaped spaces kept)."""
    body = text.replace("\\\n", " ")
    _, _, prerequisites = body.partition(": ")
    names = re.findall(r"(?:\\.|[^\s\\])+", prerequisites)
    return [re.sub(r"\\(.)", r"\1", name) for name in names]


def _deps_digest(deps: Sequence[str]) -> str:
    """Hash of the names and current contents of files (OSError if one is gone)."""
    return _hash(*(_hash(name, _file_hash(name)) for name in deps))


def _manifest_digest(manifest: Path) -> str | None:
    """_deps_digest of the dependencies a manifest lists, or None (no
    manifest, or a dependency is gone)."""
    try:
        return _deps_digest(json.loads(manifest.read_text())["deps"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _safe_name(name: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9_.+-]", "_", name).lstrip(".-")
    return cleaned or "ops"


def _run(full: list[str], failure: str, display: str) -> str:
    """Runs a compiler or linker command; returns what it printed, or raises
    BuildError ("opforge: <failure>:" and its messages) when it fails."""
    result = subprocess.run(full, capture_output=True, text=True)
    printed = (result.stdout + result.stderr).strip()
    if result.returncode != 0:
        raise BuildError(
            f"opforge: {failure}:\n{printed}\n(command: {shlex.join(full)})", source=display, command=full,
            output=printed,
        )  # fmt: skip
    return printed


def _compile(
    command: list[str],
    link: Sequence[str],
    source: Path,
    name: str,
    base_key: str,
    directory: Path,
    display: str,
    *,
    output: str = "lib{}.so",
    warn: bool = True,
) -> tuple[Built, str]:
    """Builds ``directory/lib<name>-<key>.so`` (``output`` names it from
    ``<name>-<key>``: ``"{}.o"`` for an object) from ``source`` unless the
    cache has it. ``command`` is the compiler and its flags, ``link`` the
    libraries (after the source, which --as-needed linkers require); the
    source, output and dependency-file arguments are added here. Returns the
    build and what the compiler printed (warned about unless ``warn`` is
    false)."""
    directory.mkdir(parents=True, exist_ok=True)
    stem = f"{name}-{base_key[:_KEY_LENGTH]}"
    manifest = directory / f"{stem}.deps.json"
    suffix = output.rpartition("}")[2]

    def library_named(deps_digest: str) -> Path:
        return directory / output.format(f"{name}-{_hash(base_key, deps_digest)[:_KEY_LENGTH]}")

    def cached() -> Path | None:
        digest = _manifest_digest(manifest)
        library = None if digest is None else library_named(digest)
        return library if library is not None and library.exists() else None

    def hit(library: Path) -> tuple[Built, str]:
        _mark_used(library, manifest)
        return Built(library, _file_hash(library)[:_KEY_LENGTH]), ""

    library = cached()
    if library is not None:
        return hit(library)
    with _locked(directory / f"{stem}.lock"):
        library = cached()  # built by another process while this one waited
        if library is not None:
            return hit(library)
        fd, temp = tempfile.mkstemp(dir=directory, prefix=f".tmp-{name}-", suffix=suffix)
        os.close(fd)
        deps_file = temp + ".d"
        # -MMD: the local (non-system) headers it includes, as a make rule
        full = [*command, str(source), "-o", temp, "-MMD", "-MF", deps_file, *link]
        try:
            printed = _run(full, f"cannot compile {display}", display)
            deps = sorted(
                {os.path.abspath(d) for d in _parse_deps(Path(deps_file).read_text()) if Path(d) != source}
            )
            library = library_named(_deps_digest(deps))
            _write_atomically(manifest, json.dumps({"source": display, "deps": deps}, indent=1).encode())
            os.chmod(temp, 0o755 if suffix == ".so" else 0o644)
            os.replace(temp, library)
        finally:
            _remove(temp)
            _remove(deps_file)
    if printed and warn:
        warnings.warn(BuildWarning(f"opforge: compiling {display}:\n{printed}"), stacklevel=4)
    return Built(library, _file_hash(library)[:_KEY_LENGTH], compiled=True), printed


# --------------------------------------------------------------------------
# User op libraries
# --------------------------------------------------------------------------


def is_source_text(source: Source) -> bool:
    """True for C source text (a str with a newline), False for a path."""
    return isinstance(source, str) and "\n" in source


def source_files(source: Source) -> list[Path] | None:
    """The files of a source given as a list of files, else None."""
    if isinstance(source, (str, bytes)) or isinstance(source, os.PathLike):
        return None
    return [Path(os.fspath(item)).expanduser().absolute() for item in source]


def source_label(source: Source) -> str:
    """How messages name a source: its path, its files, or "<source text>"."""
    files = source_files(source)
    if files is not None:
        return ", ".join(map(str, files))
    return "<source text>" if is_source_text(source) else os.fspath(source)  # type: ignore[arg-type]


def _toolchain(is_cuda: bool, compile_flags: Sequence[str], cflags: Sequence[str]) -> tuple[list[str], list[str]]:
    """The compiler, and its command (the compiler, opforge's flags, the
    include path, ``cflags``) for C or CUDA."""
    from . import get_include

    compiler = cuda_compiler() if is_cuda else c_compiler()
    return compiler, [*compiler, *compile_flags, f"-I{get_include()}", *cflags]


def _link_flags(is_cuda: bool, ldflags: Sequence[str]) -> list[str]:
    """libopforge (found at run time through an rpath), ``ldflags``, libm."""
    from . import get_library_dir

    library_dir = get_library_dir()
    rpath = f"-Xlinker=-rpath,{library_dir}" if is_cuda else f"-Wl,-rpath,{library_dir}"
    return [f"-L{library_dir}", "-lopforge", rpath, *ldflags, "-lm"]


def build(
    source: Source,
    *,
    name: str | None = None,
    cflags: Sequence[str] = (),
    ldflags: Sequence[str] = (),
    cuda: bool | None = None,
) -> Built:
    """Compiles a C (or, with nvcc, CUDA) op library from a ``.c``/``.cu``
    file, from C source text or from a list of ``.c``/``.cu`` files (whose
    ops one of them exports with OPF_EXPORT_OP_PARTS), or takes it from the
    cache.

    ``name`` names the library (default: the (first) file's stem, or "ops"
    for source text); ``cflags``/``ldflags`` are added to opforge's own
    flags; ``cuda`` compiles source text as CUDA (files go by their suffix,
    unless ``cuda`` says otherwise). The files of a list compile in
    parallel, each cached on its own.
    Raises BuildError with the compiler's messages when it fails."""
    files = source_files(source)
    if files is not None:
        return _build_files(files, name=name, cflags=cflags, ldflags=ldflags, cuda=cuda)
    if is_source_text(source):
        content = str(source).encode()
        name = _safe_name(name or "ops")
        is_cuda = bool(cuda)
        source_dir = cache_dir() / "ops" / "src"  # kept: the compiler's messages point into it
        source_dir.mkdir(parents=True, exist_ok=True)
        path = source_dir / f"{name}-{_hash(content)[:_KEY_LENGTH]}{'.cu' if is_cuda else '.c'}"
        if path.exists():
            _mark_used(path)
        else:
            _write_atomically(path, content)
        display = f"<source text> ({path})"
        location = ""
    else:
        path = Path(os.fspath(source)).expanduser().absolute()  # type: ignore[arg-type]
        if not path.is_file():
            raise FileNotFoundError(f"opforge: no such source file: {path}")
        content = path.read_bytes()
        is_cuda = path.suffix == ".cu" if cuda is None else cuda
        name = _safe_name(name or path.stem)
        display = str(path)
        location = str(path.parent)  # its local headers resolve from there
    compiler, command = _toolchain(is_cuda, CUDA_FLAGS if is_cuda else C_FLAGS, cflags)
    link = _link_flags(is_cuda, ldflags)
    key = _hash(
        "op-library", _opforge_version(), _compiler_identity(tuple(compiler)), *command, "--", *link, location, content
    )
    return _trimmed(_compile(command, link, path, name, key, cache_dir() / "ops", display)[0])


def _trimmed(built: Built) -> Built:
    """``built``, after trimming the cache if this call wrote to it (see _cache)."""
    if built.compiled:
        _trim()
    return built


def _build_files(
    files: list[Path], *, name: str | None, cflags: Sequence[str], ldflags: Sequence[str], cuda: bool | None
) -> Built:
    """build() of a list of files: an object per file (compiled in
    parallel, cached by file), then the library linked from them (cached by
    the objects' keys), with nvcc where a file is CUDA; a list of one file
    is built as that file."""
    if not files:
        raise ValueError("opforge: build() of a list of source files needs at least one file")
    for path in files:
        if not path.is_file():
            raise FileNotFoundError(f"opforge: no such source file: {path}")
        if path.suffix not in (".c", ".cu"):
            raise ValueError(f"opforge: {path}: a library built from several files takes .c and .cu files only")
    if len(set(files)) != len(files):
        raise ValueError(f"opforge: a file appears twice in {', '.join(map(str, files))}")
    if len(files) == 1:
        return build(files[0], name=name, cflags=cflags, ldflags=ldflags, cuda=cuda)
    name = _safe_name(name or files[0].stem)
    cuda_files = [path.suffix == ".cu" if cuda is None else cuda for path in files]

    def compile_one(index: int) -> tuple[Built, str]:
        path, is_cuda = files[index], cuda_files[index]
        compiler, command = _toolchain(is_cuda, (*(CUDA_COMPILE_FLAGS if is_cuda else C_COMPILE_FLAGS), "-c"), cflags)
        key = _hash(
            "op-object", _opforge_version(), _compiler_identity(tuple(compiler)), *command, str(path.parent),
            path.read_bytes(),
        )  # fmt: skip
        return _compile(
            command, (), path, f"{name}.{_safe_name(path.stem)}", key, cache_dir() / "ops" / "objects", str(path),
            output="{}.o", warn=False,
        )  # fmt: skip

    with ThreadPoolExecutor(max_workers=max(1, min(len(files), os.cpu_count() or 1))) as pool:
        futures = [pool.submit(compile_one, i) for i in range(len(files))]
    objects: list[Built] = []
    failed: list[BuildError] = []
    for future, path in zip(futures, files):
        try:
            built, printed = future.result()
        except BuildError as exc:
            failed.append(exc)
            continue
        objects.append(built)
        if printed:
            warnings.warn(BuildWarning(f"opforge: compiling {path}:\n{printed}"), stacklevel=3)
    if failed:  # every failing file's messages
        raise BuildError(
            "\n".join(map(str, failed)), source=failed[0].source, command=failed[0].command,
            output="\n".join(exc.output for exc in failed),
        )  # fmt: skip
    library, linked = _link(objects, name, any(cuda_files), ldflags, ", ".join(map(str, files)))
    return _trimmed(
        Built(library, _file_hash(library)[:_KEY_LENGTH], compiled=linked or any(o.compiled for o in objects))
    )


def _link(objects: list[Built], name: str, with_cuda: bool, ldflags: Sequence[str], display: str) -> tuple[Path, bool]:
    """``lib<name>-<key>.so`` linked from ``objects`` (by nvcc ``with_cuda``),
    keyed by the objects' paths (which carry their keys), unless the cache
    has it; and whether this call linked it."""
    linker = cuda_compiler() if with_cuda else c_compiler()
    link = _link_flags(with_cuda, ldflags)
    paths = [str(built.path) for built in objects]
    key = _hash("op-library-link", _opforge_version(), _compiler_identity(tuple(linker)), *linker, "--", *link, *paths)
    directory = cache_dir() / "ops"
    library = directory / f"lib{name}-{key[:_KEY_LENGTH]}.so"
    if library.exists():
        _mark_used(library)
        return library, False
    with _locked(directory / f"{name}-{key[:_KEY_LENGTH]}.lock"):
        if library.exists():  # linked by another process while this one waited
            _mark_used(library)
            return library, False
        fd, temp = tempfile.mkstemp(dir=directory, prefix=f".tmp-{name}-", suffix=".so")
        os.close(fd)
        full = [*linker, "-shared", *paths, "-o", temp, *link]
        try:
            _run(full, f"cannot link {name} from {display}", display)
            os.chmod(temp, 0o755)
            os.replace(temp, library)
        finally:
            _remove(temp)
    return library, True


_loaded_libraries: dict[str, str] = {}  # real path -> digest of the file when first loaded


def library_for(source: Source, **options: object) -> Built:
    """A library to load for ``source``: built (and cached) from a ``.c``/``.cu``
    file, C source text or a list of files, or, for a shared library path,
    that library.

    A shared library that this process has already loaded from the same path
    with other contents (it was rebuilt) is copied to a content-addressed
    file in the cache first: the dynamic loader would otherwise hand back the
    old library for that path."""
    if is_source_text(source) or source_files(source) is not None:
        return build(source, **options)  # type: ignore[arg-type]
    path = Path(os.fspath(source)).expanduser()  # type: ignore[arg-type]
    if path.suffix in (".c", ".cu"):
        return build(path, **options)  # type: ignore[arg-type]
    if options:
        raise TypeError(f"opforge: build options {sorted(options)} apply to sources, not to the library {path}")
    if not path.is_file():
        return Built(path, "")  # the loader reports it
    digest = _file_hash(path)[:_KEY_LENGTH]
    real = os.path.realpath(path)
    first = _loaded_libraries.setdefault(real, digest)
    if first == digest:
        return Built(path, digest)
    directory = cache_dir() / "libs"
    directory.mkdir(parents=True, exist_ok=True)
    stem = path.name.split(".so")[0] or "lib"
    copy = directory / f"{_safe_name(stem)}-{digest}.so"
    if copy.exists():
        _mark_used(copy)
        return Built(copy, digest)
    _write_atomically(copy, path.read_bytes(), 0o755)
    _trim()
    return Built(copy, digest)


def load_user_table(source: Source, **options: object) -> tuple[OpTable, Built]:
    """The op table of ``source`` (see library_for), loaded and validated."""
    from ._table import load_table

    built = library_for(source, **options)
    return load_table(built.path), built


# --------------------------------------------------------------------------
# Framework adapters
# --------------------------------------------------------------------------


def adapter_source(framework: str) -> Path:
    """The C source of an adapter, shipped in the package (``adapters/<framework>.c``)."""
    path = _PACKAGE_DIR / "adapters" / f"{framework}.c"
    if not path.is_file():
        raise ImportError(f"opforge: the {framework} adapter's source {path} is missing from this installation")
    return path


def build_adapter(framework: str, version: str, cflags: Sequence[str], ldflags: Sequence[str]) -> Built:
    """Compiles the adapter for ``framework`` (``torch``, ``tensorflow``,
    ``xla``) with the framework's own flags, cached under its ``version``."""
    from . import get_include, get_library_dir

    source = adapter_source(framework)
    include, library_dir = get_include(), get_library_dir()
    compiler = c_compiler()
    command = [
        *compiler, "-std=c11", "-D_POSIX_C_SOURCE=200809L", "-O2", "-fPIC", "-pthread", "-fvisibility=hidden",
        "-Wall", "-Wextra", "-shared", f"-I{include}", *cflags,
    ]  # fmt: skip
    link = ["-Wl,--as-needed", f"-L{library_dir}", "-lopforge", f"-Wl,-rpath,{library_dir}", *ldflags]
    key = _hash(
        "adapter", framework, version, _opforge_version(), _compiler_identity(tuple(compiler)), *command, "--",
        *link, source.read_bytes(),
    )  # fmt: skip
    return _trimmed(
        _compile(
            command, link, source, f"opforge_{framework}", key, cache_dir() / "adapters",
            f"the {framework} adapter ({source})",
        )[0]
    )  # fmt: skip


def prebuilt_adapter(framework: str, version: str) -> Path | None:
    """The adapter bundled with the package, if it was built against this
    ``version`` of its framework (``lib/adapters.json`` records them).
    ``OPFORGE_PREBUILT_ADAPTERS=0`` ignores every bundled adapter."""
    if os.environ.get("OPFORGE_PREBUILT_ADAPTERS", "1") == "0":
        return None
    lib_dir = _PACKAGE_DIR / "lib"
    path = lib_dir / f"libopforge_{framework}.so"
    try:
        built_for = json.loads((lib_dir / "adapters.json").read_text()).get(framework)
    except (OSError, ValueError):
        return None
    return path if path.is_file() and built_for == version else None


#: The module whose version an adapter is built for, per adapter.
ADAPTER_MODULES = {"torch": "torch", "tensorflow": "tensorflow", "xla": "jaxlib"}


def framework_version(framework: str) -> str:
    """The installed version of the framework of an adapter (imports it)."""
    if framework == "torch":
        import torch

        return str(torch.__version__)
    if framework == "tensorflow":
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        import tensorflow as tf

        return str(tf.__version__)
    if framework == "xla":
        import jaxlib.version

        return str(jaxlib.version.__version__)
    raise ValueError(f"opforge: unknown adapter {framework!r}; expected one of {', '.join(ADAPTER_MODULES)}")


def adapter_flags(framework: str) -> tuple[list[str], list[str]]:
    """Compile and link flags of an adapter (what adapters/<framework>.mk passes)."""
    if framework == "torch":
        import torch

        # libtorch_cpu by its soname, no rpath: the adapter binds to the copy
        # `import torch` loaded. -fexceptions: torch's errors unwind through C.
        return ["-fexceptions"], [f"-L{Path(torch.__file__).parent / 'lib'}", "-ltorch_cpu", "-ldl"]
    if framework == "tensorflow":
        import tensorflow as tf

        return ["-isystem", tf.sysconfig.get_include()], list(tf.sysconfig.get_link_flags())
    if framework == "xla":
        import jax.ffi

        return ["-isystem", jax.ffi.include_dir()], []
    raise ValueError(f"opforge: unknown adapter {framework!r}; expected one of {', '.join(ADAPTER_MODULES)}")


def adapter_library(framework: str) -> str:
    """Path of the adapter library for ``framework`` (``torch``, ``tensorflow``,
    ``xla``): the bundled one if it was built for the installed version of
    the framework, else one built from the bundled source (and cached).
    ImportError when it cannot be built."""
    version = framework_version(framework)
    prebuilt = prebuilt_adapter(framework, version)
    if prebuilt is not None:
        return str(prebuilt)
    cflags, ldflags = adapter_flags(framework)
    try:
        return str(build_adapter(framework, version, cflags, ldflags).path)
    except BuildError as exc:
        raise ImportError(
            f"opforge: no bundled {framework} adapter matches the installed version {version}, "
            f"and building it failed: {exc}"
        ) from exc

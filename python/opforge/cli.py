"""The ``opforge`` command (also ``python -m opforge ...``):

- ``opforge build myops.c [more.c ...] [-o libmyops.so]``: compiles an op library (cached)
  and lists its ops with their signatures;
- ``opforge new NAME``: writes a small working project of one's own ops;
- ``opforge config --cflags --libs ...``: paths and flags for C build systems
  (the package also ships ``opforge.pc`` and a CMake package configuration);
- ``opforge cache [clean [--unused-for DAYS]]``: what the build cache holds;
  removing all of it, or what has not been used for a while;
- ``opforge info`` and ``opforge bench``.
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import sys
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Optional, Sequence

if TYPE_CHECKING:
    from ._table import OpDef, OpTable


def info_main(args: argparse.Namespace) -> int:
    """Prints the version, ISA level in use and supported, threads, CUDA devices."""
    import opforge

    from .bench.machine import cpu_model, supported_levels

    info = opforge.info()
    print(f"opforge {info['version']} ({opforge.__file__})")
    print(f"CPU: {cpu_model()}")
    print(f"ISA level in use: {info['isa']} (OPFORGE_ISA forces one)")
    print(f"ISA levels supported here: {', '.join(supported_levels())}")
    print(f"threads: {info['num_threads']} (OPFORGE_NUM_THREADS sets them)")
    print(f"CUDA devices: {info['cuda_devices']}")
    return 0


def signature(op: OpDef) -> str:
    """An op's call signature from its row: ``dense(x, w, b=None, *, activation: 'none'|'relu' = 'none') -> y``
    (``x!``: written in place; ``y?``: an optional output)."""
    params = [f"{a.name}!" if a.mutated else f"{a.name}=None" if a.optional else a.name for a in op.inputs]
    if op.attrs:
        params.append("*")
    for attr in op.attrs:
        kind = "|".join(repr(c) for c in attr.choices) if attr.kind == "enum" else attr.kind
        params.append(f"{attr.name}: {kind} = {attr.default!r}")
    outputs = [f"{o.name}?" if o.optional else o.name for o in op.outputs]
    returns = outputs[0] if len(outputs) == 1 else f"({', '.join(outputs)})" if outputs else "None"
    return f"{op.name}({', '.join(params)}) -> {returns}"


def describe(table: OpTable) -> list[str]:
    """Lines listing a table's ops: signature, then dtypes, flags, gradient and doc."""
    lines = [f"table {table.name!r}: {len(table.ops)} op{'s' * (len(table.ops) != 1)}"]
    for op in table.ops:
        facts = [", ".join(op.dtypes)]
        if op.elementwise:
            facts.append("elementwise")
        grad_ops = sorted({g.op or "identity" for g in op.grads})
        facts.append(f"gradient: {', '.join(grad_ops)}" if grad_ops else "not differentiable")
        lines += [f"  {signature(op)}", f"      {'; '.join(facts)}"]
        if op.doc:
            lines.append(f"      {op.doc}")
    return lines


def build_main(args: argparse.Namespace) -> int:
    """Compiles an op library from C source (cached), copies it to -o if given,
    and lists its ops."""
    from ._build import BuildError, BuildWarning, build
    from ._table import load_table

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", BuildWarning)
        try:
            built = build(args.source, name=args.name, cflags=shlex.split(args.cflags),
                          ldflags=shlex.split(args.ldflags))  # fmt: skip
        except (BuildError, FileNotFoundError, ValueError) as exc:
            print(exc, file=sys.stderr)
            return 1
    for warning in caught:
        print(warning.message, file=sys.stderr)
    path = built.path
    if args.output:
        path = Path(args.output)
        shutil.copyfile(built.path, path)
        path.chmod(0o755)
    try:
        table = load_table(path)
    except (OSError, ValueError) as exc:
        print(f"opforge build: {path} was built, but its op table is not usable: {exc}", file=sys.stderr)
        return 1
    print(f"{path} ({'compiled' if built.compiled else 'from the cache'})")
    print("\n".join(describe(table)))
    return 0


def _size(count: int) -> str:
    """A byte count for people: 0 B, 812 B, 4.2 KiB, 31.0 MiB, 1.5 GiB."""
    if count < 1024:
        return f"{count} B"
    value, unit = count / 1024, "KiB"
    for larger in ("MiB", "GiB"):
        if value < 1024:
            break
        value, unit = value / 1024, larger
    return f"{value:.1f} {unit}"


def _ago(when: Optional[float], now: float) -> str:
    if when is None:
        return "-"
    seconds = max(0.0, now - when)
    for unit, length in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= length:
            return f"{seconds / length:.1f} {unit} ago"
    return "just now"


def cache_main(args: argparse.Namespace) -> int:
    """Prints what the build cache holds, or cleans it."""
    import time

    from . import _cache
    from ._build import cache_dir

    try:
        limit = _cache.cache_limit()
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    if args.action == "clean":
        if args.unused_for is not None and not args.unused_for >= 0:
            print(f"opforge cache clean: --unused-for {args.unused_for}: expected days, 0 or more", file=sys.stderr)
            return 2
        files, size = _cache.clean(cache_dir(), None if args.unused_for is None else args.unused_for * 86400)
        what = "" if args.unused_for is None else f" unused for {args.unused_for:g} days"
        print(f"removed {files} files{what} ({_size(size)}) from {cache_dir()}")
        return 0
    now = time.time()
    sections = _cache.sections(cache_dir())
    print(f"cache: {cache_dir()} (OPFORGE_CACHE_DIR sets it)")
    print(f"limit: {_size(limit) if limit else 'none'} (OPFORGE_CACHE_SIZE sets it; the least recently used files "
          "go first)")  # fmt: skip
    print(f"  {'folder':<12} {'files':>6} {'size':>10}  {'last used':>13}  {'oldest use':>13}  holds")
    for s in sections:
        print(f"  {s.name:<12} {s.files:>6} {_size(s.bytes):>10}  {_ago(s.newest_use, now):>13}  "
              f"{_ago(s.oldest_use, now):>13}  {s.description}")  # fmt: skip
    print(f"  {'total':<12} {sum(s.files for s in sections):>6} {_size(sum(s.bytes for s in sections)):>10}")
    return 0


def new_main(args: argparse.Namespace) -> int:
    """Writes a new project: an op file, its tests and a README."""
    from ._scaffold import new_project

    try:
        files = new_project(args.name, Path(args.directory) if args.directory else None)
    except (ValueError, FileExistsError) as exc:
        print(exc, file=sys.stderr)
        return 1
    for path in files:
        print(f"wrote {path}")
    print(f"next: cd {files[0].parent} && python -m pytest")
    return 0


def config_values() -> dict[str, str]:
    """What ``opforge config`` can print, by option name."""
    import opforge

    from ._build import cache_dir

    include, libdir = opforge.get_include(), opforge.get_library_dir()
    return {
        "cflags": f"-I{include}",
        "libs": f"-L{libdir} -lopforge -Wl,-rpath,{libdir}",
        "includedir": include,
        "libdir": libdir,
        "pkgconfigdir": str(Path(libdir) / "pkgconfig"),
        "cmakedir": str(Path(libdir) / "cmake" / "opforge"),
        "cachedir": str(cache_dir()),
    }


def config_main(args: argparse.Namespace) -> int:
    """Prints the values asked for, space-separated on one line (as pkg-config does)."""
    values = config_values()
    wanted = [name for name in args.order if getattr(args, name)]
    if not wanted:
        print(f"opforge config: say what to print: {' '.join('--' + n for n in values)}", file=sys.stderr)
        return 2
    print(" ".join(values[name] for name in wanted))
    return 0


class _InOrder(argparse.Action):
    """A flag that also records its position (config prints in the order asked)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: Optional[str] = None) -> None:  # fmt: skip
        setattr(namespace, self.dest, True)
        namespace.order.append(self.dest)


def make_parser() -> argparse.ArgumentParser:
    from .bench import runner

    parser = argparse.ArgumentParser(prog="opforge", description="opforge: ML kernels written once in C.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="{build,new,config,cache,info,bench}")
    build = commands.add_parser(
        "build",
        help="compile an op library from C source and list its ops",
        description="Compiles a C (or, with nvcc, .cu) file holding an op table (OPF_EXPORT_OPS) into a "
        "shared library linked with libopforge, with warnings on; or several files, each compiled on its own "
        "and in parallel, one of which exports the others' ops (OPF_EXPORT_OP_PARTS). The result is cached "
        "(OPFORGE_CACHE_DIR) and reused while the sources, their local headers, the flags and the compiler "
        "are unchanged; of several files, only those that changed are compiled again. Prints the library's "
        "path and its ops' signatures.",
    )
    build.add_argument("source", nargs="+", help="the .c or .cu file, or files")
    build.add_argument("-o", "--output", help="copy the library here (default: leave it in the cache)")
    build.add_argument("--name", help="name of the library (default: the (first) source file's stem)")
    build.add_argument("--cflags", default="", help="extra compiler flags, e.g. '-DNDEBUG -I include'")
    build.add_argument("--ldflags", default="", help="extra linker flags, e.g. '-L lib -lfoo'")
    build.set_defaults(main=build_main)
    new = commands.add_parser(
        "new",
        help="write a small working project of your own ops",
        description="Writes NAME/ with NAME.c (an op table with one elementwise op and its gradient), "
        "test_NAME.py (checks the ops in every installed framework against NumPy) and a README.",
    )
    new.add_argument("name", help="name of the project and of its op table (lower_snake_case)")
    new.add_argument("--directory", help="where to write it (default: ./NAME)")
    new.set_defaults(main=new_main)
    config = commands.add_parser(
        "config",
        help="paths and flags for C build systems",
        description="Prints paths and flags to build against the libopforge this package loads. "
        "pkg-config: PKG_CONFIG_PATH=$(opforge config --pkgconfigdir) pkg-config --cflags --libs opforge. "
        "CMake: find_package(opforge) with -Dopforge_DIR=$(opforge config --cmakedir), then link "
        "opforge::opforge.",
    )
    config.set_defaults(main=config_main, order=[])
    for name, text in [
        ("cflags", "compiler flags (-I...)"),
        ("libs", "linker flags (-L... -lopforge and an rpath)"),
        ("includedir", "directory of opforge.h"),
        ("libdir", "directory of libopforge"),
        ("pkgconfigdir", "directory of opforge.pc"),
        ("cmakedir", "directory of opforgeConfig.cmake (for opforge_DIR)"),
        ("cachedir", "where built libraries are cached"),
    ]:
        config.add_argument(f"--{name}", nargs=0, action=_InOrder, default=False, help=text)
    cache = commands.add_parser(
        "cache",
        help="what the build cache holds; clean it",
        description="Prints where the build cache is (OPFORGE_CACHE_DIR), its size limit (OPFORGE_CACHE_SIZE, "
        "default 2G, 0 for none: after each build the least recently used files go, never one used within the "
        "hour) and what each of its folders holds. 'opforge cache clean' removes every file; with "
        "--unused-for DAYS, those not used for that long. A process that has loaded a removed library keeps "
        "it; the next build or load_ops compiles it again.",
    )
    cache.add_argument("action", nargs="?", choices=["info", "clean"], default="info",
                       help="info (the default) or clean")  # fmt: skip
    cache.add_argument("--unused-for", type=float, metavar="DAYS",
                       help="clean: only the files not used for this many days")  # fmt: skip
    cache.set_defaults(main=cache_main)
    info = commands.add_parser("info", help="version, ISA levels, threads, CUDA devices",
                               description=info_main.__doc__)
    info.set_defaults(main=info_main)
    bench = commands.add_parser(
        "bench",
        help="measure opforge against the machine's limits and the installed frameworks",
        description="Measures the machine's copy bandwidth and FMA peak, then opforge (at every ISA level "
        "the CPU supports) and every installed framework's built-ins on elementwise ops and dense layers; "
        "prints ratios as a table (progress goes to stderr), and writes a JSON file and a PNG plot. "
        "Every time is the best of N runs after a warm-up.",
    )
    runner.add_arguments(bench)
    bench.set_defaults(main=runner.bench_main)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of the ``opforge`` console script."""
    args = make_parser().parse_args(argv)
    return int(args.main(args))


if __name__ == "__main__":
    sys.exit(main())

"""Build of the ``opforge`` Python package.

Static metadata lives in pyproject.toml. This file adds what needs code:

- the version, read from ``include/opforge.h`` (one source of truth);
- ``build_ext``: runs ``make lib`` in the repository root, copies
  ``build/libopforge.so`` into ``opforge/lib/`` (one file, named by its soname,
  which is what the loader looks for, plus a linker script ``libopforge.so``
  for ``-lopforge``) and the public headers (``include/*.h``) into
  ``opforge/include/``, and the framework adapters ``make adapters`` built
  (``libopforge_<framework>.so``, one per framework this Python can import)
  into ``opforge/lib/``, with ``lib/adapters.json`` naming the framework
  version each was built for (opforge uses a bundled adapter only for that
  version, and otherwise compiles one at first import from the adapter
  sources (and their local headers) it ships in ``opforge/adapters/``); the pkg-config file
  (``lib/pkgconfig/opforge.pc``) and the CMake package configuration
  (``lib/cmake/opforge/``) of the package; then lets CFFI compile ``opforge._capi`` against it
  (``cffi_modules``; rpath ``$ORIGIN/lib``), and ``opforge._probe``, the
  native loops of ``opforge bench`` (python/opforge/bench/probe.c; it does not
  link libopforge).

Development build without installing:  python setup.py build_ext --inplace
"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
HEADER = ROOT / "include" / "opforge.h"
NATIVE_LIB = ROOT / "build" / "libopforge.so"
ADAPTER_BUILD_DIR = ROOT / "build" / "adapters"
PACKAGE_PC = ROOT / "build" / "package" / "opforge.pc"
CMAKE_DIR = ROOT / "cmake"


def header_version() -> str:
    """``MAJOR.MINOR.PATCH`` from the OPF_VERSION_* defines of the header."""
    text = HEADER.read_text()
    parts = [re.search(rf"#define OPF_VERSION_{p}\s+(\d+)", text) for p in ("MAJOR", "MINOR", "PATCH")]
    if not all(parts):
        raise RuntimeError(f"{HEADER}: OPF_VERSION_MAJOR/MINOR/PATCH not found")
    return ".".join(m.group(1) for m in parts if m)


def elf_soname(path: Path) -> str | None:
    """DT_SONAME of a 64-bit little-endian ELF shared library, or None."""
    data = path.read_bytes()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return None
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    for _, sh_type, _, _, offset, size, link, _, _, _ in sections:
        if sh_type != 6:  # SHT_DYNAMIC
            continue
        strtab_offset = sections[link][4]
        for pos in range(offset, offset + size, 16):
            tag, value = struct.unpack_from("<qQ", data, pos)
            if tag == 14:  # DT_SONAME
                end = data.index(b"\0", strtab_offset + value)
                return data[strtab_offset + value:end].decode()
    return None


def run_make(*targets: str) -> None:
    """Runs make in the repository root, one job per CPU (the row-wise ops
    are several files, each built for three ISA levels) unless a calling make passes
    its own jobs down through MAKEFLAGS."""
    make = os.environ.get("MAKE", "make")
    jobs = [] if "-j" in os.environ.get("MAKEFLAGS", "") else [f"-j{os.cpu_count() or 1}"]
    subprocess.run([make, *jobs, "-C", str(ROOT), *targets], check=True)


def make_native_lib() -> Path:
    """Runs ``make lib`` in the repository root; returns the real library file."""
    run_make("lib")
    if not NATIVE_LIB.exists():
        raise RuntimeError(f"`make lib` did not produce {NATIVE_LIB}")
    return NATIVE_LIB.resolve()


def framework_versions() -> dict[str, str]:
    """Adapter name -> version of its framework, for each framework this
    Python can import (``opforge._build.framework_version``, run in a child
    process: it imports the frameworks)."""
    code = (
        "import importlib.util as u, json, sys\n"
        "spec = u.spec_from_file_location('opforge_build', sys.argv[1])\n"
        "build = sys.modules['opforge_build'] = u.module_from_spec(spec); spec.loader.exec_module(build)\n"
        "found = {}\n"
        "for adapter, module in build.ADAPTER_MODULES.items():\n"
        "    if u.find_spec(module) is None: continue\n"
        "    try: found[adapter] = build.framework_version(adapter)\n"
        "    except Exception as exc: print(f'opforge: {adapter}: {exc}', file=sys.stderr)\n"
        "print(json.dumps(found))\n"
    )
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run([sys.executable, "-c", code, str(ROOT / "python" / "opforge" / "_build.py")],
                            check=True, capture_output=True, text=True, env=env)
    return json.loads(result.stdout.strip().splitlines()[-1])


def make_adapters() -> dict[str, tuple[Path, str]]:
    """Runs ``make adapters`` with this Python; returns, per adapter built, its
    library and the version of the framework it was built against.

    An adapter is built for each framework this Python can import (see
    adapters/README.md); none is an error only if the framework is absent.
    An adapter left in build/adapters/ by a build against another version of
    its framework is removed first (make would not know it is out of date),
    and one of a framework this Python cannot import is not bundled.
    """
    versions = framework_versions()
    record = ADAPTER_BUILD_DIR / "versions.json"
    try:
        built_for = json.loads(record.read_text())
    except (OSError, ValueError):
        built_for = {}
    for name, version in versions.items():
        if built_for.get(name) != version:
            (ADAPTER_BUILD_DIR / f"libopforge_{name}.so").unlink(missing_ok=True)
    run_make("adapters", f"PYTHON={sys.executable}")
    ADAPTER_BUILD_DIR.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps({**built_for, **versions}, indent=1, sort_keys=True) + "\n")
    built = {}
    for name, version in versions.items():
        library = ADAPTER_BUILD_DIR / f"libopforge_{name}.so"
        if library.exists():
            built[name] = (library, version)
    return built


def install_native_files(library: Path, package_dir: Path) -> None:
    """Copies libopforge into package_dir/lib and the public headers into package_dir/include.

    The library is copied once, under its soname (what the loader looks for).
    Next to it, ``libopforge.so`` is a one-line GNU ld linker script naming it,
    so ``-L<lib> -lopforge`` links too, without a second copy of the binary
    that something could load a second time.
    """
    lib_dir = package_dir / "lib"
    shutil.rmtree(lib_dir, ignore_errors=True)
    lib_dir.mkdir(parents=True)
    soname = elf_soname(library) or "libopforge.so"
    shutil.copy2(library, lib_dir / soname)
    if soname != "libopforge.so":
        (lib_dir / "libopforge.so").write_text(f"/* GNU ld script: link the bundled library */\nINPUT({soname})\n")
    adapters = make_adapters()
    for library, _ in adapters.values():
        shutil.copy2(library, lib_dir / library.name)
    versions = {name: version for name, (_, version) in adapters.items()}
    (lib_dir / "adapters.json").write_text(json.dumps(versions, indent=1, sort_keys=True) + "\n")
    include_dir = package_dir / "include"
    include_dir.mkdir(parents=True, exist_ok=True)
    for header in sorted(HEADER.parent.glob("*.h")):  # opforge.h and the headers it includes
        shutil.copy2(header, include_dir / header.name)
    sources_dir = package_dir / "adapters"  # for adapters built at first import
    shutil.rmtree(sources_dir, ignore_errors=True)
    sources_dir.mkdir(parents=True)
    for source in sorted((ROOT / "adapters").glob("*.[ch]")):
        shutil.copy2(source, sources_dir / source.name)
    (lib_dir / "pkgconfig").mkdir()
    shutil.copy2(PACKAGE_PC, lib_dir / "pkgconfig" / "opforge.pc")
    cmake_dir = lib_dir / "cmake" / "opforge"
    cmake_dir.mkdir(parents=True)
    shutil.copy2(CMAKE_DIR / "opforgeConfig.cmake", cmake_dir / "opforgeConfig.cmake")
    version_file = (CMAKE_DIR / "opforgeConfigVersion.cmake.in").read_text().replace("@VERSION@", header_version())
    (cmake_dir / "opforgeConfigVersion.cmake").write_text(version_file)


class BuildExtWithNativeLib(build_ext):
    """build_ext that first builds libopforge and puts it inside the package."""

    def run(self) -> None:
        library = make_native_lib()
        package_dir = Path(self.get_ext_fullpath("opforge._capi")).parent
        install_native_files(library, package_dir)
        if getattr(self, "editable_mode", False):  # PEP 660: the package is the source tree
            install_native_files(library, ROOT / "python" / "opforge")
        super().run()


setup(
    version=header_version(),
    cmdclass={"build_ext": BuildExtWithNativeLib},
    cffi_modules=[
        "python/opforge/_build_capi.py:ffibuilder",
        "python/opforge/bench/_build_probe.py:ffibuilder",
    ],
    # Keep setuptools' files apart from the Makefile's in build/.
    options={"build": {"build_base": "build/python"}},
)

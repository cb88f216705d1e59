"""What machine and software a benchmark ran on: CPU model, cores, the ISA
levels opforge can use here, package versions, and the environment variables
that change the numbers."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import platform
from pathlib import Path
from typing import Any, Optional

from . import limits

#: opforge's ISA levels (include/opforge.h, opf_isa), lowest first.
ISA_LEVELS = ("scalar", "portable", "avx2", "avx512", "neon")
#: Framework packages compared against, by import name.
FRAMEWORK_MODULES = ("numpy", "torch", "tensorflow", "jax")
#: Environment variables that change what is measured; recorded as found.
ENV_VARS = (
    "OPFORGE_ISA",
    "OPFORGE_NUM_THREADS",
    "OPENBLAS_CORETYPE",
    "OPENBLAS_L2_SIZE",
    "OPENBLAS_NUM_THREADS",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
)


def cpu_model() -> str:
    """The CPU's name from /proc/cpuinfo, else what platform says."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("model name", "Model", "Hardware") and value.strip():
                return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _cpuinfo_flags() -> set[str]:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("flags", "Features"):
                return set(value.split())
    except OSError:
        pass
    return set()


def _has(feature: str, flags: set[str]) -> bool:
    answer = limits.cpu_has(feature)
    return feature in flags if answer is None else answer


def supported_levels() -> list[str]:
    """opforge's ISA levels this CPU runs, lowest first.

    Mirrors opf_cpu_supports in src/core/dispatch.c (which the public API does
    not expose): avx2 needs AVX2 and FMA, avx512 needs AVX-512 F, BW, VL and DQ,
    neon is AArch64. Asks the CPU through opforge._probe, else /proc/cpuinfo.
    The benchmark checks each level it runs: a worker reports the level that
    opforge actually used.
    """
    machine = platform.machine().lower()
    levels = ["scalar", "portable"]
    if machine in ("x86_64", "amd64", "i386", "i686"):
        flags = _cpuinfo_flags()
        if _has("avx2", flags) and _has("fma", flags):
            levels.append("avx2")
        if all(_has(f, flags) for f in ("avx512f", "avx512bw", "avx512vl", "avx512dq")):
            levels.append("avx512")
    elif machine in ("aarch64", "arm64"):
        levels.append("neon")
    return levels


def package_version(module: str) -> Optional[str]:
    """The installed version of a package by import name, without importing
    it (None if absent)."""
    if importlib.util.find_spec(module) is None:
        return None
    distribution = {"torch": "torch", "tensorflow": "tensorflow", "jax": "jax", "numpy": "numpy"}.get(module, module)
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        # tensorflow-cpu and similar install the module under another name.
        for alternative in (f"{distribution}-cpu", f"{distribution}-intel"):
            try:
                return importlib.metadata.version(alternative)
            except importlib.metadata.PackageNotFoundError:
                pass
        return "unknown"


def installed_frameworks() -> list[str]:
    """The framework modules that can be imported here (none is imported)."""
    return [m for m in FRAMEWORK_MODULES if importlib.util.find_spec(m) is not None]


def _numpy_blas() -> Optional[str]:
    """NumPy's BLAS as its build config says (name and version), if it says."""
    try:
        import numpy

        config = numpy.show_config(mode="dicts")
        blas = config["Build Dependencies"]["blas"]
        return f"{blas.get('name', '?')} {blas.get('version', '')}".strip()
    except Exception:  # older NumPy: no mode="dicts"
        return None


def machine_info() -> dict[str, Any]:
    """Everything about the machine and software that the report records."""
    import opforge

    info = opforge.info()
    try:
        load = list(os.getloadavg())
    except OSError:
        load = None
    return {
        "cpu_model": cpu_model(),
        "architecture": platform.machine(),
        "cores": os.cpu_count(),
        "opforge_threads": info["num_threads"],
        "isa_levels": supported_levels(),
        "isa_default": info["isa"],
        "fma_probe_isas": limits.fma_isas(),
        "cuda_devices": info["cuda_devices"],
        "load_average": load,
        "environment": {name: os.environ[name] for name in ENV_VARS if name in os.environ},
        "platform": platform.platform(),
        "python": platform.python_version(),
        "versions": {
            "opforge": info["version"],
            **{m: package_version(m) for m in FRAMEWORK_MODULES},
            "matplotlib": package_version("matplotlib"),
        },
        "numpy_blas": _numpy_blas(),
    }

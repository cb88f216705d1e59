"""The ``opforge`` command: ``opforge info`` and ``opforge bench``
(also ``python -m opforge ...``)."""

from __future__ import annotations

import argparse
import sys
from typing import Optional, Sequence


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


def make_parser() -> argparse.ArgumentParser:
    from .bench import runner

    parser = argparse.ArgumentParser(prog="opforge", description="opforge: ML kernels written once in C.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="{info,bench}")
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

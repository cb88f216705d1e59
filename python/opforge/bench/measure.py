"""Timing: one statistic for every measurement of ``opforge bench``.

Every measurement is *best of N after one warm-up*: the callable runs once
untimed (first-touch page faults, lazy initialisation, JIT compilation), then
timed runs until there are at least ``repeats`` of them and they add up to at
least ``min_time_s`` (so a fast call is sampled over a span longer than a
burst of noise from other processes), stopping early once they add up to
``budget_s`` (at least one timed run always happens). The reported time is the
fastest run: on a shared, noisy machine the minimum is the run least disturbed
by others, which is what a kernel can do; the median is recorded in the JSON
too, for the curious.
"""

from __future__ import annotations

import statistics
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, TextIO

#: Said in the table and stored in the JSON: how a time was obtained.
STATISTIC = "best-of"
STATISTIC_TEXT = (
    "best of at least {repeats} timed runs spanning at least {min_time:g} s, after one warm-up run "
    "(each measurement stops after about {budget:g} s of timed runs)"
)


@dataclass
class Timing:
    """The timed runs of one measurement, in seconds."""

    samples: list[float]
    warmup_s: float
    result: Any = field(default=None, repr=False)  # what the last run returned, for checks

    @property
    def best_s(self) -> float:
        return min(self.samples)

    @property
    def median_s(self) -> float:
        return statistics.median(self.samples)

    def as_json(self) -> dict[str, Any]:
        return {
            "best_s": self.best_s,
            "median_s": self.median_s,
            "warmup_s": self.warmup_s,
            "samples_s": self.samples,
        }


def _sample(run_once: Callable[[], tuple[float, Any]], repeats: int, budget_s: float, min_time_s: float) -> Timing:
    """The sampling rule of the module docstring over run_once() -> (seconds, result)."""
    warmup, result = run_once()
    samples: list[float] = []
    total = 0.0
    while not samples or ((len(samples) < repeats or total < min_time_s) and total < budget_s):
        seconds, result = run_once()
        samples.append(seconds)
        total += seconds
    return Timing(samples, warmup, result)


def time_best_of(fn: Callable[[], Any], repeats: int, budget_s: float, min_time_s: float = 0.0) -> Timing:
    """Times fn (see the module docstring); keeps what its last run returned."""

    def run_once() -> tuple[float, Any]:
        start = time.perf_counter()
        result = fn()
        return time.perf_counter() - start, result

    return _sample(run_once, repeats, budget_s, min_time_s)


def time_with_copies(fn: Callable[[], Any], copies: list[Callable[[], float]], repeats: int, budget_s: float,
                     min_time_s: float = 0.0) -> tuple[Timing, Timing]:
    """Times fn as time_best_of does and, after each of its runs, each native
    copy of ``copies`` once (seconds_of_run callables, as time_native's), so
    that fn and the copies meet the same moments of a shared machine. Returns
    fn's Timing and the copies': one sample per run of fn, the fastest copy
    of that round."""
    copy_samples: list[float] = []

    def run_once() -> tuple[float, Any]:
        start = time.perf_counter()
        result = fn()
        seconds = time.perf_counter() - start
        copy_seconds = [copy() for copy in copies]
        if min(copy_seconds) < 0:
            raise RuntimeError("the native probe could not run")
        copy_samples.append(min(copy_seconds))
        return seconds, result

    timing = _sample(run_once, repeats, budget_s, min_time_s)
    return timing, Timing(copy_samples[1:], copy_samples[0])


def time_native(seconds_of_run: Callable[[], float], repeats: int, budget_s: float, min_time_s: float = 0.0) -> Timing:
    """Like time_best_of for a native loop that reports its own wall time
    (seconds; negative on failure, which raises RuntimeError)."""

    def run_once() -> tuple[float, Any]:
        seconds = seconds_of_run()
        if seconds < 0:
            raise RuntimeError("the native probe could not run")
        return seconds, None

    return _sample(run_once, repeats, budget_s, min_time_s)


class Progress:
    """One line per measurement on stderr: what is measured, then its result.

    Lines carry the seconds since the run started (``started_at``, a
    ``time.time()`` value shared with worker processes).
    """

    def __init__(self, started_at: Optional[float] = None, stream: TextIO = sys.stderr, prefix: str = "") -> None:
        self.started_at = time.time() if started_at is None else started_at
        self.stream = stream
        self.prefix = prefix
        self._open = False  # a begun line awaits its result

    def begin(self, what: str) -> None:
        """Starts a line saying what is being measured (ended by end())."""
        elapsed = time.time() - self.started_at
        line = f"{self.prefix}{what}"
        self.stream.write(f"[{elapsed:6.1f}s] {line:<62} ")
        self.stream.flush()
        self._open = True

    def end(self, result: str) -> None:
        """Ends the begun line with the result (a line of its own if none is begun)."""
        if not self._open:
            self.note(result)
            return
        self.stream.write(result + "\n")
        self.stream.flush()
        self._open = False

    def note(self, text: str) -> None:
        """A line of its own (a skipped measurement, a warning, a phase)."""
        if self._open:
            self.end("")
        elapsed = time.time() - self.started_at
        self.stream.write(f"[{elapsed:6.1f}s] {self.prefix}{text}\n")
        self.stream.flush()

"""The probes' one clock for a tight loop of calls."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any


def mean_call_us(call: Callable[..., Any], calls: int, *args: Any) -> float:
    """The mean time of ``calls`` calls of ``call(*args)`` back to back, in microseconds."""
    start = time.perf_counter_ns()
    for _ in range(calls):
        call(*args)
    return (time.perf_counter_ns() - start) / calls / 1e3


def rounds_parser(doc: str, rounds: int, calls: int) -> argparse.ArgumentParser:
    """A probe's command line: its docstring's first line, ``--rounds`` of ``--calls`` calls."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=rounds)
    parser.add_argument("--calls", type=int, default=calls)
    return parser

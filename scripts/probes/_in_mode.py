"""The probes' one way into a benchmark mode: a mode is an environment that GraCE reads at
interpreter start, so a probe runs itself again in a fresh interpreter under it."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Callable


def mode_parser(doc: str, workload: str, exclude: tuple[str, ...] = ("eager",),
                dry_run: str | None = None) -> argparse.ArgumentParser:
    """A probe's command line: ``--mode`` (a benchmark mode but ``exclude``), ``--workload``, and
    the hidden ``--child``; with ``dry_run``, ``--device`` (``cpu``: a dry run of the probe,
    without ``dry_run``'s part) and ``--size``."""
    from grace.bench.modes import MODES

    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", required=True, choices=sorted(m for m in MODES if m not in exclude))
    ap.add_argument("--workload", default=workload)
    if dry_run is not None:
        ap.add_argument("--device", default="cuda", help=f"cpu: a dry run of the probe itself ({dry_run})")
        ap.add_argument("--size", default="full", choices=["full", "tiny"])
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    return ap


def rerun_in_mode(mode: str, script: str) -> int:
    """Run ``script`` again, with this command line and ``--child``, under ``mode``'s environment."""
    from grace.bench.modes import MODES

    env = {**os.environ, **MODES[mode].env}
    return subprocess.call([sys.executable, script, "--child", *sys.argv[1:]], env=env)


def run_in_mode(args: argparse.Namespace, script: str, child: Callable[[], None], header: bool = True) -> int:
    """A probe's ``main`` after parsing: in the child, ``child()``; else (with a header naming the
    mode and workload) ``script`` again under ``args.mode``'s environment."""
    if args.child:
        child()
        return 0
    if header:
        print(f"==== {args.mode} {args.workload}", flush=True)
    return rerun_in_mode(args.mode, script)

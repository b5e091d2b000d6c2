"""The probes' one way into a benchmark mode: a mode is an environment that GraCE reads at
interpreter start, so a probe runs itself again in a fresh interpreter under it."""

from __future__ import annotations

import os
import subprocess
import sys


def rerun_in_mode(mode: str, script: str) -> int:
    """Run ``script`` again, with this command line and ``--child``, under ``mode``'s environment."""
    from grace.bench.modes import MODES

    env = {**os.environ, **MODES[mode].env}
    return subprocess.call([sys.executable, script, "--child", *sys.argv[1:]], env=env)

"""GraCE's hardening of CUDA graph trees on the GPU (grace.trees, with any switch on)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from grace.paths import REPO_ROOT

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a CUDA GPU")


def test_an_overwritten_input_raises_and_the_next_call_in_the_generation_records_and_is_right() -> None:
    """A replay whose input a later replay overwrote raises before its node becomes current, so
    the recording that follows in the same generation does not list a freed output as live
    (the probe run with GRACE_DISABLE=1 shows stock there)."""
    env = {**os.environ, "GRACE_DISABLE": "0", "GRACE_SCG_FORCE": "graph"}
    proc = subprocess.run([sys.executable, str(REPO_ROOT / "scripts/probes/replay_input_overwritten.py")],
                          capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = dict(line.split(": ", 1) for line in proc.stdout.splitlines() if ": " in line)
    assert lines["f(z), z overwritten"].startswith("RuntimeError") and "overwritten" in lines["f(z), z overwritten"]
    assert lines["f(fresh), same generation"] == "ok, equal to eager: True", proc.stdout


@pytest.mark.parametrize("lean", ["0", "1"])
def test_outputs_only_autograd_holds_are_not_overwritten_before_their_backward(lean: str) -> None:
    """A layer's forward whose outputs only autograd holds, then another function or the same
    layer again, then one backward: each step's gradients equal eager's (stock 2.11 aborts there,
    "invalid device pointer" in its allocator restore)."""
    env = {**os.environ, "GRACE_DISABLE": "0", "GRACE_LEAN_REPLAY": lean}
    proc = subprocess.run([sys.executable, str(REPO_ROOT / "scripts/probes/saved_output_dead.py")],
                          capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    steps = [line for line in proc.stdout.splitlines() if " step " in line]
    assert len(steps) == 14, proc.stdout
    assert all(line.endswith("(equal)") for line in steps), proc.stdout

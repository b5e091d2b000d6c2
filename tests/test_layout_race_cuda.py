"""Race-free kernel configurations on the GPU (grace.layout_race, patches/pi/0003): what the check
chose for a kernel compiled in one of Inductor's compile workers reaches the user's log.

Behaviour only, never timing. Each case compiles, in a fresh interpreter with fresh caches, the
training step whose backward Inductor 2.11 fuses into the in-place reduction Triton 3.6 compiles
racy in most of its configurations (``scripts/probes/inplace_reduction_race.py``), with the
compile workers' pool ready before the first kernel, so that the kernel compiles in a worker.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from grace.paths import REPO_ROOT

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

STEP = """
import torch
from torch._inductor.async_compile import AsyncCompile

AsyncCompile.wait_pool_ready()  # the kernels compile in the workers, whose own output Inductor discards
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 20)).cuda()
step = torch.compile(model, dynamic=True)
for batch in (4, 6):
    model.zero_grad(set_to_none=True)
    step(torch.randn(batch, 16, device="cuda")).square().mean().backward()
torch.cuda.synchronize()
print("stepped")
"""


def _compile_in_workers(tmp_path: Path, race_free: str) -> str:
    env = {**os.environ, "GRACE_DISABLE": "0", "GRACE_LOGS": "info", "GRACE_RACE_FREE_KERNELS": race_free,
           "TORCHINDUCTOR_COMPILE_THREADS": "4", "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / f"inductor{race_free}"),
           "TRITON_CACHE_DIR": str(tmp_path / f"triton{race_free}")}
    proc = subprocess.run([sys.executable, "-c", STEP], capture_output=True, text=True, env=env, cwd=REPO_ROOT,
                          timeout=300)
    assert proc.returncode == 0 and "stepped" in proc.stdout, proc.stderr[-3000:]
    return proc.stderr


def test_the_choice_made_in_a_compile_worker_is_logged_in_the_launching_process(tmp_path: Path) -> None:
    log = _compile_in_workers(tmp_path, "1")
    choices = [line for line in log.splitlines() if line.startswith("[grace]") and "grace.layout_race" in line]
    assert any("left out of autotuning" in line or "variants that do not" in line for line in choices), log[-3000:]
    assert len(choices) == len(set(choices)), "each kernel's choice is logged once"


def test_with_the_check_off_nothing_is_chosen_or_logged(tmp_path: Path) -> None:
    log = _compile_in_workers(tmp_path, "0")
    assert "grace.layout_race" not in log, log[-3000:]

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


ORDERED_STEP = """
import torch
from torch._inductor.runtime.triton_heuristics import triton_config_to_hashable

import grace.layout_race as layout_race

keep_race_free = layout_race.keep_race_free


def racy_only(autotuner, results):
    # the configurations Triton compiled without the race left out before the check sees them, so
    # that every one it sees races, whichever configurations Inductor proposed for this shape
    noted = getattr(autotuner, "grace_layout_races", None) or {}
    racy = [r for r in results if triton_config_to_hashable(r.config) in noted]
    if racy and len(racy) < len(results):
        print("race-free configurations left out:", len(results) - len(racy), flush=True)
    return keep_race_free(autotuner, racy or results)


layout_race.keep_race_free = racy_only
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 20)).cuda()
step = torch.compile(model, dynamic=True)
wrong = 0
for i, batch in enumerate((4, 6, 5, 3, 6, 4, 7, 5) * 3):
    x = torch.randn(batch, 16, device="cuda")
    model.zero_grad(set_to_none=True)
    step(x).square().mean().backward()
    compiled = [p.grad.clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    model(x).square().mean().backward()
    wrong += any(not torch.allclose(c, p.grad, rtol=1e-4, atol=1e-6) for c, p in zip(compiled, model.parameters()))
torch.cuda.synchronize()
print(f"stepped, {wrong} wrong")
"""


def test_where_every_configuration_races_the_kernel_is_ordered_and_its_gradients_are_eagers(tmp_path: Path) -> None:
    """The backward's in-place reduction with its race-free configurations taken away (compiled
    in this process, so that the check sees only racy ones): the autotuner gets the same
    configurations compiled with a barrier, and every step's gradients equal eager's. Two of
    these configurations, unordered, sum wrong on every launch
    (``scripts/probes/inplace_reduction_race.py``)."""
    env = {**os.environ, "GRACE_DISABLE": "0", "GRACE_LOGS": "info", "GRACE_RACE_FREE_KERNELS": "1",
           "TORCHINDUCTOR_COMPILE_THREADS": "1",
           "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor"), "TRITON_CACHE_DIR": str(tmp_path / "triton")}
    proc = subprocess.run([sys.executable, "-c", ORDERED_STEP], capture_output=True, text=True, env=env,
                          cwd=REPO_ROOT, timeout=300)
    assert proc.returncode == 0 and "stepped" in proc.stdout, proc.stderr[-3000:]
    assert "the same configurations ordered by a barrier" in proc.stderr, proc.stdout + proc.stderr[-3000:]
    assert "stepped, 0 wrong" in proc.stdout, proc.stdout + proc.stderr[-2000:]

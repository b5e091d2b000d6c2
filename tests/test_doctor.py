"""``python -m grace doctor`` and ``setup``: what users see when things are right and wrong."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from grace.paths import REPO_ROOT


def _doctor(cache: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "grace", "doctor"], capture_output=True, text=True,
                          cwd=REPO_ROOT, timeout=120, env={**os.environ, "GRACE_CACHE_DIR": str(cache), **env})


def test_doctor_reports_versions_patches_and_switches(tmp_path: Path) -> None:
    from grace.patching import overlay
    from grace.patching.series import load_series
    from grace.versions import pins

    built = overlay.build(load_series(), pins().upstream_sha256, {"torch": "2.11.0", "triton": "3.6.0"},
                          root=tmp_path / "overlay")
    proc = _doctor(tmp_path, GRACE_SCG="0")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "torch      2.11.0" in out and "(pinned 2.11.0)" in out and "triton     3.6.0" in out
    assert f"in overlay {built.path}" in out
    assert "switches   on: cgct, pi, lean_replay; off: scg" in out
    assert "safety     stale-output guard on; race-free kernel configurations on; adopted gradients copied" in out
    assert "pi         strategy ptx, table write copy" in out
    assert "gpu " in out
    proc = _doctor(tmp_path, GRACE_CGCT="0", GRACE_PI="0", GRACE_SCG="0", GRACE_LEAN_REPLAY="0",
                   GRACE_RACE_FREE_KERNELS="0")
    assert "safety     stale-output guard off; race-free kernel configurations off" in proc.stdout
    proc = _doctor(tmp_path, GRACE_COPY_GRADS="0")
    assert "adopted gradients left on the graph's memory (stock)" in proc.stdout
    proc = _doctor(tmp_path, GRACE_PI_TABLE_WRITE="pinned")
    assert proc.returncode == 1 and "pi_table_write='pinned' (GRACE_PI_TABLE_WRITE): choose one of 'copy', 'memop'" in proc.stdout
    proc = _doctor(tmp_path, GRACE_PI_STRATEGY="fast")
    assert proc.returncode == 1 and "pi_strategy='fast' (GRACE_PI_STRATEGY): choose one of 'ptx', 'prelude', 'exec-update'" in proc.stdout
    proc = _doctor(tmp_path, GRACE_PI_STRATEGY="prelude")
    assert "pi         strategy prelude" in proc.stdout and "prelude" in proc.stdout.split("strategy prelude")[1]
    assert "WARNING: every PI check is reported failed" not in proc.stdout
    proc = _doctor(tmp_path, GRACE_PI_FORCE_UNTRUSTED="1")
    assert proc.returncode == 0 and "WARNING: every PI check is reported failed" in proc.stdout
    proc = _doctor(tmp_path, GRACE_SCG="off")
    assert "switches   on: cgct, pi, lean_replay; off: scg" in proc.stdout
    proc = _doctor(tmp_path, GRACE_LEAN_REPLAY="maybe")
    assert proc.returncode == 1 and "switches   ERROR: GRACE_LEAN_REPLAY='maybe' is not a switch's value" in proc.stdout
    assert "Traceback" not in proc.stderr


def test_doctor_says_whether_the_prelude_builds(monkeypatch: pytest.MonkeyPatch) -> None:
    from grace import doctor
    from grace.pi import prelude

    monkeypatch.setattr(prelude, "compile_prelude", lambda arch: b"\x7fELF" + bytes(60))
    monkeypatch.setattr(prelude, "find_cudadevrt", lambda: Path("/cuda/lib/libcudadevrt.a"))
    assert doctor.prelude_line() == ("  prelude builds (64 B for sm_90), device runtime /cuda/lib/libcudadevrt.a", True)

    def missing(arch: str) -> bytes:
        raise prelude.PreludeError("libcudadevrt.a (the CUDA device runtime, which the prelude links) not found")

    monkeypatch.setattr(prelude, "compile_prelude", missing)
    line, builds = doctor.prelude_line()
    assert not builds and line.startswith("  ERROR: the prelude cannot be built") and "libcudadevrt.a" in line


def test_doctor_without_setup_says_what_to_do(tmp_path: Path) -> None:
    proc = _doctor(tmp_path)
    assert proc.returncode == 1
    assert "no overlay (run make setup)" in proc.stdout


def test_setup_refuses_other_versions_naming_the_pins(monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture, tmp_path: Path) -> None:
    import grace.versions as versions
    from grace.cli import main

    monkeypatch.setenv("GRACE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(versions, "installed_version", lambda d: {"torch": "2.9.1", "triton": "3.6.0"}[d])
    assert main(["setup"]) == 2
    err = capsys.readouterr().err
    assert "torch 2.9.1 is installed" in err and "torch==2.11.0" in err and "triton==3.6.0" in err
    assert not (tmp_path / "overlay").exists(), "a refused setup must change nothing"

"""SCG's quiet gate (grace.scg.quiet): profiles wait until no other process compiles.

The lock is an ``flock``, which conflicts between open files of one process as between
processes: a second ``os.open`` of the same file stands for another process here, and a child
process where two processes must both make progress.
"""

from __future__ import annotations

import fcntl
import logging
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import grace.config
from grace.scg import quiet

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def lock(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "scg-quiet.lock"
    quiet._gates.clear()
    with grace.config.patch(scg_quiet_lock=str(path), scg_quiet_wait_s="30"):
        yield path
    quiet._gates.clear()


def _other_holder(path: Path, how: int) -> int:
    """Another open file of ``path`` holding ``how``: another process, for flock."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, how)
    return fd


def _can_take(path: Path, how: int) -> bool:
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, how | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


def test_without_a_lock_there_is_no_gate_and_profiles_run_as_they_come() -> None:
    quiet._gates.clear()
    with grace.config.patch(scg_quiet_lock=""):
        assert quiet.gate() is None
        with quiet.compiling() as held, quiet.profiling_alone() as alone:
            assert held is None and alone is None


@pytest.mark.parametrize("value", ["soon", "-1", "nan"])
def test_a_wait_that_is_no_number_of_seconds_is_refused_by_name(lock: Path, value: str) -> None:
    with grace.config.patch(scg_quiet_wait_s=value), pytest.raises(ValueError, match="GRACE_SCG_QUIET_WAIT_S"):
        quiet.gate()


def test_a_compiling_process_holds_the_gate_shared_and_lets_another_compile(lock: Path) -> None:
    with quiet.compiling():
        assert _can_take(lock, fcntl.LOCK_SH), "another process may compile beside it"
        assert not _can_take(lock, fcntl.LOCK_EX), "no other process may profile while it compiles"
    assert _can_take(lock, fcntl.LOCK_EX), "released when its compilation ends"


def test_a_profile_inside_a_compilation_runs_alone_then_the_compilation_holds_again(lock: Path) -> None:
    """Its own shared hold does not keep a process from profiling (flock converts it)."""
    with quiet.compiling():
        with quiet.profiling_alone() as alone:
            assert alone is True
            assert not _can_take(lock, fcntl.LOCK_SH), "nobody compiles during the profile"
        assert _can_take(lock, fcntl.LOCK_SH) and not _can_take(lock, fcntl.LOCK_EX), "held shared again"
    assert quiet.gate().waited_s >= 0 and not quiet.gate().spent


def test_a_profile_waits_until_the_other_processes_finish_compiling(lock: Path) -> None:
    """A child compiles (shared hold) and writes a marker just before it stops; the profile may
    only begin after the marker exists."""
    marker = lock.with_suffix(".done")
    script = textwrap.dedent(f"""
        import fcntl, os, sys, time
        fd = os.open({str(lock)!r}, os.O_RDWR | os.O_CREAT)
        fcntl.flock(fd, fcntl.LOCK_SH)
        print("compiling", flush=True)
        time.sleep(0.5)
        open({str(marker)!r}, "w").close()
        fcntl.flock(fd, fcntl.LOCK_UN)
    """)
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "compiling"
        with quiet.profiling_alone() as alone:
            assert alone is True
            assert marker.exists(), "the profile began while the other process still compiled"
    finally:
        child.wait(timeout=30)


def test_two_processes_that_compile_and_profile_both_finish(lock: Path) -> None:
    """Each drops its own shared hold to wait for the exclusive one: neither waits on the other."""
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(REPO)!r})
        import grace.config
        from grace.scg import quiet
        with grace.config.patch(scg_quiet_lock={str(lock)!r}, scg_quiet_wait_s="60"):
            with quiet.compiling():
                print("compiling", flush=True)
                sys.stdin.readline()
                with quiet.profiling_alone() as alone:
                    print("profiled", alone, flush=True)
    """)
    child = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "compiling"
        with quiet.compiling():
            child.stdin.write("go\n")
            child.stdin.flush()
            with quiet.profiling_alone() as alone:
                assert alone is True
        assert child.stdout.readline().strip() == "profiled True"
    finally:
        child.wait(timeout=60)
    assert child.returncode == 0


def test_once_the_wait_runs_out_profiles_run_beside_the_others_and_say_so(
        lock: Path, caplog: pytest.LogCaptureFixture) -> None:
    other = _other_holder(lock, fcntl.LOCK_SH)  # a process that compiles for longer than the budget
    try:
        with grace.config.patch(scg_quiet_wait_s="0.2"), caplog.at_level(logging.WARNING, logger="grace.scg"):
            g = quiet.gate()
            with quiet.compiling():
                with quiet.profiling_alone() as alone:
                    assert alone is False
                assert not _can_take(lock, fcntl.LOCK_EX), "this process holds the gate shared again"
                waited = g.waited_s
                with quiet.profiling_alone() as alone:
                    assert alone is False
                assert g.spent and g.waited_s == waited, "a spent budget waits no more"
        assert waited > 0, "it waited before it gave up"
        assert "profiles beside them" in caplog.text
    finally:
        os.close(other)


def _pointwise_decision(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, list[Any]]:
    """SCG's decision for a generated pointwise partition with its profile faked; the cache's
    stores are returned beside it."""
    import importlib.util
    import types

    import torch
    from torch._inductor.codecache import PyCodeCache

    from grace.scg import cache, tree_hook
    from grace.scg.choose import Choice

    module_file = tmp_path / "generated_quiet.py"
    module_file.write_text("import torch\n\ndef partition_0(args):\n    (x,) = args\n    args.clear()\n"
                           "    return (x * 2,)\n")
    spec = importlib.util.spec_from_file_location("grace_test_generated_quiet", module_file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    stored: list[Any] = []
    monkeypatch.setattr(tree_hook, "is_inductor_generated", lambda model: True)
    monkeypatch.setattr(tree_hook, "_cache_key", lambda candidate, device: "key")
    monkeypatch.setattr(cache, "load", lambda key: None)
    monkeypatch.setattr(cache, "store", lambda key, decision: stored.append(decision))
    monkeypatch.setattr(tree_hook, "_profile", lambda *args: {Choice.NO_GRAPH: [10.0] * 5, Choice.GRAPH: [5.0] * 5})
    wrapped = types.SimpleNamespace(model=module.partition_0, static_input_idxs=[])
    manager = types.SimpleNamespace(ids_to_funcs={"f": wrapped},
                                    id_to_mode={"f": types.SimpleNamespace(name="INFERENCE")}, device_index=0,
                                    _get_cuda_graph_recorded_tensor_checker=lambda: (lambda t: False))
    PyCodeCache.modules.append(module)
    try:
        return tree_hook._decide(manager, [torch.zeros(8, 16)], "f"), stored
    finally:
        PyCodeCache.modules.remove(module)


def test_a_decision_profiled_alone_is_cached(lock: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    record, stored = _pointwise_decision(tmp_path, monkeypatch)
    assert record.source == "profiled" and record.choice == "graph" and len(stored) == 1
    assert "quiet gate" not in record.reason


def test_a_decision_profiled_beside_compilations_says_so_and_is_not_cached(
        lock: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    other = _other_holder(lock, fcntl.LOCK_SH)
    try:
        with grace.config.patch(scg_quiet_wait_s="0"):
            record, stored = _pointwise_decision(tmp_path, monkeypatch)
    finally:
        os.close(other)
    assert record.source == "profiled" and record.choice == "graph"
    assert "beside other processes' compilations" in record.reason and stored == []

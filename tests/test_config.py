"""GraCE's switches: on by default, settable from Python and from the environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from grace.paths import REPO_ROOT

PRINT = "import json, grace.config as c; print(json.dumps({s: getattr(c, s) for s in ('cgct', 'pi', 'scg')}))"


def _switches(**env: str) -> dict:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("GRACE_")}
    proc = subprocess.run([sys.executable, "-c", PRINT], capture_output=True, text=True, cwd=REPO_ROOT,
                          env={**clean, **env}, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_all_switches_default_on() -> None:
    assert _switches() == {"cgct": True, "pi": True, "scg": True}


def test_lean_replay_and_gradient_copies_are_on_until_the_environment_turns_them_off() -> None:
    code = "import grace.config as c; print(c.lean_replay, c.copy_grads)"
    for env, expected in (({}, "True True"), ({"GRACE_LEAN_REPLAY": "0", "GRACE_COPY_GRADS": "0"}, "False False")):
        clean = {k: v for k, v in os.environ.items() if not k.startswith("GRACE_")}
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT,
                              env={**clean, **env}, timeout=120)
        assert proc.stdout.strip() == expected, proc.stderr


def test_the_stale_output_guard_and_race_free_kernels_are_on_until_the_environment_turns_them_off() -> None:
    code = "import grace.config as c; print(c.stale_outputs_raise, c.race_free_kernels)"
    for env, expected in (({}, "True True"), ({"GRACE_STALE_OUTPUTS_RAISE": "0", "GRACE_RACE_FREE_KERNELS": "0"},
                                                  "False False")):
        clean = {k: v for k, v in os.environ.items() if not k.startswith("GRACE_")}
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT,
                              env={**clean, **env}, timeout=120)
        assert proc.stdout.strip() == expected, proc.stderr


@pytest.mark.parametrize("name", ["cgct", "pi", "scg"])
def test_environment_turns_one_switch_off(name: str) -> None:
    switches = _switches(**{f"GRACE_{name.upper()}": "0"})
    assert switches == {s: s != name for s in ("cgct", "pi", "scg")}


@pytest.mark.parametrize(("text", "expected"), [("false", False), ("Off", False), ("no", False),
                                                ("TRUE", True), ("on", True), ("yes", True), ("", True)])
def test_a_switch_reads_the_usual_spellings_and_an_empty_variable_leaves_the_default(text: str, expected: bool) -> None:
    """torch's configuration keeps any text but "1" and "0" as a string, which is true:
    ``GRACE_CGCT=false`` would have turned CGCT on."""
    assert _switches(GRACE_CGCT=text) == {"cgct": expected, "pi": True, "scg": True}


def test_a_switch_with_any_other_text_is_refused_by_its_variable() -> None:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("GRACE_")}
    proc = subprocess.run([sys.executable, "-c", PRINT], capture_output=True, text=True, cwd=REPO_ROOT,
                          env={**clean, "GRACE_LEAN_REPLAY": "maybe"}, timeout=120)
    assert proc.returncode != 0 and "GRACE_LEAN_REPLAY='maybe' is not a switch's value: use 1 or 0" in proc.stderr


def test_grace_disable_reads_the_same_spellings_and_disables_with_a_warning_on_any_other_text(capsys) -> None:
    from grace import option_values

    assert option_values.disabled({}) is False
    assert [option_values.disabled({"GRACE_DISABLE": t}) for t in ("1", "true", "On", "0", "no", "")] == \
        [True, True, True, False, False, False]
    option_values._disable_warned = False
    assert option_values.disabled({"GRACE_DISABLE": "please"}) and option_values.disabled({"GRACE_DISABLE": "please"})
    assert capsys.readouterr().err.count("GRACE_DISABLE='please' is not a switch's value") == 1


def test_python_patch_is_scoped() -> None:
    import grace.config as config

    with config.patch(scg=False, pi=False):
        assert (config.cgct, config.pi, config.scg) == (True, False, False)
    assert (config.pi, config.scg) == (True, True)


def test_python_overrides_the_environment() -> None:
    """SCG times a graph with PI off against PI on through ``config.patch``: the environment
    that turned PI on for the process (the benchmark's modes do) must not override it."""
    code = ("import json, grace.config as c\n"
            "with c.patch(pi=False, pi_strategy='ptx'):\n"
            "    inside = (c.pi, c.pi_strategy)\n"
            "print(json.dumps([inside, (c.pi, c.pi_strategy)]))")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("GRACE_")}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT,
                          env={**clean, "GRACE_PI": "1", "GRACE_PI_STRATEGY": "exec-update"}, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == [[False, "ptx"], [True, "exec-update"]]


def test_log_level_from_environment() -> None:
    code = "import logging, grace.log as l; print(l.get_logger().level)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT,
                          env={**os.environ, "GRACE_LOGS": "+grace"}, timeout=60)
    assert proc.stdout.strip() == "10"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT,
                          env={**os.environ, "GRACE_LOGS": "loud"}, timeout=60)
    assert proc.stdout.strip() == "30" and "GRACE_LOGS='loud'" in proc.stderr


def test_pi_strategy_defaults_to_the_pointer_table_and_is_set_from_the_environment() -> None:
    code = "import grace.config as c; print(c.pi_strategy)"
    clean = {k: v for k, v in os.environ.items() if not k.startswith("GRACE_")}
    for env, expected in (({}, "ptx"), ({"GRACE_PI_STRATEGY": "exec-update"}, "exec-update")):
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT,
                              env={**clean, **env}, timeout=120)
        assert proc.stdout.strip() == expected, proc.stderr


def test_an_unknown_pi_strategy_is_refused_by_name() -> None:
    import grace.config as config
    from grace.pi.tree_hook import strategy

    with config.patch(pi_strategy="fast"), pytest.raises(ValueError, match="choose one of 'ptx', 'prelude', 'exec-update'"):
        strategy()


def test_collector_paused_turns_the_cyclic_collector_off_and_back_as_it_was() -> None:
    import gc

    from grace.trees import collector_paused

    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled(), "an inner pause does not turn it back on early"
    assert gc.isenabled()
    with pytest.raises(ValueError):
        with collector_paused():
            raise ValueError("a failed recording")
    assert gc.isenabled(), "turned back on after an exception too"
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled(), "left off if it was off"
    finally:
        gc.enable()


def test_check_inputs_readable_raises_the_overwritten_error_before_anything_else() -> None:
    import torch

    from grace.trees import check_inputs_readable

    fine, overwritten = torch.ones(3), torch.ones(3)
    check_inputs_readable([fine, 3, None, fine[1:]])
    torch._C._set_storage_access_error_msg(overwritten, "accessing tensor output of CUDAGraphs that has been overwritten")
    with pytest.raises(RuntimeError, match="has been overwritten"):
        check_inputs_readable([fine, overwritten[1:]])


def test_the_tree_is_hardened_with_any_switch_on_and_stock_with_all_off() -> None:
    import gc

    import grace.config
    from grace.trees import collector_paused_if_hardened, hardened

    off = {"cgct": False, "pi": False, "scg": False, "lean_replay": False}
    for switches, expected in (({**off, "cgct": True}, True), ({**off, "scg": True}, True),
                               ({**off, "lean_replay": True}, True), (off, False)):
        with grace.config.patch(**switches):
            assert hardened() is expected
            with collector_paused_if_hardened():
                assert gc.isenabled() is not expected
    assert gc.isenabled()


def test_running_switches_report_every_option_a_variable_sets() -> None:
    """A benchmark row or a tensor-parallel launch records every option its environment can set,
    each under that variable's name, as the process has it."""
    import re

    import grace.config
    from grace.paths import PACKAGE_DIR
    from grace.switches import running_switches

    declared = set(re.findall(r'env_name_default="(GRACE_\w+)"', (PACKAGE_DIR / "config.py").read_text()))
    with grace.config.patch(scg_force="graph", race_free_kernels=False, pi_strategy="prelude"):
        running = running_switches()
    assert set(running) == declared | {"GRACE_DISABLE"}
    assert (running["GRACE_SCG_FORCE"], running["GRACE_RACE_FREE_KERNELS"], running["GRACE_PI_STRATEGY"]) == (
        "graph", "0", "prelude")


def test_every_enumerated_option_is_refused_by_one_check() -> None:
    """A wrong value of any enumerated option is refused by the same message wherever it is read
    (grace.option_values): PI's strategy and table write, SCG's force and profiled strategies."""
    import grace.config
    from grace.option_values import ACCEPTED, checked, problems

    assert problems() == {}
    assert {name: checked(name) for name in ACCEPTED} == {name: getattr(grace.config, name) for name in ACCEPTED}
    with grace.config.patch(pi_strategy="fast", pi_table_write="pinned", scg_force="always",
                            scg_pi_strategies="ptx, slow"):
        found = list(problems().values())
        with pytest.raises(ValueError) as refused:
            checked("scg_force")
    assert found == [
        "grace.config.pi_strategy='fast' (GRACE_PI_STRATEGY): choose one of 'ptx', 'prelude', 'exec-update'",
        "grace.config.pi_table_write='pinned' (GRACE_PI_TABLE_WRITE): choose one of 'copy', 'memop'",
        "grace.config.scg_force='always' (GRACE_SCG_FORCE): choose one of '', 'graph'",
        "grace.config.scg_pi_strategies='ptx, slow' (GRACE_SCG_PI_STRATEGIES): unknown strategy 'slow'; "
        "choose among ptx, prelude, exec-update",
    ]
    assert str(refused.value) == found[2]

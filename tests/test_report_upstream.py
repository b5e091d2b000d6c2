"""The upstream CUDA graph trees report: configurations, junit and log parsing, differences."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from grace.report import upstream

JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="test_cudagraph_trees.CudaGraphTreeTests" name="test_a"/>
<testcase classname="test_cudagraph_trees.CudaGraphTreeTests" name="test_b">
  <failure message="AssertionError: Scalars are not equal!&#10;Expected 2 but got 4.">trace</failure></testcase>
<testcase classname="test_cudagraph_trees.CudaGraphTreeTests" name="test_c"><skipped message="needs 2 GPUs"/></testcase>
<testcase classname="test_cudagraph_trees.TestSAC" name="test_d">
  <error message="failed on teardown with &quot;AssertionError&quot;">trace</error></testcase>
</testsuite></testsuites>"""


def _run(root: Path, name: str, configs: dict[str, str]) -> Path:
    run = root / "raw" / upstream.EXPERIMENT / name
    for config, junit in configs.items():
        (run / config).mkdir(parents=True)
        (run / config / "junit.xml").write_text(junit)
    return run


def test_every_configuration_has_an_environment_and_stock_disables_grace() -> None:
    assert upstream.env_line("stock") == "GRACE_DISABLE=1"
    for name in upstream.CONFIGURATIONS:
        line = upstream.env_line(name)
        if "-free" not in name and "GRACE_SCG=1" in line:
            assert "GRACE_SCG_FORCE=graph" in line, f"{name}: SCG forced to graph for upstream's tests"


def test_every_grace_configuration_sets_lean_replay_itself_and_its_lean_twin_differs_only_there() -> None:
    """A change of lean replay's, gradient copies' or mutated inputs' default must change no
    configuration: each sets all three; a "-lean" configuration is its namesake with lean replay on, nothing else."""
    configurations = upstream.CONFIGURATIONS
    for name, env in configurations.items():
        if name != "stock":
            lean = name == "lean" or name.endswith("-lean") or "-lean-" in name
            assert env["GRACE_LEAN_REPLAY"] == ("1" if lean else "0"), name
            assert env["GRACE_COPY_GRADS"] == ("1" if name.endswith("-copy") else "0"), name
            assert env["GRACE_MUTATED_INPUTS"] == ("1" if "-mut-" in name else "0"), name
    twins = [name for name in configurations if name.endswith("-lean")]
    assert {"all-lean", "all-free-lean", "cgct-lean", "scg-lean"} <= set(twins)
    for twin in twins:
        assert configurations[twin] == {**configurations[twin.removesuffix("-lean")], "GRACE_LEAN_REPLAY": "1"}, twin
    assert set(upstream.RUN_BY_DEFAULT) <= set(configurations) and upstream.RUN_BY_DEFAULT[0] == "stock"
    assert {"cgct", "pi-ptx", "pi-prelude", "pi-exec-update", "scg", "all", "all-free"} <= set(upstream.RUN_BY_DEFAULT)
    assert configurations["all-lean-copy"] == {**configurations["all-lean"], "GRACE_COPY_GRADS": "1"}
    assert "all-mut-lean-copy" in upstream.RUN_BY_DEFAULT, "GraCE's defaults"
    assert configurations["all-mut-lean-copy"] == {**configurations["all-lean-copy"], "GRACE_MUTATED_INPUTS": "1"}
    assert configurations["all-free-mut-lean-copy"] == {**configurations["all-free-lean-copy"],
                                                        "GRACE_MUTATED_INPUTS": "1"}
    for strategy in ("pi-ptx", "pi-prelude", "pi-exec-update"):
        untrusted = f"{strategy}-untrusted"
        assert configurations[untrusted] == {**configurations[strategy], "GRACE_PI_FORCE_UNTRUSTED": "1"}
        assert untrusted not in upstream.RUN_BY_DEFAULT, "a test of PI's fallbacks, run when asked"
    assert configurations["untrusted-all-mut-lean-copy"] == {**configurations["all-mut-lean-copy"],
                                                             "GRACE_PI_FORCE_UNTRUSTED": "1"}
    assert "untrusted-all-mut-lean-copy" not in upstream.RUN_BY_DEFAULT


def test_list_prints_what_a_run_covers_by_default_and_list_all_every_configuration(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert upstream.main(["--list"]) == 0
    assert capsys.readouterr().out.split() == list(upstream.RUN_BY_DEFAULT)
    assert upstream.main(["--list-all"]) == 0
    assert capsys.readouterr().out.split() == list(upstream.CONFIGURATIONS)


def test_junit_outcomes_and_first_lines() -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "junit.xml"
        path.write_text(JUNIT)
        results = upstream.read_junit(path)
    assert results["CudaGraphTreeTests::test_a"].outcome == "passed"
    assert results["CudaGraphTreeTests::test_b"] == upstream.Result("failed", "AssertionError: Scalars are not equal!")
    assert results["CudaGraphTreeTests::test_c"].outcome == "skipped"
    assert results["TestSAC::test_d"].outcome == "errors"


def test_a_verbose_log_stands_in_for_a_missing_junit(tmp_path: Path) -> None:
    log = tmp_path / "pytest.log"
    log.write_text("[gw0] [ 10%] PASSED test_cudagraph_trees.py::CudaGraphTreeTests::test_a \n"
                   "[gw1] [ 20%] FAILED test_cudagraph_trees.py::TestSAC::test_d \n")
    results = upstream.read_configuration(tmp_path)
    assert results == {"CudaGraphTreeTests::test_a": upstream.Result("passed"),
                       "TestSAC::test_d": upstream.Result("failed")}


def test_the_table_and_differences_take_missing_configurations_from_earlier_runs(tmp_path: Path) -> None:
    passing = JUNIT.replace('<failure message="AssertionError: Scalars are not equal!&#10;Expected 2 but got 4.">'
                            'trace</failure>', "")
    early = _run(tmp_path, "early", {"stock": JUNIT, "pi-ptx": JUNIT})
    late = _run(tmp_path, "late", {"stock": passing, "cgct": JUNIT})
    table, differ, _ = upstream.write_report(late, tmp_path / "processed", [early])
    rows = {r["configuration"]: r for r in csv.DictReader(table.open())}
    assert list(rows) == ["stock", "cgct", "pi-ptx"]
    assert rows["stock"] == {"configuration": "stock", "passed": "2", "failed": "0", "errors": "1", "skipped": "1"}
    assert rows["cgct"]["failed"] == "1"
    text = differ.read_text()
    assert "- pi-ptx: `early`" in text and "- cgct: `late`" in text
    assert "`CudaGraphTreeTests::test_b` | passed (stock failed it in run `early`) | failed" in text


def _rerun(call: tuple[str, str], teardown: tuple[str, str] = ("passed", ""), filecheck: str = "") -> "upstream.Rerun":
    return upstream.Rerun({"setup": ("passed", ""), "call": call, "teardown": teardown},
                          (filecheck,) if filecheck else ())


def test_a_difference_needs_a_look_unless_its_rerun_shows_a_designed_one() -> None:
    """A designed difference fails on the test's own assertion or a recorded FileCheck, with a
    clean teardown; anything raised by the code under test, a teardown that still fails, or a
    failure never rerun is flagged, unless stock's rerun fails the same way."""
    R = upstream.Result
    passed, failed = R("passed"), R("failed", "AssertionError: Scalars are not equal!")
    count = _rerun(("failed", "AssertionError: Scalars are not equal!"))
    filecheck = _rerun(("passed", ""), filecheck="Expected to find \".copy_\"")
    internal = _rerun(("failed", "RuntimeError: GraCE internal error: managed input 1 died"))
    leak = _rerun(("passed", ""), teardown=("failed", "AssertionError: Scalars are not equal!"))
    clean = _rerun(("passed", ""))
    assert upstream.needs_a_look(passed, failed, count, clean) is None
    assert upstream.needs_a_look(passed, R("errors"), filecheck, clean) is None
    assert upstream.needs_a_look(passed, failed, internal, clean) == \
        "call failed: RuntimeError: GraCE internal error: managed input 1 died"
    assert upstream.needs_a_look(passed, R("errors"), leak, clean).startswith("teardown failed")
    assert upstream.needs_a_look(passed, failed, None, clean) == "failed, not rerun: AssertionError: Scalars are not equal!"
    assert upstream.needs_a_look(passed, failed, internal, internal) is None, "stock's rerun fails the same way"
    assert upstream.needs_a_look(failed, passed, None, None) is None, "stock failed it: stock's"
    no_tree = _rerun(("failed", "AttributeError: 'NoneType' object has no attribute 'new_graph_id'"))
    assert upstream.needs_a_look(passed, failed, no_tree, clean, scg_deciding=True) is None
    assert upstream.needs_a_look(passed, failed, no_tree, clean) is not None, "a tree must exist where SCG is forced"
    assert [c for c in upstream.CONFIGURATIONS if upstream.scg_decides(c)] == \
        ["all-free", "all-free-lean", "all-free-lean-copy", "all-free-mut-lean-copy"]


def test_the_differences_open_with_what_needs_a_look(tmp_path: Path) -> None:
    import json

    run = _run(tmp_path, "run", {"stock": JUNIT.replace('<failure message="AssertionError: Scalars are not equal!&#10;'
                                                        'Expected 2 but got 4.">trace</failure>', ""),
                                 "pi-ptx": JUNIT})
    rechecked = [{"test": "CudaGraphTreeTests::test_b", "event": "phase", "when": w, "outcome": o, "message": m}
                 for w, o, m in (("setup", "passed", ""), ("call", "failed", "RuntimeError: GraCE internal error"),
                                 ("teardown", "passed", ""))]
    (run / "pi-ptx" / "recheck-00.jsonl").write_text("\n".join(json.dumps(r) for r in rechecked))
    _, differ, look = upstream.write_report(run, tmp_path / "processed")
    flagged = "- pi-ptx: `CudaGraphTreeTests::test_b`: call failed: RuntimeError: GraCE internal error"
    assert look == [flagged]
    text = differ.read_text()
    assert flagged in text[text.index("## Needs a look"):text.index("## pi-ptx")]


def test_shards_are_read_together_and_a_stopped_shard_from_its_log(tmp_path: Path) -> None:
    (tmp_path / "junit-00.xml").write_text(JUNIT)
    (tmp_path / "pytest-00.log").write_text("exit 1\n")
    (tmp_path / "pytest-01.log").write_text("[ 10%] PASSED test_cudagraph_trees.py::CudaGraphTreeTests::test_e \n")
    results = upstream.read_configuration(tmp_path)
    assert set(results) == {"CudaGraphTreeTests::test_a", "CudaGraphTreeTests::test_b", "CudaGraphTreeTests::test_c",
                            "TestSAC::test_d", "CudaGraphTreeTests::test_e"}
    assert results["CudaGraphTreeTests::test_e"] == upstream.Result("passed")


def test_differences_where_a_side_failed_are_rechecked() -> None:
    R = upstream.Result
    stock = {"a": R("passed"), "b": R("failed"), "c": R("passed"), "d": R("skipped"), "e": R("failed")}
    other = {"a": R("errors"), "b": R("errors"), "c": R("passed"), "d": R("failed"), "e": R("passed")}
    assert upstream.to_recheck(stock, other) == ["a", "b", "d", "e"]


RECHECKED_TESTS = '''
import gc
import unittest
import weakref

from torch.testing import FileCheck

alive = []


class Holder:
    pass


class T(unittest.TestCase):
    def tearDown(self):
        gc.collect()
        assert not [r for r in alive if r() is not None], "an object the test body held is still alive"

    def test_body_fails_holding_an_object(self):
        held = Holder()
        alive.append(weakref.ref(held))
        assert False, "the body fails"

    def test_filecheck_then_values(self):
        FileCheck().check(".copy_").run("no copy here")
        self.assertEqual(1 + 1, 2)
'''


def _run_pytest(folder: Path, *args: str, env: dict[str, str] | None = None) -> str:
    import os
    import subprocess
    import sys

    from grace.paths import REPO_ROOT

    full_env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), **(env or {})}
    out = subprocess.run([sys.executable, "-m", "pytest", "-c", "/dev/null", "--rootdir", str(folder),
                          "-p", "no:cacheprovider", "-q", "-rA", *args, "test_rechecked.py"],
                         cwd=folder, env=full_env, capture_output=True, text=True, timeout=300)
    return out.stdout + out.stderr


def test_the_recheck_plugin_releases_failure_frames_and_records_filechecks(tmp_path: Path) -> None:
    (tmp_path / "test_rechecked.py").write_text(RECHECKED_TESTS)
    plain = _run_pytest(tmp_path)
    # without the plugin, pytest keeps the failed body's frames (and what they hold) through tearDown
    assert "an object the test body held is still alive" in plain
    assert "Expected to find" in plain

    out = tmp_path / "recheck.jsonl"
    rechecked = _run_pytest(tmp_path, "-p", "grace.report.upstream_recheck",
                            env={"GRACE_UPSTREAM_RECHECK_OUT": str(out)})
    assert "still alive" not in rechecked
    words = {test: rerun.words() for test, rerun in upstream.read_recheck(out).items()}
    assert words["T::test_body_fails_holding_an_object"].startswith("call failed: AssertionError: the body fails")
    assert "teardown passed" in words["T::test_body_fails_holding_an_object"]
    assert words["T::test_filecheck_then_values"].startswith("FileCheck differs (Expected to find")
    assert "call passed; teardown passed" in words["T::test_filecheck_then_values"]

"""The benchmark runner: statistics, output checks, configs, modes, and whole runs on the CPU.

Whole runs use ``--device cpu --size tiny`` (the worker, protocol, interleaving, rows and
error handling are the same as on the GPU; only CUDA graphs and timings differ), and the
faulty workloads in ``fixtures/faulty_workloads.py`` for the error, timeout and mismatch rows.
"""

from __future__ import annotations

import dataclasses
import json
import re
import os
import signal
import shutil
import subprocess
import sys
import time
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from grace import stats
from grace.bench import check
from grace.bench.configs import ConfigError, parse_config, resolve
from grace.bench.modes import MODES, TREE_CACHE, parse_modes, parse_tree
from grace.bench.options import WorkerOptions
from grace.bench.runner import Settings, run
from grace.bench.targets import Target, shard
from grace.bench.workloads import get
from grace.paths import CONFIGS_DIR, REPO_ROOT

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def faulty(monkeypatch: pytest.MonkeyPatch) -> None:
    """Registers the faulty workloads here and in every worker the runner starts."""
    monkeypatch.setenv("GRACE_WORKLOAD_MODULES", "faulty_workloads")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(FIXTURES), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.syspath_prepend(str(FIXTURES))
    import grace.bench.workloads as registry

    registry._loaded.clear()  # re-run discovery with the extra module
    import faulty_workloads  # noqa: F401  - registers on first import only

    registry._loaded.append(True)


# --- statistics and output checks -------------------------------------------------------

def test_percentiles_match_numpy() -> None:
    values = list(np.random.default_rng(0).exponential(100.0, size=101))
    for q in (0, 10, 50, 90, 100):
        assert stats.percentile(values, q) == pytest.approx(np.percentile(values, q))
    assert stats.summary([3.0, 1.0, 2.0])["median"] == 2.0


def test_compare_accepts_rounding_and_rejects_wrong_answers() -> None:
    ref = torch.randn(1000, dtype=torch.float32)
    err, bad = check.compare(ref + 1e-7 * torch.randn(1000), ref)
    assert not bad and err < 1e-4
    _, bad = check.compare(ref * 1.01, ref)
    assert bad and "relative error" in str(bad[0])


def test_compare_tolerance_depends_on_dtype() -> None:
    ref = torch.randn(1000, dtype=torch.float64)
    near = ref * (1 + 1e-6)
    assert check.compare(near, ref)[1], "1e-6 relative error must fail in float64"
    assert not check.compare(near.float(), ref.float())[1], "but passes in float32"


def test_compare_rejects_nan_shape_structure_and_integer_changes() -> None:
    ref = torch.ones(4)
    assert check.compare(torch.tensor([1.0, float("nan"), 1.0, 1.0]), ref)[1]
    assert check.compare(torch.ones(5), ref)[1]
    assert check.compare((ref, ref), (ref,))[1]
    assert check.compare(torch.tensor([1, 2]), torch.tensor([1, 3]))[1]
    assert not check.compare({"a": [ref, 3]}, {"a": [ref.clone(), 3]})[1]



def test_training_gradient_that_is_zero_in_exact_arithmetic_is_judged_against_the_whole() -> None:
    loss = torch.tensor(4.6)
    weight_grad = torch.randn(64, 64)
    key_bias_eager, key_bias_compiled = 1e-12 * torch.randn(64), 1e-12 * torch.randn(64)
    err, bad = check.compare((loss, [weight_grad, key_bias_compiled]),
                             (loss, [weight_grad.clone(), key_bias_eager]), training=True)
    assert not bad and err < 1e-3, "two rounding noises near zero are not a mismatch"
    # The same noise is still a mismatch where the leaf is compared alone, outside training,
    # and a stale gradient of real size fails whatever the floor.
    assert check.compare(key_bias_compiled, key_bias_eager)[1]
    stale = (loss, [weight_grad, key_bias_eager + 1e-3 * torch.randn(64)])
    assert check.compare(stale, (loss, [weight_grad, key_bias_eager]), training=True)[1]
    assert check.compare((loss, [weight_grad * 0.9, key_bias_eager]),
                         (loss, [weight_grad, key_bias_eager]), training=True)[1]


def test_float64_run_arbitrates_rounding_but_not_wrong_data() -> None:
    exact = torch.randn(4096, dtype=torch.float64)
    eager = (exact + 8e-5 * torch.randn(4096, dtype=torch.float64)).float()  # within 1e-4 of float64
    compiled = (exact + 1.5e-4 * torch.randn(4096, dtype=torch.float64)).float()  # 1.7e-4 from eager
    assert check.compare(compiled, eager)[1], "the float32 comparison alone fails"
    assert not check.judge_against_fp64(compiled, eager, exact), "no further from float64 than 3x eager"
    stale = torch.randn(4096)
    assert check.judge_against_fp64(stale, eager, exact), "unrelated data is far from the float64 run"
    labels = torch.tensor([1, 2, 3])
    assert check.judge_against_fp64((compiled, labels + 1), (eager, labels), (exact, labels)), \
        "an integer leaf must still equal eager's"
    assert check.judge_against_fp64((compiled,), (eager, labels), (exact, labels)), "structure"
    other_masks = torch.randn(4096, dtype=torch.float64)  # a float64 run that drew other random numbers
    assert check.judge_against_fp64(compiled, eager, other_masks), "no arbiter when eager misses it too"


def test_eagers_second_run_arbitrates_its_own_variation_but_not_wrong_data() -> None:
    eager = torch.randn(4096)
    rerun = eager * (1 + 6e-5 * torch.randn(4096))  # atomics: eager differs from itself, within the tolerance
    compiled = eager * (1 + 1.5e-4 * torch.randn(4096))  # past the tolerance (1e-4), within 3x eager's variation
    failed = check.compare(compiled, eager)[1]
    assert failed, "the float32 comparison alone fails"
    assert not check.judge_against_rerun(compiled, eager, rerun, failed=failed), "within eager's own variation"
    assert check.judge_against_rerun(compiled, eager, eager.clone(), failed=failed), \
        "a deterministic eager repeats exactly and passes nothing"
    stale = torch.randn(4096)
    assert check.judge_against_rerun(stale, eager, rerun, failed=check.compare(stale, eager)[1]), "wrong data"
    redrawn = torch.randn(4096)  # eager's rerun drew other random numbers: it judges nothing
    assert check.judge_against_rerun(stale, eager, redrawn, failed=check.compare(stale, eager)[1])
    labels = torch.tensor([1, 2, 3])
    both = check.compare((compiled, labels + 1), (eager, labels))[1]
    remaining = check.judge_against_rerun((compiled, labels + 1), (eager, labels), (rerun, labels), failed=both)
    assert [m.where for m in remaining] == ["out[1]"], "an integer leaf keeps its verdict"


def test_float64_run_judges_only_the_leaves_that_failed_in_float32() -> None:
    exact = torch.randn(4096, dtype=torch.float64)
    eager = (exact + 8e-5 * torch.randn(4096, dtype=torch.float64)).float()
    passing, failing = eager.clone(), torch.full_like(eager, float("nan"))
    other_draws = torch.randn(4096, dtype=torch.float64)  # dropout drew other masks in float64
    out, ref, ref64 = (passing, failing), (eager, eager), (other_draws, other_draws)
    _, failed = check.compare(out, ref)
    assert [m.where for m in failed] == ["out[1]"]
    verdict = check.judge_against_fp64(out, ref, ref64, failed=failed)
    assert [m.where for m in verdict] == ["out[1]"], "a leaf that passed in float32 stays passed"
    assert "non-finite" in verdict[0].detail and "no arbiter" in verdict[0].detail, \
        "an unjudgeable leaf keeps its float32 verdict beside the reason"
    assert len(check.judge_against_fp64(out, ref, ref64)) == 2, "without a verdict every leaf is judged"


def test_error_is_computed_in_bounded_float64_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    a = torch.randn(1000)
    b = a + 1e-3 * torch.randn(1000)
    b[17] = float("inf")
    a[17] = float("inf")
    whole = check._tensor_error(a, b, check.TOLERANCE)
    monkeypatch.setattr(check, "CHECK_CHUNK", 64)
    assert check._tensor_error(a, b, check.TOLERANCE)[0] == pytest.approx(whole[0], rel=1e-12)
    assert check._global_norm([("x", a), ("y", b)]) == pytest.approx(
        torch.linalg.vector_norm(torch.cat([a, b])[torch.isfinite(torch.cat([a, b]))].double()).item())
    a[999] = float("nan")
    assert check._tensor_error(a, b, check.TOLERANCE)[0] == float("inf"), "a NaN in the last piece"


def test_worker_arbitrates_a_mismatch_with_eagers_rerun_then_a_float64_copy_of_the_model(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from grace.bench.worker import Case

    case = Case(get("micro-mlp2"), MODES["pt2-nocg"], "cpu", 4, "tiny")
    twin = case.reference
    ref = case.step(twin.model, twin.model, case.inputs(3))
    rounding = ref * (1 + 2e-7 * torch.randn_like(ref))
    mismatches = [check.Mismatch("out", "float32 says no")]
    assert twin.arbitrate(3, rounding, ref, mismatches) == []
    assert (twin.rerun_arbitrated, twin.fp64_arbitrated, twin.model64) == (1, 0, None), "eager's rerun first"
    monkeypatch.setattr(check, "judge_against_rerun", lambda out, ref, rerun, training, failed: failed)
    assert twin.arbitrate(3, rounding, ref, mismatches) == []
    assert twin.fp64_arbitrated == 1
    assert next(twin.model64.parameters()).dtype == torch.float64
    assert next(twin.model.parameters()).dtype == torch.float32, "the float32 twin is untouched"
    assert twin.arbitrate(3, torch.zeros_like(ref), ref, mismatches), "zeros are wrong data"
    assert twin.fp64_arbitrated == 1
    assert Case(get("micro-mlp2"), MODES["eager"], "cpu", 4, "tiny").reference is None, "eager is not checked"

def test_a_training_step_lists_each_modules_trainable_parameters_once_and_starts_from_no_gradient(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The parameter list is the harness's, not the model's work: walked once per module, not in
    every timed step; each step still sets every gradient to None first, so steps never
    accumulate, and a module's frozen parameters get none."""
    from grace.bench.worker import Case

    case = Case(get("micro-mlp16-T"), MODES["eager"], "cpu", 1, "tiny")
    frozen = case.model[0][0].bias
    frozen.requires_grad_(False)
    walks: list[int] = []
    walk = torch.nn.Module.parameters
    monkeypatch.setattr(torch.nn.Module, "parameters",
                        lambda self, recurse=True: walks.append(id(self)) or walk(self, recurse))
    inputs = case.inputs(0)
    _, first = case.step(case.fn, case.model, inputs)
    _, second = case.step(case.fn, case.model, inputs)
    twin = torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.GELU()) for _ in range(2)])
    case.step(twin, twin, (torch.randn(1, 16),))
    case.step(twin, twin, (torch.randn(1, 16),))
    assert walks == [id(case.model), id(twin)], "one walk per module"
    assert len(first) == 31 and frozen.grad is None, "16 weights and the 15 biases left trainable"
    for a, b in zip(first, second):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    loss = case.workload.loss(case.model(*inputs))
    expected = torch.autograd.grad(loss, case.trainable(case.model))
    for got, want in zip(second, expected):
        torch.testing.assert_close(got, want)


def test_with_distinct_inputs_timed_samples_cycle_over_inputs_the_warm_up_ran_four_times_each() -> None:
    """A workload whose shapes follow its data (VM's detections) records new graphs for each new
    input: its timed samples cycle over a few inputs, and the warm-up runs each of them first;
    never one input, so that a replay of the previous call's data cannot pass the check."""
    from grace.bench.worker import WARMUP_SAMPLE_BASE, Case

    own = Case(get("micro-mlp2"), MODES["eager"], "cpu", 4, "tiny")
    assert own.warm_up_samples(2) == [WARMUP_SAMPLE_BASE, WARMUP_SAMPLE_BASE + 1], "no timed sample's input"
    assert not torch.equal(own.inputs(0)[0], own.inputs(2)[0])
    cycled = Case(get("micro-mlp2"), MODES["eager"], "cpu", 4, "tiny", distinct_inputs=2)
    assert cycled.warm_up_samples(2) == [0, 1] * 4 and cycled.warm_up_samples(10) == [0, 1] * 5
    assert torch.equal(cycled.inputs(5)[0], own.inputs(1)[0]) and torch.equal(cycled.inputs(4)[0], own.inputs(0)[0])
    assert not torch.equal(cycled.inputs(4)[0], cycled.inputs(5)[0]), "consecutive samples differ"
    seen: list[torch.Tensor] = []
    step = cycled.step
    cycled.step = lambda fn, module, inputs: seen.append(inputs[0]) or step(fn, module, inputs)
    cycled.warm_up(1)
    assert len(seen) == 8 and all(torch.equal(x, own.inputs(i % 2)[0]) for i, x in enumerate(seen))
    with pytest.raises(ValueError, match="previous call's data"):
        WorkerOptions(distinct_inputs=1)


def test_device_time_is_measured_on_every_nth_sample_of_each_round() -> None:
    """``--gpu-time-every 4``: a quarter of the samples, spread over the rounds (numbered across them)."""
    from grace.bench.worker import device_timed

    rounds = [list(range(r * 5, r * 5 + 5)) for r in range(4)]
    picked = [device_timed(samples, 4) for samples in rounds]
    assert picked == [[0, 4], [8], [12], [16]]
    assert [device_timed(samples, 1) for samples in rounds] == rounds, "the default: every sample"
    with pytest.raises(ValueError, match="gpu-time-every"):
        WorkerOptions(gpu_time_every=0)


def test_a_config_line_can_cycle_its_timed_samples_over_a_few_inputs() -> None:
    from grace.bench.configs import parse_options
    from grace.bench.runner import settings_for

    assert parse_options("inputs=2,repeat=40") == {"inputs": 2, "repeat": 40}
    with pytest.raises(ValueError, match="positive"):
        parse_options("inputs=0")
    with pytest.raises(ValueError, match="previous call's data"):  # one input hides stale replays
        parse_options("inputs=1")
    settings = Settings(experiment="x", run_id="y")
    cycled = settings_for(settings, Target(get("micro-mlp2"), 1, inputs=3))
    assert cycled.worker.distinct_inputs == 3 and settings.worker.distinct_inputs == 0
    argv = cycled.worker.argv()
    assert argv[argv.index("--distinct-inputs") + 1] == "3", "the worker is told"
    targets = {t.workload.name: t for t in parse_config(CONFIGS_DIR / "workloads_single_gpu_25.txt")}
    assert targets["VM"].inputs == 2, "VM times two inputs in turn: consecutive calls differ"


def test_a_timed_sample_runs_inner_iterations_on_their_own_inputs_and_checks_the_last() -> None:
    from grace.bench.worker import Case

    case = Case(get("micro-mlp2"), MODES["eager"], "cpu", 4, "tiny")
    stepped: list[torch.Tensor] = []
    checked: list[tuple[int, torch.Tensor]] = []
    step = case.step
    case.step = lambda fn, module, inputs: stepped.append(inputs[0]) or step(fn, module, inputs)
    # a compiled mode's sample is checked against its eager twin; the model stays eager here
    case.reference = types.SimpleNamespace(check=lambda sample, out: checked.append((sample, out)))
    assert case.timed(2, inner=3) > 0
    assert [torch.equal(x, case.inputs(s)[0]) for x, s in zip(stepped, (6, 7, 8))] == [True] * 3
    assert [s for s, _ in checked] == [8]
    torch.testing.assert_close(checked[0][1], step(case.model, case.model, case.inputs(8)))


def test_with_check_after_no_check_runs_between_timed_samples_and_each_checks_its_own_copy() -> None:
    """A CUDA graph's output is overwritten by its next replay: the sample's output is copied
    when its clock stops, and compared with eager only once the chunk's samples are timed."""
    from grace.bench.worker import Case

    case = Case(get("micro-mlp2"), MODES["eager"], "cpu", 4, "tiny", check_after=True)
    events: list[str] = []
    outputs: list[torch.Tensor] = []
    step = case.step

    def stepping(fn: Any, module: Any, inputs: tuple) -> Any:
        out = step(fn, module, inputs)
        if fn is case.fn:
            events.append("timed")
            outputs.append(out)
        return out

    case.step = stepping
    checked: list[tuple[int, torch.Tensor]] = []
    # a compiled mode's sample is checked against its eager twin; the model stays eager here
    case.reference = types.SimpleNamespace(check=lambda sample, out: events.append("check") or checked.append((sample, out)))
    for sample in (0, 1, 2):
        case.timed(sample)
    for out in outputs:
        out.fill_(float("nan"))  # what a later replay does to a graph's output
    assert events == ["timed"] * 3
    case.check_kept()
    assert events == ["timed"] * 3 + ["check"] * 3 and [s for s, _ in checked] == [0, 1, 2]
    for sample, out in checked:
        torch.testing.assert_close(out, step(case.model, case.model, case.inputs(sample)))
    case.check_kept()
    assert len(checked) == 3, "each kept output is checked once"


def test_kept_copies_every_tensor_in_the_structure_the_check_reads() -> None:
    from collections import namedtuple

    pair = namedtuple("pair", "a b")
    value = {"x": [torch.ones(2), None, 3], "y": pair(torch.zeros(1), "s")}
    copy = check.kept(value)
    value["x"][0].fill_(7)
    assert [p for p, _ in check.flatten(copy)] == [p for p, _ in check.flatten(value)]
    assert torch.equal(copy["x"][0], torch.ones(2)) and copy["y"][1] == "s"
    with pytest.raises(TypeError, match="outputs of type object are not handled"):
        check.kept(object())


def test_coverage_profiles_the_steps_but_not_the_making_of_their_inputs(monkeypatch) -> None:
    from grace.bench.worker import Case
    from grace.cgct import coverage

    case = Case(get("micro-mlp2"), MODES["eager"], "cpu", 4, "tiny")
    profiling: list[bool] = [False]
    made_while_profiling: list[bool] = []
    inputs = case.inputs
    case.inputs = lambda sample: made_while_profiling.append(profiling[0]) or inputs(sample)

    def measure(step: Any, iterations: int) -> coverage.Coverage:
        profiling[0] = True
        for i in range(iterations):
            step(i)
        profiling[0] = False
        return coverage.Coverage(kernels=4, in_graphs=3, unlinked=0)

    monkeypatch.setattr(coverage, "measure", measure)
    result = case.coverage(3)
    assert made_while_profiling == [False] * 3 and result["iterations"] == 3 and result["in_graphs"] == 3


def test_every_field_of_the_workers_summary_reaches_the_row() -> None:
    """The worker's summary and the runner's row agree on their fields (graph_pool_bytes was
    once computed by the worker and dropped by the runner)."""
    import inspect

    from grace.bench import runner, worker

    source = inspect.getsource(worker.Case.summary)
    sent = set(re.findall(r'^\s*"(\w+)":', source, re.M)) - {"summary", "graphs", "ok", "fallback_random",
                                                               "checked", "max_rel_err", "tolerance", "detail",
                                                               "rerun_arbitrated", "fp64_arbitrated", "no_fp64_reference",
                                                               "errors_by_sample", "failed_samples"}
    assert sent and sent <= set(runner.SUMMARY_KEYS), sent - set(runner.SUMMARY_KEYS)
    row = runner.base_row(Settings(experiment="x", run_id="y"), Target(get("micro-mlp2"), 4), MODES["pt2-cg"])
    assert set(runner.SUMMARY_KEYS) <= set(row), "every summary field has a place in every row, error rows too"


def test_modes_share_the_runs_decision_cache_unless_each_is_given_its_own(tmp_path: Path) -> None:
    from grace.bench import runner

    shared = runner.Settings(run_id="r")
    apart = runner.Settings(run_id="r", scg_cache_per_mode=True)
    earlier = runner.Settings(run_id="r", scg_cache=tmp_path / "old", scg_cache_per_mode=True)
    assert runner.scg_cache_dir(shared, tmp_path, MODES["grace"]) == tmp_path / "scg-cache"
    assert runner.scg_cache_dir(shared, tmp_path, MODES["grace-no-guard"]) == tmp_path / "scg-cache"
    assert runner.scg_cache_dir(apart, tmp_path, MODES["grace"]) == tmp_path / "scg-cache" / "grace"
    assert runner.scg_cache_dir(apart, tmp_path, MODES["grace-no-guard"]) == tmp_path / "scg-cache" / "grace-no-guard"
    assert runner.scg_cache_dir(earlier, tmp_path, MODES["grace"]) == tmp_path / "old" / "grace"


def test_workers_share_the_runs_quiet_gate_with_a_third_of_the_phase_limit_to_wait(tmp_path: Path) -> None:
    """SCG's profiles in one worker wait while the others compile (grace.scg.quiet), for at most
    a third of the limit its own compilation shares."""
    from grace.bench import runner

    env = runner.worker_env(MODES["grace"], tmp_path, quiet_lock=tmp_path / "scg-quiet.lock",
                            quiet_wait_s=runner.quiet_wait_s(540.0))
    assert env["GRACE_SCG_QUIET_LOCK"] == str(tmp_path / "scg-quiet.lock") and env["GRACE_SCG_QUIET_WAIT_S"] == "180"
    assert "GRACE_SCG_QUIET_LOCK" not in runner.worker_env(MODES["grace"], tmp_path)


def test_device_times_reach_the_row_beside_the_timed_samples() -> None:
    from grace.bench import runner

    row = runner.base_row(Settings(experiment="x", run_id="y"), Target(get("micro-mlp2"), 4), MODES["pt2-cg"])
    assert row["gpu_us"] is None and row["gpu_samples_us"] is None
    worker = runner.Worker(MODES["pt2-cg"], None, Path("log"), 0.0, row, samples=[5.0, 7.0, 6.0],
                           gpu_samples=[2.0, 3.0])
    done = runner._finish_row(worker, {"check": {"ok": True}})
    assert done["gpu_samples_us"] == [2.0, 3.0] and done["gpu_us"]["median"] == 2.5
    assert done["iter_us"]["median"] == 6.0


# --- configs, modes, shards --------------------------------------------------------------

def test_micro_config_names_every_micro_workload() -> None:
    targets = parse_config(CONFIGS_DIR / "workloads_micro.txt")
    assert {t.workload.name for t in targets} == {
        "micro-attn-numpy", "micro-attn-cputensor", "micro-attn-float", "micro-cpu-tensor",
        "micro-eos", "micro-mlp2", "micro-mlp16", "micro-item"}
    assert resolve("micro")[0].workload.name == targets[0].workload.name
    assert [t.workload.name for t in resolve("micro-eos,micro-mlp2")] == ["micro-eos", "micro-mlp2"]


def test_suite_config_is_the_papers_table1() -> None:
    """The 25 workloads with the paper's modes and batch sizes (Table 1), and a smoke subset."""
    table1 = {
        "XLNET-I": ("I", 1), "MMC": ("I", 1), "ST": ("I", 1), "DALLE2": ("I", 1), "EOS": ("I", 1048576),
        "TKE": ("I", 1048576), "VM": ("I", 1), "DR-I": ("I", 8192), "XLNET-T": ("T", 8),
        "MTCG-T": ("T", 16), "DLRM": ("I", 2048), "MBERT": ("I", 128), "TEFD": ("T", 1),
        "ALNET": ("I", 2), "DCGAN": ("T", 32), "BERT": ("T", 16), "LCNET": ("I", 256),
        "DR-T": ("T", 256), "DNET": ("I", 64), "MTCG-I": ("I", 16), "DBV2": ("I", 1),
        "BSCG": ("T", 64), "DGPT2": ("T", 16), "STCLM": ("T", 256), "DMLM": ("T", 8),
    }
    targets = parse_config(CONFIGS_DIR / "workloads_single_gpu_25.txt")
    got = {t.workload.name: ("I" if t.workload.kind == "inference" else "T", t.batch_size) for t in targets}
    assert got == table1
    smoke = {t.workload.name for t in parse_config(CONFIGS_DIR / "workloads_smoke.txt")}
    assert smoke - {"micro-mlp16"} <= set(table1) and len(smoke) < len(table1)


@pytest.mark.parametrize("line, message", [
    ("micro-eos eos_like micro I", "expected 'short_name"),
    ("nope eos_like micro I 1", "unknown workload 'nope'"),
    ("micro-eos eos_like micro X 1", "mode must be I or T"),
    ("micro-eos other_model micro I 1", "registered as"),
    ("micro-eos eos_like micro I -3", "positive integer"),
])
def test_bad_config_lines_are_named(tmp_path: Path, line: str, message: str) -> None:
    config = tmp_path / "bad.txt"
    config.write_text("# header\n" + line + "\n")
    with pytest.raises(ConfigError, match=message) as info:
        parse_config(config)
    assert f"{config}:2" in str(info.value)


def test_modes_keep_baselines_stock_and_switch_grace_variants() -> None:
    for name in ("eager", "pt2-nocg", "pt2-cg"):
        assert MODES[name].env == {"GRACE_DISABLE": "1"}
    assert MODES["grace-cgct"].env["GRACE_PI"] == "0" and MODES["grace-cgct"].env["GRACE_CGCT"] == "1"
    assert {MODES["grace"].env[k] for k in ("GRACE_CGCT", "GRACE_PI", "GRACE_SCG")} == {"1"}
    assert not MODES["pt2-nocg"].uses_cuda_graphs and MODES["pt2-cg"].uses_cuda_graphs
    with pytest.raises(ValueError, match="unknown mode"):
        parse_modes("pt2-cg,fast")


def test_a_mode_at_a_tree_runs_that_checkouts_code_with_its_own_cache(tmp_path: Path) -> None:
    tree = tmp_path / "before"
    (tree / "grace" / "bench").mkdir(parents=True)
    (tree / "grace" / "bench" / "worker.py").write_text("")
    name, folder = parse_tree(f"before={tree}")
    (mode,) = parse_modes("grace@before", {name: folder})
    assert (mode.name, mode.tree) == ("grace@before", tree.resolve())
    assert mode.env == {**MODES["grace"].env, "GRACE_CACHE_DIR": str(tree.resolve() / TREE_CACHE)}
    with pytest.raises(ValueError, match="no tree 'after'"):
        parse_modes("grace@after", {name: folder})
    with pytest.raises(ValueError, match="not a checkout of GraCE"):
        parse_tree(f"x={tmp_path}")
    with pytest.raises(ValueError, match="expected NAME=PATH"):
        parse_tree(str(tree))


def test_a_replica_is_one_more_worker_of_the_same_mode(tmp_path: Path) -> None:
    tree = tmp_path / "before"
    (tree / "grace" / "bench").mkdir(parents=True)
    (tree / "grace" / "bench" / "worker.py").write_text("")
    trees = dict([parse_tree(f"before={tree}")])
    plain, again, before, before_again = parse_modes("grace,grace~2,grace@before,grace@before~2", trees)
    assert (again.name, again.base, again.env, again.tree) == ("grace~2", "grace", plain.env, None)
    assert (before_again.name, before_again.base, before_again.tree) == ("grace@before~2", "grace", tree.resolve())
    assert before_again.env == before.env
    for bad in ("grace~1", "grace~x", "grace,grace"):
        with pytest.raises(ValueError, match="replica|named twice"):
            parse_modes(bad, trees)


@pytest.mark.slow
def test_a_run_times_a_mode_from_another_checkout_beside_this_ones(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    for part in ("grace", "patches", "third_party", "configs"):
        shutil.copytree(REPO_ROOT / part, tree / part, ignore=shutil.ignore_patterns("__pycache__"))
    worker = tree / "grace" / "bench" / "worker.py"
    worker.write_text(worker.read_text().replace("\nif __name__ ==", "\nsys.stderr.write('worker from the other tree\\n')\nif __name__ ==", 1))
    settings = Settings(experiment="cpu_test", run_id="r1", repeat=2, worker=WorkerOptions(warmup=1), chunk=1,
                        timeout_s=240.0,
                        device="cpu", size="tiny", results_dir=tmp_path / "results", pin_cpu=-1)
    modes = parse_modes("grace-cgct,grace-cgct@tree", dict([parse_tree(f"tree={tree}")]))
    out = run(settings, [Target(get("micro-mlp2"), get("micro-mlp2").batch_size)], modes)
    rows = [json.loads(line) for line in (out / "rows.jsonl").read_text().splitlines()]
    assert [(r["mode"], r["status"]) for r in rows] == [("grace-cgct", "ok"), ("grace-cgct@tree", "ok")]
    assert "worker from the other tree" in (out / "logs" / "micro-mlp2.grace-cgct@tree.log").read_text()
    assert "worker from the other tree" not in (out / "logs" / "micro-mlp2.grace-cgct.log").read_text()
    assert list((tree / TREE_CACHE / "overlay").glob("*/manifest.json")), "the tree's own overlay was built"


def test_shards_partition_the_targets() -> None:
    targets = resolve("micro")
    parts = [shard(targets, i, 3) for i in (1, 2, 3)]
    names = sorted(t.workload.name for part in parts for t in part)
    assert names == sorted(t.workload.name for t in targets)
    with pytest.raises(ValueError):
        shard(targets, 4, 3)


# --- whole runs on the CPU ---------------------------------------------------------------

def _run(tmp_path: Path, names: list[str], modes: str, repeat: int = 4, timeout: float = 240.0,
         compile_together: bool = False, end_after_s: float | None = None, **worker: Any) -> list[dict]:
    settings = Settings(experiment="cpu_test", run_id="r1", repeat=repeat, chunk=2,
                        timeout_s=timeout, device="cpu", size="tiny", results_dir=tmp_path,
                        pin_cpu=max(os.sched_getaffinity(0)), compile_together=compile_together,
                        end_after_s=end_after_s, worker=WorkerOptions(**{"warmup": 2, **worker}))
    out = run(settings, [Target(get(n), get(n).batch_size) for n in names], parse_modes(modes))
    assert (tmp_path / "raw" / "cpu_test" / "latest.txt").read_text().strip() == "r1"
    return [json.loads(line) for line in (out / "rows.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_run_writes_one_checked_row_per_mode(tmp_path: Path) -> None:
    rows = _run(tmp_path, ["micro-mlp2"], "eager,pt2-nocg")
    assert [(r["workload"], r["mode"], r["status"]) for r in rows] == [
        ("micro-mlp2", "eager", "ok"), ("micro-mlp2", "pt2-nocg", "ok")]
    nocg = rows[1]
    assert len(nocg["samples_us"]) == 4 and nocg["iter_us"]["p10"] <= nocg["iter_us"]["median"] <= nocg["iter_us"]["p90"]
    assert nocg["check"]["ok"] and nocg["check"]["checked"] == 4
    assert nocg["compile_s"] > 0 and rows[0]["compile_s"] is None
    assert rows[0]["workload_wall_s"] == nocg["workload_wall_s"] >= nocg["compile_s"], "the workload's wall time"
    # every worker held the run's quiet gate while it compiled; no SCG profile waited on the CPU
    assert (tmp_path / "raw" / "cpu_test" / "r1" / "scg-quiet.lock").is_file()
    assert rows[0]["scg_quiet_wait_s"] == nocg["scg_quiet_wait_s"] == 0.0
    assert set(nocg["round_phases_s"]) == {"rewarm", "timed", "check"}
    assert set(rows[0]["round_phases_s"]) == {"rewarm", "timed", "check"}
    assert 0 < sum(nocg["round_phases_s"].values()) <= nocg["rounds_s"], "the worker's parts lie within its rounds"
    assert nocg["pinned_cpu"] == max(os.sched_getaffinity(0))
    for key in ("machine", "versions", "command"):
        assert nocg[key]
    assert nocg["versions"]["torch"].startswith("2.11.0")


@pytest.mark.slow
def test_compile_together_starts_every_mode_before_waiting_and_release_memory_still_checks(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from grace.bench import runner

    events: list[tuple[str, str]] = []
    start, receive = runner.start_worker, runner.Worker.receive

    def spy_start(settings: Any, target: Any, mode: Any, *rest: Any, **kwargs: Any) -> Any:
        events.append(("start", mode.name))
        return start(settings, target, mode, *rest, **kwargs)

    def spy_receive(self: Any, expected: str) -> Any:
        message = receive(self, expected)
        if expected == "ready":
            events.append(("ready", self.mode.name))
        return message

    monkeypatch.setattr(runner, "start_worker", spy_start)
    monkeypatch.setattr(runner.Worker, "receive", spy_receive)
    rows = _run(tmp_path, ["micro-mlp2"], "eager,pt2-nocg", compile_together=True, release_memory=True,
                inner=2)
    assert events[:2] == [("start", "eager"), ("start", "pt2-nocg")], events
    assert [r["status"] for r in rows] == ["ok", "ok"], [r["error"] for r in rows]
    assert all(r["compiled_together"] and r["worker"]["release_memory"] and r["worker"]["inner"] == 2 for r in rows)
    assert all(r["worker"] == dataclasses.asdict(WorkerOptions(warmup=2, inner=2, release_memory=True)) for r in rows)
    assert rows[1]["check"]["checked"] == 4 and len(rows[1]["samples_us"]) == 4


@pytest.mark.slow
def test_the_layer_phase_follows_every_timed_round_one_mode_at_a_time(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With --layers no timed sample follows a call that ran with the layer clock's wrappers: each
    mode's layer command comes after every round of every mode, and is answered before the next
    mode's is sent (two workers measuring at once would share the timing core)."""
    from grace.bench import runner

    sent: list[tuple[str, str]] = []
    send, receive = runner.Worker.send, runner.Worker.receive

    def spy_send(self: Any, message: dict) -> None:
        sent.append((message["cmd"], self.mode.name))
        send(self, message)

    def spy_receive(self: Any, expected: str) -> Any:
        message = receive(self, expected)
        if expected == "layers":
            sent.append(("answered", self.mode.name))
        return message

    monkeypatch.setattr(runner.Worker, "send", spy_send)
    monkeypatch.setattr(runner.Worker, "receive", spy_receive)
    rows = _run(tmp_path, ["micro-mlp2"], "eager,pt2-nocg", layers=True)
    assert [r["status"] for r in rows] == ["ok", "ok"], [r["error"] for r in rows]
    commands = [c for c, _ in sent]
    last_run, first_layers = max(i for i, c in enumerate(commands) if c == "run"), commands.index("layers")
    assert last_run < first_layers, sent
    assert [e for e in sent if e[0] in ("layers", "answered")] == [
        ("layers", "eager"), ("answered", "eager"), ("layers", "pt2-nocg"), ("answered", "pt2-nocg")], sent
    assert all(r["host_us"] and r["round_phases_s"]["layers"] > 0 for r in rows)


@pytest.mark.slow
def test_a_workload_short_of_time_writes_its_rows_with_fewer_rounds(tmp_path: Path) -> None:
    """A call's deadline cut workloads that had timed most of their rounds (STCLM all 20) before
    they wrote a row; with --end-after a workload stops at the rounds that fit, never fewer than
    MIN_ROUNDS, and says so in its rows."""
    from grace.bench.runner import MIN_ROUNDS

    rows = _run(tmp_path, ["micro-mlp2"], "eager,pt2-nocg", repeat=2 * (MIN_ROUNDS + 2), end_after_s=0.0)
    assert [r["status"] for r in rows] == ["ok", "ok"]
    assert all(r["rounds"] == {"timed": MIN_ROUNDS, "planned": MIN_ROUNDS + 2} for r in rows)
    assert all(len(r["samples_us"]) == 2 * MIN_ROUNDS for r in rows) and rows[1]["check"]["checked"] == 2 * MIN_ROUNDS
    whole = _run(tmp_path / "whole", ["micro-mlp2"], "pt2-nocg", repeat=2 * (MIN_ROUNDS + 2))
    assert whole[0]["rounds"] == {"timed": MIN_ROUNDS + 2, "planned": MIN_ROUNDS + 2}


def test_every_worker_is_told_to_finish_before_any_is_waited_on(tmp_path: Path) -> None:
    """DALLE2's five compiled modes timed their rounds within --end-after and were still finishing,
    one after another, when the call's deadline killed them: no row. Told to finish together, the
    modes' summaries and exits overlap; a worker that fails to finish becomes its own error row."""
    from grace.bench import runner

    events: list[tuple[str, str]] = []

    class Recording(runner.Worker):
        def send(self, message: dict[str, Any]) -> None:
            events.append(("send " + message["cmd"], self.mode.name))

        def receive(self, expected: str) -> dict[str, Any]:
            events.append(("receive " + expected, self.mode.name))
            if self.mode.name == "grace":
                raise runner.WorkerFailed("worker exited (exit code -9)")
            return {"event": "summary", "check": {"ok": True}}

    def worker(mode: str) -> runner.Worker:
        return Recording(mode=MODES[mode], process=types.SimpleNamespace(wait=lambda timeout: 0),
                         log_path=tmp_path / f"{mode}.log", deadline=time.monotonic() + 60,
                         row={"workload": "micro-mlp2", "mode": mode}, samples=[10.0, 11.0])

    live = [worker(m) for m in ("pt2-nocg", "pt2-cg", "grace")]
    failed: list[tuple[str, str]] = []

    def fail(w: runner.Worker, reason: str) -> None:
        failed.append((w.mode.name, reason))
        live.remove(w)

    rows = runner._finish_all(live, fail)
    assert [e for e, _ in events[:3]] == ["send finish"] * 3
    assert [e for e, _ in events[3:]] == ["receive summary"] * 3
    assert [(r["mode"], r["status"]) for r in rows] == [("pt2-nocg", "ok"), ("pt2-cg", "ok")]
    assert all(r["finish_s"] >= 0 and r["iter_us"]["median"] == 10.5 for r in rows)
    assert failed == [("grace", "worker exited (exit code -9)")] and live == []
    events.clear()
    live[:] = [worker(m) for m in ("pt2-nocg", "pt2-cg")]
    runner._finish_all(live, fail, one_at_a_time=True)
    assert [e for e, _ in events] == ["send finish", "receive summary"] * 2, "profiling modes that do not fit together"


@pytest.mark.slow
def test_failures_become_rows_and_the_run_goes_on(tmp_path: Path, faulty: None) -> None:
    rows = _run(tmp_path, ["test-crash", "test-segfault", "test-drift", "test-hang", "test-train"], "pt2-nocg",
                timeout=60)
    by_name = {r["workload"]: r for r in rows}
    assert by_name["test-crash"]["status"] == "error"
    assert "this model cannot be built" in by_name["test-crash"]["error"]
    assert by_name["test-segfault"]["status"] == "error"
    assert f"exit code {-signal.SIGSEGV}" in by_name["test-segfault"]["error"]
    crash_log = (tmp_path / "raw" / "cpu_test" / "r1" / "logs" / "test-segfault.pt2-nocg.log").read_text()
    assert "Segmentation fault" in crash_log and "faulty_workloads.py" in crash_log, "the stack where it crashed"
    assert by_name["test-drift"]["status"] == "mismatch"
    assert "outputs differ from eager" in by_name["test-drift"]["error"]
    assert by_name["test-drift"]["samples_us"], "a mismatch still reports its timings"
    assert by_name["test-drift"]["check"]["failed_samples"] == ["0", "1", "2", "3"], "each sample drifted"
    assert by_name["test-hang"]["status"] == "timeout"
    hang_log = (tmp_path / "raw" / "cpu_test" / "r1" / "logs" / "test-hang.pt2-nocg.log").read_text()
    assert "faulty_workloads.py" in hang_log and "in inputs" in hang_log, "the stack where it hung"
    assert by_name["test-train"]["status"] == "ok", by_name["test-train"]["error"]
    assert by_name["test-train"]["check"]["checked"] == 4


@pytest.mark.slow
def test_a_worker_hanging_mid_timing_loses_its_row_only(tmp_path: Path, faulty: None,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    from grace.bench import runner

    monkeypatch.setattr(runner, "ROUND_FLOOR_S", 5.0)
    start = time.monotonic()
    rows = _run(tmp_path, ["test-hang-later"], "pt2-nocg,grace-cgct", repeat=8, timeout=600)
    by_mode = {r["mode"]: r for r in rows}
    assert by_mode["pt2-nocg"]["status"] == "ok" and len(by_mode["pt2-nocg"]["samples_us"]) == 8
    hung = by_mode["grace-cgct"]
    assert hung["status"] == "timeout" and "a round's limit" in hung["error"], hung["error"]
    assert time.monotonic() - start < 300, "the phase's limit, not the round's, ended the hang"


def test_a_rounds_limit_follows_its_slowest_earlier_round_within_the_phase() -> None:
    from grace.bench.runner import ROUND_FACTOR, ROUND_FLOOR_S, round_deadline

    assert round_deadline([], 100.0, 500.0) == (500.0, "the per-case limit")
    assert round_deadline([1.0, 2.0], 100.0, 500.0)[0] == 100.0 + ROUND_FLOOR_S
    slow = (ROUND_FLOOR_S / ROUND_FACTOR) * 2
    assert round_deadline([slow], 100.0, 1e6)[0] == pytest.approx(100.0 + ROUND_FACTOR * slow)
    assert round_deadline([1.0], 450.0, 500.0)[0] == 500.0, "never past the phase's end"


@pytest.mark.slow
def test_stochastic_training_is_checked_with_eager_random_ops_and_shared_seeds(tmp_path: Path, faulty: None) -> None:
    rows = _run(tmp_path, ["test-dropout", "test-dropout-undeclared"], "pt2-nocg")
    by_name = {r["workload"]: r for r in rows}
    declared = by_name["test-dropout"]
    assert declared["status"] == "ok", declared["error"]
    assert declared["check"]["fallback_random"] and declared["check"]["checked"] == 4
    undeclared = by_name["test-dropout-undeclared"]
    assert undeclared["status"] == "mismatch", "compiled dropout draws other masks than eager's"
    assert not undeclared["check"]["fallback_random"]


@pytest.mark.slow
def test_stop_after_leaves_the_rest_to_resume(tmp_path: Path) -> None:
    from grace.bench.targets import pending

    settings = Settings(experiment="cpu_test", run_id="r2", repeat=2, worker=WorkerOptions(warmup=1), chunk=2,
                        timeout_s=240.0,
                        device="cpu", size="tiny", results_dir=tmp_path, stop_after_s=0.0)
    targets = [Target(get(n), 1) for n in ("micro-mlp2", "micro-mlp16")]
    modes = parse_modes("eager")
    out = run(settings, targets, modes)
    rows = [json.loads(line) for line in (out / "rows.jsonl").read_text().splitlines()]
    assert [r["workload"] for r in rows] == ["micro-mlp2"], "the first workload always starts"
    assert [t.workload.name for t in pending(targets, modes, out)] == ["micro-mlp16"]
    assert pending(targets, parse_modes("eager,pt2-nocg"), out) == targets, "a missing mode is pending"
    events = [(e["workload"], e["event"]) for e in map(json.loads, (out / "attempts.jsonl").read_text().splitlines())]
    assert events == [("micro-mlp2", "started"), ("micro-mlp2", "finished")], "a finished workload is not cut"



def test_a_call_starts_the_workloads_whose_earlier_wall_time_fits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    """DALLE2 compiled for 456 s of a ten-minute call; a workload started late in a call is cut
    and compiles again in the next. With --walls-from, a workload whose wall time in an earlier
    run does not fit before --end-after waits for a later call, and a shorter one goes first."""
    from grace.bench import runner, walls

    earlier = tmp_path / "raw" / "single_gpu" / "before"
    earlier.mkdir(parents=True)
    for name, wall in (("micro-mlp2", 500.0), ("micro-mlp16", 400.0), ("micro-eos", 2.0)):
        results_append = {"workload": name, "mode": "eager", "workload_wall_s": wall}
        with open(earlier / "rows.jsonl", "a") as f:
            f.write(json.dumps(results_append) + "\n")
    assert walls.read("single_gpu/before", tmp_path) == {"micro-mlp2": 500.0, "micro-mlp16": 400.0, "micro-eos": 2.0}
    monkeypatch.setattr(runner, "run_target", lambda settings, target, *a: [{"workload": target.workload.name}])
    told: list[float] = []
    monkeypatch.setattr(runner.Progress, "expect", lambda self, seconds: told.append(seconds))
    settings = Settings(experiment="cpu_test", run_id="w", device="cpu", size="tiny", results_dir=tmp_path,
                        end_after_s=300.0, walls_from="single_gpu/before")
    targets = [Target(get(n), 1) for n in ("micro-mlp2", "micro-mlp16", "micro-ptr-1", "micro-eos")]
    out = run(settings, targets, parse_modes("eager"))
    ran = [json.loads(line)["workload"] for line in (out / "rows.jsonl").read_text().splitlines()]
    assert ran == ["micro-mlp2", "micro-ptr-1", "micro-eos"], "the first always; then what fits or is unknown"
    assert "micro-mlp16 (400 s before, 300 s left)" in caplog.text
    assert told == [500 + 400 + 400 + 2, 400 + 400 + 2, 400 + 2], "the run's time left, the waiting one included"
    strict = dataclasses.replace(settings, run_id="s", walls_strict=True)
    out = run(strict, targets, parse_modes("eager"))
    ran = [json.loads(line)["workload"] for line in (out / "rows.jsonl").read_text().splitlines()]
    assert ran == ["micro-eos"], "--walls-strict: not even the first, where it does not fit, nor one without a wall"
    assert "micro-ptr-1 (no wall time before)" in caplog.text
    with pytest.raises(ValueError, match="expected EXPERIMENT/RUN"):
        walls.read("before", tmp_path)
    with pytest.raises(ValueError, match="no run gone under"):
        walls.read("single_gpu/gone", tmp_path)
    (tmp_path / "raw" / "single_gpu" / "bare").mkdir()
    (tmp_path / "raw" / "single_gpu" / "bare" / "rows.jsonl").write_text('{"workload": "micro-eos"}\n')
    with pytest.raises(ValueError, match="no row there records a workload's wall time"):
        walls.read("single_gpu/bare", tmp_path)


def test_the_time_left_comes_from_earlier_wall_times_where_a_run_has_them(capsys: pytest.CaptureFixture[str],
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The first sweep call on one GPU printed "~90193s left" after DALLE2's compilations: three
    steps of 593 had taken 459 s. With an earlier run's wall times the estimate is their sum for
    what is left, a workload that run lacks at their median."""
    from grace.bench import progress as progress_module, walls

    clock = [100.0]
    monkeypatch.setattr(progress_module, "time", types.SimpleNamespace(monotonic=lambda: clock[0]))
    bar = progress_module.Progress(593)
    clock[0] += 459.0
    bar.advance(3)
    assert "~90270s left" in capsys.readouterr().err, "the steps' scale"
    assert walls.seconds_left({"DALLE2": 544.0, "BERT": 532.0, "ALNET": 46.0}, ["DALLE2", "ALNET", "MTCG-T"]) \
        == 544.0 + 46.0 + 532.0
    assert walls.seconds_left({}, ["DALLE2"]) is None
    bar.expect(1122.0)
    clock[0] += 100.0
    bar.advance()
    assert "~1022s left" in capsys.readouterr().err
    clock[0] += 5000.0
    bar.advance()
    assert "~   0s left" in capsys.readouterr().err, "never below nothing"


def _children(pid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.slow
@pytest.mark.parametrize("stop", ["SIGTERM", "SIGKILL"])
def test_a_runner_stopped_leaves_no_worker_behind(tmp_path: Path, faulty: None, stop: str) -> None:
    """A deadline's `timeout` sends SIGTERM, then SIGKILL: the worker must not run on, orphaned,
    on the GPU."""
    import signal
    import time

    code = ("import sys; from pathlib import Path; from grace.bench.runner import Settings, run; "
            "from grace.bench.targets import Target; from grace.bench.modes import parse_modes; from grace.bench.workloads import get; "
            "import faulty_workloads; "
            f"run(Settings(experiment='cpu_test', run_id='r3', repeat=2, timeout_s=600, device='cpu', size='tiny', "
            f"results_dir=Path({str(tmp_path)!r})), [Target(get('test-hang'), 2)], parse_modes('pt2-nocg'))")
    runner = subprocess.Popen([sys.executable, "-c", code], cwd=REPO_ROOT, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        workers: list[int] = []
        while not workers and time.monotonic() < deadline and runner.poll() is None:
            time.sleep(0.5)
            workers = _children(runner.pid)
        assert workers, f"no worker started: {runner.stderr.read() if runner.poll() is not None else ''}"
        time.sleep(2)  # inside the run, past the signal handler's installation
        runner.send_signal(getattr(signal, stop))
        runner.wait(timeout=60)
        time.sleep(1)
        assert not [w for w in workers if _alive(w)], "a worker outlived its runner"
    finally:
        if runner.poll() is None:
            runner.kill()
        for w in _children(runner.pid):
            os.kill(w, signal.SIGKILL)


def test_config_options_reach_the_target_and_bad_ones_are_named(tmp_path: Path) -> None:
    config = tmp_path / "w.txt"
    config.write_text("micro-eos eos_like micro I 4 release-memory,together=2,first,repeat=20,timeout=600,"
                      "modes=pt2-cg+grace\nmicro-mlp2 mlp_2_layers micro I 1\n")
    heavy, plain = parse_config(config)
    assert (heavy.release_memory, heavy.together, heavy.first, heavy.repeat, heavy.timeout_s, heavy.modes) == (
        True, 2, True, 20, 600.0, ("pt2-cg", "grace"))
    assert (plain.release_memory, plain.together, plain.first, plain.repeat, plain.timeout_s, plain.modes) == (
        False, None, False, None, None, None)
    for bad, message in (("repeat=0", "positive number"), ("together", "unknown option"),
                         ("release_memory", "unknown option"), ("first,timeout=x", "positive number"),
                         ("modes=pt2-cg,grace", "unknown option"), ("modes=pt2-cg+nope", "unknown mode nope")):
        config.write_text(f"micro-eos eos_like micro I 4 {bad}\n")
        with pytest.raises(ConfigError, match=message) as info:
            parse_config(config)
        assert f"{config}:1" in str(info.value)


def test_a_targets_line_sets_its_repeat_timeout_memory_release_and_start_waves() -> None:
    from grace.bench.runner import settings_for, wave_size
    from grace.bench.targets import first_first

    settings = Settings(experiment="x", run_id="y", repeat=100, timeout_s=420, compile_together=True)
    wl = get("micro-mlp2")
    plain, heavy, paired = Target(wl, 1), Target(wl, 1, release_memory=True, repeat=30), Target(
        wl, 1, release_memory=True, together=3, timeout_s=600, first=True)
    assert settings_for(settings, plain) == settings
    adjusted = settings_for(settings, heavy)
    assert adjusted.repeat == 30 and adjusted.timeout_s == 420 and adjusted.worker.release_memory
    assert settings.worker.check_after and not adjusted.worker.check_after, "no kept copies where memory is short"
    assert settings_for(settings, paired).timeout_s == 600
    assert [wave_size(settings, t, 7) for t in (plain, heavy, paired)] == [7, 1, 3]
    apart = dataclasses.replace(settings, compile_together=False)
    assert [wave_size(apart, t, 7) for t in (plain, heavy, paired)] == [1, 1, 3]
    h100, h200 = (dataclasses.replace(settings, wave_gib=g) for g in (79.6, 140.4))
    assert [wave_size(h100, t, 7) for t in (plain, heavy, paired)] == [7, 1, 3], "an H100's 79.6 GiB keeps N"
    assert [wave_size(h200, t, 7) for t in (plain, heavy, paired)] == [7, 1, 5], "an H200 warms up more at once"
    assert wave_size(h200, paired, 4) == 4, "never more than the workload's modes"
    assert first_first([plain, heavy, paired]) == [paired, plain, heavy]
    assert shard(first_first([plain, heavy, paired]), 1, 2)[0] is paired, "a first target starts a runner's list"


def test_the_suites_heavy_workloads_say_how_they_fit_a_gpu_and_a_call() -> None:
    """DALLE2 and TEFD compile for minutes: they lead; the memory-bound ones release between chunks."""
    targets = {t.workload.name: t for t in parse_config(CONFIGS_DIR / "workloads_single_gpu_25.txt")}
    assert {n for n, t in targets.items() if t.first} >= {"DALLE2", "TEFD"}
    assert {n for n, t in targets.items() if t.release_memory} >= {"DR-I", "MTCG-T", "BSCG", "XLNET-T"}
    assert all({"pt2-nocg", "pt2-cg", "grace"} <= set(t.modes) for t in targets.values() if t.modes), \
        "every workload keeps Figure 10's modes"
    from grace.bench.runner import wave_size
    from grace.bench.targets import modes_for

    sweep = parse_modes("eager,pt2-nocg,pt2-cg,grace-cgct,grace-cgct-pi,grace-no-lean,grace")
    xlnet_t = modes_for(targets["XLNET-T"], sweep)
    size = wave_size(Settings(experiment="x", run_id="y", compile_together=True), targets["XLNET-T"], len(xlnet_t))
    waves = [[m.name for m in xlnet_t[i:i + size]] for i in range(0, len(xlnet_t), size)]
    assert waves == [["pt2-nocg", "pt2-cg"], ["grace"]], "GraCE's 44 GB warm-up runs beside no other warm-up"


def test_a_target_with_its_own_modes_is_done_when_those_have_rows(tmp_path: Path) -> None:
    from grace.bench.targets import modes_for, pending

    modes = parse_modes("eager,pt2-nocg,pt2-cg")
    narrow, full = Target(get("micro-mlp2"), 1, modes=("pt2-cg", "eager")), Target(get("micro-mlp16"), 1)
    assert [m.name for m in modes_for(narrow, modes)] == ["eager", "pt2-cg"], "the run's order"
    assert modes_for(full, modes) == modes
    (tmp_path / "rows.jsonl").write_text("".join(
        json.dumps({"workload": w, "mode": m, "status": "ok"}) + "\n"
        for w, m in [("micro-mlp2", "eager"), ("micro-mlp2", "pt2-cg"), ("micro-mlp16", "eager")]))
    assert pending([narrow, full], modes, tmp_path) == [full]


def test_retry_reruns_a_workload_in_every_mode_when_its_latest_row_failed(tmp_path: Path) -> None:
    from grace.bench.targets import pending

    targets = [Target(get(n), 1) for n in ("micro-mlp2", "micro-mlp16")]
    modes = parse_modes("eager,pt2-nocg")
    rows = [("micro-mlp2", "eager", "ok"), ("micro-mlp2", "pt2-nocg", "error"),
            ("micro-mlp16", "eager", "ok"), ("micro-mlp16", "pt2-nocg", "mismatch"),
            ("micro-mlp16", "pt2-nocg", "ok")]  # a retried case: its last row counts
    (tmp_path / "rows.jsonl").write_text(
        "".join(json.dumps({"workload": w, "mode": m, "status": st}) + "\n" for w, m, st in rows))
    names = lambda ts: [t.workload.name for t in ts]  # noqa: E731
    assert pending(targets, modes, tmp_path) == [], "without --retry every row counts as done"
    assert names(pending(targets, modes, tmp_path, frozenset({"error"}))) == ["micro-mlp2"]
    assert names(pending(targets, modes, tmp_path, frozenset({"mismatch"}))) == []


def test_redo_reruns_a_named_workload_whose_rows_ran_other_code(tmp_path: Path) -> None:
    from grace.bench.targets import pending

    targets = [Target(get(n), 1) for n in ("micro-mlp2", "micro-mlp16")]
    modes = parse_modes("eager,pt2-nocg")
    rows = [("micro-mlp2", "eager", "old"), ("micro-mlp2", "pt2-nocg", None),  # a row from before the field
            ("micro-mlp16", "eager", "old"), ("micro-mlp16", "pt2-nocg", "old")]
    (tmp_path / "rows.jsonl").write_text("".join(
        json.dumps({"workload": w, "mode": m, "status": "ok", "versions": {"grace_code": c}}) + "\n"
        for w, m, c in rows))
    names = lambda ts: [t.workload.name for t in ts]  # noqa: E731
    assert pending(targets, modes, tmp_path) == [], "without --redo every row counts as done"
    assert names(pending(targets, modes, tmp_path, redo=frozenset({"micro-mlp2"}), code="new")) == ["micro-mlp2"]
    with (tmp_path / "rows.jsonl").open("a") as f:  # its rerun, by this code
        for m in ("eager", "pt2-nocg"):
            f.write(json.dumps({"workload": "micro-mlp2", "mode": m, "status": "ok",
                                "versions": {"grace_code": "new"}}) + "\n")
    assert pending(targets, modes, tmp_path, redo=frozenset({"micro-mlp2"}), code="new") == [], \
        "a call after the rerun finds it done"


def test_a_workload_an_earlier_call_cut_runs_after_those_not_yet_tried(tmp_path: Path) -> None:
    from grace.bench import results
    from grace.bench.targets import cut_attempts, first_first, pending

    long, other, cut_twice, fresh = (Target(get(n), 1, first=(n == "micro-mlp2"))
                                     for n in ("micro-mlp2", "micro-mlp16", "micro-eos", "micro-ptr-1"))
    modes = parse_modes("eager")
    for name, event in [("micro-mlp2", "started"),  # cut once
                        ("micro-eos", "started"), ("micro-eos", "started"),  # cut twice
                        ("micro-mlp16", "started"), ("micro-mlp16", "finished")]:  # retried after an error row
        results.note_attempt(tmp_path, name, event)
    (tmp_path / "rows.jsonl").write_text(json.dumps({"workload": "micro-mlp16", "mode": "eager", "status": "error"}) + "\n")
    assert cut_attempts(tmp_path) == {"micro-mlp2": 1, "micro-eos": 2, "micro-mlp16": 0}
    todo = pending([long, other, cut_twice, fresh], modes, tmp_path, frozenset({"error"}))
    assert [t.workload.name for t in todo] == ["micro-mlp16", "micro-ptr-1", "micro-mlp2", "micro-eos"]
    assert [t.workload.name for t in first_first(todo)][0] == "micro-mlp16", "a cut workload no longer starts a call"
    assert pending([long], modes, tmp_path / "new") == [long], "a run without attempts: nothing reordered"
    import time

    begun = time.time()  # runners started together: one of them starts micro-ptr-1 at once
    results.note_attempt(tmp_path, "micro-ptr-1", "started")
    assert cut_attempts(tmp_path)["micro-ptr-1"] == 1
    assert cut_attempts(tmp_path, before=begun)["micro-ptr-1"] == 0, "another runner's fresh start is no cut"
    todo = pending([long, other, cut_twice, fresh], modes, tmp_path, frozenset({"error"}), attempts_before=begun)
    assert [t.workload.name for t in todo] == ["micro-mlp16", "micro-ptr-1", "micro-mlp2", "micro-eos"]


def test_a_runner_killed_mid_workload_leaves_it_cut_for_the_next_call(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from grace.bench import runner
    from grace.bench.targets import first_first, pending

    def killed(settings, target, *args, **kwargs):  # the call's deadline, mid-way through its first workload
        raise KeyboardInterrupt

    monkeypatch.setattr(runner, "run_target", killed)
    settings = Settings(experiment="cpu_test", run_id="cut", repeat=2, device="cpu", size="tiny", results_dir=tmp_path)
    targets = [Target(get("micro-mlp2"), 1, first=True), Target(get("micro-mlp16"), 1)]
    with pytest.raises(KeyboardInterrupt):
        run(settings, targets, parse_modes("eager"))
    out = tmp_path / "raw" / "cpu_test" / "cut"
    todo = first_first(pending(targets, parse_modes("eager"), out))
    assert [t.workload.name for t in todo] == ["micro-mlp16", "micro-mlp2"], "the cut one runs after the rest"


def test_cli_rejects_retry_without_resume_and_unknown_statuses() -> None:
    from grace.bench.__main__ import main

    assert main(["--workloads", "micro-mlp2", "--retry", "error"]) == 2
    assert main(["--workloads", "micro-mlp2", "--resume", "--run-id", "x", "--retry", "oom"]) == 2


def test_a_run_id_or_experiment_that_is_not_a_plain_name_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A separator in a run id would write the run outside results/raw (``/x``: at the file
    system's root), a leading dot hide it: refused before anything is made."""
    from grace.bench import results
    from grace.bench.__main__ import main

    outside = tmp_path / "outside"
    for bad in (str(outside), "../up", ".hidden", "a/b", ""):
        assert main(["--device", "cpu", "--workloads", "micro-mlp2", "--modes", "eager", "--run-id", bad]) == 2
        assert "is not a plain name" in capsys.readouterr().err
        with pytest.raises(ValueError, match="not a plain name"):
            results.run_dir("cpu_test", bad, tmp_path)
    assert main(["--device", "cpu", "--workloads", "micro-mlp2", "--experiment", "a/b"]) == 2
    assert not outside.exists() and not (tmp_path / "raw").exists()
    assert results.run_dir("cpu_test", "20261129-s38.cpu_1", tmp_path).is_dir()


def test_cli_without_gpu_says_so_in_one_line() -> None:
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    proc = subprocess.run([sys.executable, "-m", "grace.bench", "--workloads", "micro-eos", "--repeat", "2"],
                          capture_output=True, text=True, cwd=REPO_ROOT, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "no NVIDIA GPU" in proc.stderr


def test_cli_rejects_bad_arguments_clearly() -> None:
    proc = subprocess.run([sys.executable, "-m", "grace.bench", "--workloads", "nope", "--device", "cpu"],
                          capture_output=True, text=True, cwd=REPO_ROOT, timeout=120)
    assert proc.returncode == 2 and "unknown workload 'nope'" in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "grace.bench", "--inner", "0", "--device", "cpu"],
                          capture_output=True, text=True, cwd=REPO_ROOT, timeout=120)
    assert proc.returncode == 2 and "--inner must be at least 1" in proc.stderr


@pytest.mark.parametrize("script", ["smoke_test.sh", "run_baseline_pt2.sh", "run_tables23.sh",
                                    "gpu_checks_pi_cgct.sh"])
def test_gpu_script_without_gpu_fails_in_one_clear_line(script: str) -> None:
    if shutil.which("nvidia-smi"):
        pytest.skip("this machine has nvidia-smi")
    proc = subprocess.run(["bash", f"scripts/{script}"], capture_output=True, text=True, cwd=REPO_ROOT,
                          timeout=60, env={**os.environ, "RUN_ID": "no-gpu-test"})
    assert proc.returncode != 0
    assert proc.stderr.strip().splitlines() == [
        "[FAIL] No NVIDIA GPU found (nvidia-smi is missing or sees no device): "
        "GraCE's benchmarks need a CUDA GPU."]
    assert "[OK]" not in proc.stdout


def test_pin_cpu_choices(tmp_path, monkeypatch) -> None:
    from grace.bench import timing_core
    from grace.bench.__main__ import parse_pin

    monkeypatch.setattr(timing_core, "LOCK_DIR", tmp_path)
    allowed = sorted(os.sched_getaffinity(0))
    auto = parse_pin("auto")
    assert auto is not None and auto.core == allowed[-1] and auto.lock is not None
    auto.release()
    assert parse_pin("none") is None
    given = parse_pin(str(allowed[-1]))
    assert given is not None and given.core == allowed[-1] and given.lock is not None, "a named core is claimed"
    if len(allowed) > 1:
        beside = parse_pin("auto")
        assert beside is not None and beside.core != given.core, "an auto benchmark beside it times elsewhere"
        beside.release()
    again = parse_pin(str(allowed[-1]))
    assert again is not None and again.core == allowed[-1] and again.lock is None, "named twice: shared, not refused"
    given.release()
    with pytest.raises(ValueError, match="not a core of this machine"):
        parse_pin("9999")


def test_benchmarks_side_by_side_claim_different_timing_cores(tmp_path) -> None:
    """Two benchmarks on one host with ``--pin-cpu auto`` time on two cores, not one; a core is
    claimed again once its benchmark let it go; with every core held the last is shared."""
    from grace.bench.timing_core import claim

    first = claim([4, 5, 6], tmp_path)
    second = claim([4, 5, 6], tmp_path)
    assert (first.core, second.core) == (6, 5)
    first.release()
    third = claim([4, 5, 6], tmp_path)
    fourth = claim([4, 5, 6], tmp_path)
    assert (third.core, fourth.core) == (6, 4)
    shared = claim([4, 5, 6], tmp_path)
    assert (shared.core, shared.lock) == (6, None)
    for c in (second, third, fourth):
        c.release()


def test_a_claim_held_by_another_process_keeps_the_core(tmp_path) -> None:
    """The lock is the kernel's (flock), so another process's benchmark sees it, and it ends with
    that process."""
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, pathlib; from grace.bench.timing_core import claim; "
         f"c = claim([4, 5], pathlib.Path({str(tmp_path)!r})); print(c.core, flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=str(Path(__file__).parent.parent))
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "5"
        from grace.bench.timing_core import claim

        mine = claim([4, 5], tmp_path)
        assert mine.core == 4
        mine.release()
    finally:
        holder.communicate("", timeout=30)
    after = claim([4, 5], tmp_path)
    assert after.core == 5
    after.release()


def test_timed_calls_use_exact_float32() -> None:
    """The benchmark checks at 1e-4 and compares with probes that time the same workloads: TF32
    off for matmuls and for cuDNN's convolutions, whose default is on."""
    import torch

    from grace.bench.precision import exact_float32

    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
        exact_float32()
        assert (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) == (False, False)
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


def test_every_runner_of_a_benchmark_workload_uses_the_benchmarks_arithmetic() -> None:
    """A probe that times a workload in PyTorch's default arithmetic runs other convolution
    kernels than the benchmark (cuDNN's TF32), and its times cannot be set beside the
    benchmark's: whatever builds a registered workload to run it calls ``exact_float32``."""
    root = Path(__file__).parent.parent
    builders = [p for p in [*root.glob("grace/**/*.py"), *root.glob("scripts/**/*.py")]
                if re.search(r"\b(wl|workload)\.build\(", p.read_text())]
    assert len(builders) >= 5, builders  # the worker, the TP runner, explain and the probes
    assert [str(p.relative_to(root)) for p in builders if "exact_float32()" not in p.read_text()] == []


def test_an_unwritable_lock_folder_times_on_the_last_core_unclaimed(tmp_path) -> None:
    from grace.bench.timing_core import claim

    blocker = tmp_path / "file"
    blocker.write_text("")
    c = claim([2, 3], blocker / "locks")
    assert (c.core, c.lock) == (3, None)


def test_timing_lock_excludes_other_runners_while_held(tmp_path) -> None:
    import fcntl

    from grace.bench.runner import exclusive

    lock = tmp_path / "timing.lock"

    def try_lock() -> bool:
        with open(lock, "a") as other:
            try:
                fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            fcntl.flock(other, fcntl.LOCK_UN)
            return True

    with exclusive(lock, "w"):
        assert not try_lock(), "another runner must not time while this one does"
    assert try_lock(), "the lock is released after the timed rounds"
    with exclusive(None, "w"):
        pass


def test_dcgan_runs_in_float64_for_the_check() -> None:
    """The float64 arbiter runs the model converted to float64; DCGAN's BCE labels follow the
    images' dtype, so its losses (and their gradients) can be computed there."""
    from grace.bench import workloads
    from grace.bench.reference import as_float64

    w = workloads.get("DCGAN")
    model = as_float64(w.build("cpu", 2, size="tiny"))
    loss = w.loss(model(*as_float64(w.inputs(model, 0, "cpu", 2, size="tiny"))))
    loss.backward()
    assert loss.dtype == torch.float64


def test_worker_options_are_declared_once_for_both_command_lines() -> None:
    import argparse

    from grace.bench import options

    parser = argparse.ArgumentParser()
    options.add_arguments(parser)
    chosen = options.WorkerOptions(warmup=3, coverage=2, inner=4, release_memory=True, gpu_time=False)
    assert options.WorkerOptions.from_args(parser.parse_args(chosen.argv())) == chosen
    assert options.WorkerOptions.from_args(parser.parse_args([])) == options.WorkerOptions()
    between = options.WorkerOptions(check_after=False)
    assert options.WorkerOptions.from_args(parser.parse_args(between.argv())) == between
    unpinned = options.WorkerOptions(pin_backward=False)
    assert "--no-pin-backward" in unpinned.argv()
    assert options.WorkerOptions.from_args(parser.parse_args(unpinned.argv())) == unpinned
    assert options.WorkerOptions().pin_backward, "a pinned timing thread takes autograd's thread with it by default"
    assert options.WorkerOptions().check_after, "by default no eager check runs between two timed samples"
    assert set(options.FLAGS) == {f.name for f in __import__("dataclasses").fields(options.WorkerOptions)}
    with pytest.raises(ValueError, match="--inner must be at least 1"):
        options.WorkerOptions(inner=0)


def test_the_no_guard_mode_turns_only_the_guard_off_and_grace_leaves_it_to_the_checkout() -> None:
    grace, no_guard = MODES["grace"].env, MODES["grace-no-guard"].env
    assert no_guard == {**grace, "GRACE_STALE_OUTPUTS_RAISE": "0"}
    assert "GRACE_STALE_OUTPUTS_RAISE" not in grace, "grace@TREE keeps that checkout's default"


def test_the_backward_thread_pin_touches_no_thread_where_the_calling_thread_runs_the_backward(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """On the CPU autograd runs a backward on the calling thread: nothing to pin, no affinity set."""
    from grace.bench import pinning

    set_to: list[tuple[int, set[int]]] = []
    monkeypatch.setattr(pinning.os, "sched_setaffinity", lambda tid, cores: set_to.append((tid, cores)))
    assert pinning.autograd_device_thread("cpu") is None
    assert pinning.pin_backward_thread(0, "cpu") is None and set_to == []


def test_rewarm_runs_untimed_steps_for_its_time_within_its_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    from grace.bench import worker

    steps: list[float] = []
    case = worker.Case.__new__(worker.Case)
    case.untimed_step = lambda avoid: (time.sleep(0.001), steps.append(time.perf_counter()))  # type: ignore[method-assign]
    assert case.rewarm(0) == 0 and steps == [], "0 ms: none"
    assert case.rewarm(1) >= worker.REWARM_MIN_ITERATIONS
    assert steps[-1] - steps[0] < 1.0
    steps.clear()
    start = time.perf_counter()
    ran = case.rewarm(30)
    assert ran == len(steps) and time.perf_counter() - start >= 0.030, "it runs for its time"
    assert steps[-1] - start < 0.5, "and stops soon after"
    monkeypatch.setattr(worker, "REWARM_MAX_ITERATIONS", 5)
    assert case.rewarm(60_000) == 5, "never past its most"
    with pytest.raises(ValueError, match="rewarm milliseconds and the lead-in.s bound must be at least 0"):
        WorkerOptions(rewarm_ms=-1)


def test_a_short_timed_sample_follows_an_untimed_iteration_on_another_input() -> None:
    """On the GPU a host-bound call ran up to 40% longer after any pause in the loop than right
    after the same call; each timed sample of a short iteration now follows one untimed iteration,
    on an input the timed sample does not use (a replay of stale data still fails its check)."""
    from grace.bench import worker

    def case(bound: int, distinct: int = 0) -> tuple[worker.Case, list[tuple[str, int]]]:
        c = worker.Case(get("micro-mlp2"), MODES["eager"], "cpu", 2, "tiny", distinct_inputs=distinct,
                        lead_in_below_us=bound)
        events: list[tuple[str, int]] = []
        inputs, step = c.inputs, c.step
        c.inputs = lambda s: (events.append(("input", s)), inputs(s))[1]  # type: ignore[method-assign]
        c.step = lambda fn, m, args: (events.append(("step", -1)), step(fn, m, args))[1]  # type: ignore[method-assign]
        return c, events

    c, events = case(10_000)
    c.timed(0)
    assert events == [("input", worker.WARMUP_SAMPLE_BASE), ("step", -1), ("input", 0), ("step", -1)]
    c.last_timed_us = 20_000.0
    events.clear()
    c.timed(1)
    assert events == [("input", 1), ("step", -1)], "a long iteration: no lead-in"
    c, events = case(0)
    c.timed(0)
    assert events == [("input", 0), ("step", -1)], "0: never"
    c, events = case(10_000, distinct=2)
    c.timed(0)
    c.last_timed_us = 100.0  # short, whatever the machine's load made the first call take
    c.timed(1)
    assert [s for e, s in events if e == "input"] == [1, 0, 0, 1], "the lead-in's input is never the sample's"
    events.clear()
    c.rewarm(1, avoid=0)
    assert {s for e, s in events if e == "input"} == {1}, "nor the rewarm's, before a round's first sample"
    with pytest.raises(ValueError, match="the lead-in's bound must be at least 0"):
        WorkerOptions(lead_in_below_us=-1)


def test_the_no_lean_aot_mode_keeps_stocks_aot_wrappers_and_nothing_else() -> None:
    grace, stock_aot = MODES["grace"].env, MODES["grace-no-lean-aot"].env
    assert stock_aot == {**grace, "GRACE_LEAN_AOT": "0"}
    assert "GRACE_LEAN_AOT" not in grace, "grace@TREE keeps that checkout's default"


def test_the_no_copy_grads_mode_turns_only_gradient_copies_off() -> None:
    grace, not_copying = MODES["grace"].env, MODES["grace-no-copy-grads"].env
    assert not_copying == {**grace, "GRACE_COPY_GRADS": "0"}
    assert "GRACE_COPY_GRADS" not in grace, "grace@TREE keeps that checkout's default"


def test_the_mutated_inputs_modes_differ_from_grace_only_there() -> None:
    grace = MODES["grace"].env
    assert grace["GRACE_MUTATED_INPUTS"] == "1", "set, so that an earlier checkout has it on too"
    assert MODES["grace-mutated-inputs"].env == grace
    assert MODES["grace-no-mutated-inputs"].env == {**grace, "GRACE_MUTATED_INPUTS": "0"}


def test_the_pi_choice_mode_has_scg_profile_every_strategy() -> None:
    from grace.option_values import problems

    choice = MODES["grace-pi-choice"].env
    assert choice == {**MODES["grace"].env, "GRACE_SCG_PI_STRATEGIES": "ptx,prelude,exec-update"}
    import grace.config

    with grace.config.patch(scg_pi_strategies=choice["GRACE_SCG_PI_STRATEGIES"]):
        assert "scg_pi_strategies" not in problems(), "a value the option accepts"


def test_figure_11s_bars_add_one_optimization_at_a_time() -> None:
    """CGCT, +PI and +SCG run with lean replay off; GraCE, the last bar, leaves it to the
    checkout's default (on)."""
    lean = {name: MODES[name].env.get("GRACE_LEAN_REPLAY") for name in
            ("grace-cgct", "grace-cgct-pi", "grace-no-lean", "grace")}
    assert lean == {"grace-cgct": "0", "grace-cgct-pi": "0", "grace-no-lean": "0", "grace": None}
    assert MODES["grace-no-lean"].env == {**MODES["grace"].env, "GRACE_LEAN_REPLAY": "0"}


def test_status_says_per_workload_what_a_resumable_run_has_left(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    from grace.bench import results
    from grace.bench.status import main, statuses

    out = tmp_path / "raw" / "single_gpu" / "r"
    out.mkdir(parents=True)
    rows = [("micro-mlp2", "eager", "ok"), ("micro-mlp2", "pt2-nocg", "ok"),
            ("micro-mlp16", "eager", "ok"), ("micro-mlp16", "pt2-nocg", "timeout")]
    rounds = {"micro-mlp2": {"timed": 4, "planned": 4}, "micro-mlp16": {"timed": 12, "planned": 20}}
    (out / "rows.jsonl").write_text("".join(
        json.dumps({"workload": w, "mode": m, "status": st, "workload_wall_s": 1800.0, "rounds": rounds[w]}) + "\n"
        for w, m, st in rows))
    for event in ("started", "finished"):
        results.note_attempt(out, "micro-mlp2", event)
    results.note_attempt(out, "micro-eos", "started")  # cut twice
    results.note_attempt(out, "micro-eos", "started")
    targets = [Target(get(n), 1) for n in ("micro-mlp2", "micro-mlp16", "micro-eos", "micro-ptr-1")]
    found = statuses(targets, parse_modes("eager,pt2-nocg"), out)
    assert [(s.workload, s.state, s.detail) for s in found] == [
        ("micro-mlp2", "done", ""), ("micro-mlp16", "failed", "pt2-nocg: timeout, 12 of 20 rounds"),
        ("micro-eos", "cut", "2x"), ("micro-ptr-1", "not started", "")]
    assert main(["--run-id", "r", "--results-dir", str(tmp_path), "--workloads",
                 "micro-mlp2,micro-mlp16,micro-eos,micro-ptr-1", "--modes", "eager,pt2-nocg"]) == 0
    assert "2 of 4 workloads have rows (1 with failed modes), 1 cut by a call's deadline, 1 not started; " \
           "the finished ones took 1.00 GPU-hours" in (printed := capsys.readouterr().out)
    env = "WORKLOADS=micro-mlp2,micro-mlp16,micro-eos,micro-ptr-1 MODES=eager,pt2-nocg "
    assert f"to go on: {env}RUN_ID=r " in printed and f"{env}RETRY=error,timeout,mismatch RUN_ID=r " in printed
    earlier = out.parent / "before"
    earlier.mkdir()
    (earlier / "rows.jsonl").write_text(json.dumps({"workload": "micro-eos", "workload_wall_s": 900.0}) + "\n")
    assert main(["--run-id", "r", "--results-dir", str(tmp_path), "--workloads",
                 "micro-mlp2,micro-mlp16,micro-eos,micro-ptr-1", "--modes", "eager,pt2-nocg",
                 "--walls-from", "single_gpu/before"]) == 0
    printed = capsys.readouterr().out
    assert re.search(r"micro-eos +cut +~900 ", printed), "a workload left, at its earlier wall time"
    assert "the rest about 0.50 GPU-hours by single_gpu/before's wall times" in printed, "micro-ptr-1 at the median"
    assert main(["--run-id", "r", "--results-dir", str(tmp_path), "--walls-from", "before"]) == 2
    assert "expected EXPERIMENT/RUN" in capsys.readouterr().err
    assert main(["--run-id", "nope", "--results-dir", str(tmp_path)]) == 2
    (out.parent / "packed.tar.xz").write_bytes(b"")
    assert main(["--run-id", "packed", "--results-dir", str(tmp_path)]) == 2
    assert "grace.report.archive restore" in capsys.readouterr().err


PINNED_POOL_CHILD = """
import os, threading, torch
from grace.bench.pinning import pin_timing_thread
cores = os.sched_getaffinity(0)
pin_timing_thread(max(cores))
torch.zeros(1 << 22).add_(1)  # a parallel CPU op after the pin, as a check's eager reference makes
me = threading.get_native_id()
others = []
for task in os.listdir("/proc/self/task"):
    if int(task) == me:
        continue
    with open(f"/proc/self/task/{task}/status") as f:
        allowed = next(line.split(":", 1)[1].strip() for line in f if line.startswith("Cpus_allowed_list"))
    others.append(allowed)
print(len(cores), torch.get_num_threads(), os.sched_getaffinity(0) == {max(cores)}, others)
"""


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2 or not Path("/proc/self/task").is_dir(),
                    reason="needs two cores and Linux's /proc")
def test_the_timing_thread_is_pinned_after_the_intra_op_pool_is_made() -> None:
    """OpenMP threads inherit their maker's affinity: a pool made after the pin would share the
    timing thread's one core (a compiled worker's eager check of XLNET-I took 2.5 s a sample)."""
    import ast

    out = subprocess.run([sys.executable, "-c", PINNED_POOL_CHILD], capture_output=True, text=True, check=True,
                         cwd=REPO_ROOT).stdout.split(" ", 3)
    cores, threads, pinned, others = int(out[0]), int(out[1]), out[2] == "True", ast.literal_eval(out[3])
    assert pinned, "the calling thread runs on its one core"
    assert threads >= 2 and len(others) >= threads - 1, "the pool's threads are there"
    assert str(max(os.sched_getaffinity(0))) not in others, f"a thread shares the timing thread's core: {others}"


def test_a_run_records_its_commit_dirty_only_where_the_code_it_executes_changed(tmp_path, monkeypatch):
    """A resumed run unpacks its archive and so deletes a tracked file under results/: its rows
    still ran the committed code. An edit under grace/ is a change to what runs."""
    import subprocess

    from grace.bench import results

    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "grace").mkdir()
    (tmp_path / "grace" / "x.py").write_text("A = 1\n")
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "run.tar.xz").write_text("packed\n")
    git("add", "-A")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c")
    monkeypatch.setattr(results, "REPO_ROOT", tmp_path)
    (tmp_path / "results" / "run.tar.xz").unlink()
    assert not results._git_commit().endswith("-dirty")
    committed = results.code_hash("HEAD")
    assert committed is not None and results.code_hash() == committed
    (tmp_path / "grace" / "x.py").write_text("A = 2\n")
    assert results._git_commit().endswith("-dirty")
    edited = results.code_hash()
    assert edited != committed, "the code that runs has changed"
    (tmp_path / "grace" / "new.py").write_text("B = 1\n")  # a file the checkout's HEAD lacks
    assert results.code_hash() not in (edited, committed)
    git("add", "-A")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "d")
    assert results.code_hash("HEAD") == results.code_hash(), "the same code, committed, hashes the same"


def test_runner_flags_are_declared_once_on_the_settings(tmp_path: Path) -> None:
    """Each flagged ``Settings`` field is one ``python -m grace.bench`` flag with the field's own
    default; parsed values come back as the settings, paths made absolute."""
    import argparse
    import dataclasses

    from grace.bench import runner

    parser = argparse.ArgumentParser()
    runner.add_arguments(parser)
    defaults = runner.Settings.from_args(parser.parse_args([]), run_id="r")
    assert defaults == runner.Settings(run_id="r")
    flagged = [f.name for f in dataclasses.fields(runner.Settings) if "flag" in f.metadata]
    assert {"repeat", "chunk", "timeout_s", "experiment", "device", "size", "scg_cache", "scg_cache_per_mode", "timing_lock",
            "stop_after_s", "end_after_s", "compile_together", "walls_from", "walls_strict", "wave_gib"} == set(flagged)
    args = parser.parse_args(["--repeat", "7", "--timeout", "9.5", "--size", "tiny", "--scg-cache", "rel/cache",
                              "--end-after", "30", "--compile-together", "--walls-from", "single_gpu/x",
                              "--walls-strict", "--wave-gib", "140.4"])
    got = runner.Settings.from_args(args, run_id="r", pin_cpu=3)
    assert got.wave_gib == 140.4
    assert (got.repeat, got.timeout_s, got.size, got.end_after_s, got.compile_together, got.pin_cpu) == (
        7, 9.5, "tiny", 30.0, True, 3)
    assert (got.walls_from, got.walls_strict) == ("single_gpu/x", True)
    assert got.scg_cache == Path("rel/cache").resolve() and got.scg_cache.is_absolute()
    with pytest.raises(SystemExit):
        parser.parse_args(["--size", "huge"])

"""Tensor-parallel plans on the CPU: each plan, at two ranks over gloo, gives the unsharded
model's outputs (the GPU runs use NCCL; what the plans shard is the same)."""

from __future__ import annotations

import copy
import json
import os
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")


def _then_exit(rank: int, body: str, *args: object) -> None:
    """A spawned rank: run ``body`` (a function of this module), then leave the process at once.
    The rank's result is written by then; gloo's threads can abort the interpreter's own
    teardown afterwards ("terminate called without an active exception"), which says nothing
    about the plan."""
    globals()[body](rank, *args)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _rank(rank: int, world: int, init_file: str, workload: str, out_dir: str) -> None:
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.utils._pytree import tree_leaves

    from grace.bench.workloads import get
    from grace.tp.plans import shard

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        mesh = init_device_mesh("cpu", (world,))
        wl = get(workload)
        torch.manual_seed(0)
        model = wl.build("cpu", 2, "tiny")
        reference = copy.deepcopy(model)
        inputs = wl.inputs(model, 0, "cpu", 2, "tiny")
        with torch.no_grad():
            expected = tree_leaves(reference(*inputs))
            shard(workload, model, mesh)
            got = tree_leaves(model(*inputs))
        assert len(got) == len(expected)
        for g, e in zip(got, expected):
            if isinstance(e, torch.Tensor):
                torch.testing.assert_close(g, e, rtol=1e-4, atol=1e-5)
        sharded = [n for n, p in model.named_parameters() if type(p.data).__name__ == "DTensor"]
        (Path(out_dir) / f"rank{rank}").write_text(f"ok {len(sharded)}")
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("workload", ["ST", "XLNET-I", "VM", "DALLE2"])
def test_a_plan_at_two_ranks_gives_the_unsharded_outputs(workload: str, tmp_path: Path) -> None:
    import torch.multiprocessing as mp

    mp.spawn(_then_exit, args=("_rank", 2, str(tmp_path / "init"), workload, str(tmp_path)), nprocs=2, join=True)
    results = [(tmp_path / f"rank{r}").read_text() for r in range(2)]
    assert all(r.startswith("ok ") and int(r.split()[1]) > 0 for r in results), results


def _gated_rank(rank: int, world: int, init_file: str, out_dir: str) -> None:
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    from grace.bench.workloads import get
    from grace.tp.plans import PLANS, shard

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        torch.manual_seed(0)
        model = get("DALLE2").build("cpu", 2, "tiny")
        (block,) = PLANS["DALLE2"]
        name = next(n for n, m in model.named_modules() if block.matches(m))
        reference = copy.deepcopy(model.get_submodule(name))
        x = torch.randn(2, 3, reference[1].in_features)
        shard("DALLE2", model, init_device_mesh("cpu", (world,)))
        with torch.no_grad():
            torch.testing.assert_close(model.get_submodule(name)(x), reference(x), rtol=1e-5, atol=1e-5)
        (Path(out_dir) / f"rank{rank}").write_text("ok")
    finally:
        dist.destroy_process_group()


def test_a_sharded_swiglu_block_computes_the_unsharded_block(tmp_path: Path) -> None:
    """DALL-E 2's SwiGLU feed-forward at two ranks: the block's own output, which the whole
    model's sampled image does not show at the tiny size."""
    import torch.multiprocessing as mp

    mp.spawn(_then_exit, args=("_gated_rank", 2, str(tmp_path / "init"), str(tmp_path)), nprocs=2, join=True)
    assert [(tmp_path / f"rank{r}").read_text() for r in range(2)] == ["ok", "ok"]


def test_a_degree_that_does_not_divide_the_heads_is_refused() -> None:
    from grace.bench.workloads import get
    from grace.tp.plans import plan_for

    model = get("ST").build("cpu", 2, "tiny")
    with pytest.raises(ValueError, match="do not split over 3 ranks"):
        plan_for("ST", model, 3)
    with pytest.raises(ValueError, match="no tensor-parallel plan for XLNET-T"):
        plan_for("XLNET-T", model, 2)


def test_the_plan_splits_attention_and_feed_forward_the_megatron_way() -> None:
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel

    from grace.bench.workloads import get
    from grace.tp.plans import plan_for

    model = get("ST").build("cpu", 2, "tiny")
    plan, heads, gated = plan_for("ST", model, 2)
    attn = "encoder.layer_stack.0.slf_attn"
    assert all(isinstance(plan[f"{attn}.{c}"], ColwiseParallel) for c in ("w_qs", "w_ks", "w_vs"))
    assert isinstance(plan[f"{attn}.fc"], RowwiseParallel)
    ffn = "encoder.layer_stack.0.pos_ffn"
    assert isinstance(plan[f"{ffn}.w_1"], ColwiseParallel) and isinstance(plan[f"{ffn}.w_2"], RowwiseParallel)
    assert heads and all(local == 1 for _, _, local in heads), "2 heads, 1 per rank"
    assert gated == []


def test_a_gated_feed_forward_gives_each_rank_its_value_and_gate_rows() -> None:
    from grace.bench.workloads import get
    from grace.tp.plans import gated_row_order, plan_for

    # rows 0-3 are the value, 4-7 the gate: rank 0 takes value 0-1 and gate 4-5
    assert gated_row_order(8, 2) == [0, 1, 4, 5, 2, 3, 6, 7]
    assert gated_row_order(8, 1) == list(range(8))
    model = get("DALLE2").build("cpu", 2, "tiny")
    plan, heads, gated = plan_for("DALLE2", model, 2)
    assert gated and len(plan) == 2 * len(gated), "each SwiGLU block: its first layer by columns, its last by rows"
    assert all(layer.out_features % 4 == 0 for layer in gated)


def test_grace_tp_runs_a_mode_on_two_ranks_and_writes_a_checked_row(tmp_path: Path) -> None:
    """``python -m grace.tp`` under torchrun, on gloo: the row rank 0 writes, checked against the
    unsharded eager model (eager mode: the plumbing, not the compiler)."""
    import json
    import os
    import subprocess
    import sys

    from grace.paths import REPO_ROOT

    out = tmp_path / "rows.jsonl"
    env = {**os.environ, "GRACE_DISABLE": "1", "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--standalone", "-m", "grace.tp",
           "--workload", "ST", "--mode", "eager", "--device", "cpu", "--size", "tiny", "--warmup", "1",
           "--repeat", "2", "--round", "3", "--rewarm", "1", "--out", str(out)]
    proc = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (row,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert (row["workload"], row["tp"], row["mode"], row["round"], row["status"]) == ("ST", 2, "eager", 3, "ok")
    assert row["rewarm"] == 1
    assert len(row["samples_us"]) == 2 and row["median_us"] > 0 and row["worst_error"] < 1e-4


def test_modes_that_start_alike_share_a_launch_each_with_its_own_checked_row(tmp_path: Path) -> None:
    """Eager and PT2-NoCG start with the same (stock) switches: one torchrun times both, their
    iterations interleaved, and writes a row for each; GraCE would need its own."""
    import json
    import os
    import subprocess
    import sys

    from grace.paths import REPO_ROOT
    from grace.tp.__main__ import groups

    assert groups(["pt2-nocg", "pt2-cg", "grace", "eager"]) == [["pt2-nocg", "pt2-cg", "eager"], ["grace"]]
    out = tmp_path / "rows.jsonl"
    env = {**os.environ, "GRACE_DISABLE": "1", "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--standalone", "-m", "grace.tp",
           "--workload", "ST", "--mode", "eager,pt2-nocg", "--device", "cpu", "--size", "tiny", "--warmup", "1",
           "--repeat", "2", "--out", str(out)]
    proc = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = {r["mode"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert sorted(rows) == ["eager", "pt2-nocg"]
    assert all(r["status"] == "ok" and len(r["samples_us"]) == 2 and r["worst_error"] < 1e-4 for r in rows.values())
    refused = subprocess.run([sys.executable, "-m", "grace.tp", "--workload", "ST", "--mode", "pt2-cg,grace",
                              "--out", str(out)], cwd=REPO_ROOT, env=env, capture_output=True, text=True)
    assert refused.returncode == 2 and "different switches" in refused.stderr


def test_a_negative_rewarm_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    from grace.tp.__main__ import parse_args

    with pytest.raises(SystemExit):
        parse_args(["--workload", "ST", "--mode", "eager", "--out", "rows.jsonl", "--rewarm", "-1"])
    assert "--rewarm must be at least 0, not -1" in capsys.readouterr().err
    assert parse_args(["--workload", "ST", "--mode", "eager", "--out", "rows.jsonl"]).rewarm == 1


def test_a_mode_started_without_its_switches_is_refused() -> None:
    import grace.config
    from grace.switches import running_switches
    from grace.tp.__main__ import main, switch_mismatch

    on = {"GRACE_DISABLE": "0", "GRACE_CGCT": "1", "GRACE_PI": "1", "GRACE_SCG": "1", "GRACE_PI_STRATEGY": "ptx",
          "GRACE_LEAN_REPLAY": "1", "GRACE_STALE_OUTPUTS_RAISE": "1", "GRACE_COPY_GRADS": "1",
          "GRACE_MUTATED_INPUTS": "1"}
    assert switch_mismatch("grace", on) == []
    assert switch_mismatch("grace-no-mutated-inputs", on) == ["GRACE_MUTATED_INPUTS=0"]
    assert switch_mismatch("grace-no-guard", on) == ["GRACE_STALE_OUTPUTS_RAISE=0"]
    assert switch_mismatch("grace-no-copy-grads", on) == ["GRACE_COPY_GRADS=0"]
    assert switch_mismatch("grace-no-copy-grads", {**on, "GRACE_COPY_GRADS": "0"}) == []
    assert switch_mismatch("grace-no-lean", on) == ["GRACE_LEAN_REPLAY=0"]
    assert switch_mismatch("pt2-cg", on) == ["GRACE_DISABLE=1"]
    assert switch_mismatch("grace-cgct", on) == ["GRACE_PI=0", "GRACE_SCG=0", "GRACE_LEAN_REPLAY=0"]
    with grace.config.patch(pi=False, scg=True, pi_strategy="prelude", copy_grads=False):
        running = running_switches()
    assert (running["GRACE_PI"], running["GRACE_SCG"], running["GRACE_PI_STRATEGY"]) == ("0", "1", "prelude")
    assert running["GRACE_COPY_GRADS"] == "0"
    assert main(["--env", "pt2-cg"]) == 0


def test_figure12_takes_the_median_of_per_round_ratios(tmp_path: Path) -> None:
    from grace.report import figure12

    def row(mode: str, rnd: int, us: float, status: str = "ok") -> dict:
        return {"workload": "ST", "tp": 2, "mode": mode, "round": rnd, "status": status, "median_us": us}

    rows = [row("pt2-nocg", 1, 100.0), row("pt2-cg", 1, 50.0), row("grace", 1, 40.0),
            row("pt2-nocg", 2, 120.0), row("pt2-cg", 2, 40.0), row("grace", 2, 60.0),
            row("pt2-nocg", 3, 110.0), row("pt2-cg", 3, 55.0), row("grace", 3, 0.0, status="error")]
    recs = {r["mode"]: r for r in figure12.records(rows)}
    assert recs["pt2-cg"]["speedup_over_nocg"] == 2.0 and (recs["pt2-cg"]["speedup_min"],
                                                            recs["pt2-cg"]["speedup_max"]) == (2.0, 3.0)
    assert recs["grace"]["status"] == "error" and recs["grace"]["speedup_over_nocg"] is None
    assert recs["pt2-nocg"]["speedup_over_nocg"] == 1.0 and recs["pt2-nocg"]["median_us"] == 110.0
    paths = figure12.draw(list(recs.values()), tmp_path)
    assert sorted(p.name for p in paths) == ["figure12.pdf", "figure12.png"]


def test_a_lost_launch_gets_a_row_per_mode_it_did_not_write(tmp_path: Path) -> None:
    from grace.tp.lost_launch import record_lost_launch

    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"workload": "ST", "tp": 4, "mode": "pt2-nocg", "round": 1, "status": "ok"}) + "\n")
    log = tmp_path / "launch.log"
    log.write_text("compiling\ntraceback : Signal 11 (SIGSEGV) received by PID 16674\n====\n")
    lost = record_lost_launch(rows, "ST", 4, ["pt2-nocg", "pt2-cg"], 1, exit_code=1, log=log)
    assert [(r["mode"], r["status"]) for r in lost] == [("pt2-cg", "crash")]
    assert "SIGSEGV" in lost[0]["error"]
    assert record_lost_launch(rows, "ST", 4, ["pt2-nocg", "pt2-cg"], 1, exit_code=1, log=log) == []  # once
    cut = record_lost_launch(rows, "ST", 4, ["grace"], 2, exit_code=124)
    assert [(r["mode"], r["round"], r["status"]) for r in cut] == [("grace", 2, "timeout")]
    assert record_lost_launch(rows, "ST", 4, ["grace"], 3, exit_code=0) == []
    assert len(rows.read_text().splitlines()) == 3


def test_the_lost_launch_command_needs_the_degree(tmp_path: Path) -> None:
    from grace.tp.__main__ import main

    with pytest.raises(SystemExit):
        main(["--lost-launch", "1", "--workload", "ST", "--mode", "grace", "--out", str(tmp_path / "r.jsonl")])
    assert main(["--lost-launch", "124", "--workload", "ST", "--mode", "grace", "--tp", "2",
                 "--out", str(tmp_path / "r.jsonl")]) == 0
    assert json.loads((tmp_path / "r.jsonl").read_text())["status"] == "timeout"


def test_figure12_says_why_a_mode_has_no_bar() -> None:
    from grace.report.figure12 import bar_gap_reason

    ok = {"status": "ok"}
    assert bar_gap_reason(None, ok) == "not run"
    assert bar_gap_reason({"status": "crash"}, ok) == "crash"
    assert bar_gap_reason(ok, None) == "PT2-NoCG not run"
    assert bar_gap_reason(ok, {"status": "timeout"}) == "PT2-NoCG timeout"
    assert bar_gap_reason(ok, ok) == "no round shared with PT2-NoCG"

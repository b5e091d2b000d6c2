"""The layer clock of grace.bench.layers: exclusive time per layer, wrappers put back, and the
benchmark's rows with --layers (on the CPU: Dynamo, AOTAutograd and Inductor's layers; the
tree's layers are the GPU's)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import torch

from grace.bench import layers
from grace.bench.modes import MODES, parse_modes
from grace.bench.options import WorkerOptions
from grace.bench.runner import Settings, run
from grace.bench.targets import Target
from grace.bench.workloads import get


def test_the_clock_charges_each_interval_to_the_innermost_layer() -> None:
    clock = layers.LayerClock()
    ticks = iter([0, 10, 30, 35, 60, 100]).__next__
    real = time.perf_counter_ns
    time.perf_counter_ns = ticks
    try:
        clock.enter("caller")    # 0
        clock.enter("aot")       # 10: caller 10
        clock.enter("inductor")  # 30: aot 20
        clock.leave()            # 35: inductor 5
        clock.leave()            # 60: aot 25 more
        clock.leave()            # 100: caller 40 more
    finally:
        time.perf_counter_ns = real
    assert clock.exclusive_ns == {"caller": 50, "aot": 45, "inductor": 5}
    us = clock.exclusive_us()
    assert list(us) == list(layers.LAYERS) and us["tree"] == 0.0 and us["caller"] == 0.05


def test_an_open_layer_is_an_error_not_a_number() -> None:
    clock = layers.LayerClock()
    clock.enter("caller")
    with pytest.raises(RuntimeError, match="still open"):
        clock.exclusive_us()


def _compiled_pointwise():
    def f(x: torch.Tensor) -> torch.Tensor:
        return torch.sin(x) * 2 + x

    return torch.compile(f), f


def test_timing_wraps_dynamos_function_and_inductors_call_then_puts_them_back() -> None:
    from torch._inductor.output_code import CompiledFxGraph

    cf, _ = _compiled_pointwise()
    x = torch.randn(32)
    cf(x)
    before_call = CompiledFxGraph.__dict__["__call__"]
    before_fns = {(id(ns), name): ns[name] for ns, name in layers.compiled_functions()}
    assert before_fns, "Dynamo keeps the compiled function in a module's globals"
    for _ in range(3):  # the first timed call may still do one-time work
        with layers.timing() as clock:
            start = time.perf_counter_ns()
            out = clock.call(cf, x)
            total_us = (time.perf_counter_ns() - start) / 1e3
    torch.testing.assert_close(out, torch.sin(x) * 2 + x)
    us = clock.exclusive_us()
    assert us["caller"] > 0 and us["aot"] > 0 and us["inductor"] > 0
    assert us["tree"] == us["node"] == us["pi"] == 0.0, "no CUDA graph on the CPU"
    assert sum(us.values()) <= total_us, "no microsecond counted twice (the clock's arithmetic: the test above)"
    assert CompiledFxGraph.__dict__["__call__"] is before_call
    assert {(id(ns), name): ns[name] for ns, name in layers.compiled_functions()} == before_fns


def test_graces_per_call_guarantees_are_their_own_layer_and_are_put_back() -> None:
    from grace.grad_copies import AdoptedGrads
    from grace.stale_outputs import StaleOutputGuard

    originals = {m: AdoptedGrads.__dict__[m] for m in ("before_call", "noted")}
    originals["call_ends"] = StaleOutputGuard.__dict__["call_ends"]
    params = [torch.nn.Parameter(torch.randn(4)) for _ in range(3)]
    grads, guard = AdoptedGrads(), StaleOutputGuard(lambda trace: "overwritten")

    class Backward(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *ps):
            return sum(p.sum() for p in ps)

        @staticmethod
        def backward(ctx, g):
            outs = tuple(torch.ones(4) for _ in params)
            grads.noted(outs)
            return outs

    def step() -> None:
        grads.before_call()
        guard.call_ends()
        Backward.apply(*params).backward()

    with layers.timing() as clock:
        clock.call(step)
    assert grads.noted_leaves == len(params), "the wrapped methods still do their work"
    assert clock.exclusive_us()["guards"] > 0
    assert {m: AdoptedGrads.__dict__[m] for m in ("before_call", "noted")} == \
        {m: originals[m] for m in ("before_call", "noted")}
    assert StaleOutputGuard.__dict__["call_ends"] is originals["call_ends"]


def test_a_case_splits_one_iterations_host_time_by_layer() -> None:
    from grace.bench.worker import Case

    case = Case(get("micro-mlp2"), MODES["pt2-nocg"], "cpu", 4, "tiny")
    case.warm_up(2)
    us = case.layered(0)
    assert set(us) == set(layers.LAYERS)
    assert us["caller"] > 0 and us["aot"] > 0 and us["inductor"] > 0


@pytest.mark.slow
def test_a_run_with_layers_writes_each_layers_median_and_the_host_time(tmp_path: Path) -> None:
    settings = Settings(experiment="cpu_test", run_id="r1", repeat=4, chunk=2, timeout_s=240.0, device="cpu",
                        size="tiny", results_dir=tmp_path, worker=WorkerOptions(warmup=2, layers=True))
    out = run(settings, [Target(get("micro-mlp2"), 4)], parse_modes("pt2-nocg"))
    (row,) = [json.loads(line) for line in (out / "rows.jsonl").read_text().splitlines()]
    assert row["status"] == "ok", row["error"]
    assert set(row["layers_us"]) == set(layers.LAYERS) and row["layers_us"]["inductor"] > 0
    assert row["host_us"]["median"] >= row["layers_us"]["inductor"]
    assert row["round_phases_s"]["layers"] > 0 and set(row["round_phases_s"]) >= {"rewarm", "timed", "check"}


class _FakeWorker:
    """A worker's side of the layer phase's protocol, recorded."""

    def __init__(self, name: str, samples_us: list[float], fails: bool = False) -> None:
        self.name, self.samples, self.fails = name, samples_us, fails
        self.sent: list[dict] = []
        self.layer_samples: list[dict] = []
        self.phase_s: dict[str, float] = {}
        self.deadline, self.limit = 0.0, ""

    def send(self, message: dict) -> None:
        self.sent.append(message)

    def receive(self, expected: str) -> dict:
        from grace.bench.runner import WorkerFailed

        if self.fails:
            raise WorkerFailed("worker exited")
        assert expected == "layers"
        return {"event": "layers", "layers_us": [{"caller": 1.0} for _ in self.sent[-1]["samples"]], "seconds": 0.5}


def test_the_layer_phase_asks_each_mode_once_for_every_timed_sample_and_fails_only_its_worker() -> None:
    from grace.bench.runner import _measure_layers, layer_phase_s

    ok, broken = _FakeWorker("pt2-cg", [100.0, 300.0]), _FakeWorker("grace", [200.0], fails=True)
    live = [ok, broken]
    failed: list[tuple[str, str]] = []

    def fail(worker, reason: str) -> None:
        failed.append((worker.name, reason))
        live.remove(worker)

    _measure_layers(live, [0, 1, 2, 3], fail, limit_s=60.0)
    assert ok.sent == [{"cmd": "layers", "samples": [0, 1, 2, 3]}] and len(ok.layer_samples) == 4
    assert ok.phase_s == {"layers": 0.5}
    assert time.monotonic() + 50 < ok.deadline <= time.monotonic() + 60, "its own per-case limit, from now"
    assert failed == [("grace", "worker exited")] and live == [ok]
    # each sample costs the warm calls and the measured one, at the median timed iteration
    assert layer_phase_s([ok], 10) == pytest.approx((layers.WARM_CALLS + 1) * 200e-6 * 10)
    assert layer_phase_s([_FakeWorker("none yet", [])], 10) == 0.0


def _row(workload: str, mode: str, layer_us: dict[str, float], gpu: float | None, it: float,
         status: str = "ok") -> dict:
    full = {layer: layer_us.get(layer, 0.0) for layer in layers.LAYERS}
    return {"workload": workload, "mode": mode, "status": status, "layers_us": full,
            "host_us": {"median": sum(full.values())}, "gpu_us": None if gpu is None else {"median": gpu},
            "iter_us": {"median": it}}


def test_the_replay_map_reports_layers_host_device_and_the_gap(tmp_path: Path) -> None:
    from grace.report import replay_map
    from grace.report.__main__ import main

    rows = [_row("micro-eos", "grace", {"caller": 30, "aot": 20, "inductor": 10, "tree": 40, "pi": 8, "launch": 7},
                 gpu=9.0, it=130.0),
            _row("micro-eos", "pt2-nocg", {"caller": 30, "aot": 20, "inductor": 40, "launch": 10}, gpu=8.0, it=101.0),
            _row("micro-eos", "pt2-cg", {"caller": 30, "tree": 60}, gpu=None, it=95.0),
            _row("ALNET", "pt2-cg", {"caller": 1}, gpu=1.0, it=2.0, status="mismatch"),
            {"workload": "ALNET", "mode": "pt2-nocg", "status": "ok", "layers_us": None}]
    recs = replay_map.records(rows)
    assert [(r["workload"], r["mode"]) for r in recs] == [
        ("micro-eos", "pt2-nocg"), ("micro-eos", "pt2-cg"), ("micro-eos", "grace")], "ok rows with layers, in mode order"
    grace = recs[2]
    assert (grace["host_us"], grace["device_us"], grace["iter_us"]) == (115.0, 9.0, 130.0)
    assert grace["gap_us"] == 15.0 and grace["iter_over_device"] == round(130 / 9, 3)
    assert recs[1]["device_us"] is None and recs[1]["gap_us"] is None
    assert replay_map.overhead(recs)[0] == {"workload": "micro-eos", "mode": "pt2-nocg", "host_us": 100.0,
                                            "device_us": 8.0, "iter_us": 101.0}
    run = tmp_path / "results" / "raw" / "replay_map" / "r1"
    run.mkdir(parents=True)
    (run / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["replay-map", "--experiment", "replay_map", "--run-id", "r1", "--results-dir",
                 str(tmp_path / "results"), "--figures-dir", str(tmp_path / "figures")]) == 0
    header = (tmp_path / "results" / "processed" / "replay_overhead.csv").read_text().splitlines()[0]
    assert header == "workload,mode,host_us,device_us,iter_us"
    assert (tmp_path / "figures" / "replay_overhead.png").stat().st_size > 0
    table = (tmp_path / "results" / "processed" / "replay_overhead.md").read_text().splitlines()
    assert table[2] == "| workload | PT2-NoCG | PT2-CG | GraCE |"
    assert table[4] == "| micro-eos | 100 / 101 / 8 (12.62x) | 90 / 95 / - | 115 / 130 / 9 (14.44x) |", \
        "host / iteration / device (iteration over device); no device time: a dash, no ratio"


def test_every_wrapped_entry_exists_where_its_layer_looks_for_it() -> None:
    """A renamed method would silently leave its time in the enclosing layer: each entry must
    resolve, except Triton's, which a CPU-only install may lack."""
    import importlib

    from grace.bench.layers import METHODS

    for layer, module_name, cls_name, attr in METHODS:
        if module_name.startswith("torch._inductor.runtime"):
            continue
        owner = getattr(importlib.import_module(module_name), cls_name)
        assert attr in owner.__dict__, f"{layer}: {module_name}.{cls_name}.{attr} not found"


def test_a_reset_clock_counts_only_what_follows() -> None:
    clock = layers.LayerClock()
    clock.call(time.sleep, 0.002)
    clock.reset()
    assert clock.exclusive_us()["caller"] == 0.0
    clock.enter("caller")
    with pytest.raises(RuntimeError, match="still open"):
        clock.reset()
    clock.leave()

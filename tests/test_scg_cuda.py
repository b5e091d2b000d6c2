"""SCG inside real CUDA graph trees (needs a GPU and GraCE's overlay; skips otherwise).

Decisions are forced where a test needs a particular mix (``tree_hook.decide`` is replaced), so
what is asserted is behaviour, never timing: outputs equal eager with inputs changing every call
and freed after capture, the tree holds exactly the graphs that were kept, training pairs
forward and backward graphs correctly, the cache answers the second run, and a failed profile
falls back to stock behaviour.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any, Iterator

import pytest

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def _overlay_active() -> bool:
    from torch._inductor import cudagraph_trees

    return "grace_no_graph_functions" in inspect.getsource(cudagraph_trees)


@pytest.fixture
def scg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    if not _overlay_active():
        pytest.skip("GraCE's overlay is not active in this interpreter (run `make setup`)")
    import torch._dynamo
    from torch._inductor import cudagraph_trees

    import grace.config
    from grace.scg import report, tree_hook

    monkeypatch.setenv("GRACE_SCG_CACHE_DIR", str(tmp_path / "scg-cache"))
    monkeypatch.setenv("GRACE_SCG_REPORT", str(tmp_path / "report.json"))
    torch._dynamo.reset()
    cudagraph_trees.reset_cudagraph_trees()
    report.reset()
    with grace.config.patch(scg=True, scg_warmup=2, scg_rounds=2, scg_calls=2):
        yield tree_hook
    torch._dynamo.reset()
    cudagraph_trees.reset_cudagraph_trees()
    report.reset()


def _force(monkeypatch: pytest.MonkeyPatch, tree_hook: Any, pattern: list[str]) -> None:
    """Decide the n-th profiled candidate as ``pattern[n % len(pattern)]``."""
    from grace.scg.choose import Choice, Decision

    calls = iter(range(10_000))

    def forced(samples: dict, margin: float = 0.0) -> Decision:
        choice = Choice(pattern[next(calls) % len(pattern)])
        medians = {c: 1.0 for c in samples}
        return Decision(choice, medians, f"forced {choice.value} by the test")

    monkeypatch.setattr(tree_hook, "decide", forced)


@torch.library.custom_op("grace_test::host_step", mutates_args=(), tags=(torch._C.Tag.cudagraph_unsafe,))
def host_step(x: torch.Tensor) -> torch.Tensor:
    """An op Inductor must leave out of CUDA graphs: the graph is partitioned around it."""
    return x * 2.0


@host_step.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


host_step.register_autograd(lambda ctx, grad: host_step(grad))


class Split(torch.nn.Module):
    """Linear layers separated by a cudagraph-unsafe op: several partitions, forward and backward."""

    def __init__(self, width: int = 64) -> None:
        super().__init__()
        self.first = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.ReLU(), torch.nn.Linear(width, width))
        self.second = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.Tanh())
        self.third = torch.nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = host_step(self.first(x))
        h = host_step(self.second(h))
        return self.third(h)


def _tree() -> Any:
    from torch._inductor import cudagraph_trees

    return cudagraph_trees.get_manager(torch.cuda.current_device(), create_if_none_exists=False)


def _graphs_in_tree() -> int:
    manager = _tree()
    if manager is None:
        return 0
    stack = [n for nodes in manager.roots.values() for n in nodes]
    total = 0
    while stack:
        node = stack.pop()
        total += 1
        stack.extend(c for children in node.children.values() for c in children)
    return total


def _models() -> tuple[torch.nn.Module, torch.nn.Module]:
    import copy

    torch.manual_seed(0)
    model = Split().cuda()
    return model, copy.deepcopy(model)


def test_mixed_decisions_inference_match_eager(scg: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from grace.scg import report

    _force(monkeypatch, scg, ["no-graph", "graph"])
    model, reference = _models()
    compiled = torch.compile(model.eval(), mode="reduce-overhead")
    with torch.no_grad():
        for step in range(8):
            x = torch.randn(32, 64, device="cuda") * (step + 1)  # a fresh tensor every call
            out = compiled(x)
            torch.testing.assert_close(out, reference.eval()(x), rtol=1e-4, atol=1e-4)
            del x  # the input of a captured call is freed before the next one
    records = report.records()
    assert len(records) >= 3, "the cudagraph-unsafe op should split the graph into partitions"
    kept = [r for r in records if r.choice == "graph"]
    dropped = [r for r in records if r.choice == "no-graph"]
    assert kept and dropped
    assert _graphs_in_tree() == len(kept)
    assert len(_tree().grace_no_graph_functions) == len(dropped)
    assert all(r.source == "profiled" and r.kernels for r in records)


@pytest.mark.parametrize("pattern", [None, ["graph"], ["no-graph"], ["graph", "no-graph", "no-graph"],
                                     ["no-graph", "graph"]], ids=["scg-off", "all-graph", "no-graph", "mixed-a", "mixed-b"])
def test_decisions_in_training_match_eager(scg: Any, monkeypatch: pytest.MonkeyPatch, pattern: list[str] | None) -> None:
    import grace.config
    from grace.scg import report

    if pattern:
        _force(monkeypatch, scg, pattern)
    model, reference = _models()
    compiled = torch.compile(model.train(), mode="reduce-overhead")
    with grace.config.patch(scg=pattern is not None):
        for step in range(6):
            x = torch.randn(16, 64, device="cuda") + step
            for m in (model, reference):
                m.zero_grad(set_to_none=True)
            loss = compiled(x).square().mean()
            loss.backward()
            ref_loss = reference.train()(x).square().mean()
            ref_loss.backward()
            torch.testing.assert_close(loss, ref_loss, rtol=1e-4, atol=1e-5, msg=lambda m: f"step {step}: {m}")
            for (name, p), q in zip(model.named_parameters(), reference.parameters()):
                torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5,
                                           msg=lambda m: f"step {step}, grad of {name}: {m}")
    if pattern is None:
        assert report.records() == []
        return
    records = report.records()
    assert {r.mode for r in records} == {"forward", "backward"}
    forward = [r for r in records if r.mode == "forward"]
    backward = [r for r in records if r.mode == "backward"]
    assert all(r.source == "rule" and r.choice == "graph" for r in forward)
    assert {r.choice for r in backward} == set(pattern[:len(backward)])
    assert _graphs_in_tree() == sum(r.choice == "graph" for r in records)  # nothing recorded twice


def test_second_run_reads_the_cache_and_does_not_profile(scg: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch._dynamo
    from torch._inductor import cudagraph_trees

    from grace.scg import report

    _force(monkeypatch, scg, ["no-graph", "graph"])
    model, reference = _models()
    x = torch.randn(8, 64, device="cuda")
    with torch.no_grad():
        for _ in range(3):
            torch.compile(model.eval(), mode="reduce-overhead")(x)
    first = [(r.name, r.choice) for r in report.records()]
    assert first and all(r.source == "profiled" for r in report.records())

    torch._dynamo.reset()
    cudagraph_trees.reset_cudagraph_trees()
    report.reset()

    def no_profiling(*args: object, **kwargs: object) -> None:
        raise AssertionError("the second run profiled")

    monkeypatch.setattr(scg, "_profile", no_profiling)
    compiled = torch.compile(model.eval(), mode="reduce-overhead")
    with torch.no_grad():
        for step in range(3):
            y = torch.randn(8, 64, device="cuda") - step
            torch.testing.assert_close(compiled(y), reference.eval()(y), rtol=1e-4, atol=1e-4)
    assert [(r.name, r.choice) for r in report.records()] == first
    assert all(r.source == "cache" for r in report.records())


def test_failed_profile_falls_back_to_the_graph(scg: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from grace.scg import report

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("simulated profiler failure")

    monkeypatch.setattr(scg, "_profile", broken)
    model, reference = _models()
    compiled = torch.compile(model.eval(), mode="reduce-overhead")
    with torch.no_grad():
        for step in range(3):
            x = torch.randn(4, 64, device="cuda") * step
            torch.testing.assert_close(compiled(x), reference.eval()(x), rtol=1e-4, atol=1e-4)
    records = report.records()
    assert records and all(r.source == "fallback" and r.choice == "graph" for r in records)
    assert "simulated profiler failure" in records[0].reason
    assert _graphs_in_tree() == len(records)


def test_real_profile_times_both_choices_and_keeps_outputs_right(scg: Any) -> None:
    """An EOS-like elementwise graph, profiled for real; the choice itself is not asserted."""
    import grace.config
    from grace.bench.workloads import get
    from grace.scg import report

    workload = get("micro-eos")
    torch.manual_seed(0)
    model = workload.build("cuda", 4096, "tiny")
    compiled = torch.compile(model, mode="reduce-overhead")
    with torch.no_grad():
        for sample in range(4):
            inputs = workload.inputs(model, sample, "cuda", 4096, "tiny")
            torch.testing.assert_close(compiled(*inputs), model(*inputs))
    records = report.records()
    timed = {"no-graph", "graph", "graph-pi"} if grace.config.pi else {"no-graph", "graph"}
    assert records and all(set(r.medians_us) == timed for r in records), \
        "each choice is timed; graph-pi where PI is on (EOS's inputs are read by Triton kernels only)"
    assert all(r.copied_bytes > 0 for r in records)  # EOS's inputs are copied before each replay


def test_scg_measures_each_pi_strategy_and_the_graph_records_with_the_chosen_one(scg: Any) -> None:
    """With several PI strategies to profile, each is timed as a choice on a private tree, and
    the graph recorded in the real tree uses the strategy decided (or none); outputs stay right."""
    import grace.config
    from grace import trees
    from grace.bench.workloads import get
    from grace.pi import report as pi_report
    from grace.scg import report
    from grace.scg.choose import PI_STRATEGY, Choice

    pi_report.reset()
    if not grace.config.pi:
        pytest.skip("PI is off here")
    workload = get("micro-eos")
    torch.manual_seed(0)
    model = workload.build("cuda", 4096, "tiny")
    with grace.config.patch(scg_pi_strategies="ptx,prelude,exec-update"):
        compiled = torch.compile(model, mode="reduce-overhead")
        with torch.no_grad():
            for sample in range(4):
                inputs = workload.inputs(model, sample, "cuda", 4096, "tiny")
                torch.testing.assert_close(compiled(*inputs), model(*inputs))
    (record,) = report.records()
    assert set(record.medians_us) == {"no-graph", "graph", "graph-pi", "graph-pi-prelude", "graph-pi-exec-update"}, \
        "every strategy indirects EOS's inputs, so each is timed"
    nodes = trees.nodes(_tree())
    if record.choice == "no-graph":
        assert nodes == []
        return
    (node,) = nodes
    chosen = Choice(record.choice)
    if chosen in PI_STRATEGY:
        assert node.grace_pi is not None and node.grace_pi.plan.indirected
        (deployed,) = pi_report.records()  # the profile's own recordings are not reported
        assert deployed.strategy == PI_STRATEGY[chosen], (deployed.strategy, chosen)
    else:
        assert node.grace_pi is None, "the graph without PI was faster: recorded with copies"


def test_switch_off_is_stock(scg: Any) -> None:
    import grace.config
    from grace.scg import report

    model, reference = _models()
    with grace.config.patch(scg=False), torch.no_grad():
        compiled = torch.compile(model.eval(), mode="reduce-overhead")
        for step in range(3):
            x = torch.randn(4, 64, device="cuda") + step
            torch.testing.assert_close(compiled(x), reference.eval()(x), rtol=1e-4, atol=1e-4)
    assert report.records() == []
    assert len(_tree().grace_no_graph_functions) == 0 and _graphs_in_tree() >= 2


def test_profile_gives_its_private_pools_back(scg: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """After a real profile, no segment of its private trees' pools is still reserved."""
    from torch._inductor import cudagraph_trees

    from grace.bench.workloads import get
    from grace.pi import report as pi_report
    from grace.scg import report

    profiling, private_pools = [False], []

    class Noted(cudagraph_trees.CUDAGraphTreeManager):  # notes the pools of the profile's trees
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            if profiling[0]:
                private_pools.append(tuple(self.cuda_graphs_thread_pool))

    def noting(*args: Any, **kwargs: Any) -> Any:
        profiling[0] = True
        try:
            return profile(*args, **kwargs)
        finally:
            profiling[0] = False

    profile = scg._profile
    pi_report.reset()
    monkeypatch.setattr(cudagraph_trees, "CUDAGraphTreeManager", Noted)
    monkeypatch.setattr(scg, "_profile", noting)
    workload = get("micro-eos")
    model = workload.build("cuda", 1 << 16, "full")
    compiled = torch.compile(model, mode="reduce-overhead")
    with torch.no_grad():
        for sample in range(3):
            inputs = workload.inputs(model, sample, "cuda", 1 << 16, "full")
            torch.testing.assert_close(compiled(*inputs), model(*inputs))
    (record,) = report.records()
    assert record.source == "profiled" and {"graph", "graph-pi"} <= set(record.medians_us), \
        "both graph choices were recorded and timed"
    assert len(private_pools) == 2, "one private tree per graph choice"
    assert len(pi_report.records()) == (record.choice != "no-graph"), \
        "Table 3 counts the deployed graph only, not the profile's"
    left = [(tuple(seg["segment_pool_id"]), seg["total_size"]) for seg in torch.cuda.memory_snapshot()
            if tuple(seg.get("segment_pool_id", (0, 0))) in private_pools]
    assert left == [], f"segments of the profile's private pools are still reserved: {left}"


def test_a_function_kept_out_from_an_executing_path_leaves_the_tree_able_to_record(
        scg: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A keep-out decided at the recording point of an executing path: the tree must not have
    moved its allocator to a recording's state first (with no node made after it, the next
    recording's restore would fail in ``_cuda_setCheckpointPoolState``, "Not expecting deleter
    function"). f is recorded and replayed, F kept out from f's path, then g recorded there."""
    def f(x: Any) -> Any:
        return torch.sin(x) + 1

    def big_f(x: Any) -> Any:
        return torch.cos(x) * 3

    def g(x: Any) -> Any:
        return x * x - 2

    _force(monkeypatch, scg, ["graph", "no-graph", "graph"])  # f, then F, then g, in that order
    cf, cbig, cg = (torch.compile(fn, mode="reduce-overhead") for fn in (f, big_f, g))
    x = torch.randn(1 << 12, device="cuda")
    for fn, c in ((f, cf), (big_f, cbig), (g, cg)):  # every first call is a warm-up
        torch.compiler.cudagraph_mark_step_begin()
        torch.testing.assert_close(c(x), fn(x))
    for step in range(3):  # f records, then replays: the path executes
        torch.compiler.cudagraph_mark_step_begin()
        y = cf(x)
        torch.testing.assert_close(y, f(x), msg=f"f, call {step}")
    torch.testing.assert_close(cbig(y), big_f(y))  # F: decided at the recording point, kept out
    torch.testing.assert_close(cg(y), g(y))  # g: a new recording from f's path
    for step in range(3):
        torch.compiler.cudagraph_mark_step_begin()
        a = torch.randn(1 << 12, device="cuda")
        out = cf(a)
        torch.testing.assert_close(cbig(out), big_f(f(a)), msg=f"F, call {step}")
        torch.testing.assert_close(cg(out), g(f(a)), msg=f"g, call {step}")


def test_a_training_backward_reading_saved_philox_state_is_never_profiled_outside_its_capture(
        tmp_path: Path) -> None:
    """Attention with dropout saves a philox seed that a captured forward keeps on the device;
    SCG's profile of the backward without a graph would dereference it on the host (DGPT2's
    GraCE workers died with SIGSEGV that way). Such a backward keeps its graph by rule. In its
    own process, so a crash fails the test."""
    import json
    import os
    import subprocess
    import sys

    from grace.paths import REPO_ROOT

    if not _overlay_active():
        pytest.skip("GraCE's overlay is not active in this interpreter (run `make setup`)")
    report = tmp_path / "report.json"
    proc = subprocess.run([sys.executable, str(REPO_ROOT / "scripts/probes/rng_training.py"), "--case",
                           "sdpa-dropout-scg"], capture_output=True, text=True, cwd=REPO_ROOT, timeout=600,
                          env={**os.environ, "GRACE_LOGS": "info", "GRACE_SCG_REPORT": str(report),
                               "GRACE_SCG_CACHE_DIR": str(tmp_path / "scg-cache")})
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "step 4 loss" in out, out[-3000:]
    reasons = [g["reason"] for g in json.loads(report.read_text())["graphs"] if g["mode"] == "backward"]
    assert reasons and any("random-number state" in r for r in reasons), reasons

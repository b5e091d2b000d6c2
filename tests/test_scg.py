"""SCG's decision rule and decision cache (the parts that need no GPU)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from grace.scg import cache
from grace.scg.choose import Choice, decide, schedule

G, N, P = Choice.GRAPH, Choice.NO_GRAPH, Choice.GRAPH_PI


def test_fastest_choice_wins_by_median() -> None:
    decision = decide({N: [39, 40, 41, 500], G: [78, 79, 80, 81], P: [60, 61, 59, 62]})
    assert decision.choice is N  # one outlier does not move a median
    assert decision.medians_us[N] == pytest.approx(40.5)
    assert "no-graph" in decision.reason


def test_ties_within_margin_keep_stocks_graph_then_the_simpler_pi() -> None:
    assert decide({N: [98.0], G: [100.0]}, margin=0.03).choice is G, "no graph must win by the margin"
    assert decide({N: [96.0], G: [100.0]}, margin=0.03).choice is N
    assert decide({N: [100.0], G: [98.0]}, margin=0.03).choice is G
    assert decide({G: [100.0], P: [98.5]}, margin=0.03).choice is G
    assert decide({N: [100.0], G: [50.0], P: [49.0]}, margin=0.03).choice is G
    assert decide({N: [100.0], G: [50.0], P: [40.0]}, margin=0.03).choice is P


def test_decide_rejects_empty_input() -> None:
    with pytest.raises(ValueError):
        decide({})
    with pytest.raises(ValueError):
        decide({N: []})
    with pytest.raises(ValueError):
        decide({N: [1.0]}, margin=1.5)


def test_schedule_interleaves_and_rotates() -> None:
    order = schedule([P, G, N], trials=3)
    assert order == [N, G, P, G, P, N, P, N, G]
    assert schedule([G], trials=2) == [G, G]


def _key(**changes: object) -> cache.DecisionKey:
    fields = dict(code_sha256="ab" * 32, inputs=(((1024,), "torch.float64", (1,), "copied"),), gpu="NVIDIA H100 80GB HBM3",
                  driver="580.159.04", torch="2.11.0+cu130", triton="3.6.0", grace="0.1.0")
    fields.update(changes)
    return cache.DecisionKey(**fields)  # type: ignore[arg-type]


def test_store_then_load_round_trips(tmp_path: Path) -> None:
    decision = decide({N: [40.0], G: [78.0]})
    path = cache.store(_key(), decision, tmp_path)
    assert path is not None and path.parent == tmp_path
    loaded = cache.load(_key(), tmp_path)
    assert loaded is not None and loaded.choice is N and loaded.medians_us == decision.medians_us
    assert loaded.reason.endswith("[cached]")


@pytest.mark.parametrize("change", [
    {"code_sha256": "cd" * 32}, {"inputs": (((2048,), "torch.float64", (1,), "copied"),)},
    {"inputs": (((1024,), "torch.float64", (1,), "static"),)},
    {"inputs": (((1024,), "torch.float32", (1,), "copied"),)}, {"inputs": (((1024,), "torch.float64", (2,), "copied"),)},
    {"gpu": "NVIDIA H200"}, {"driver": "575.57.08"}, {"torch": "2.10.0"}, {"triton": "3.5.0"}, {"grace": "0.2.0"},
])
def test_every_key_field_matters(tmp_path: Path, change: dict) -> None:
    cache.store(_key(), decide({N: [40.0], G: [78.0]}), tmp_path)
    assert cache.load(_key(**change), tmp_path) is None


def test_corrupt_and_foreign_files_are_ignored_with_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    key = _key()
    path = cache.store(key, decide({N: [40.0], G: [78.0]}), tmp_path)
    logger = logging.getLogger("grace.scg")  # the grace logger does not propagate to root
    logger.addHandler(caplog.handler)
    try:
        path.write_text(path.read_text()[:20])
        assert cache.load(key, tmp_path) is None
        assert "unreadable" in caplog.text
        foreign = {"format": cache.FORMAT, "key": _key(gpu="other").as_json(), "choice": "graph",
                   "medians_us": {"graph": 1.0}, "reason": "x"}
        path.write_text(json.dumps(foreign))
        caplog.clear()
        assert cache.load(key, tmp_path) is None
        assert "another graph, machine or version" in caplog.text
        path.write_text(json.dumps({"format": cache.FORMAT, "key": key.as_json(), "choice": "sometimes"}))
        assert cache.load(key, tmp_path) is None
    finally:
        logger.removeHandler(caplog.handler)


def test_cache_can_be_turned_off_and_cleared(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache.store(_key(), decide({N: [40.0]}), tmp_path)
    monkeypatch.setenv("GRACE_SCG_CACHE", "0")
    assert cache.load(_key(), tmp_path) is None
    assert cache.store(_key(), decide({N: [40.0]}), tmp_path) is None
    monkeypatch.delenv("GRACE_SCG_CACHE")
    assert len(cache.entries(tmp_path)) == 1
    assert cache.clear(tmp_path) == 1 and cache.entries(tmp_path) == []


def test_cli_cache_clear(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    from grace.cli import main

    monkeypatch.setenv("GRACE_CACHE_DIR", str(tmp_path))
    cache.store(_key(), decide({N: [40.0]}))
    assert main(["cache", "list"]) == 0 and "1 SCG decision(s)" in capsys.readouterr().out
    assert main(["cache", "clear"]) == 0 and "removed 1" in capsys.readouterr().out
    assert cache.entries() == []


# --- candidates: what SCG reads from Inductor's generated code -------------------------------

GENERATED = '''
# kernel path: /tmp/torchinductor_a/xy/cxyz.py
triton_poi_fused_mul_relu_0 = async_compile.triton('triton_poi_fused_mul_relu_0', """...""")

def partition_0(args):
    primals_1, primals_2, primals_3 = args
    args.clear()
    with torch.cuda._DeviceGuard(0):
        buf0 = empty_strided_cuda((16, 64), (64, 1), torch.float32)
        extern_kernels.addmm(primals_2, primals_3, reinterpret_tensor(primals_1, (64, 64), (1, 64), 0), alpha=1, beta=1, out=buf0)
        stream0 = get_raw_stream(0)
        triton_poi_fused_mul_relu_0.run(buf0, 1024, stream=stream0)
        buf1 = torch.ops.aten._scaled_dot_product_efficient_attention.default(buf0, buf0, buf0, None, False)
        triton_poi_fused_mul_relu_0.run(buf0, 1024, stream=stream0)
    return (buf0, )
'''


def test_kernels_called_in_launch_order_without_repeats() -> None:
    from grace.scg.candidate import kernels_called

    assert kernels_called(GENERATED) == ("addmm", "triton_poi_fused_mul_relu_0",
                                         "aten._scaled_dot_product_efficient_attention")


def test_code_digest_ignores_cache_paths_but_not_code_or_function() -> None:
    from grace.scg.candidate import code_digest

    moved = GENERATED.replace("/tmp/torchinductor_a/xy/cxyz.py", "/home/u/.cache/ind/xy/cxyz.py")
    assert code_digest(GENERATED, "partition_0") == code_digest(moved, "partition_0")
    assert code_digest(GENERATED, "partition_0") != code_digest(GENERATED, "partition_1")
    assert code_digest(GENERATED, "partition_0") != code_digest(GENERATED.replace("1024", "2048"), "partition_0")


def test_describe_assigns_input_roles_and_copied_bytes(tmp_path: Path) -> None:
    import importlib.util

    import torch

    from grace.scg.candidate import describe

    module_file = tmp_path / "generated.py"
    module_file.write_text("import torch\n\ndef _triton(*a):\n    return a\n" + GENERATED.replace("async_compile.triton", "_triton"))
    spec = importlib.util.spec_from_file_location("generated_for_test", module_file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    managed = torch.zeros(3)
    inputs = [torch.zeros(16, 64), torch.zeros(64), managed, 7]
    cand = describe(module.partition_0, "forward", inputs, static_input_idxs=[1],
                    is_managed=lambda t: t is managed)
    assert cand.name == "partition_0" and cand.mode == "forward"
    assert [i.role for i in cand.inputs] == ["copied", "static", "managed", "scalar"]
    assert cand.copied_bytes == 16 * 64 * 4 and cand.copied_inputs == 1
    assert cand.code_sha256 is not None and "addmm" in cand.kernels
    assert describe(len, "inference", [], [], lambda t: False).code_sha256 is None  # a builtin: no source


# --- profiling: interleaved, synchronized, warm-up untimed ----------------------------------

def test_time_choices_interleaves_and_times_each_call() -> None:
    from grace.scg.profile import ProfileSettings, time_choices

    now = [0.0]
    trace: list[str] = []
    cost = {N: 40e-6, G: 80e-6}

    def runner(choice: Choice):
        def run() -> None:
            trace.append(choice.value)
            now[0] += cost[choice]
        return run

    syncs = []
    samples = time_choices({G: runner(G), N: runner(N)}, sync=lambda: syncs.append(1),
                           settings=ProfileSettings(warmup=2, rounds=2, calls=3), clock=lambda: now[0])
    assert samples[N] == pytest.approx([40.0] * 6) and samples[G] == pytest.approx([80.0] * 6)
    timed = trace[4:]  # after two untimed calls of each
    assert timed == ["no-graph"] * 3 + ["graph"] * 3 + ["graph"] * 3 + ["no-graph"] * 3
    assert len(syncs) == 2 * 12  # before and after every timed call
    assert decide(samples).choice is N


def test_profile_settings_are_validated() -> None:
    from grace.scg.profile import ProfileSettings

    with pytest.raises(ValueError):
        ProfileSettings(warmup=1)  # a graph records on its second call: it must not be timed
    with pytest.raises(ValueError):
        ProfileSettings(rounds=0)


# --- the report (Table 4) --------------------------------------------------------------------

def _rec(name: str, choice: str, source: str = "profiled", **kw: object):
    from grace.scg.report import GraphRecord

    return GraphRecord(name=name, mode="inference", kernels=["k0", "k1"], copied_inputs=1, copied_bytes=8192,
                       choice=choice, source=source, reason="r", medians_us={"no-graph": 40.0, "graph": 78.0},
                       profile_s=0.5, **kw)


def test_report_summarizes_writes_and_reloads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from grace.scg import report

    target = tmp_path / "sub" / "scg.json"
    monkeypatch.setenv("GRACE_SCG_REPORT", str(target))
    report.reset()
    try:
        report.add(_rec("partition_0", "no-graph"))
        report.add(_rec("partition_1", "graph", source="cache"))
        report.add(_rec("partition_2", "graph", source="fallback"))
        summary = json.loads(target.read_text())["summary"]
        assert summary == {"total": 3, "enabled": 2, "disabled": 1, "with_pi": 0, "profiled": 1,
                           "from_cache": 1, "by_rule": 0, "fallbacks": 1, "profile_s": 1.5}
        assert [r.name for r in report.load(target)] == ["partition_0", "partition_1", "partition_2"]
        table = report.format_table(report.records())
        assert "partition_0" in table and "disabled 1" in table and "78.0" in table
        with pytest.raises(ValueError):
            report.add(_rec("x", "graph", source="guess"))
    finally:
        report.reset()


def test_cli_scg_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    from grace.cli import main
    from grace.scg import report

    monkeypatch.setenv("GRACE_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("GRACE_SCG_REPORT", raising=False)
    assert main(["scg-report"]) == 2 and "no SCG report" in capsys.readouterr().err
    report.reset()
    try:
        report.add(_rec("partition_0", "no-graph"))
        assert main(["scg-report"]) == 0
        out = capsys.readouterr().out
        assert "partition_0" in out and "disabled 1" in out
        bad = tmp_path / "bad.json"
        bad.write_text("{")
        assert main(["scg-report", str(bad)]) == 2
    finally:
        report.reset()


def _generated_runner(tmp_path: Path, name: str, partitions: list[str]) -> Any:
    """A module shaped as Inductor's generated code with graph partitions: ``partition_i``
    returning the expression ``partitions[i]`` of its one input ``x``, and a ``runner`` whose
    ``partitions`` list the generated code calls them through."""
    import importlib.util

    source = "".join(f"def partition_{i}(args):\n    (x,) = args\n    args.clear()\n    return ({e},)\n\n"
                     for i, e in enumerate(partitions))
    source += ("class Runner:\n    def __init__(self, partitions):\n        self.partitions = partitions\n\n"
               f"runner = Runner(partitions=[{', '.join(f'partition_{i}' for i in range(len(partitions)))}])\n")
    module_file = tmp_path / f"{name}.py"
    module_file.write_text(source)
    spec = importlib.util.spec_from_file_location(name, module_file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def test_unwrap_partition_rewires_the_runner_slot(tmp_path: Path) -> None:
    """A kept-out partition is called directly by the generated runner (CPU: no graph needed)."""
    import torch

    from grace.scg.tree_hook import _unwrap_partition

    module = _generated_runner(tmp_path, "gen_runner_for_test", ["x + 1", "x * 2"])
    sentinel = object()
    module.runner.partitions = [sentinel, sentinel]  # as if both were wrapped for CUDA graphs
    x = torch.arange(4.0)
    assert _unwrap_partition(module.partition_1, [x], [], [])
    assert module.runner.partitions[0] is sentinel  # the other partition keeps its graph wrapper
    (out,) = module.runner.partitions[1]([x])
    assert torch.equal(out, x * 2)
    def rewrapped(args: list) -> tuple:  # what a recompile sees after a reset: our wrapper, wrapped again
        return module.partition_0(args)

    rewrapped.__wrapped__ = module.partition_0  # type: ignore[attr-defined]
    assert _unwrap_partition(rewrapped, [x], [], [])
    assert module.runner.partitions[0] is module.partition_0  # CPU inputs: no alignment guard needed
    module.runner.partitions[0] = sentinel
    assert not _unwrap_partition(module.partition_0, [x, 3], [], [])  # a symbolic size: the tree decides
    assert module.runner.partitions[0] is sentinel
    assert not _unwrap_partition(len, [x], [], [])


def test_a_graph_records_with_pi_as_profiled_and_otherwise_with_the_switches_as_they_are() -> None:
    import grace.config
    from grace.scg import tree_hook

    manager = type("Manager", (), {})()  # a weak-referenceable stand-in for the tree
    tree = tree_hook.decisions(manager)
    tree.decided.update({"f_pi": Choice.GRAPH_PI, "f_copy": Choice.GRAPH, "f_rule": Choice.GRAPH})
    tree.pi_measured.update({"f_pi", "f_copy"})
    with grace.config.patch(pi=True):
        with tree_hook.recording_config(manager, "f_pi"):
            assert grace.config.pi
        with tree_hook.recording_config(manager, "f_copy"):
            assert not grace.config.pi, "copying measured faster: record without PI"
        with tree_hook.recording_config(manager, "f_rule"):
            assert grace.config.pi, "not measured: the switch as set"
        assert grace.config.pi
    with grace.config.patch(pi=False), tree_hook.recording_config(manager, "f_pi"):
        assert not grace.config.pi, "a cached PI decision never turns the switch on"


def test_force_graph_turns_a_measured_keep_out_into_the_faster_graph() -> None:
    from grace.scg.choose import Choice, forced

    assert forced(Choice.NO_GRAPH, "") is Choice.NO_GRAPH, "unforced: as measured"
    assert forced(Choice.NO_GRAPH, "graph") is Choice.GRAPH
    assert forced(Choice.NO_GRAPH, "graph", {Choice.GRAPH: 10.0, Choice.GRAPH_PI: 8.0}) is Choice.GRAPH_PI
    assert forced(Choice.NO_GRAPH, "graph", {Choice.GRAPH: 8.0, Choice.GRAPH_PI: 10.0}) is Choice.GRAPH
    assert forced(Choice.GRAPH_PI, "graph") is Choice.GRAPH_PI, "a graph decision stays as measured"
    with pytest.raises(ValueError, match="scg_force='always'"):
        forced(Choice.GRAPH, "always")


def test_the_profile_puts_back_generator_states_and_compile_counters() -> None:
    """Selective activation checkpointing hands the graph its generators; the profile draws from
    them and counts private recordings, and neither may show after it."""
    import torch
    from torch._dynamo.utils import counters

    from grace.scg.tree_hook import _counters_kept, _generator_states

    g = torch.Generator().manual_seed(7)
    expected = torch.rand(4, generator=torch.Generator().manual_seed(7))
    counters["inductor"]["grace_test_counter"] = 1
    with _generator_states([3, g, torch.zeros(1)]), _counters_kept():
        torch.rand(100, generator=g)
        counters["inductor"]["grace_test_counter"] += 5
        counters["grace_test_kind"]["new"] += 1
    assert torch.equal(torch.rand(4, generator=g), expected)
    assert counters["inductor"]["grace_test_counter"] == 1 and "grace_test_kind" not in counters
    del counters["inductor"]["grace_test_counter"]


def test_only_inductor_generated_code_counts_as_generated() -> None:
    import functools
    import types

    from torch._inductor.codecache import PyCodeCache

    from grace.generated import is_inductor_generated

    module = types.ModuleType("grace_test_generated_scg")
    exec("def partition_0(args):\n    return args\n", module.__dict__)
    PyCodeCache.modules.append(module)
    try:
        assert is_inductor_generated(module.partition_0)
        assert is_inductor_generated(functools.partial(module.partition_0))
        assert not is_inductor_generated(lambda args: args)
        assert not is_inductor_generated(print)
    finally:
        PyCodeCache.modules.remove(module)


COLLECTIVE_PARTITION = '''
def partition_0(args):
    arg0_1, = args
    args.clear()
    buf0 = empty_strided_cuda((8, 16), (16, 1), torch.float32)
    triton_poi_fused_mul_0.run(arg0_1, buf0, 128, stream=stream0)
    torch.ops._c10d_functional.all_reduce_.default(buf0, 'sum', '0')
    torch.ops._c10d_functional.wait_tensor.default(buf0)
    return (buf0, )
'''


ATTENTION_BACKWARD_PARTITION = '''
def partition_0(args):
    grad, q, k, v, out, lse, seed, offset = args
    args.clear()
    buf0 = torch.ops.aten._scaled_dot_product_efficient_attention_backward.default(
        grad, q, k, v, None, out, lse, seed, offset, 0.1, [True, True, True, False])
    return (buf0[0], buf0[1], buf0[2])
'''


def _decide_generated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, mode: str, why: str) -> Any:
    """SCG's decision for ``partition_0`` of a generated module with ``source``, as a tree of
    ``mode`` would ask for it, where ``why`` says why that graph must not be profiled."""
    import importlib.util
    import types

    import torch
    from torch._inductor.codecache import PyCodeCache

    from grace.scg import tree_hook

    module_file = tmp_path / f"generated_{mode}.py"
    module_file.write_text("import torch\n" + source)
    spec = importlib.util.spec_from_file_location(f"grace_test_generated_{mode}", module_file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]

    def no_profile(*args: Any) -> Any:
        raise AssertionError(why)

    monkeypatch.setattr(tree_hook, "_profile", no_profile)
    wrapped = types.SimpleNamespace(model=module.partition_0, static_input_idxs=[])
    manager = types.SimpleNamespace(ids_to_funcs={"f": wrapped}, id_to_mode={"f": types.SimpleNamespace(name=mode.upper())},
                                    _get_cuda_graph_recorded_tensor_checker=lambda: (lambda t: False))
    PyCodeCache.modules.append(module)
    try:
        return module, tree_hook._decide(manager, [torch.zeros(8, 16)], "f")
    finally:
        PyCodeCache.modules.remove(module)


def test_a_graph_that_launches_collectives_keeps_its_graph_on_every_rank_unprofiled(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A profile runs a graph's collectives dozens of times on one rank; a peer that took the
    decision from the cache would not run them with it, and both would wait for ever."""
    import torch

    from grace.scg.candidate import describe

    module, record = _decide_generated(tmp_path, monkeypatch, COLLECTIVE_PARTITION, "inference",
                                       "a graph with collectives must not be profiled")
    assert describe(module.partition_0, "inference", [torch.zeros(8, 16)], [], lambda t: False).collectives == (
        "_c10d_functional.all_reduce_", "_c10d_functional.wait_tensor")
    assert record.choice == Choice.GRAPH.value and record.source == "rule"
    assert "all_reduce_" in record.reason and "collectives" in record.reason


def test_a_backward_reading_its_forwards_saved_philox_state_keeps_its_graph_unprofiled(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Attention with dropout saves its philox seed and offset; after a captured forward they are
    device tensors, which the backward run outside a capture reads from the host, and crashes."""
    module, record = _decide_generated(tmp_path, monkeypatch, ATTENTION_BACKWARD_PARTITION, "backward",
                                       "a backward reading saved philox state must not run outside a capture")
    assert record.choice == Choice.GRAPH.value and record.source == "rule"
    assert "aten._scaled_dot_product_efficient_attention_backward" in record.reason
    assert "random-number state" in record.reason


def test_which_operators_read_saved_random_state() -> None:
    import torch

    from grace.random_state import operator_reads_random_state

    for reads in ("aten._scaled_dot_product_efficient_attention_backward", "aten._efficient_attention_backward",
                  "aten._scaled_dot_product_flash_attention_backward", "aten._flash_attention_backward",
                  "aten._scaled_dot_product_cudnn_attention_backward"):
        assert operator_reads_random_state(reads), reads
    for other in ("aten.native_dropout", "aten.native_dropout_backward", "aten.mm",
                  "aten._scaled_dot_product_efficient_attention", "aten.no_such_operator", "no_namespace.op",
                  "_c10d_functional.all_reduce_", "triton_poi_fused_add_0", "mm"):
        assert not operator_reads_random_state(other), other
    assert "triton_poi_fused_add_0" not in vars(torch.ops), "a kernel's name makes no operator namespace"


def test_scg_profiles_the_pi_strategies_it_is_given_and_records_with_the_one_it_chose() -> None:
    import grace.config
    from grace.scg import tree_hook
    from grace.scg.choose import pi_choice

    with grace.config.patch(pi_strategy="ptx", scg_pi_strategies=""):
        assert tree_hook.profiled_strategies() == ("ptx",), "by default the configured strategy alone"
    with grace.config.patch(scg_pi_strategies="prelude, ptx,prelude"):
        assert tree_hook.profiled_strategies() == ("prelude", "ptx")
    with grace.config.patch(scg_pi_strategies="ptx,fast"), pytest.raises(ValueError, match="scg_pi_strategies.*'fast'"):
        tree_hook.profiled_strategies()
    assert pi_choice("exec-update") is Choice.GRAPH_PI_EXEC_UPDATE

    manager = type("Manager", (), {})()
    tree = tree_hook.decisions(manager)
    tree.decided.update({"f_pre": Choice.GRAPH_PI_PRELUDE, "f_exec": Choice.GRAPH_PI_EXEC_UPDATE,
                         "f_copy": Choice.GRAPH})
    tree.pi_measured.update({"f_pre", "f_exec", "f_copy"})
    with grace.config.patch(pi=True, pi_strategy="ptx"):
        with tree_hook.recording_config(manager, "f_pre"):
            assert grace.config.pi and grace.config.pi_strategy == "prelude"
        with tree_hook.recording_config(manager, "f_exec"):
            assert grace.config.pi and grace.config.pi_strategy == "exec-update"
        with tree_hook.recording_config(manager, "f_copy"):
            assert not grace.config.pi
        assert grace.config.pi_strategy == "ptx"


def test_among_pi_strategies_the_simplest_within_the_margin_wins_and_force_takes_the_fastest_graph() -> None:
    from grace.scg.choose import forced

    samples = {G: [100.0] * 3, P: [80.0] * 3, Choice.GRAPH_PI_PRELUDE: [79.0] * 3,
               Choice.GRAPH_PI_EXEC_UPDATE: [60.0] * 3}
    assert decide(samples, margin=0.03).choice is Choice.GRAPH_PI_EXEC_UPDATE
    samples[Choice.GRAPH_PI_EXEC_UPDATE] = [78.5] * 3
    assert decide(samples, margin=0.03).choice is P, "within 3% of ptx: ptx, the simplest PI"
    medians = {G: 10.0, P: 9.0, Choice.GRAPH_PI_PRELUDE: 7.0}
    assert forced(Choice.NO_GRAPH, "graph", medians) is Choice.GRAPH_PI_PRELUDE


def test_decisions_made_with_other_pi_strategies_profiled_are_cached_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    import types

    import torch

    import grace.config
    from grace.scg import tree_hook

    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index: "a GPU")
    monkeypatch.setattr(tree_hook, "_driver_version", lambda: "580")
    candidate = types.SimpleNamespace(code_sha256="abc", inputs=())
    with grace.config.patch(pi=True, pi_strategy="ptx", scg_pi_strategies=""):
        one = tree_hook._cache_key(candidate, 0)
    with grace.config.patch(pi=True, scg_pi_strategies="ptx,prelude"):
        both = tree_hook._cache_key(candidate, 0)
    with grace.config.patch(pi=False, scg_pi_strategies="ptx,prelude"):
        off = tree_hook._cache_key(candidate, 0)
    assert one.grace.endswith("+pi:ptx") and both.grace.endswith("+pi:ptx,prelude")
    assert len({one, both, off}) == 3


def test_an_unwired_backward_partition_tells_its_tree_that_the_backward_runs(tmp_path: Path) -> None:
    """A backward partition kept out and unwired no longer passes through the tree's dispatch,
    which is where a backward clears the forwards' pending state: the direct call does it, as
    stock does for a backward without CUDA graphs, while the tree lives, without keeping it
    alive. A forward's or an inference partition's direct call leaves the tree alone."""
    import gc
    import weakref

    import torch

    from grace.scg.tree_hook import _unwrap_partition

    module = _generated_runner(tmp_path, "gen_backward_runner_for_test", ["x * 3"])

    class Tree:
        def __init__(self) -> None:
            self.running_forwards_with_pending_backwards = True
            self.backwards = 0

        def set_to_running_backward(self) -> None:
            self.running_forwards_with_pending_backwards = False
            self.backwards += 1

    x = torch.arange(4.0)
    tree = Tree()
    assert _unwrap_partition(module.partition_0, [x], [], [])  # not a backward: the tree is not told
    module.runner.partitions[0]([x])
    assert tree.backwards == 0 and tree.running_forwards_with_pending_backwards
    assert _unwrap_partition(module.partition_0, [x], [], [], backward_of=tree)
    (out,) = module.runner.partitions[0]([x])
    assert torch.equal(out, x * 3)
    assert tree.backwards == 1 and not tree.running_forwards_with_pending_backwards
    gone = weakref.ref(tree)
    del tree
    gc.collect()
    assert gone() is None, "the generated module's runner must not keep the tree alive"
    (out,) = module.runner.partitions[0]([x])  # the tree is gone: the partition still runs
    assert torch.equal(out, x * 3)

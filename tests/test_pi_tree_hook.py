"""PI's tree hook on the CPU: placeholders matched by storage, launches redirected to slots,
ATen readers and aliasing outputs keeping copies, and the replay's copies and table values.

The capture itself needs a GPU (tests/test_pi_cuda.py); here the recording runs on CPU tensors
with a stand-in for Triton's autotuner, so each rule is checked on its own.
"""

from __future__ import annotations

import inspect
import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from grace.pi import observe, tree_hook
from grace.pi import variant as variants
from grace.option_values import EXEC_UPDATE, PRELUDE, PTX
from grace.pi.replay import CopyingReplay, PIReplay
from grace.pi.tree_hook import start_recording


def _generated_function() -> Any:
    """A function of a module registered as Inductor's output (PI records only generated code)."""
    import types

    from torch._inductor.codecache import PyCodeCache

    module = types.ModuleType("grace_test_generated")
    exec("def call(args):\n    raise AssertionError('a recording in these tests never runs its model')\n",
         module.__dict__)
    PyCodeCache.modules.append(module)
    return module.call


GENERATED = _generated_function()


def _finish(rec: Any, mutated_input_idxs: Any, node_name: str, node: Any = None, outputs: Any = (),
            model: Any = None, inputs: Any = ()) -> Any:
    """``Recording.finish`` on the record a capture would leave; without a ``model``, the check
    against stock kernels is taken as passed (the test is about planning, not the check)."""
    from unittest import mock

    from grace.pi import finish
    from grace.pi.check import Captured

    captured = Captured(node, node_name, rec.device, outputs, model, inputs, mutated_input_idxs)
    if model is not None:
        return rec.finish(captured)
    with mock.patch.object(finish, "why_untrusted", lambda *args: None):
        return rec.finish(captured)


@dataclass
class FakeVariant:
    calls: list[tuple] = field(default_factory=list)

    def run(self, *args: Any, stream: Any, **kwargs: Any) -> str:
        self.calls.append(args)
        return "variant launched"


def autotuner(name: str = "triton_poi_fused_add_0", mutated: tuple[str, ...] = ()) -> Any:
    signature = {"in_ptr0": "*fp32", "in_ptr1": "*fp32", "out_ptr0": "*fp32", "xnumel": "i32",
                 "XBLOCK": "constexpr"}
    fn = SimpleNamespace(__name__=name, arg_names=list(signature), constexprs=[4],  # XBLOCK: tl.constexpr
                         fn=lambda: None)  # .fn: its module's code
    return SimpleNamespace(fn=fn, triton_meta={"signature": signature, "constants": {}},
                           inductor_meta={"mutated_arg_names": list(mutated)})


LAUNCHER = SimpleNamespace(config=SimpleNamespace(kwargs={"XBLOCK": 128}, num_warps=4, num_stages=1))


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> list[FakeVariant]:
    """Variants "compiled" (stand-ins), with the process-wide variant cache emptied."""
    made: list[FakeVariant] = []

    def build(autotuner: Any, config: Any, names: list[str]) -> FakeVariant:
        made.append(FakeVariant())
        made[-1].names = names  # type: ignore[attr-defined]
        return made[-1]

    monkeypatch.setattr(variants, "indirected_variant", build)
    monkeypatch.setattr(observe, "_VARIANTS", {})
    return made


@pytest.fixture
def recording(built: list[FakeVariant]) -> tuple[Any, list[torch.Tensor], list[FakeVariant]]:
    placeholders = [torch.zeros(64), torch.zeros(16, 4), 7]  # input 2 is an int, never a placeholder
    rec = start_recording("cpu", placeholders, non_static_input_idx=[0, 1, 2], model=GENERATED)
    return rec, placeholders, built


def test_a_launch_reading_placeholders_goes_to_the_variant_with_slot_addresses(recording) -> None:
    rec, (x, y, _), built = recording
    buf = torch.zeros(64)
    view = torch.as_strided(y, (8, 4), (4, 1), storage_offset=32)  # reinterpret_tensor(arg1_1, ..., 32)
    kernel = autotuner()
    assert rec.launch(kernel, LAUNCHER, [x, view, buf, 64], {}, stream=0) == "variant launched"
    (variant,) = built
    assert variant.names == ["in_ptr0", "in_ptr1"]
    ((a0, a1, a2, a3),) = variant.calls
    base = rec.table_storage.data_ptr()
    assert (a0, a1) == (base, base + 8) and a2 is buf and a3 == 64
    assert [(s.input_index, s.offset) for s in rec.slots] == [(0, 0), (1, 32 * 4)]
    rec.launch(kernel, LAUNCHER, [x, view, buf, 64], {}, stream=0)
    assert len(built) == 1, "the variant is built once per kernel, arguments and config"
    assert len(rec.slots) == 4, "each launch gets its own slots"


def test_a_launch_without_placeholders_is_stock(recording) -> None:
    rec, _, built = recording
    other = torch.zeros(64)
    assert rec.launch(autotuner(), LAUNCHER, [other, other, other, 64], {}, stream=0) is NotImplemented
    assert not built and not rec.slots and not rec.blocked


def test_a_matching_address_is_not_enough_storage_identity_decides(recording) -> None:
    rec, (x, _, _), _ = recording
    same_address = torch.tensor([], dtype=torch.float32).set_(x.untyped_storage())  # new tensor, same storage
    assert rec.owner_of(same_address) is not None
    stranger = torch.from_numpy(x.numpy())  # another storage object over the same bytes
    assert stranger.data_ptr() == x.data_ptr() and rec.owner_of(stranger) is None


def test_a_kernel_that_writes_the_input_or_cannot_be_built_leaves_the_input_copied(recording) -> None:
    rec, (x, y, _), _ = recording
    other = torch.zeros(64)
    assert rec.launch(autotuner(mutated=("in_ptr0",)), LAUNCHER, [x, other, other, 64], {}, stream=0) \
        is NotImplemented
    assert list(rec.blocked) == [0] and "writes in_ptr0" in rec.blocked[0][0]

    def broken(*_: Any) -> Any:
        raise RuntimeError("no module source")

    variants.indirected_variant = broken  # the fixture's monkeypatch restores it
    assert rec.launch(autotuner("triton_other_1"), LAUNCHER, [y, y, y, 64], {}, stream=0) is NotImplemented
    assert "no module source" in rec.blocked[1][0]


def test_aten_readers_block_and_views_do_not(recording) -> None:
    rec, (x, y, _), _ = recording
    with rec.active():
        from torch._inductor.runtime import triton_heuristics

        assert triton_heuristics._grace_pi_recording is rec
        x.view(8, 8)[2:]  # views read nothing
        assert not rec.blocked
        torch.mm(y, torch.ones(4, 2))  # an extern kernel reads input 1 itself
    from torch._inductor.runtime import triton_heuristics

    assert triton_heuristics._grace_pi_recording is None
    assert list(rec.blocked) == [1] and "aten.mm" in rec.blocked[1][0]


def _node(placeholders: list[Any]) -> Any:
    node = SimpleNamespace(non_static_input_idx=[0, 1, 2], expanded_dims=[[], [], []],
                           reconstructed_inputs=[p.clone() if isinstance(p, torch.Tensor) else p for p in placeholders],
                           replays=0)
    node.run_graph = lambda: setattr(node, "replays", node.replays + 1)
    return node


def test_finish_indirects_read_only_inputs_and_the_replay_fills_pointers(recording) -> None:
    rec, placeholders, _ = recording
    x, y, _ = placeholders
    rec.launch(autotuner(), LAUNCHER, [x, y[4:], torch.zeros(1), 64], {}, stream=0)  # rows 4.. : 64 bytes in
    node = _node(placeholders)
    ptr0, ptr1 = x.data_ptr(), y.data_ptr()
    placeholders[:2] = [None, None]
    del x, y  # the placeholders gone after the recording, as the tree lets them go
    replay = _finish(rec, mutated_input_idxs=[], node_name="graph 0", node=node).replay
    assert isinstance(replay, PIReplay) and replay.plan.indirected == (0, 1)
    assert rec.table_storage[:2].tolist() == [ptr0, ptr1 + 64], "first replay reads the placeholders"
    a, b = torch.randn(64), torch.randn(16, 4)
    before = node.reconstructed_inputs[0].clone()
    replay.replay(node, [a, b, 7])
    assert node.replays == 1
    assert rec.table_storage[:2].tolist() == [a.data_ptr(), b.data_ptr() + 64]
    assert torch.equal(node.reconstructed_inputs[0], before), "an indirected input is not copied"


def test_guard_failure_copies_that_replay_and_points_its_slot_at_the_placeholder(recording) -> None:
    rec, placeholders, _ = recording
    x, y, _ = placeholders
    rec.launch(autotuner(), LAUNCHER, [x, y, torch.zeros(1), 64], {}, stream=0)
    node = _node(placeholders)
    ptr0 = x.data_ptr()
    placeholders[:2] = [None, None]
    del x, y
    replay = _finish(rec, [], "graph 0", node).replay
    node.reconstructed_inputs[0] = torch.empty(64)  # the copy target stands for the placeholder
    misaligned = torch.randn(65)[1:]  # 4 bytes past an aligned address
    b = torch.randn(16, 4)
    replay.replay(node, [misaligned, b, 7])
    assert torch.equal(node.reconstructed_inputs[0], misaligned), "copied as PT2-CG does"
    assert rec.table_storage[:2].tolist() == [ptr0, b.data_ptr()]


def test_an_output_aliasing_a_placeholder_or_a_mutated_input_keeps_the_copy(recording) -> None:
    rec, placeholders, _ = recording
    x, y, _ = placeholders
    rec.launch(autotuner(), LAUNCHER, [x, y, torch.zeros(1), 64], {}, stream=0)
    alias = y.view(-1)  # an output that is a view of input 1 keeps its storage alive
    node = _node(placeholders)
    placeholders[:2] = [None, None]
    del x, y
    replay = _finish(rec, mutated_input_idxs=[0], node_name="graph 0", node=node, outputs=[alias]).replay
    assert isinstance(replay, CopyingReplay), "it replays as stock, keeping the table its kernels read"
    decisions = {d.input_index: d for d in replay.plan.decisions}
    assert not decisions[0].indirect and "mutates" in decisions[0].reason
    assert not decisions[1].indirect and "aliases" in decisions[1].reason
    assert replay.plan.indirected == (), "slots stay (the graph reads them), every input is copied"
    del alias


def test_nothing_to_track_means_no_recording() -> None:
    assert start_recording("cpu", [3, torch.zeros(2)], non_static_input_idx=[0], model=GENERATED) is None


def test_a_function_that_is_not_generated_code_records_stock() -> None:
    """The check runs the function once more, which only Inductor's generated code allows."""
    def user_function(args: list[Any]) -> Any:
        return args[0] * 2

    assert start_recording("cpu", [torch.zeros(2)], non_static_input_idx=[0], model=user_function) is None
    assert start_recording("cpu", [torch.zeros(2)], non_static_input_idx=[0], model=GENERATED) is not None


def test_each_finished_recording_is_reported_for_table_3(recording) -> None:
    from grace.pi import report

    report.reset()
    rec, placeholders, _ = recording
    x, y, _ = placeholders
    rec.launch(autotuner(), LAUNCHER, [x, y, torch.zeros(1), 64], {}, stream=0)
    rec.block(1, "read by aten.mm.default")
    node = _node(placeholders)
    placeholders[:2] = [None, None]
    del x, y
    _finish(rec, [], "graph 3", node)
    (r,) = report.records()
    assert (r.name, r.indirected, r.pointers, r.strategy) == ("graph 3", [0], 2, "ptx")
    assert r.copy_bytes_before == 64 * 4 * 2 and r.copy_bytes_after == 64 * 4
    assert "aten.mm" in r.copied[1]
    summary = report.summarize(report.records())
    assert summary == {"graphs": 1, "graphs_with_pi": 1, "copy_bytes_pt2_cg": 512,
                       "copy_bytes_grace": 256 + 16, "pointers_per_replay": 2}
    report.reset()


def test_warmup_builds_the_variants_of_kernels_reading_non_static_inputs(built) -> None:
    from grace.pi.tree_hook import start_warmup

    x, weight, managed = torch.randn(64), torch.randn(64), torch.randn(64)
    warm = start_warmup(GENERATED, [x, weight, managed, 3], static_input_idxs=[1],
                        managed_data_ptrs={managed.untyped_storage().data_ptr()})
    assert set(warm.inputs.values()) == {0}, "static and graph-managed inputs never get placeholders"
    kernel = autotuner()
    with warm.active():
        assert warm.launch(kernel, LAUNCHER, [x, weight, torch.zeros(64), 64], {}, stream=0) is NotImplemented
        warm.launch(kernel, LAUNCHER, [weight, managed, torch.zeros(64), 64], {}, stream=0)
    (variant,) = built
    assert variant.names == ["in_ptr0"] and not variant.calls, "built, not launched: warm-up runs stock"
    placeholders = [torch.zeros(64), torch.zeros(64), torch.zeros(64)]
    rec = start_recording("cpu", placeholders, non_static_input_idx=[0], model=GENERATED)
    assert rec.launch(kernel, LAUNCHER, [placeholders[0], weight, torch.zeros(64), 64], {}, stream=0) \
        == "variant launched"
    assert len(built) == 1 and variant.calls, "the capture finds the warm-up's variant and launches it"


def _at(address: int, like: torch.Tensor) -> torch.Tensor:
    """The CPU float32 tensor of ``like``'s size at ``address`` (what a kernel given that pointer reads)."""
    import ctypes

    import numpy as np

    buf = (ctypes.c_float * like.numel()).from_address(address)
    return torch.from_numpy(np.ctypeslib.as_array(buf)).view(like.shape)


class FakeNode:
    """A recorded node whose graph computes ``factor * input 0`` into its output, reading either
    through slot 0 of the pointer table (as an indirected kernel) or the placeholder itself."""

    def __init__(self, rec: Any, placeholder: torch.Tensor, through_table: bool, factor: float = 2.0) -> None:
        self.id = 7
        self.non_static_input_idx, self.expanded_dims = [0], [[]]
        self.reconstructed_inputs = [placeholder]  # the tree's view of the placeholder's bytes
        self.out = torch.zeros_like(placeholder)
        table = rec.table_storage

        def replay() -> None:
            source = _at(int(table[0]), placeholder) if through_table else placeholder
            self.out.copy_(source * factor)

        self.graph = SimpleNamespace(replay=replay)


def stock_model(args: list[Any]) -> list[torch.Tensor]:
    """The recorded function with stock kernels: ``2 * input 0``; takes its list as Inductor's does."""
    (x,) = args[:1]
    args.clear()
    return [x * 2]


def _recorded(built: Any, through_table: bool, factor: float = 2.0) -> tuple[Any, Any, torch.Tensor]:
    placeholder = torch.randn(64)
    rec = start_recording("cpu", [placeholder], non_static_input_idx=[0], model=GENERATED)
    rec.launch(autotuner(), LAUNCHER, [placeholder, torch.zeros(64), torch.zeros(64), 64], {}, stream=0)
    return rec, FakeNode(rec, placeholder, through_table, factor), placeholder


def test_a_graph_that_agrees_with_stock_kernels_with_inputs_moved_keeps_its_plan(built) -> None:
    rec, node, placeholder = _recorded(built, through_table=True)
    before = placeholder.clone()
    finished = _finish(rec, [], "graph 7", node, [node.out], stock_model, [placeholder])
    assert finished.rerecord is None and finished.replay.plan.indirected == (0,)
    assert torch.equal(placeholder, before), "the placeholder has its bytes back for the tree's first replay"
    assert rec.table_storage[0].item() == placeholder.data_ptr(), "and the table its address"


def test_the_stock_run_of_the_check_frees_the_vendor_workspaces_it_took(built, monkeypatch) -> None:
    """The check runs the model outside a capture, as stock's warm-up does, and like it inside
    ``clear_cublas_manager``: a cuBLAS workspace taken there is not kept allocated afterwards."""
    from grace.pi import check

    events: list[str] = []

    @contextlib.contextmanager
    def released(device: Any) -> Iterator[None]:
        events.append(f"freed on {torch.device(device).type}")
        yield
        events.append("freed after")

    def model(args: list[Any]) -> list[torch.Tensor]:
        events.append("stock run")
        return stock_model(args)

    monkeypatch.setattr(check, "vendor_workspaces_released", released)
    rec, node, placeholder = _recorded(built, through_table=True)
    finished = _finish(rec, [], "graph 7", node, [node.out], model, [placeholder])
    assert finished.rerecord is None
    assert events == ["freed on cpu", "stock run", "freed after"]


def test_vendor_workspaces_are_freed_around_a_cuda_run_and_left_alone_elsewhere(monkeypatch) -> None:
    from torch._inductor import cudagraph_trees

    from grace.pi.check import vendor_workspaces_released

    cleared: list[str] = []
    monkeypatch.setattr(cudagraph_trees, "clear_cublass_cache", lambda: cleared.append("cleared"))
    with vendor_workspaces_released("cpu"):
        pass
    assert cleared == []
    with vendor_workspaces_released(torch.device("cuda", 0)):
        cleared.append("run")
    assert cleared == ["cleared", "run", "cleared"]


def test_every_check_fails_once_it_has_run_where_the_fallbacks_are_tested(built) -> None:
    """``grace.config.pi_force_untrusted``: a graph that passes its check is reported untrusted
    all the same, after the check ran and put the inputs back, so that it takes the path of a
    real failure."""
    import grace.config
    from grace.pi.finish import FORCED_UNTRUSTED

    rec, node, placeholder = _recorded(built, through_table=True)
    before = placeholder.clone()
    ran: list[str] = []

    def model(args: list[Any]) -> list[torch.Tensor]:
        ran.append("stock run")
        return stock_model(args)

    with grace.config.patch(pi_force_untrusted=True):
        finished = _finish(rec, [], "graph 7", node, [node.out], model, [placeholder])
    assert finished.replay is None and finished.rerecord == FORCED_UNTRUSTED and ran == ["stock run"]
    assert torch.equal(placeholder, before)


@pytest.mark.parametrize("through_table, factor, why", [
    (False, 2.0, "more NaN than stock"),  # a kernel the capture missed reads the overwritten placeholder
    (True, 3.0, "max |difference|"),  # an indirected kernel that computes something else
])
def test_a_graph_that_differs_from_stock_kernels_is_recorded_again(built, through_table: bool, factor: float,
                                                                   why: str) -> None:
    from grace.pi import report

    report.reset()
    rec, node, placeholder = _recorded(built, through_table, factor)
    before = placeholder.clone()
    finished = _finish(rec, [], "graph 7", node, [node.out], stock_model, [placeholder])
    assert finished.replay is None and why in finished.rerecord
    assert torch.equal(placeholder, before), "the second capture reads the recording inputs"
    (r,) = report.records()
    assert r.strategy.startswith("none") and r.indirected == [] and r.copy_bytes_after == r.copy_bytes_before
    report.reset()


def test_a_check_that_cannot_run_means_recording_again(built) -> None:
    rec, node, placeholder = _recorded(built, through_table=True)

    def failing(args: list[Any]) -> Any:
        raise RuntimeError("out of memory")

    finished = _finish(rec, [], "graph 7", node, [node.out], failing, [placeholder])
    assert finished.replay is None and "could not run" in finished.rerecord


@pytest.mark.parametrize("graph_step, why", [(1.0, None), (2.0, "mutated input 0")])
def test_a_graph_that_mutates_a_buffer_is_checked_on_it_and_the_buffer_is_put_back(built, graph_step: float,
                                                                                   why: str | None) -> None:
    placeholder, buffer = torch.randn(64), torch.zeros(4)
    rec = start_recording("cpu", [placeholder, buffer], non_static_input_idx=[0], model=GENERATED)
    rec.launch(autotuner(), LAUNCHER, [placeholder, torch.zeros(64), torch.zeros(64), 64], {}, stream=0)
    node = FakeNode(rec, placeholder, through_table=True)
    replay = node.graph.replay
    node.graph.replay = lambda: (replay(), buffer.add_(graph_step))

    def model(args: list[Any]) -> list[torch.Tensor]:
        x, b = args
        args.clear()
        b.add_(1.0)  # stock: the running statistic moves by one
        return [x * 2]

    finished = _finish(rec, [1], "graph 8", node, [node.out], model, [placeholder, buffer])
    if why is None:
        assert finished.rerecord is None and finished.replay.plan.indirected == (0,)
    else:
        assert finished.replay is None and why in finished.rerecord
    assert torch.equal(buffer, torch.zeros(4)), "the tree's first replay updates it, once"


def test_a_graph_with_a_generator_among_its_inputs_is_recorded_again(built) -> None:
    placeholder = torch.randn(64)
    rec = start_recording("cpu", [placeholder, torch.Generator()], non_static_input_idx=[0], model=GENERATED)
    rec.launch(autotuner(), LAUNCHER, [placeholder, torch.zeros(64), torch.zeros(64), 64], {}, stream=0)
    node = FakeNode(rec, placeholder, through_table=True)
    finished = _finish(rec, [], "graph 9", node, [node.out], stock_model, [placeholder, torch.Generator()])
    assert finished.replay is None and "a generator" in finished.rerecord and not node.out.any()


def test_a_graph_that_draws_random_numbers_is_checked_with_the_generator_forked(built, monkeypatch) -> None:
    """The check of a graph seen drawing random numbers runs: the generator's state is taken
    before either side runs, put back before the stock run and before the replay, and put back
    once more after, for the tree's first replay. A graph that draws nothing forks nothing."""
    from grace.pi import check

    events: list[Any] = []

    class Fork:
        def __init__(self, device: Any) -> None:
            events.append(("fork", device))

        def start(self) -> None:
            events.append("start")

    monkeypatch.setattr(check, "GeneratorFork", Fork)

    def model(args: list[Any]) -> list[torch.Tensor]:
        events.append("stock run")
        return stock_model(args)

    for draws in (True, False):
        events.clear()
        rec, node, placeholder = _recorded(built, through_table=True)
        replay = node.graph.replay
        node.graph = SimpleNamespace(replay=lambda: (events.append("replay"), replay()))
        with rec.active():
            if draws:
                torch.ops.aten.native_dropout.default(torch.ones(8), 0.5, True)
        assert rec.random.draws is draws and rec.unverifiable is None
        finished = _finish(rec, [], "graph 10", node, [node.out], model, [placeholder])
        assert finished.rerecord is None and finished.replay.plan.indirected == (0,)
        assert events == [("fork", rec.device if draws else None), "start", "stock run", "start", "replay", "start"]


def test_an_undo_that_fails_is_reported_and_the_generator_is_put_back_all_the_same(built, monkeypatch) -> None:
    """Where the pointers cannot be put back after the check, the graph is not trusted (its
    capture is made again), and the generator's state is put back all the same."""
    from grace.pi import check, finish
    from grace.pi.check import Captured

    starts: list[str] = []

    class Fork:
        def __init__(self, device: Any) -> None:
            pass

        def start(self) -> None:
            starts.append("start")

    class Pointers:
        def __init__(self) -> None:
            self.fills = 0

        def fill(self, ptrs: Any) -> None:
            self.fills += 1
            if self.fills > 1:
                raise RuntimeError("the driver refused")

    monkeypatch.setattr(check, "GeneratorFork", Fork)
    rec, node, placeholder = _recorded(built, through_table=False)
    captured = Captured(node, "graph 11", rec.device, [node.out], stock_model, [placeholder], [])
    why = check.compare(captured, finish.plan_of(rec), Pointers(), [placeholder.data_ptr()], [0], None,
                        check.RandomUse(draws=True))
    assert why is not None and why.startswith(check.UNDO_FAILED) and "the driver refused" in why
    assert starts == ["start"] * 3, "before the stock run, before the replay, and after both"


def test_the_check_puts_back_copied_placeholders_whose_memory_the_graph_reused(built) -> None:
    """A graph may reuse a copied input's placeholder for a later buffer once it has read it; the
    check's replay then leaves other bytes there, which the tree's first replay would read."""
    x, y = torch.randn(64), torch.randn(64)
    rec = start_recording("cpu", [x, y], non_static_input_idx=[0, 1], model=GENERATED)
    rec.launch(autotuner(), LAUNCHER, [x, torch.zeros(64), torch.zeros(64), 64], {}, stream=0)
    rec.block(1, "read by aten.mm.default")
    node = FakeNode(rec, x, through_table=True)
    replay = node.graph.replay
    node.graph.replay = lambda: (replay(), node.out.add_(y.sum()), y.fill_(7.0))  # y's memory reused

    def model(args: list[Any]) -> list[torch.Tensor]:
        a, b = args
        args.clear()
        return [a * 2 + b.sum()]

    y_before = y.clone()
    finished = _finish(rec, [], "graph 10", node, [node.out], model, [x, y])
    assert finished.rerecord is None and finished.replay.plan.indirected == (0,)
    assert torch.equal(y, y_before), "the copied input's placeholder has its bytes back"


def test_a_function_that_writes_what_it_reads_leaves_the_placeholders_their_bytes(built) -> None:
    """A backward graph reuses a donated activation, here a placeholder, as scratch: neither the
    stock run nor the check's replay may write the bytes the placeholder gets back (found on the
    GPU: a training step whose first backward replay read the stock run's scratch)."""
    rec, node, placeholder = _recorded(built, through_table=True)
    before = placeholder.clone()
    replay, table = node.graph.replay, rec.table_storage
    node.graph.replay = lambda: (replay(), _at(int(table[0]), placeholder).fill_(-1.0))

    def donating(args: list[Any]) -> list[torch.Tensor]:
        (x,) = args[:1]
        args.clear()
        out = x * 2
        x.fill_(-1.0)  # the buffer reused once read
        return [out]

    finished = _finish(rec, [], "graph 12", node, [node.out], donating, [placeholder])
    assert finished.rerecord is None and finished.replay.plan.indirected == (0,)
    assert torch.equal(placeholder, before), "the tree's first replay reads the recording input"


# --- strategy (3): the instantiated graph's kernel arguments rewritten -----------------------------


class ExecNode:
    """A recorded node with a kept graph of one kernel node computing ``factor * input 0``,
    reading the input through the pointer in its (patchable) argument buffer."""

    def __init__(self, placeholder: torch.Tensor, factor: float = 2.0) -> None:
        import ctypes

        self.id = 11
        self.non_static_input_idx, self.expanded_dims = [0], [[]]
        self.reconstructed_inputs = [placeholder]
        self.out = torch.zeros_like(placeholder)
        self.args = [ctypes.create_string_buffer(placeholder.data_ptr().to_bytes(8, "little"), 8)]
        self.instantiated = False
        self.graph = SimpleNamespace(raw_cuda_graph=lambda: 1, raw_cuda_graph_exec=lambda: 2,
                                     instantiate=lambda: setattr(self, "instantiated", True),
                                     replay=lambda: self.out.copy_(_at(self.pointer(), placeholder) * factor))

    def pointer(self) -> int:
        return int.from_bytes(self.args[0].raw, "little")


def _exec_recording(monkeypatch: pytest.MonkeyPatch, node_kinds: str = "kernel") -> tuple[Any, ExecNode, torch.Tensor]:
    import grace.config
    from grace.pi import exec_update

    x = torch.randn(64)
    with grace.config.patch(pi_strategy="exec-update"):
        rec = start_recording("cpu", [x], non_static_input_idx=[0], model=GENERATED)
    assert rec.keeps_graph and rec.table_storage is None
    node = ExecNode(x)
    nodes: list[Any] = [exec_update.KernelNode(0, "sm90_gemm", (node.args[0].raw,))]
    if node_kinds == "memcpy":
        nodes.append(exec_update.CopyNode(1, "memcpy", ((x.data_ptr(), 256),)))
    graph = exec_update.DriverGraph(nodes, {}, {})
    monkeypatch.setattr(exec_update, "read_graph", lambda raw: graph)
    monkeypatch.setattr(exec_update, "bind",
                        lambda g, raw_exec, sites: exec_update.ExecPatch(sites, {0: node.args}, lambda n: None))
    return rec, node, x


def test_exec_update_patches_the_kernel_argument_and_passes_its_check(monkeypatch) -> None:
    rec, node, x = _exec_recording(monkeypatch)
    finished = _finish(rec, [], "graph 11", node, [node.out], stock_model, [x])
    assert finished.rerecord is None and node.instantiated
    replay = finished.replay
    assert replay.plan.indirected == (0,) and replay.plan.copy_bytes_after == 0
    assert node.pointer() == x.data_ptr(), "the tree's first replay reads the recording input"
    fresh = torch.randn(64)
    replay.pointers.fill([fresh.data_ptr()])
    node.graph.replay()
    assert torch.equal(node.out, fresh * 2), "a replay reads the new input where the argument points"


def test_exec_update_keeps_the_copy_of_an_input_a_memcpy_node_reads(monkeypatch) -> None:
    rec, node, x = _exec_recording(monkeypatch, node_kinds="memcpy")
    finished = _finish(rec, [], "graph 12", node, [node.out], stock_model, [x])
    assert finished.replay is None and finished.rerecord is None and node.instantiated
    assert node.pointer() == x.data_ptr()


def test_exec_update_that_fails_its_check_copies_every_input_without_recording_again(monkeypatch) -> None:
    rec, node, x = _exec_recording(monkeypatch)

    def model(args: list[Any]) -> list[torch.Tensor]:
        (a,) = args
        args.clear()
        return [a * 3]  # not what the graph computes

    finished = _finish(rec, [], "graph 13", node, [node.out], model, [x])
    assert finished.replay is None and finished.rerecord is None, "its kernels are stock: no second capture"
    assert node.pointer() == x.data_ptr(), "the argument is put back"


def _prelude_recording(monkeypatch: pytest.MonkeyPatch, load_error: str = "", install_error: str = "",
                       upload_error: str = "") -> tuple[Any, ExecNode, torch.Tensor, list[str]]:
    """A kept graph whose one kernel reads ``x``'s placeholder; the fake prelude makes each
    replay read its pointer from the table, as the device-side rewrite does."""
    import grace.config
    from grace.pi import exec_update, prelude

    x = torch.randn(64)
    with grace.config.patch(pi_strategy="prelude"):
        rec = start_recording("cpu", [x], non_static_input_idx=[0], model=GENERATED)
    assert rec.keeps_graph and rec.table_storage is None
    node = ExecNode(x)
    events: list[str] = []
    kernel = exec_update.KernelNode(0, "sm90_gemm", (node.args[0].raw,), offsets=(0,))
    monkeypatch.setattr(exec_update, "read_graph", lambda raw: exec_update.DriverGraph([kernel], {}, {}))

    def load(device: Any) -> None:
        if load_error:
            raise prelude.PreludeError(load_error)

    def install(graph: Any, raw: int, entries: Any, table: Any, device: Any) -> Any:
        events.append(f"install {[(e.node, e.offset, e.slot) for e in entries]}")
        if install_error:
            raise prelude.PreludeError(install_error)
        node.graph.replay = lambda: node.out.copy_(_at(int(table.table[entries[0].slot]), x) * 2.0)
        return prelude.Prelude(torch.tensor(prelude.entry_words(entries, {0: 77})), (), 1, len(entries))

    def upload(raw_exec: int, device: Any) -> None:
        events.append("upload")
        if upload_error:
            raise prelude.PreludeError(upload_error)

    instantiate = node.graph.instantiate
    node.graph.instantiate = lambda: (events.append("instantiate"), instantiate())
    monkeypatch.setattr(prelude, "load", load)
    monkeypatch.setattr(prelude, "install", install)
    monkeypatch.setattr(prelude, "upload", upload)
    return rec, node, x, events


def test_prelude_is_installed_before_instantiation_uploaded_after_and_replays_read_the_table(monkeypatch) -> None:
    """The graph is uploaded before the check's replay, its first launch: the driver asks it of a
    graph whose nodes are updated from the device within it."""
    rec, node, x, events = _prelude_recording(monkeypatch)
    finished = _finish(rec, [], "graph 21", node, [node.out], stock_model, [x])
    assert finished.rerecord is None and events == ["install [(0, 0, 0)]", "instantiate", "upload"]
    replay = finished.replay
    assert replay.plan.indirected == (0,) and replay.plan.copy_bytes_after == 0
    assert replay.pointers.prelude.writes == 1, "the prelude lives as long as the replay state"
    fresh = torch.randn(64)
    replay.pointers.fill([fresh.data_ptr()])
    node.graph.replay()
    assert torch.equal(node.out, fresh * 2), "the rewritten argument points at the new input"


def test_a_prelude_that_cannot_be_built_leaves_the_graph_as_captured(monkeypatch) -> None:
    rec, node, x, events = _prelude_recording(monkeypatch, load_error="libcudadevrt.a not found")
    finished = _finish(rec, [], "graph 22", node, [node.out], stock_model, [x])
    assert finished.replay is None and finished.rerecord is None and events == ["instantiate"]
    assert node.pointer() == x.data_ptr()


@pytest.mark.parametrize("failure", ["install", "upload", "check"])
def test_a_prelude_that_fails_to_install_upload_or_its_check_records_the_graph_again(monkeypatch, failure) -> None:
    rec, node, x, _ = _prelude_recording(monkeypatch, install_error="no device node" if failure == "install" else "",
                                         upload_error="CUDA_ERROR_INVALID_VALUE" if failure == "upload" else "")

    def wrong(args: list[Any]) -> list[torch.Tensor]:
        (a,) = args
        args.clear()
        return [a * 3]  # not what the graph computes

    finished = _finish(rec, [], "graph 23", node, [node.out], wrong if failure == "check" else stock_model, [x])
    assert finished.replay is None and finished.rerecord, "the graph was changed: it is not trusted"


def test_table_3_counts_pointer_table_bytes_for_the_table_strategies_only() -> None:
    from grace.pi import report

    ptx = report.GraphRecord("graph 0", PTX, 4096, 0, 2, [0, 1])
    exec_ = report.GraphRecord("graph 1", EXEC_UPDATE, 4096, 0, 2, [0, 1])
    prelude = report.GraphRecord("graph 3", PRELUDE, 4096, 0, 1, [0])
    stock = report.GraphRecord("graph 2", "none (recorded again, stock)", 1024, 1024, 0, [])
    summary = report.summarize([ptx, exec_, prelude, stock])
    assert summary["copy_bytes_pt2_cg"] == 4096 + 4096 + 4096 + 1024
    assert summary["copy_bytes_grace"] == 16 + 0 + 8 + 1024, "exec-update writes its pointers with driver calls"
    assert summary["graphs_with_pi"] == 3 and summary["pointers_per_replay"] == 5


def test_a_static_input_the_code_reuses_in_place_is_put_back_after_each_run(built) -> None:
    """A backward graph may reuse a saved activation's memory (AOTAutograd's donated buffers) with
    nothing marking it mutated: the check's extra runs must each start from its real bytes, and
    leave them for the tree's first replay."""
    x, act = torch.randn(64), torch.randn(64)
    rec = start_recording("cpu", [x, act], non_static_input_idx=[0], model=GENERATED)
    rec.launch(autotuner(), LAUNCHER, [x, torch.zeros(64), torch.zeros(64), 64], {}, stream=0)
    node = FakeNode(rec, x, through_table=True)
    replay = node.graph.replay
    node.graph.replay = lambda: (replay(), node.out.add_(act.sum()), act.fill_(0.0))

    def model(args: list[Any]) -> list[torch.Tensor]:
        a, saved_activation = args
        args.clear()
        out = a * 2 + saved_activation.sum()
        saved_activation.fill_(0.0)  # its memory reused once read
        return [out]

    act_before = act.clone()
    finished = _finish(rec, [], "graph 14", node, [node.out], model, [x, act])
    assert finished.rerecord is None and finished.replay.plan.indirected == (0,)
    assert torch.equal(act, act_before), "the tree's first replay reads the real activation"


def test_an_input_whose_elements_share_memory_is_checked_and_put_back(built) -> None:
    """An expanded input (stride 0, as the speech transformer's masks are) cannot be written
    elementwise; the check snapshots and restores storages, so it runs and leaves its bytes."""
    x = torch.randn(64)
    row = torch.randn(4)
    mask = row.expand(8, 4)  # eight views of one row's memory
    rec = start_recording("cpu", [x, mask], non_static_input_idx=[0], model=GENERATED)
    rec.launch(autotuner(), LAUNCHER, [x, torch.zeros(64), torch.zeros(64), 64], {}, stream=0)
    node = FakeNode(rec, x, through_table=True)
    replay = node.graph.replay
    node.graph.replay = lambda: (replay(), row.zero_())  # the code reuses the mask's memory

    def model(args: list[Any]) -> list[torch.Tensor]:
        a, m = args
        args.clear()
        out = a * 2
        m.select(0, 0).zero_()
        return [out]

    row_before = row.clone()
    finished = _finish(rec, [], "graph 15", node, [node.out], model, [x, mask])
    assert finished.rerecord is None and finished.replay.plan.indirected == (0,)
    assert torch.equal(row, row_before), "the tree's first replay reads the real mask"


def test_an_expanded_placeholder_is_overwritten_and_put_back_whole() -> None:
    from grace.pi.check import StorageSnapshot, overwrite

    row = torch.arange(4.0)
    placeholder = row.expand(3, 4)
    saved = StorageSnapshot({0: placeholder})
    moved = saved.fresh_views([0])[0]
    assert moved.stride() == placeholder.stride() and moved.data_ptr() != placeholder.data_ptr()
    assert torch.equal(moved, placeholder)
    overwrite(placeholder)
    assert row.isnan().all()
    saved.put_back()
    assert torch.equal(row, torch.arange(4.0))


def test_inputs_sharing_a_storage_share_one_copy_of_it() -> None:
    from grace.pi.check import StorageSnapshot

    flat = torch.arange(10.0)
    a, b = flat[:4], flat[4:].view(2, 3)
    snap = StorageSnapshot({0: a, 1: b})
    fresh = snap.fresh_views([0, 1])
    assert fresh[0].untyped_storage()._cdata == fresh[1].untyped_storage()._cdata
    assert torch.equal(fresh[1], b) and fresh[1].storage_offset() == 4
    fresh[1].fill_(-1.0)  # a run writing the fresh copy leaves the snapshot as it was
    flat.zero_()
    snap.put_back()
    assert torch.equal(flat, torch.arange(10.0))


def test_records_of_graphs_that_are_not_the_programs_are_discarded() -> None:
    """SCG's private profiling trees record candidates; Table 3 counts the deployed graphs only."""
    from grace.pi import report

    report.reset()
    report.add(report.GraphRecord("graph 0", "ptx", 64, 0, 1, [0]))
    with report.discarded():
        report.add(report.GraphRecord("graph 1 (profile)", "ptx", 64, 0, 1, [0]))
        report.add(report.GraphRecord("graph 2 (profile)", "none", 64, 64, 0, []))
    report.add(report.GraphRecord("graph 3", "none", 32, 32, 0, []))
    assert [r.name for r in report.records()] == ["graph 0", "graph 3"]
    assert report.summarize(report.records())["graphs"] == 2
    report.reset()


@pytest.mark.parametrize("chunk", [1 << 26, 7, 1])
def test_outputs_are_compared_in_row_chunks_and_a_late_difference_is_found(chunk: int) -> None:
    from grace.pi import check

    a = torch.arange(60, dtype=torch.float32).reshape(20, 3)
    assert check.first_difference([a, 2], [a.clone(), 2], chunk=chunk) is None
    b = a.clone()
    b[17, 2] += 1.0
    why = check.first_difference([a], [b], chunk=chunk)
    assert why is not None and "max |difference| 1" in why
    ints, other = torch.arange(10), torch.arange(10)
    other[9] = -1
    assert "1 elements differ" in check.first_difference([ints], [other], chunk=chunk)
    assert check.first_difference([torch.tensor(1.0)], [torch.tensor(1.0)], chunk=chunk) is None
    t = a.t()  # non-contiguous rows compare as views too
    assert check.first_difference([t], [b.t()], chunk=chunk) is not None


def test_a_wrong_table_write_is_refused_before_the_capture() -> None:
    import grace.config

    placeholders = [torch.zeros(4)]
    with grace.config.patch(pi_table_write="pinned"), pytest.raises(ValueError, match="choose one of 'copy', 'memop'"):
        start_recording("cpu", placeholders, non_static_input_idx=[0], model=GENERATED)
    with grace.config.patch(pi_table_write="pinned", pi_strategy=EXEC_UPDATE):  # writes no table
        assert start_recording("cpu", placeholders, non_static_input_idx=[0], model=GENERATED) is not None


def _seen(*calls: tuple) -> Any:
    """A :class:`grace.pi.check.RandomUse` after noting ``(op, args, kwargs, out)`` calls."""
    from grace.pi.check import RandomUse

    seen = RandomUse()
    for op, args, kwargs, out in calls:
        observe.note_random(seen, op, args, kwargs, out)
    return seen


def test_draws_reads_and_saved_state_are_noted_apart() -> None:
    aten = torch.ops.aten
    x = torch.zeros(4)
    assert not _seen((aten.add.Tensor, (x, x), {}, x)).draws
    for op, args, kwargs in [(aten.bernoulli_.float, (x, 0.5), {}), (aten.native_dropout.default, (x, 0.1, True), {}),
                             (aten.randint.low_out, (0, 9, [2]), {"out": x})]:  # the last: Inductor's seeds
        seen = _seen((op, args, kwargs, x))
        assert seen.draws and not seen.reads_state and not seen.saved_state, op
    sdpa = aten._scaled_dot_product_efficient_attention.default  # (q, k, v, bias, compute_lse, dropout_p=0.)
    seed, offset = torch.tensor(1), torch.tensor(2)
    returned = (x, x, seed, offset)
    storages = {seed.untyped_storage().data_ptr(), offset.untyped_storage().data_ptr()}
    for args, kwargs in [((x, x, x, None, True), {}), ((x, x, x, None, True, 0.0), {})]:
        seen = _seen((sdpa, args, kwargs, returned))
        assert not seen.draws, "attention without dropout draws nothing"
        assert seen.unused_state == storages and not seen.saved_state
    seen = _seen((sdpa, (x, x, x, None, True), {"dropout_p": 0.1}, returned))
    assert seen.draws and seen.saved_state == storages and not seen.unused_state and not seen.reads_state
    backward = aten._scaled_dot_product_flash_attention_backward.default
    names = [a.name for a in backward._schema.arguments]
    args = [x] * len(names)
    args[names.index("dropout_p")] = 0.1
    seen = _seen((backward, tuple(args), {}, (x, x, x)))
    assert seen.reads_state and not seen.draws
    args[names.index("dropout_p")] = 0.0
    assert not _seen((backward, tuple(args), {}, (x, x, x))).reads_state


def test_an_operator_reading_saved_state_runs_as_called_under_the_host_state_mode() -> None:
    """On host tensors the mode hands the operator what it was given (positional or by name)
    and returns its result; the device-to-host copy itself needs a GPU."""
    from grace.random_state import host_random_state

    if not hasattr(torch.ops, "grace_test") or not hasattr(torch.ops.grace_test, "attention_backward"):
        lib = torch.library.Library("grace_test", "FRAGMENT")
        lib.define("attention_backward(Tensor grad, Tensor philox_seed, Tensor philox_offset, float dropout_p) -> Tensor")
        lib.impl("attention_backward", lambda grad, philox_seed, philox_offset, dropout_p:
                 grad * philox_seed + philox_offset, "CPU")
        test_an_operator_reading_saved_state_runs_as_called_under_the_host_state_mode.lib = lib  # kept alive
    op = torch.ops.grace_test.attention_backward.default
    grad, seed, offset = torch.ones(3), torch.tensor(7), torch.tensor(2)
    expected = op(grad, seed, offset, 0.1)
    with host_random_state():
        torch.testing.assert_close(op(grad, seed, offset, 0.1), expected)
        torch.testing.assert_close(op(grad, philox_seed=seed, philox_offset=offset, dropout_p=0.1), expected)
        torch.testing.assert_close(torch.ops.aten.add.Tensor(grad, grad), grad * 2)


def test_saved_state_arguments_go_to_the_host_and_nothing_else() -> None:
    from grace.random_state import with_state_on_host

    backward = torch.ops.aten._scaled_dot_product_efficient_attention_backward.default
    names = [a.name for a in backward._schema.arguments]
    args = list(range(len(names)))
    moved, kwargs = with_state_on_host(backward, args, {}, lambda v: ("host", v))
    assert [names[k] for k, v in enumerate(moved) if isinstance(v, tuple)] == ["philox_seed", "philox_offset"]
    assert [v for v in moved if not isinstance(v, tuple)] == [k for k in args if names[k] not in
                                                               ("philox_seed", "philox_offset")]
    short = args[:names.index("philox_seed")]
    moved, kwargs = with_state_on_host(backward, short, {"philox_seed": 1, "philox_offset": 2, "scale": 3},
                                       lambda v: ("host", v))
    assert moved == short and kwargs == {"philox_seed": ("host", 1), "philox_offset": ("host", 2), "scale": 3}


def _attention_like() -> Any:
    """An operator with attention's random-state signature (a ``dropout_p`` argument, a
    ``philox_seed`` and ``philox_offset`` among its returns), with a CPU kernel: the seed is 7
    when it drops out and uninitialised (here 99) when it does not, as attention's is."""
    if not hasattr(torch.ops, "grace_test") or not hasattr(torch.ops.grace_test, "attention"):
        lib = torch.library.Library("grace_test", "FRAGMENT")
        lib.define("attention(Tensor q, float dropout_p=0.0) -> "
                   "(Tensor output, Tensor philox_seed, Tensor philox_offset)")
        lib.impl("attention", lambda q, dropout_p=0.0: (q * 2, torch.tensor(7 if dropout_p else 99),
                                                        torch.tensor(0)), "CPU")
        _attention_like.lib = lib  # type: ignore[attr-defined]  # kept alive with the process
    return torch.ops.grace_test.attention.default


def test_the_watch_notes_random_state_an_operator_returns(built) -> None:
    op = _attention_like()
    rec, _, _ = _recorded(built, through_table=True)
    with rec.active():
        quiet = op(torch.ones(4), 0.0)
        dropping = op(torch.ones(4), 0.1)
    assert rec.random.unused_state == {quiet[1].untyped_storage().data_ptr(), quiet[2].untyped_storage().data_ptr()}
    assert rec.random.saved_state == {dropping[1].untyped_storage().data_ptr(),
                                      dropping[2].untyped_storage().data_ptr()}
    assert rec.unverifiable is None, "saving random-number state no longer keeps a graph unchecked"


@pytest.mark.parametrize("noted", [True, False])
def test_the_check_leaves_out_random_state_returned_without_drawing(built, noted: bool) -> None:
    """Attention without dropout returns a philox seed that nothing reads, on the device inside a
    capture and on the host outside one: noted during the capture, it is left out of the check;
    any other output that differs still fails it."""
    op = _attention_like()
    rec, node, placeholder = _recorded(built, through_table=True)
    with rec.active():
        captured_outputs = op(torch.ones(4), 0.0)
    seed = captured_outputs[1]
    if not noted:
        rec.random.unused_state.clear()
    seed.fill_(5)  # what the graph left there, which the stock run does not return

    def model(args: list[Any]) -> list[torch.Tensor]:
        return [*stock_model(args), torch.tensor(99)]

    finished = _finish(rec, [], "graph 11", node, [node.out, seed], model, [placeholder])
    if noted:
        assert finished.rerecord is None and finished.replay.plan.indirected == (0,)
    else:
        assert "output 1" in finished.rerecord and "elements differ" in finished.rerecord


def test_tensors_of_no_elements_match_on_any_device() -> None:
    from grace.pi import check

    assert check.first_difference([torch.empty(0, device="meta")], [torch.empty(0)]) is None
    assert "(0,)" in check.first_difference([torch.empty(0)], [torch.empty(0, 2)])
    assert check.first_difference([torch.ones(2)], [torch.zeros(2)], skip={0}) is None


def test_the_generator_fork_puts_the_state_back_and_is_inert_off_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    from grace.pi import check

    states: list[Any] = []
    monkeypatch.setattr(torch.cuda, "get_rng_state", lambda device=None: ("state at", device))
    monkeypatch.setattr(torch.cuda, "set_rng_state", lambda state, device=None: states.append((state, device)))
    cuda = torch.device("cuda", 1)
    fork = check.GeneratorFork(cuda)
    fork.start()
    fork.start()
    assert states == [(("state at", cuda), cuda)] * 2, "the state read once, put back at each start"
    states.clear()
    for device in (None, torch.device("cpu")):
        check.GeneratorFork(device).start()
    assert states == []


def test_a_graph_seen_reading_random_state_runs_its_stock_side_with_that_state_on_the_host(built, monkeypatch) -> None:
    """Attention's backward with dropout reads the philox seed its forward saved (a device tensor
    after a captured forward, read on the host outside one): noted during the capture, and the
    check's stock run happens under :func:`grace.random_state.host_random_state`; a graph that
    reads none runs without it."""
    import contextlib

    from grace.pi import check

    backward = torch.ops.aten._scaled_dot_product_flash_attention_backward.default
    by_type = {"Tensor": torch.ones(8), "int": 8, "float": 0.1, "bool": False, "Optional[float]": None}
    args = [by_type[str(a.type)] for a in backward._schema.arguments if not a.kwarg_only]  # dropout_p 0.1
    seen = _seen((backward, tuple(args), {}, (torch.ones(8),) * 3))  # its kernel has no CPU implementation
    assert seen.reads_state

    modes: list[str] = []

    @contextlib.contextmanager
    def host_state() -> Any:
        modes.append("enter")
        yield
        modes.append("exit")

    monkeypatch.setattr(check, "host_random_state", host_state)
    for reads in (True, False):
        modes.clear()
        rec, node, placeholder = _recorded(built, through_table=True)
        rec.random.reads_state = reads

        def model(args: list[Any]) -> list[torch.Tensor]:
            modes.append("stock run")
            return stock_model(args)

        finished = _finish(rec, [], "graph 12", node, [node.out], model, [placeholder])
        assert finished.rerecord is None and finished.replay.plan.indirected == (0,)
        assert modes == (["enter", "stock run", "exit"] if reads else ["stock run"])


@pytest.mark.parametrize("host_value, why", [(7, None), (8, "output 1")])
def test_saved_state_is_compared_on_the_host(built, host_value: int, why: str | None) -> None:
    """Attention with dropout saves its seed on the device in the graph and on the host in the
    stock run: the check compares the two on the host, and a different value fails it."""
    op = _attention_like()
    rec, node, placeholder = _recorded(built, through_table=True)
    with rec.active():
        saved = op(torch.ones(4), 0.1)[1]  # 7
    assert saved.untyped_storage().data_ptr() in rec.random.saved_state

    def model(args: list[Any]) -> list[torch.Tensor]:
        return [*stock_model(args), torch.tensor(host_value)]

    finished = _finish(rec, [], "graph 13", node, [node.out, saved], model, [placeholder])
    if why is None:
        assert finished.rerecord is None
    else:
        assert why in finished.rerecord and "elements differ" in finished.rerecord


def test_a_higher_order_operator_makes_the_graph_unverifiable_without_raising(built) -> None:
    """The watch does not see into a higher-order operator (selective activation checkpointing's
    ``graphsafe_run_with_rng_state``): the operator runs as it would without the watch, and the
    graph is marked so that the patch records it again stock."""
    from torch._prims.rng_prims import run_with_rng_state

    placeholder = torch.randn(8)
    state = torch.get_rng_state()
    expected = run_with_rng_state(state, torch.ops.aten.rand.default, [4], device=torch.device("cpu"))
    rec = start_recording("cpu", [placeholder], non_static_input_idx=[0], model=GENERATED)
    with rec.active():
        out = run_with_rng_state(state, torch.ops.aten.rand.default, [4], device=torch.device("cpu"))
    torch.testing.assert_close(out, expected)
    assert rec.unverifiable is not None and "higher-order operator run_with_rng_state" in rec.unverifiable
    from grace.pi import finish
    from grace.pi.check import Captured

    captured = Captured(None, "graph 1", rec.device, [], lambda args: None, [placeholder], [])
    why = finish.why_untrusted(rec, captured, None, None, [])
    assert why is not None and "outside its capture" in why


@pytest.mark.parametrize("strategy", [PTX, EXEC_UPDATE])
def test_a_warm_up_that_cannot_be_checked_makes_the_capture_once_and_stock(strategy: str) -> None:
    """A higher-order operator (selective activation checkpointing's ``run_with_rng_state``) seen
    in the warm-up: the capture is made once, stock. A random draw beside it is no verdict."""
    import contextlib

    from torch._prims.rng_prims import run_with_rng_state

    import grace.config
    from grace.pi import tree_hook

    generated_twin = _generated_identity()  # a fresh function: the verdict is kept on it
    x = torch.randn(64)
    with grace.config.patch(pi_strategy=strategy):
        warm = tree_hook.start_warmup(generated_twin, [x], static_input_idxs=[], managed_data_ptrs=set())
        assert warm is not None and observe.unverifiable_at_warmup(generated_twin) is None
        with warm.active():
            torch.ops.aten.add.Tensor(x, 1)
            torch.ops.aten.bernoulli_.float(torch.ones(8), 0.5)
            assert warm.unverifiable is None
            run_with_rng_state(torch.get_rng_state(), torch.ops.aten.rand.default, [4], device=torch.device("cpu"))
        assert "run_with_rng_state" in observe.unverifiable_at_warmup(generated_twin)
        node = _record_node(x)
        capture = _Capture(node, IDENTITY)
        tree_hook.record(node, generated_twin, [x], capture)
    (only,) = capture.calls
    assert isinstance(only[2], contextlib.nullcontext), "one capture, stock, not a watched one first"
    assert node.grace_pi == "unset", "no PI replay: the patch's own None stands"


def test_a_warm_up_that_draws_random_numbers_or_none_leaves_the_capture_watched() -> None:
    from grace.pi import tree_hook

    generated_twin = _generated_identity()
    x = torch.randn(64)
    warm = tree_hook.start_warmup(generated_twin, [x], static_input_idxs=[], managed_data_ptrs=set())
    with warm.active():
        torch.ops.aten.mul.Tensor(x, 2)
        torch.ops.aten.native_dropout.default(torch.ones(8), 0.5, True)
    assert observe.unverifiable_at_warmup(generated_twin) is None
    assert tree_hook.start_warmup(lambda args: args, [x], [], set()) is None, "not generated code: no watch"


def test_a_replay_with_nothing_indirected_is_refused_and_the_guard_must_match_the_plan() -> None:
    from grace.pi.guard import InputLayout, ReplayGuard
    from grace.pi.plan import Placeholder, Slot, plan_graph

    x = torch.randn(8)
    node = SimpleNamespace(non_static_input_idx=[0], expanded_dims=[[]], reconstructed_inputs=[x])
    placeholder = Placeholder(0, x.data_ptr(), 32, 32)
    copied = plan_graph([placeholder], [], [])
    with pytest.raises(ValueError, match="no input is indirected"):
        PIReplay(node, copied, pointers=None, guard=ReplayGuard([]), placeholder_ptrs=[x.data_ptr()])
    indirected = plan_graph([placeholder], [Slot(0, 0, "k")], [])
    assert indirected.indirected == (0,)
    with pytest.raises(ValueError, match="not the indirected"):
        PIReplay(node, indirected, pointers=None, guard=ReplayGuard([]), placeholder_ptrs=[x.data_ptr()])
    replay = PIReplay(node, indirected, pointers=None, guard=ReplayGuard([InputLayout.of(0, x, 16)]),
                      placeholder_ptrs=[x.data_ptr()])
    assert replay._copied == () and replay._dst == [], "an indirected input has no copy to bind"


# --- record: the capture the patch hands over ------------------------------------------------------


class _Capture:
    """Stands for the tree's capture: runs ``model`` on ``inputs`` inside ``watch`` and notes each
    call's graph and input ids."""

    def __init__(self, node: Any, model: Any) -> None:
        self.node, self.model, self.calls = node, model, []

    def __call__(self, inputs: list[Any], watch: Any) -> Any:
        self.calls.append((self.node.graph, [id(x) for x in inputs], watch))
        with watch:
            out = self.model(inputs)
        assert not inputs, "the model takes its inputs, as Inductor's does"
        return out


def _generated_identity() -> Any:
    """Inductor's generated code as far as PI can tell: ``call(args)`` returns its first input."""
    import types

    from torch._inductor.codecache import PyCodeCache

    module = types.ModuleType("grace_test_generated_identity")
    exec("def call(args):\n    a = args[0]\n    args.clear()\n    return (a,)\n", module.__dict__)
    PyCodeCache.modules.append(module)
    return module.call


IDENTITY = _generated_identity()


def generated(fn: Any) -> Any:
    """A ``call(args)`` of a module registered as Inductor's output, which runs ``fn``."""
    import types

    from torch._inductor.codecache import PyCodeCache

    module = types.ModuleType(f"grace_test_generated_{id(fn)}")
    module.impl = fn
    exec("def call(args):\n    return impl(args)\n", module.__dict__)
    PyCodeCache.modules.append(module)
    return module.call


class RecordNode:
    """The node ``record`` is handed, on the CPU: its ``reconstructed_inputs`` are views of the
    recording inputs' memory that do not own it, as the tree makes them, and it allocates
    recording inputs as the tree does (a copy of each non-static input; the others as given)."""

    def __init__(self, inputs: list[Any], non_static: list[int], managed: list[int] | None = None) -> None:
        self.device, self.id, self.grace_pi, self.grace_retired = "cpu", 5, "unset", False
        self.graph: Any = "graph as the tree made it"
        self.non_static_input_idx, self.expanded_dims = non_static, [[] for _ in inputs]
        self.cudagraph_managed_idxs = managed or []
        self.wrapped_function = SimpleNamespace(mutated_input_idxs=[])
        self.reconstructed_inputs = [self._reconstruct_from_tensor_metadata(self._tensor_metadata(x))
                                     if isinstance(x, torch.Tensor) else x for x in inputs]
        self.allocated: list[list[Any]] = []
        self.handed: list[list[Any]] = []  # the layouts handed to _allocate_and_copy_recording_inputs

    @staticmethod
    def _tensor_metadata(x: torch.Tensor, ignore_storage_offset: bool = True) -> dict[str, Any]:
        return {"nbytes": x.untyped_storage().nbytes(), "data_ptr": x.untyped_storage().data_ptr(),
                "size": x.shape, "stride": x.stride(), "dtype": x.dtype, "device": x.device,
                "storage_offset": 0 if ignore_storage_offset else x.storage_offset()}

    @staticmethod
    def _reconstruct_from_tensor_metadata(meta: dict[str, Any]) -> torch.Tensor:
        storage = torch._C._construct_storage_from_data_pointer(meta["data_ptr"], meta["device"], meta["nbytes"])
        return torch.empty(0, dtype=meta["dtype"]).set_(storage, meta["storage_offset"], meta["size"], meta["stride"])

    def _allocate_and_copy_recording_inputs(self, inputs: list[Any]) -> list[Any]:
        self.handed.append([(x.stride(), x.storage_offset()) if isinstance(x, torch.Tensor) else x for x in inputs])
        out = [torch.empty(0, dtype=x.dtype).set_(x.untyped_storage().clone(), x.storage_offset(), x.size(), x.stride())
               if i in self.non_static_input_idx and isinstance(x, torch.Tensor) else x
               for i, x in enumerate(inputs)]
        inputs.clear()
        self.allocated.append(list(out))  # the capture takes ``out`` itself
        return out


def _record_node(x: torch.Tensor) -> Any:
    return RecordNode([x], non_static=[0])


def test_record_captures_once_and_sets_the_node_replay(monkeypatch) -> None:
    from grace.pi import tree_hook
    from grace.pi.tree_hook import Finished, record  # Finished: grace.pi.finish's, as the patch sees it

    x = torch.randn(64)
    node = _record_node(x)
    monkeypatch.setattr(observe.Recording, "finish", lambda self, *a, **k: Finished("the replay"))
    capture = _Capture(node, IDENTITY)
    out = record(node, IDENTITY, [x], capture)
    assert len(capture.calls) == 1 and node.grace_pi == "the replay"
    assert out[0] is x, "the static outputs are the capture's"
    assert capture.calls[0][0] == "graph as the tree made it", "strategy ptx keeps the tree's graph"


def test_record_captures_again_stock_on_placeholders_of_its_own_when_the_check_fails(monkeypatch) -> None:
    """Strategy ptx releases the placeholders during the capture; a second capture gets new
    ones with the first's bytes (which the check put back), and the node's reconstructed inputs
    follow them; an input that is not a placeholder is handed over as it was."""
    import contextlib

    from grace.pi import tree_hook
    from grace.pi.tree_hook import Finished, record  # Finished: grace.pi.finish's, as the patch sees it

    x, static = torch.randn(64), torch.randn(8)
    node = RecordNode([x, static], non_static=[0])
    monkeypatch.setattr(observe.Recording, "finish", lambda self, *a, **k: Finished(None, rerecord="differs"))
    monkeypatch.setattr(tree_hook, "new_graph", lambda device, inputs, keep_graph=False: "a fresh graph")
    model = generated(lambda args: (args.clear(), ())[1])
    capture = _Capture(node, model)
    record(node, model, [x, static], capture)
    (first_graph, first_ids, first_watch), (second_graph, second_ids, second_watch) = capture.calls
    assert first_ids == [id(x), id(static)]
    (again,) = node.allocated
    assert second_ids == [id(t) for t in again] and again[1] is static, "new placeholders, the static input as it was"
    assert again[0] is not x and torch.equal(again[0], x), "with the first placeholders' bytes"
    assert node.reconstructed_inputs[0].data_ptr() == again[0].data_ptr(), "the tree copies into the new ones"
    assert not isinstance(first_watch, contextlib.nullcontext), "the first capture is watched"
    assert isinstance(second_watch, contextlib.nullcontext), "the second is stock"
    assert second_graph == "a fresh graph" and node.grace_pi is None


def test_a_second_capture_hands_the_tree_each_placeholder_as_it_was_laid_out(monkeypatch) -> None:
    """An expanded input (stride 0) is handed over with its strides, which the tree's allocation
    copies and the graph's kernels assume; ``clone`` would make it dense."""
    from grace.pi import tree_hook
    from grace.pi.tree_hook import Finished, record

    x = torch.randn(4, 1).expand(4, 8)
    node = RecordNode([x], non_static=[0])
    monkeypatch.setattr(observe.Recording, "finish", lambda self, *a, **k: Finished(None, rerecord="differs"))
    monkeypatch.setattr(tree_hook, "new_graph", lambda device, inputs, keep_graph=False: "a fresh graph")
    model = generated(lambda args: (args.clear(), ())[1])
    record(node, model, [x], _Capture(node, model))
    assert node.handed == [[((1, 0), 0)]]
    assert torch.equal(node.allocated[0][0], x)


def test_inputs_the_check_cannot_put_back_stop_the_recording(monkeypatch) -> None:
    """Neither the graph's first replay nor a second capture may read recording inputs the check
    overwrote and could not restore: the recording raises instead of recording again."""
    from grace.pi import check
    from grace.pi.tree_hook import record

    x = torch.randn(64)
    node = _record_node(x)

    def restore_failed(self: Any, *a: Any, **k: Any) -> Any:
        raise check.InputsNotRestored("could not put the recording inputs' bytes back")

    monkeypatch.setattr(observe.Recording, "finish", restore_failed)
    model = generated(lambda args: (args.clear(), ())[1])
    capture = _Capture(node, model)
    with pytest.raises(check.InputsNotRestored):
        record(node, model, [x], capture)
    assert len(capture.calls) == 1, "no second capture"


def test_a_put_back_that_fails_is_raised_as_inputs_not_restored(built, monkeypatch) -> None:
    from grace.pi import check

    rec, node, placeholder = _recorded(built, through_table=True)

    def put_back_fails(self: Any) -> None:
        raise RuntimeError("device-side assert")

    monkeypatch.setattr(check.StorageSnapshot, "put_back", put_back_fails)
    with pytest.raises(check.InputsNotRestored, match="RuntimeError: device-side assert"):
        _finish(rec, [], "graph 7", node, [node.out], stock_model, [placeholder])


def test_strategy_ptx_releases_the_placeholders_during_the_capture_and_keeps_their_identity(monkeypatch) -> None:
    """Only the capture's model holds a placeholder once it starts (so the graph may reuse its
    memory after its last use, as stock's does); its StorageImpl stays allocated, so that no later
    buffer's storage can take the identity launches are matched by."""
    import weakref

    from grace.pi.tree_hook import Finished, record

    x = torch.randn(64)
    node = _record_node(x)
    identity = x.untyped_storage()._cdata
    alive = weakref.ref(x)
    monkeypatch.setattr(observe.Recording, "finish", lambda self, *a, **k: Finished("the replay"))
    during: list[tuple[bool, int]] = []

    def model(args: list[Any]) -> Any:
        args.clear()  # Inductor's code drops its inputs
        import gc

        gc.collect()
        later = [torch.empty(64) for _ in range(256)]  # storages allocated after it was freed
        during.append((alive() is None, identity in {t.untyped_storage()._cdata for t in later}))
        return ()

    inputs = [x]
    del x
    model = generated(model)
    record(node, model, inputs, _Capture(node, model))
    ((released, identity_taken),) = during
    assert released, "the placeholder was freed when the model dropped it"
    assert not identity_taken, "its StorageImpl was not reused by a later buffer's"


def test_strategies_that_match_by_address_hold_every_placeholder_through_their_capture(monkeypatch) -> None:
    import weakref

    import grace.config
    from grace.pi import tree_hook
    from grace.pi.tree_hook import Finished, record

    x = torch.randn(64)
    node = _record_node(x)
    alive = weakref.ref(x)
    monkeypatch.setattr(observe.Recording, "finish", lambda self, *a, **k: Finished(None, rerecord="differs"))
    monkeypatch.setattr(tree_hook, "new_graph", lambda device, inputs, keep_graph=False: "a fresh graph")
    during: list[bool] = []

    def model(args: list[Any]) -> Any:
        args.clear()
        during.append(alive() is not None)
        return ()

    inputs = [x]
    del x
    model = generated(model)
    capture = _Capture(node, model)
    with grace.config.patch(pi_strategy="exec-update"):
        record(node, model, inputs, capture)
    assert during == [True, False], "held through the first capture; the second drops its inputs as stock's does"
    assert capture.calls[0][1] == capture.calls[1][1] and not node.allocated, "the second reads the same placeholders"


def test_record_leaves_a_function_it_does_not_handle_to_one_stock_capture() -> None:
    import contextlib

    from grace.pi.tree_hook import record

    def user_function(args: list[Any]) -> Any:
        (a,) = args
        args.clear()
        return (a * 2,)

    x = torch.randn(4)
    node = _record_node(x)
    capture = _Capture(node, user_function)
    record(node, user_function, [x], capture)
    ((_, _, watch),) = capture.calls
    assert isinstance(watch, contextlib.nullcontext) and node.grace_pi == "unset"


def test_record_captures_a_graph_handed_a_generator_once_stock_and_reports_why() -> None:
    """A graph that draws from a generator draws other numbers each run, so PI's check could
    never pass: one stock capture instead of a watched one and a second, stock."""
    import contextlib

    from grace.pi import report
    from grace.pi.tree_hook import record

    x = torch.randn(64)
    node = _record_node(x)
    node.non_static_input_idx = [0]
    report.reset()
    capture = _Capture(node, IDENTITY)
    record(node, IDENTITY, [x, torch.Generator()], capture)
    ((graph, _, watch),) = capture.calls
    assert isinstance(watch, contextlib.nullcontext) and graph == "graph as the tree made it"
    (reported,) = report.records()
    assert reported.strategy == "none (recorded stock)" and reported.copy_bytes_after == reported.copy_bytes_before == 256
    report.reset()


def test_record_captures_again_stock_when_planning_raises(monkeypatch, caplog) -> None:
    import contextlib
    import logging

    from grace.pi import tree_hook
    from grace.pi.tree_hook import record

    def broken(self: Any, *a: Any, **k: Any) -> Any:
        raise RuntimeError("instantiation failed")

    x = torch.randn(64)
    node = _record_node(x)
    monkeypatch.setattr(observe.Recording, "finish", broken)
    monkeypatch.setattr(tree_hook, "new_graph", lambda device, inputs, keep_graph=False: "a fresh graph")
    capture = _Capture(node, IDENTITY)
    with caplog.at_level(logging.WARNING, logger="grace.pi"):
        out = record(node, IDENTITY, [x], capture)
    assert len(capture.calls) == 2 and isinstance(capture.calls[1][2], contextlib.nullcontext)
    assert node.grace_pi is None and out[0] is node.allocated[0][0] and torch.equal(out[0], x), \
        "the second capture's outputs, on placeholders of its own"
    assert "planning it raised RuntimeError: instantiation failed" in caplog.text


# --- record: earlier graphs' outputs released through the capture, and a graph retired ---------


def _two_input_model() -> Any:
    """Generated code for ``2 * input 0 + input 1``: input 1 stands for a forward's activation
    (a managed input), dropped by the code as Inductor's drops its inputs."""
    def body(args: list[Any]) -> Any:
        x, act = args
        args.clear()
        return (x * 2 + act,)

    return generated(body)


def _warmed_up(model: Any, inputs: list[Any]) -> Any:
    """``model`` after the tree's warm-up of it under PI's watch, which found it checkable."""
    from grace.pi import tree_hook

    warm = tree_hook.start_warmup(model, inputs, static_input_idxs=[], managed_data_ptrs=set())
    with warm.active():
        model(list(inputs))
    return model


class _ZerosCapture:
    """A capture whose outputs are zeros (what an untrusted graph might leave): whatever the
    caller gets must come from elsewhere."""

    def __init__(self, node: Any) -> None:
        self.node, self.calls = node, []

    def __call__(self, inputs: list[Any], watch: Any) -> Any:
        self.calls.append((self.node.graph, [id(x) for x in inputs], watch))
        inputs.clear()
        return (torch.zeros(64),)


def test_a_ptx_capture_releases_the_managed_inputs_and_a_prelude_one_holds_them() -> None:
    """Strategy ptx holds neither placeholders nor managed inputs; the check reads a managed
    input through a view made before the capture, with its storage offset (an earlier graph's
    output may be a view into a larger buffer); strategies (2) and (3) hold every input. Only a
    function a warm-up found checkable, which holds that verdict (and would hold a retirement),
    releases them."""
    from grace.pi.tree_hook import held_through_capture

    buffer = torch.randn(96)
    x, act, static = torch.randn(64), buffer[16:80], torch.randn(8)
    inputs = [x, act, static]
    node = RecordNode(inputs, non_static=[0], managed=[1])
    ptx = start_recording("cpu", inputs, non_static_input_idx=[0], model=GENERATED)
    unwatched = _two_input_model()
    kept = held_through_capture(ptx, inputs, node, unwatched).kept
    assert kept[0] is None and kept[1] is act, "no warm-up found it checkable: its managed inputs are held"
    model = _warmed_up(_two_input_model(), [x, act])
    held = held_through_capture(ptx, inputs, node, model)
    assert held.kept[:2] == [None, None] and held.kept[2] is static and held.released == {0, 1}
    assert held.managed_inputs_alive()[1] is act
    seen = held.inputs_after_capture(node)
    assert seen[0] is node.reconstructed_inputs[0] and seen[2] is static
    assert seen[1] is not act and seen[1].data_ptr() == act.data_ptr() and torch.equal(seen[1], act)

    class Unremembered:  # it takes no attribute: neither its warm-up's verdict nor a retirement
        __slots__ = ()

        def __call__(self, args: list[Any]) -> Any:
            return ()

    unremembered = Unremembered()
    observe.note_verifiable(unremembered)  # what a warm-up that found it checkable does
    assert not observe.verifiable_at_warmup(unremembered)
    kept = held_through_capture(ptx, inputs, node, unremembered).kept
    assert kept[0] is None and kept[1] is act, "code that cannot hold its verdicts keeps its managed inputs held"
    ptx.strategy = PRELUDE
    assert [k is v for k, v in zip(held_through_capture(ptx, inputs, node, model).kept, inputs)] == [True] * 3


def test_a_failed_check_whose_managed_input_died_retires_the_graph(monkeypatch, caplog) -> None:
    """The check failed and an earlier graph's output the graph reads died during the capture:
    no second capture (it would read that memory where the graph may have put its buffers);
    this call's outputs are the stock kernels', the node never replays, and the function's
    next recording is stock."""
    import contextlib

    from grace.pi import retire as retiring
    from grace.pi.tree_hook import RETIRED_BEFORE, Finished, record

    monkeypatch.setattr(observe.Recording, "finish", lambda self, *a, **k: Finished(None, rerecord="differs"))
    memory = torch.randn(96)  # the pool's memory: it outlives the activation's tensor, as on the GPU
    x = torch.randn(64)
    inputs = [x, memory[16:80]]  # only the list holds the activation's tensor, a view into a buffer
    node = RecordNode(inputs, non_static=[0], managed=[1])
    model = _warmed_up(_two_input_model(), list(inputs))
    capture = _ZerosCapture(node)
    with caplog.at_level("WARNING", logger="grace.pi"):
        (out,) = record(node, model, inputs, capture)
    assert len(capture.calls) == 1, "not captured again"
    torch.testing.assert_close(out, x * 2 + memory[16:80], msg="this call's outputs are the stock kernels'")
    assert node.grace_retired and node.grace_pi is None and "retired" in caplog.text
    assert isinstance(node.graph, retiring.RetiredGraph) and node.graph.captured == "graph as the tree made it"
    node.graph.replay()  # the tree's first replay after the recording: nothing
    assert torch.equal(out, x * 2 + memory[16:80])
    with pytest.raises(RuntimeError, match="retired PI graph was replayed"):
        node.graph.replay()
    assert retiring.refused(model) == "differs"

    again_inputs = [torch.randn(64), torch.randn(64)]
    second = RecordNode(again_inputs, non_static=[0], managed=[1])
    capture = _Capture(second, model)
    record(second, model, again_inputs, capture)
    ((_, _, watch),) = capture.calls
    assert isinstance(watch, contextlib.nullcontext), "its next recording is stock, once"
    from grace.pi import report

    assert any(RETIRED_BEFORE in why for r in report.records() for why in r.copied.values())


def test_a_failed_check_whose_managed_input_lives_on_captures_again_with_it(monkeypatch) -> None:
    from grace.pi.tree_hook import Finished, record

    monkeypatch.setattr(observe.Recording, "finish", lambda self, *a, **k: Finished(None, rerecord="differs"))
    monkeypatch.setattr("grace.pi.tree_hook.new_graph", lambda device, inputs, keep_graph=False: "a fresh graph")
    x, act = torch.randn(64), torch.randn(64)  # the test holds the activation, as autograd may
    node = RecordNode([x, act], non_static=[0], managed=[1])
    model = _warmed_up(_two_input_model(), [x, act])
    capture = _Capture(node, model)
    record(node, model, [x, act], capture)
    (_, first_ids, _), (second_graph, second_ids, _) = capture.calls
    (again,) = node.allocated
    assert again[1] is act and second_ids[1] == id(act), "the managed input itself, at its address"
    assert again[0] is not x and torch.equal(again[0], x)
    assert second_graph == "a fresh graph" and not node.grace_retired


class _AliasingCapture:
    """A capture whose one output is its managed input itself (a graph may return an input it
    did not copy): after the capture only that output holds the input's tensor."""

    def __init__(self, node: Any) -> None:
        self.node, self.calls = node, []

    def __call__(self, inputs: list[Any], watch: Any) -> Any:
        self.calls.append((self.node.graph, [id(x) for x in inputs], watch))
        out = (inputs[1],)
        inputs.clear()
        return out


def test_a_managed_input_held_only_by_the_first_captures_outputs_is_captured_again(monkeypatch) -> None:
    """A managed input alive when the check fails lived through the capture, so it is captured
    again, though the first capture's outputs, dropped before the second, held its last reference."""
    from grace.pi.tree_hook import Finished, record

    monkeypatch.setattr(observe.Recording, "finish", lambda self, *a, **k: Finished(None, rerecord="differs"))
    monkeypatch.setattr("grace.pi.tree_hook.new_graph", lambda device, inputs, keep_graph=False: "a fresh graph")
    inputs = [torch.randn(64), torch.randn(64)]
    act_id = id(inputs[1])
    node = RecordNode(inputs, non_static=[0], managed=[1])
    model = _warmed_up(_two_input_model(), list(inputs))
    capture = _AliasingCapture(node)
    (out,) = record(node, model, inputs, capture)
    (_, first_ids, _), (second_graph, second_ids, _) = capture.calls
    assert second_ids[1] == act_id and id(out) == act_id, "the managed input itself, not a copy"
    assert second_graph == "a fresh graph" and not node.grace_retired


def test_the_patched_check_invariants_refuses_a_retired_node_first() -> None:
    from torch._inductor import cudagraph_trees

    if "grace_retired" not in inspect.getsource(cudagraph_trees.CUDAGraphNode.check_invariants):
        pytest.skip("GraCE's overlay with the PI patches is not active here (run `make setup`)")
    node = cudagraph_trees.CUDAGraphNode.__new__(cudagraph_trees.CUDAGraphNode)
    node.grace_retired = True  # and nothing else: the test must not reach the node's other state
    status, why = cudagraph_trees.CUDAGraphNode.check_invariants(node, [])
    assert status != cudagraph_trees.CheckInvariantStatus.SUCCESS and "retired" in why()


def test_a_graph_found_unverifiable_only_at_its_capture_is_not_run_again_outside_it(monkeypatch) -> None:
    """Retiring runs the function once more outside its capture, as its warm-up did; a graph
    whose capture saw what its warm-up did not (an operator the check cannot run) is not run so:
    the recording stops with an error that says why, rather than risk that run."""
    from grace.pi.tree_hook import Finished, record

    def unverifiable_then_untrusted(self: Any, *a: Any, **k: Any) -> Any:
        self.unverifiable = "a higher-order operator"
        return Finished(None, rerecord="the graph cannot be run outside its capture to be checked")

    monkeypatch.setattr(observe.Recording, "finish", unverifiable_then_untrusted)
    memory, x = torch.randn(96), torch.randn(64)
    inputs = [x, memory[16:80]]
    node = RecordNode(inputs, non_static=[0], managed=[1])
    model = _warmed_up(_two_input_model(), list(inputs))
    with pytest.raises(RuntimeError, match="cannot be run outside its capture"):
        record(node, model, inputs, _ZerosCapture(node))
    assert not node.grace_retired

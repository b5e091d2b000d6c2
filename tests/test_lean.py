"""Lean replay's dispatch (grace.lean.dispatch) against the tree manager's own ``_run``, on the CPU.

The real ``CUDAGraphTreeManager`` methods, as GraCE's patch series makes them, run over fake
nodes (no CUDA): every test builds a tree state, makes the same call once with the manager's
``grace_lean`` None (stock ``_run`` alone) and once with a lean dispatch, and requires the same
result and the same manager state after.
"""

from __future__ import annotations

import copy
import random
from collections import defaultdict
from typing import Any

import pytest
import torch._inductor.cudagraph_trees as ct
from torch._inductor import config as inductor_config
from torch.utils._ordered_set import OrderedSet

from grace.lean.dispatch import LeanDispatch

@pytest.fixture(autouse=True)
def _tree_globals() -> Any:
    """The trees' process-wide generation state as a fresh process has it (other tests call
    ``cudagraph_mark_step_begin``), and GraCE's capture-time hooks off: the fakes record nothing."""
    import grace.config

    saved = ct.MarkStepBox.mark_step_counter
    ct.MarkStepBox.mark_step_counter = 0
    try:
        with grace.config.patch(scg=False, pi=False, cgct=False):
            yield
    finally:
        ct.MarkStepBox.mark_step_counter = saved


STATUSES = (ct.CheckInvariantStatus.SUCCESS, ct.CheckInvariantStatus.ExpectedDeadIndicesBeforeGraphMismatch,
            ct.CheckInvariantStatus.StaticInputIdxMismatch, ct.CheckInvariantStatus.CudagraphManagedIdxMismatch)


class FakeNode(ct.CUDAGraphNode):
    """A recorded node: its check's status and whether its outputs are all dead are given."""

    def __init__(self, gid: int, parent: FakeNode | None, status: Any = STATUSES[0], dead: bool = False) -> None:
        self.id = ct.GraphID(gid)
        self._parent = parent
        self.children: dict[Any, list[FakeNode]] = defaultdict(list)
        self.status = status
        self.dead = dead
        self.runs = 0
        self.non_static_input_idx = [0]

    @property
    def parent(self) -> FakeNode | None:
        return self._parent

    @property
    def _path_from_root(self) -> list[FakeNode]:
        n, out = self, []
        while n is not None:
            out.append(n)
            n = n._parent
        return out[::-1]

    def check_invariants(self, inputs: list[Any]) -> Any:
        return self.status, (lambda: str(self.status))

    def run(self, new_inputs: list[Any]) -> list[Any]:
        self.runs += 1
        new_inputs.clear()
        return [("replayed", self.id.id)]

    def all_outputs_are_dead(self) -> bool:
        return self.dead

    def clear_path_state(self) -> None:
        pass


class CountingLean(LeanDispatch):
    """The lean dispatch, counting the calls it served itself."""

    def __init__(self) -> None:
        super().__init__()
        self.served = 0

    def replay(self, manager: Any, new_inputs: list[Any], function_id: Any) -> Any:
        out = super().replay(manager, new_inputs, function_id)
        self.served += out is not None
        return out


class FakeFunction:
    def __init__(self, fid: int) -> None:
        self.mutated_input_idxs: list[int] = []
        self.static_input_idxs: list[int] = []
        self.model = lambda inputs, fid=fid: [("eager", fid)]


class FakeManager(ct.CUDAGraphTreeManager):
    """The manager's state without CUDA; recording, warm-up and the allocator are markers."""

    def __init__(self, lean: bool = False) -> None:
        self.roots: dict[Any, list[FakeNode]] = defaultdict(list)
        self.ids_to_funcs: dict[Any, FakeFunction] = {}
        self.warmed_up_functions: OrderedSet[Any] = OrderedSet()
        self.non_cudagraph_managed_mutation_hint: dict[Any, dict[Any, bool]] = defaultdict(dict)
        self.num_rerecord: dict[Any, dict[Any, int]] = defaultdict(lambda: defaultdict(lambda: 0))
        self.path_state = ct.ExecutionState.NONE
        self._current_node: FakeNode | None = None
        self.current_gen = -1
        self.id_to_mode: dict[Any, Any] = {}
        self.id_to_compile_id: dict[Any, Any] = {}
        self.running_forwards_with_pending_backwards = False
        self.mode = None
        self.compile_id = None
        self.grace_no_graph_functions: OrderedSet[Any] = OrderedSet()
        self.graph = object()
        self.warned_functions: OrderedSet[Any] = OrderedSet()
        self.warned_mutation: OrderedSet[Any] = OrderedSet()
        self.debug_fail_counter = 0
        self.events: list[Any] = []
        self.grace_lean = CountingLean() if lean else None  # as the patched __init__ sets it
        self.grace_replay_input_check = None  # stock's execute_node (grace.trees: the hardened one)
        self.grace_stale_outputs = None  # stock's end of a path and of a call (grace.stale_outputs)
        self.grace_adopted_grads = None  # stock's autograd adoption of .grad (grace.grad_copies)
        self.grace_eager = None  # stock's runs without a graph (grace.trees.EagerFallback)

    def record_function(self, new_inputs: list[Any], function_id: Any) -> Any:
        self.events.append(("record", function_id.id))
        return [("recorded", function_id.id)]

    def run_eager(self, new_inputs: list[Any], function_id: Any) -> Any:
        self.events.append(("warm-up", function_id.id))
        return [("warmed", function_id.id)]

    def apply_checkpoint_execution_state_in_allocator(self) -> None:
        self.events.append(("checkpoint",))

    def _update_non_cudagraph_managed_mutation(self, function_id: Any, inputs: list[Any]) -> None:
        self.events.append(("mutation check", function_id.id))
        self.non_cudagraph_managed_mutation_hint[self._get_node_id()][function_id] = False

    def snapshot(self, nodes: list[FakeNode]) -> dict[str, Any]:
        node = self.current_node
        return {
            "node": None if node is None else node.id.id, "state": self.path_state, "gen": self.current_gen,
            "pending backward": self.running_forwards_with_pending_backwards, "mode": self.mode,
            "events": list(self.events), "runs": [n.runs for n in nodes],
            "hints": {k: dict(v) for k, v in self.non_cudagraph_managed_mutation_hint.items() if v},
            "rerecords": {k: {f: c for f, c in v.items() if c} for k, v in self.num_rerecord.items()
                          if any(v.values())},
        }


def random_tree(rng: random.Random, lean: bool) -> tuple[FakeManager, list[FakeNode], list[Any]]:
    """A tree of up to 7 nodes over 3 functions, in a random state the lean dispatch may meet."""
    manager = FakeManager(lean)
    fids = [ct.FunctionID(i) for i in range(3)]
    modes = [ct.CompilationMode.INFERENCE, ct.CompilationMode.FORWARD, ct.CompilationMode.BACKWARD]
    for f in fids:
        manager.ids_to_funcs[f] = FakeFunction(f.id)
        manager.id_to_mode[f] = rng.choice(modes)
        manager.id_to_compile_id[f] = None
        if rng.random() < 0.85:
            manager.warmed_up_functions.add(f)
    nodes: list[FakeNode] = []
    for gid in range(rng.randint(1, 7)):
        parent = rng.choice([None, *nodes]) if nodes else None
        node = FakeNode(gid, parent, status=rng.choices(STATUSES, weights=(6, 1, 1, 1))[0], dead=rng.random() < 0.3)
        f = rng.choice(fids)
        (manager.roots[f] if parent is None else parent.children[f]).append(node)
        nodes.append(node)
    for node_id in [None, *(n.id for n in nodes)]:
        for f in fids:
            r = rng.random()
            if r < 0.8:
                manager.non_cudagraph_managed_mutation_hint[node_id][f] = r < 0.05  # rarely true
            if rng.random() < 0.1:
                manager.num_rerecord[node_id][f] = rng.choice([1, 10_000])  # the limit is 128 by default
    if rng.random() < 0.1:
        manager.grace_no_graph_functions.add(rng.choice(fids))
    if rng.random() < 0.75:
        manager._current_node = rng.choice(nodes)
        manager.path_state = ct.ExecutionState.EXECUTION
    manager.current_gen = rng.choice([ct.GenerationTracker.generation, ct.GenerationTracker.generation - 1])
    manager.running_forwards_with_pending_backwards = rng.random() < 0.3
    return manager, nodes, fids


def call_twice(seed: int) -> tuple[dict, dict, Any, Any, bool]:
    """The same call on the same state, stock and lean: (stock's state after, lean's, their
    outputs, whether the lean dispatch served the call itself)."""
    results = []
    for lean in (False, True):
        rng = random.Random(seed)
        manager, nodes, fids = random_tree(rng, lean)
        fid = rng.choice(fids)
        config = dict(force_cudagraphs_warmup=rng.random() < 0.1, skip_cudagraph_warmup=rng.random() < 0.1)
        mark_step = rng.random() < 0.2
        with inductor_config.patch({f"triton.{k}": v for k, v in config.items()}):
            saved = ct.MarkStepBox.mark_step_counter
            ct.MarkStepBox.mark_step_counter = 7 if mark_step else 0
            try:
                out = manager.run([object()], fid)
            finally:
                ct.MarkStepBox.mark_step_counter = saved
        results.append((manager.snapshot(nodes), out, bool(manager.grace_lean and manager.grace_lean.served)))
    (stock, stock_out, _), (lean, lean_out, served) = results
    return stock, lean, stock_out, lean_out, served


@pytest.mark.parametrize("inline", [True, False])
def test_the_lean_dispatch_does_what_stock_run_does_on_random_tree_states(inline: bool) -> None:
    import torch._dynamo.config as dynamo_config

    served = 0
    with dynamo_config.patch(inline_inbuilt_nn_modules=inline):
        for seed in range(3000):
            stock, lean, stock_out, lean_out, by_lean = call_twice(seed)
            assert lean_out == stock_out, f"seed {seed}"
            assert lean == stock, f"seed {seed}"
            served += by_lean
    assert served > 300, f"the lean dispatch served only {served} of 3000 calls: its path is hardly exercised"


def _chain(manager: FakeManager, partitions: int) -> list[Any]:
    """One compiled function of ``partitions`` graphs, recorded as one path, in steady state."""
    fids = [ct.FunctionID(i) for i in range(partitions)]
    parent = None
    for k, f in enumerate(fids):
        node = FakeNode(k, parent)
        (manager.roots[f] if parent is None else parent.children[f]).append(node)
        manager.ids_to_funcs[f] = FakeFunction(k)
        manager.warmed_up_functions.add(f)
        manager.id_to_mode[f] = ct.CompilationMode.INFERENCE
        manager.id_to_compile_id[f] = None
        manager.non_cudagraph_managed_mutation_hint[None if parent is None else parent.id][f] = False
        parent = node
    manager.non_cudagraph_managed_mutation_hint[parent.id][fids[0]] = False
    return fids


@pytest.mark.parametrize("partitions", [1, 4])
def test_steady_calls_replay_the_same_nodes_with_and_without_the_lean_dispatch(partitions: int) -> None:
    ran = []
    for lean in (False, True):
        manager = FakeManager(lean)
        fids = _chain(manager, partitions)
        outs = []
        for _ in range(5):
            ct.GenerationTracker.generation += 1
            outs += [manager.run([object()], f) for f in fids]
        ran.append((outs, manager.events, manager.current_node.id, manager.path_state))
    assert ran[0] == ran[1]
    assert ran[1][1] == [], "nothing but replays"


def test_a_new_generation_that_cannot_start_is_left_to_stock() -> None:
    """Training: the forward again while its backward is pending: stock decides (it checks
    whether every output of the current node is dead)."""
    manager = FakeManager(lean=True)
    (f0,) = _chain(manager, 1)
    manager.id_to_mode[f0] = ct.CompilationMode.FORWARD
    manager.run([object()], f0)
    ct.GenerationTracker.generation += 1
    assert manager.running_forwards_with_pending_backwards
    assert manager.grace_lean.replay(manager, [object()], f0) is None
    assert manager.current_node is not None, "the path was left as it was"


def test_a_replay_whose_input_was_overwritten_raises_with_the_path_as_it_was() -> None:
    """Hardened (any GraCE switch on): the input is read before the node becomes current, so
    the tree does not stand on a node whose outputs it freed when their path ended."""
    import torch

    from grace.trees import check_replay_inputs_readable

    for hardened in (False, True):
        manager = FakeManager()
        manager.grace_replay_input_check = check_replay_inputs_readable if hardened else None
        parent, child = FakeNode(0, None), FakeNode(1, None)
        child._parent = parent
        manager._current_node, manager.path_state, manager.current_gen = parent, ct.ExecutionState.EXECUTION, 3
        overwritten = torch.randn(4)
        torch._C._set_storage_access_error_msg(overwritten, "accessing tensor output of CUDAGraphs that has been "
                                                            "overwritten by a subsequent run")

        def reading_run(new_inputs: list) -> list:
            new_inputs[0].data_ptr()  # as the copy into the placeholder, or PI's guard, reads it
            return []

        child.run = reading_run
        with pytest.raises(RuntimeError, match="overwritten"):
            manager.execute_node(child, [overwritten])
        where = (manager.current_node, manager.path_state, manager.current_gen)
        if hardened:
            assert where == (parent, ct.ExecutionState.EXECUTION, 3), "the path as it was"
        else:
            assert where[0] is child, "stock: the node stays current without new outputs"
        readable = torch.randn(4)
        assert manager.execute_node(child, [readable]) == [] and manager.current_node is child


class _NotesCalls:
    """Records what the patched ``run`` hands to ``grace_adopted_grads``."""

    def __init__(self) -> None:
        self.calls: list[Any] = []

    def before_call(self) -> None:
        self.calls.append("before")

    def noted(self, outputs: Any, tree_node: Any = None) -> None:
        self.calls.append(("noted", list(outputs), tree_node))


@pytest.mark.parametrize(("mode", "noted"), [
    (ct.CompilationMode.BACKWARD, True),
    (ct.CompilationMode.FORWARD, False),
    (ct.CompilationMode.INFERENCE, False),
])
def test_run_hands_a_backward_calls_outputs_to_the_adopted_gradient_notes(mode: Any, noted: bool) -> None:
    """The patched ``run`` (``patches/scg/0007``, ``0014``): every call begins with
    ``before_call``; a backward graph's call ends by noting what it returns, and the recorded
    node it replayed, whose storages the notes then read once."""
    manager = FakeManager()
    (f0,) = _chain(manager, 1)
    manager.id_to_mode[f0] = mode
    notes = manager.grace_adopted_grads = _NotesCalls()
    out = manager.run([object()], f0)
    (root,) = manager.roots[f0]
    assert notes.calls == (["before", ("noted", list(out), root)] if noted else ["before"])


def test_a_backward_call_that_runs_no_recorded_node_hands_the_notes_its_outputs_alone() -> None:
    """Kept out of graphs (SCG), the call runs its compiled code: ``current_node`` stays the node
    of the call before, which did not return these outputs, so no node is passed and the notes
    read the outputs' storages."""
    manager = FakeManager()
    (f0,) = _chain(manager, 1)
    manager.id_to_mode[f0] = ct.CompilationMode.BACKWARD
    notes = manager.grace_adopted_grads = _NotesCalls()
    manager.run([object()], f0)  # a replay: the root is the current node now
    manager.grace_no_graph_functions.add(f0)
    out = manager.run([object()], f0)
    assert notes.calls[-1] == ("noted", list(out), None)


def _outcome(seed: int, eager: bool, inputs: list[Any]) -> tuple[Any, dict]:
    """The patched ``run`` on random tree state ``seed``, with the manager's eager fallback
    (``grace.trees.EagerFallback``) or stock's: its output or error, and the state after."""
    from grace.trees import EagerFallback

    rng = random.Random(seed)
    manager, nodes, fids = random_tree(rng, lean=rng.random() < 0.5)
    if eager:
        manager.grace_eager = EagerFallback(manager.ids_to_funcs)
    fid = rng.choice(fids)
    try:
        out: Any = manager.run(list(inputs), fid)
    except RuntimeError as e:
        out = f"raised: {str(e)[:60]}"
    return out, manager.snapshot(nodes)


def test_the_eager_fallback_changes_nothing_but_raising_for_an_overwritten_input() -> None:
    """On random tree states: with readable inputs the tree's eager fallback gives stock's output
    and state; with an input a replay overwrote, every call stock would run without a graph
    raises the tree's error instead, leaving the tree as stock's fallback leaves it, and every
    other call is as stock's."""
    import torch

    overwritten = torch.ones(4)
    torch._C._set_storage_access_error_msg(overwritten, "accessing tensor output of CUDAGraphs that has been "
                                                        "overwritten by a subsequent run")
    fell_back = 0
    for seed in range(1500):
        readable = [torch.ones(4), 3]
        assert _outcome(seed, True, readable) == _outcome(seed, False, readable), f"seed {seed}"
        (hardened, state), (stock, stock_state) = (_outcome(seed, e, [overwritten, 3]) for e in (True, False))
        if isinstance(stock, list) and stock and stock[0][0] == "eager":
            fell_back += 1
            assert hardened.startswith("raised: accessing tensor output"), f"seed {seed}: {hardened}"
            # as stock's fallback left the tree, but for what ``run`` notes after a call returns
            state.pop("pending backward"), stock_state.pop("pending backward")
            assert state == stock_state, f"seed {seed}: the tree as stock's fallback left it"
        else:
            assert (hardened, state) == (stock, stock_state), f"seed {seed}"
    assert fell_back > 50, f"only {fell_back} of 1500 calls reached an eager fallback"

"""The tree checks for alignment the inputs Inductor's kernels assume aligned, not only those
aligned at the first call of a size (grace.input_alignment, scg/0010), on the CPU: the decision
itself, and the patched ``deferred_cudagraphify`` with CPU tensors standing in for the GPU's."""

from __future__ import annotations

from typing import Any, Callable

import pytest
import torch
import torch._inductor.compile_fx as compile_fx
import torch._inductor.cudagraph_trees as ct

import grace.config
from grace import input_alignment
from grace.input_alignment import inputs_to_check, partition_checks, remember, remembering


def model_fn() -> Callable[[list[Any]], Any]:
    def call(inputs: list[Any]) -> Any:
        return [inputs[1] + inputs[2]]

    return call


def test_compiled_checks_are_joined_to_the_runtime_ones() -> None:
    model = model_fn()
    remember(model, [1, 3])
    assert inputs_to_check(model, [2]) == [1, 2, 3]
    assert inputs_to_check(model, [3, 2]) == [1, 2, 3]


def test_a_wrapped_model_finds_what_was_remembered_for_the_callable_it_wraps() -> None:
    model = model_fn()
    remember(model, [1])

    def wrapper(inputs: list[Any]) -> Any:
        return model(inputs)

    wrapper.__wrapped__ = model  # type: ignore[attr-defined]
    assert inputs_to_check(wrapper, [2]) == [1, 2]


def test_an_unknown_model_keeps_the_runtime_list() -> None:
    assert inputs_to_check(model_fn(), [4, 2]) == [4, 2]
    assert inputs_to_check(len, [1]) == [1]  # a builtin: never remembered


def test_lists_remembered_twice_are_joined() -> None:
    model = model_fn()
    remember(model, [1])
    remember(model, [2])
    remember(model, None)
    assert inputs_to_check(model, []) == [1, 2]
    remember(len, [1])  # a builtin takes no attribute: ignored, no error
    assert not hasattr(len, input_alignment.ATTRIBUTE)


def test_a_partition_sees_the_graph_list_in_its_own_indices() -> None:
    # partition inputs: graph input 3, a buffer of an earlier partition, graph inputs 0 and 2
    assert partition_checks([3, None, 0, 2], graph_checks=[0, 3]) == [0, 2]
    assert partition_checks([None, 1], graph_checks=[0, 3]) == []


def test_remembering_notes_the_model_it_is_applied_to() -> None:
    model = model_fn()
    applied = remembering(lambda m: ("wrapped", m), [2])(model)
    assert applied == ("wrapped", model)
    assert inputs_to_check(model, []) == [2]


def _off_alignment(rows: int, cols: int) -> torch.Tensor:
    base = torch.randn(rows * cols + 4)
    offset = (-base.data_ptr() % 16) // 4 + 1  # one float past a 16-byte boundary
    x = base[offset:offset + rows * cols].view(rows, cols)
    assert x.data_ptr() % 16 == 4
    return x


@pytest.fixture
def deferred(monkeypatch: pytest.MonkeyPatch) -> Callable[..., tuple[Callable[[list[Any]], Any], list[list[int]]]]:
    """``cudagraphify_impl`` as patched, CPU tensors counted as GPU ones, and the tree replaced by
    a recorder of the alignment of what it is handed."""
    monkeypatch.setattr(compile_fx, "is_gpu", lambda device_type: True)
    handed: list[list[int]] = []

    def tree(model: Any, inputs: list[Any], static_input_idxs: Any, *args: Any, **kwargs: Any) -> Any:
        handed.append([t.data_ptr() % 16 for t in inputs if isinstance(t, torch.Tensor)])
        return model, model(inputs)

    monkeypatch.setattr(ct, "cudagraphify", tree)

    def make(model: Callable[[list[Any]], Any], mutated: tuple[int, ...] = ()) -> tuple[Any, list[list[int]]]:
        example = [8, torch.randn(8, 64), torch.randn(8, 64)]
        return ct.cudagraphify_impl(model, example, (), mutated_input_idxs=mutated), handed

    return make


def _first_call_off_alignment(run: Callable[[list[Any]], Any]) -> None:
    run([8, torch.randn(8, 64), torch.randn(8, 64)])
    x, y = _off_alignment(6, 64), torch.randn(6, 64)
    assert torch.equal(run([6, x, y])[0], x + y)


@pytest.mark.parametrize("hardened", [False, True])
def test_a_new_size_off_alignment_reaches_the_tree_aligned_with_grace(deferred: Any, hardened: bool) -> None:
    """Stock hands the tree's warm-up the input off alignment that the kernels assume aligned."""
    model = model_fn()
    remember(model, [1, 2])  # the example was aligned: the kernels assume both tensors aligned
    run, handed = deferred(model)
    with grace.config.patch(scg=hardened, pi=False, cgct=False, lean_replay=False):
        _first_call_off_alignment(run)
    assert handed[1] == ([0, 0] if hardened else [4, 0])


def test_an_input_the_kernels_do_not_assume_aligned_is_not_copied(deferred: Any) -> None:
    """As PyTorch's ``test_unaligned_static_input_trees`` asks: an input off alignment in the
    example Inductor compiled for is not in the compiled list, and is never cloned."""
    model = model_fn()
    remember(model, [2])
    run, handed = deferred(model)
    with grace.config.patch(scg=True, pi=False, cgct=False, lean_replay=False):
        _first_call_off_alignment(run)
    assert handed[1] == [4, 0]


@pytest.mark.parametrize("hardened", [False, True])
def test_a_mutated_input_off_alignment_at_a_sizes_first_call_is_aligned_and_gets_the_mutation_back(
        deferred: Any, hardened: bool) -> None:
    """The kernels assume input 1 aligned; it arrives off alignment at a new size's first call.
    Stock hands the tree the input as it is (the kernels may fault on it); GraCE hands it an
    aligned clone and copies the clone's mutation back after the tree's first run."""

    def mutate(inputs: list[Any]) -> Any:
        inputs[1].add_(inputs[2])
        return [inputs[1] * 2]

    remember(mutate, [1, 2])
    run, handed = deferred(mutate, mutated=(1,))
    with grace.config.patch(scg=hardened, pi=False, cgct=False, lean_replay=False):
        run([8, torch.randn(8, 64), torch.randn(8, 64)])
        x, y = _off_alignment(6, 64), torch.randn(6, 64)
        expected = x + y
        out = run([6, x, y])
    assert handed[1] == ([0, 0] if hardened else [4, 0])
    assert torch.equal(out[0], expected * 2)
    assert torch.equal(x, expected)  # stock mutates the caller's tensor itself, unaligned


@pytest.mark.parametrize("hardened", [False, True])
def test_a_mutated_input_cloned_for_alignment_gets_the_mutation_back(deferred: Any, hardened: bool,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The tree runs a function that mutates an input it does not manage eagerly, on what the
    alignment wrapper hands it: an input aligned at the size's first call and off alignment at a
    later one is cloned there. Stock's wrapper copies nothing back (the caller's tensor keeps its
    old values); with any switch on the clone's values land in the caller's tensor
    (scg/0012)."""

    def mutate(inputs: list[Any]) -> Any:
        inputs[1].add_(inputs[2])
        return [inputs[1] * 2]

    from torch._inductor.utils import tensor_is_aligned

    # stock's runtime list as on a GPU: every input aligned at the size's first call
    monkeypatch.setattr(compile_fx, "should_assume_input_aligned", tensor_is_aligned)
    run, handed = deferred(mutate, mutated=(1,))
    with grace.config.patch(scg=hardened, pi=False, cgct=False, lean_replay=False):
        run([8, torch.randn(8, 64), torch.randn(8, 64)])  # the size's first call, aligned
        x, y = _off_alignment(8, 64), torch.randn(8, 64)
        expected = x + y
        out = run([8, x, y])
    assert len(handed) == 1  # one size: the later call went through the wrapper alone
    assert torch.equal(out[0], expected * 2)
    assert torch.equal(x, expected) == hardened


def test_mutations_copied_back_are_every_mutated_input() -> None:
    assert list(input_alignment.mutations_copied_back((3, 1))) == [3, 1]
    assert not input_alignment.mutations_copied_back(())


def _compiled_graph(partition_maps: Any = None) -> Any:
    from types import SimpleNamespace

    from torch._inductor.cudagraph_utils import PlaceholderInfo

    placeholders = [PlaceholderInfo(name=f"arg{i}", stack_trace=None, users=[], mutating_use_stack_trace=None)
                    for i in range(4)]
    partitions = [model_fn(), model_fn()]
    graph = SimpleNamespace(
        current_callable=model_fn(), inputs_to_check=(0, 3), mutated_input_idxs=(), device_idxs={0},
        cudagraph_info=SimpleNamespace(cudagraph_fail_reasons=[], placeholders=placeholders, stack_traces=[None]),
        fx_kwargs={"is_inference": True, "is_backward": False, "static_input_idxs": ()},
        partition_maps=partition_maps, partitions=partitions)
    graph.recursively_apply_fns = lambda fns: [fn(p) for fn, p in zip(fns, partitions)]
    return graph


@pytest.mark.parametrize("hardened", [False, True])
def test_post_compile_hands_over_the_compiled_list(monkeypatch: pytest.MonkeyPatch, hardened: bool) -> None:
    """``cudagraph_post_compile`` and ``cudagraph_partition_post_compile`` (patched) remember the
    compiled graph's ``inputs_to_check`` for the callables they wrap, a partition's in its own
    indices; with every switch off they remember nothing, as stock."""
    import torch._inductor.output_code as output_code
    from torch._inductor.utils import BoxedBool, GraphPartitionMap

    monkeypatch.setattr(output_code, "prepare_cudagraph_post_compile", lambda *args: None)
    monkeypatch.setattr(compile_fx, "cudagraphify", lambda model, **kwargs: ("tree", model))
    whole = _compiled_graph()
    maps = [GraphPartitionMap(0, [3, None, 1], [0], []), GraphPartitionMap(1, [0], [0], [])]
    parts = _compiled_graph(partition_maps=maps)
    with grace.config.patch(scg=hardened, pi=False, cgct=False, lean_replay=False):
        callable_ = whole.current_callable
        output_code.cudagraph_post_compile([], whole, BoxedBool(True), {}, None)
        output_code.cudagraph_partition_post_compile([], parts, BoxedBool(True), {}, None)
    assert whole.current_callable == ("tree", callable_)
    assert inputs_to_check(callable_, []) == ([0, 3] if hardened else [])
    assert [inputs_to_check(p, []) for p in parts.partitions] == ([[0], [0]] if hardened else [[], []])

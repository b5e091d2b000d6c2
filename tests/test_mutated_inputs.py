"""Functions that mutate inputs the tree copies (grace.mutated_inputs): which mutations are copied
back, which keep stock's refusal, and the copy itself, on the CPU. The GPU tests are
tests/test_mutated_inputs_cuda.py."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")

import grace.config  # noqa: E402
from grace import mutated_inputs  # noqa: E402


def _never_recorded(_: object) -> bool:
    return False


def test_only_mutations_of_inputs_the_tree_copies_are_its_to_copy_back() -> None:
    recorded = torch.zeros(4)
    inputs = [torch.zeros(4), torch.zeros(4), recorded, torch.zeros(4)]
    got = mutated_inputs.copied_mutations([0, 1, 2, 3], static_input_idxs=[1], inputs=inputs,
                                          is_recorded=lambda t: t is recorded)
    assert got == [0, 3]


def test_what_cannot_be_copied_back_exactly_is_named() -> None:
    base = torch.zeros(8)
    assert mutated_inputs.why_not_copied_back([0], [torch.zeros(4), torch.zeros(4)]) is None
    assert "not a tensor" in mutated_inputs.why_not_copied_back([0], [3, torch.zeros(4)])
    expanded = torch.zeros(1, 4).expand(3, 4)
    assert "expanded" in mutated_inputs.why_not_copied_back([0], [expanded])
    assert "shares memory with input 1" in mutated_inputs.why_not_copied_back([0], [base[:4], base[4:]])
    assert mutated_inputs.why_not_copied_back([1], [torch.zeros(0), torch.zeros(2)]) is None
    assert mutated_inputs.why_not_copied_back([0], [torch.zeros(0), torch.zeros(0)]) is None


def test_an_input_the_tree_has_overwritten_is_named_not_raised() -> None:
    """An input that is a graph output a later run overwrote: reading its storage raises, so
    the check refuses (stock's path then raises stock's own error where the function reads it)."""
    dead = torch.zeros(4)
    torch._C._set_storage_access_error_msg(dead, "overwritten by a subsequent run")
    for inputs, index in (([torch.zeros(4), dead], 0), ([dead], 0)):
        why = mutated_inputs.why_not_copied_back([index], inputs)
        assert why is not None and "overwrote" in why and f"input {len(inputs) - 1}" in why


def test_the_tree_records_only_with_the_option_and_a_switch_on(caplog) -> None:
    func = SimpleNamespace(mutated_input_idxs=[0], static_input_idxs=[])
    clean = [torch.zeros(4), torch.zeros(4)]
    base = torch.zeros(8)
    assert grace.config._config["mutated_inputs"].default is True, "on by default"
    with grace.config.patch(mutated_inputs=False, cgct=True):
        assert not mutated_inputs.copies_back(func, clean, _never_recorded), "off"
    with grace.config.patch(mutated_inputs=True, cgct=False, pi=False, scg=False, lean_replay=False):
        assert not mutated_inputs.copies_back(func, clean, _never_recorded), "every switch off is stock"
    with grace.config.patch(mutated_inputs=True, cgct=True):
        assert mutated_inputs.copies_back(func, clean, _never_recorded)
        with caplog.at_level("INFO", logger="grace.mutated_inputs"):
            assert not mutated_inputs.copies_back(func, [base[:4], base[4:]], _never_recorded)
    assert "keeps stock's refusal" in caplog.text and "shares memory" in caplog.text


def test_a_node_holds_its_callers_tensors_and_writes_the_placeholders_into_them() -> None:
    with grace.config.patch(mutated_inputs=True, cgct=True):
        callers = [torch.zeros(3), 7, torch.zeros(2), torch.zeros(2)]
        copy_back = mutated_inputs.copy_back_for([0, 1, 3], non_static_input_idx=[0, 1, 2], inputs=callers)
        assert copy_back is not None and copy_back.indices == (0,), "copied, a tensor, mutated"
        assert mutated_inputs.copy_back_for([3], non_static_input_idx=[0, 1, 2], inputs=callers) is None
        held = copy_back.hold(callers)
        callers.clear()  # as the tree clears its list of inputs before the replay
        placeholders = [torch.tensor([1.0, 2.0, 3.0]), None, torch.zeros(2), None]
        copy_back.note_recording(placeholders, [None])  # a node with no tensor output
        copy_back.write(held)
        assert held[0].tolist() == [1.0, 2.0, 3.0]
    with grace.config.patch(mutated_inputs=False):
        assert mutated_inputs.copy_back_for([0], [0], [torch.zeros(1)]) is None


def test_a_callers_tensor_the_outputs_took_is_marked_overwritten_not_written() -> None:
    """Invariant 6: an output of an earlier generation fed in, in memory the node's outputs now
    occupy, keeps the outputs' bytes and raises on its next read; the other caller is written."""
    with grace.config.patch(mutated_inputs=True, scg=True):
        copy_back = mutated_inputs.copy_back_for([0, 1], non_static_input_idx=[0, 1],
                                                 inputs=[torch.zeros(2), torch.zeros(2)])
    assert copy_back is not None
    import numpy as np

    pool = np.zeros(8, dtype=np.float32)  # the graph pool's memory, two storages over it:
    output = torch.from_numpy(pool)[:4]  # the node's output, as the tree reconstructs it
    taken = torch.from_numpy(pool)[:2]  # the earlier generation's output the caller fed in
    free = torch.zeros(2)
    copy_back.note_recording([torch.ones(2), torch.full((2,), 3.0)],
                             [{"data_ptr": output.untyped_storage().data_ptr(), "nbytes": 16}, 7, None])
    output.fill_(5.0)  # what the replay wrote
    copy_back.write([taken, free])
    assert free.tolist() == [3.0, 3.0]
    assert output.tolist() == [5.0] * 4  # not overwritten by the placeholder's ones
    with pytest.raises(RuntimeError, match="overwritten by a subsequent run"):
        taken.tolist()


def test_a_caller_apart_from_the_outputs_is_written() -> None:
    with grace.config.patch(mutated_inputs=True, scg=True):
        copy_back = mutated_inputs.copy_back_for([0], [0], [torch.zeros(2)])
    output = torch.zeros(4)
    copy_back.note_recording([torch.ones(2)], [{"data_ptr": output.untyped_storage().data_ptr(), "nbytes": 16}])
    caller = torch.zeros(2)
    copy_back.write([caller])
    assert caller.tolist() == [1.0, 1.0] and output.tolist() == [0.0] * 4


def test_the_patched_tree_asks_before_refusing_and_copies_back_around_every_replay() -> None:
    """The call sites of patches/scg/0011 in the overlay's tree (built from the series)."""
    import inspect

    from grace.patching.overlay import current

    if current() is None:
        pytest.skip("GraCE's overlay is not built here (run `make setup`)")
    from torch._inductor import cudagraph_trees as trees

    check = inspect.getsource(trees.CUDAGraphTreeManager._update_non_cudagraph_managed_mutation)
    assert "copies_back(" in check
    init, run = inspect.getsource(trees.CUDAGraphNode.__init__), inspect.getsource(trees.CUDAGraphNode.run)
    assert init.index("copy_back_for(") < init.index("_allocate_and_copy_recording_inputs(inputs)")
    assert init.rindex("self.graph.replay()") < init.rindex("grace_copy_back.note_recording(") < init.rindex(
        "grace_copy_back.write(")
    assert run.index("grace_copy_back.hold(") < run.index("_copy_inputs_and_remove_from_src")
    assert run.index("grace_pi.replay(") < run.index("grace_copy_back.write(") < run.index("reconstruct_outputs()")

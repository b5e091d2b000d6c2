"""Inputs off alignment at a CUDA-graphed function's first call (grace.input_alignment, patch
scg/0009): checked and copied into aligned clones with any GraCE switch on, left as stock leaves
them with every switch off. CPU tensors stand in for GPU ones; the tree's recording is a stub."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch._inductor.cudagraph_trees as ct

from grace import config, input_alignment
from grace.input_alignment import ALIGNMENT, with_misaligned_inputs

ALL_OFF = {"cgct": False, "pi": False, "scg": False, "lean_replay": False}


def misaligned(rows: int = 3, cols: int = 4, seed: int = 0) -> torch.Tensor:
    """A (rows, cols) float view at storage offset 1: 4 bytes off a 16-byte-aligned allocation."""
    flat = torch.randn(rows * cols + 1, generator=torch.Generator().manual_seed(seed))
    view = flat[1:].view(rows, cols)
    assert view.data_ptr() % ALIGNMENT, "the allocation itself is aligned"
    return view


def everywhere(_: Any) -> bool:
    return True


def test_misaligned_non_static_inputs_are_added_after_stocks() -> None:
    aligned = torch.randn(3, 4)
    inputs = [misaligned(), aligned, misaligned(), 5, misaligned(), misaligned()]
    # stock checked input 1; input 2 is static, input 4 mutated; 3 is a size
    got = with_misaligned_inputs(inputs, [1], static_input_idxs=[2], mutated_input_idxs=[4], on_gpu=everywhere)
    assert got == [1, 0, 5]


def test_an_input_stock_already_checks_is_not_listed_twice() -> None:
    assert with_misaligned_inputs([misaligned()], [0], (), (), on_gpu=everywhere) == [0]


def test_inputs_off_the_gpu_are_left_out() -> None:
    assert with_misaligned_inputs([misaligned()], [], (), ()) == [], "a CPU tensor needs no alignment"


class _Recording:
    """Stands in for ``cudagraph_trees.cudagraphify``: runs the model on the inputs it is handed
    and records their data pointers, as the warm-up run would hand them to the kernels."""

    def __init__(self) -> None:
        self.pointers: list[list[int]] = []

    def __call__(self, model: Any, inputs: list[Any], static_input_idxs: Any, **_: Any) -> tuple[Any, Any]:
        def replay(new_inputs: list[Any]) -> Any:
            self.pointers.append([t.data_ptr() if isinstance(t, torch.Tensor) else t for t in new_inputs])
            return model(new_inputs)

        return replay, replay(inputs)


@pytest.mark.parametrize("hardened", [True, False])
def test_the_tree_copies_an_input_off_alignment_at_its_first_call(monkeypatch: pytest.MonkeyPatch,
                                                                  hardened: bool) -> None:
    """A function whose first call gets an input off alignment: with a GraCE switch on, that call
    and a later misaligned one hand the model an aligned copy with the same values; with every
    switch off the misaligned input reaches the model, as in stock (a fault on the GPU)."""
    recording = _Recording()
    monkeypatch.setattr(ct, "cudagraphify", recording)
    monkeypatch.setattr(input_alignment, "_on_gpu", everywhere)

    def model(inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        return [inputs[0] * 2]

    first, later = misaligned(seed=1), misaligned(seed=2)
    with config.patch({**ALL_OFF, "scg": hardened}):
        run = ct.cudagraphify_impl(model, [first], static_input_idxs=(), device_index=0, is_backward=False,
                                   is_inference=True)
        outs = [run([first])[0], run([later])[0]]
    assert all(ptrs[0] % ALIGNMENT == 0 for ptrs in recording.pointers) == hardened
    torch.testing.assert_close(outs[0], first * 2)
    torch.testing.assert_close(outs[1], later * 2)


def test_a_new_size_of_a_dynamic_function_gets_its_own_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tree keys its recordings by the symbolic sizes among the inputs: a size first called
    with an aligned input, then a new size first called off alignment; the new size's calls hand
    the model aligned copies (the case a dynamic batch size meets)."""
    recording = _Recording()
    monkeypatch.setattr(ct, "cudagraphify", recording)
    monkeypatch.setattr(input_alignment, "_on_gpu", everywhere)

    def model(inputs: list[Any]) -> list[torch.Tensor]:
        return [inputs[1][: inputs[0]] + 1]

    aligned8 = torch.randn(8, 4)
    six = misaligned(6, 4, seed=3)
    with config.patch({**ALL_OFF, "scg": True}):
        run = ct.cudagraphify_impl(model, [8, aligned8], static_input_idxs=(), device_index=0, is_backward=False,
                                   is_inference=True)
        run([8, aligned8])
        outs = [run([6, six])[0], run([6, six])[0]]
    assert [ptrs[1] % ALIGNMENT == 0 for ptrs in recording.pointers] == [True, True, True]
    for out in outs:
        torch.testing.assert_close(out, six + 1)

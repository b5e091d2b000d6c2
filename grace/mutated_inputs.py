"""CUDA graphs for functions that mutate their inputs: the mutated inputs copied back after each replay.

Design note
-----------
Stock CUDA graph trees give no graph to a function that mutates an input that is neither static
(a parameter or buffer) nor a tensor an earlier graph of the tree recorded ("skipping cudagraphs
due to mutated inputs"): the graph would write the placeholder the tree copied the input into,
and the caller's tensor would never see the write. TKE (pyhpc's turbulent kinetic energy), which
updates its arrays in place, runs without a graph under stock. With ``grace.config.mutated_inputs``
the tree records such a function and keeps the caller's tensor as eager leaves it: the input is
copied in, as stock copies every non-static input, the graph writes the placeholder, and after
the replay the placeholder is copied back into the caller's tensor. Invariants:

1. Only a mutation of a non-static input that the tree copies (``non_static_input_idx``) is
   copied back; one of a static input or of an earlier graph's output lands in place, as in
   stock. The copy back is one ``torch._foreach_copy_`` on the replay's stream, after the
   replay and before the call returns, so the caller's tensor holds the mutation before any
   later work on that stream reads it.
2. The node holds the caller's tensors of those inputs from the start of the call to the copy
   back, and no longer: the tree clears its list of inputs before the replay, and a held
   tensor would count as live to nothing but this call.
3. The recording: the capture does not run, and ``CUDAGraphNode.__init__`` replays once at its
   end on the recording inputs; the caller's tensors, held from before the recording inputs are
   allocated, get the placeholders' bytes after that replay. A warm-up runs the function
   eagerly on the caller's tensors: nothing to copy.
4. Only where the copy back is exact does the tree record (:func:`copies_back`, once per node
   and function, as stock's own mutation check): every such input is a tensor with no
   expanded (stride 0) dimension, and shares no memory with another tensor input. Dynamo's
   guards keep the inputs' aliasing as it was when the function was compiled, and AOTAutograd
   merges aliased inputs of which one is mutated into one base; where an overlap shows all the
   same, or an input is a graph output the tree has since overwritten, the function keeps
   stock's refusal, and the log says why. The tree's run of it without a graph then raises the
   overwritten-output error on reading that input (``grace.trees.EagerFallback``).
5. Off (``grace.config.mutated_inputs`` false, or no switch on) the tree refuses
   such functions as stock does, and nodes carry no copy back (``grace_copy_back`` None).
6. A caller's tensor whose storage overlaps the node's outputs is an output of an earlier
   generation of the tree, in pool memory this replay (or the recording) took for its own
   outputs: its mutation is not copied back, which would overwrite them, and reading it raises
   the tree's overwritten-output error, as reading any output the tree has since overwritten
   does. The node's output storages are fixed at its recording (:meth:`CopyBack.note_recording`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Optional

import torch

from grace.log import get_logger

_log = get_logger("grace.mutated_inputs")


def enabled() -> bool:
    """Whether functions that mutate non-static inputs get graphs (invariant 5)."""
    from grace import config
    from grace.trees import hardened

    return bool(config.mutated_inputs) and hardened()


def copied_mutations(mutated_input_idxs: Sequence[int], static_input_idxs: Sequence[int], inputs: Sequence[Any],
                     is_recorded: Callable[[Any], bool]) -> list[int]:
    """The mutated inputs the tree would copy in: neither static nor recorded by an earlier graph
    (the ones stock's ``check_for_mutation`` refuses under trees)."""
    static = set(static_input_idxs)
    return [i for i in mutated_input_idxs if i not in static and not is_recorded(inputs[i])]


def _span(x: torch.Tensor) -> Optional[tuple[int, int]]:
    """The bytes of ``x``'s storage, or None where the tree has made them unreadable: an output
    of a graph whose memory a later run of the tree took ("overwritten by a subsequent run")."""
    try:
        start = x.untyped_storage().data_ptr()
    except RuntimeError:
        return None
    return start, start + x.untyped_storage().nbytes()


def why_not_copied_back(indices: Sequence[int], inputs: Sequence[Any]) -> Optional[str]:
    """Why the mutations of ``indices`` cannot be copied back exactly (invariant 4), or None."""
    spans: list[tuple[int, int, int]] = []  # (start, end, index) of every tensor input's bytes
    for k, x in enumerate(inputs):
        if isinstance(x, torch.Tensor) and x.numel() > 0:
            span = _span(x)
            if span is None:
                return f"input {k} is a graph output that a later run of the tree overwrote"
            spans.append((*span, k))
    for i in indices:
        x = inputs[i]
        if not isinstance(x, torch.Tensor):
            return f"input {i} is mutated and is not a tensor"
        if any(s == 0 and n > 1 for s, n in zip(x.stride(), x.shape)):
            return f"input {i} is mutated and has an expanded (stride 0) dimension"
        if x.numel() == 0:
            continue
        start, end = next((s, e) for s, e, k in spans if k == i)
        for s, e, k in spans:
            if k != i and s < end and start < e:
                return f"input {i} is mutated and shares memory with input {k}"
    return None


def copies_back(func: Any, inputs: Sequence[Any], is_recorded: Callable[[Any], bool]) -> bool:
    """Whether the tree may record ``func`` (a ``WrappedFunction``) although it mutates inputs it
    copies: on, and every such mutation can be copied back exactly (invariant 4)."""
    if not enabled():
        return False
    indices = copied_mutations(func.mutated_input_idxs, func.static_input_idxs, inputs, is_recorded)
    why = why_not_copied_back(indices, inputs)
    if why is not None:
        _log.info("mutated inputs: a function keeps stock's refusal of its graph: %s", why)
        return False
    return True


OVERWRITTEN_MESSAGE = (
    "Error: accessing tensor output of CUDAGraphs that has been overwritten by a subsequent run. "
    "It was the input a function mutates in place, and a later graph's outputs took its memory "
    "(GraCE's mutated inputs). To prevent overwriting, clone the tensor outside of torch.compile() "
    "before passing it in."
)


class CopyBack:
    """A node's mutated inputs that the tree copies: held at a call's start, written back from
    their placeholders after its replay (invariants 1 to 3, and 6). What a replay reads, the
    placeholders and the outputs' storages, is fixed at the recording (:meth:`note_recording`)."""

    __slots__ = ("indices", "placeholders", "output_spans")

    def __init__(self, indices: Sequence[int]) -> None:
        self.indices = tuple(indices)
        self.placeholders: list[torch.Tensor] = []  # the recording inputs of ``indices``, in order
        self.output_spans: tuple[tuple[int, int], ...] = ()  # (start, end) of each output storage

    def note_recording(self, placeholders: Sequence[Any], outputs_metadata: Sequence[Any]) -> None:
        """The node's recording inputs (its placeholders) and the tree's metadata of its outputs
        (a dict per tensor output, with its storage's ``data_ptr`` and ``nbytes``)."""
        self.placeholders = [placeholders[i] for i in self.indices]
        self.output_spans = tuple((m["data_ptr"], m["data_ptr"] + m["nbytes"])
                                  for m in outputs_metadata if isinstance(m, dict))

    def hold(self, inputs: Sequence[Any]) -> list[torch.Tensor]:
        """The caller's tensors of the mutated inputs, before the tree clears its list."""
        return [inputs[i] for i in self.indices]

    def write(self, callers: list[torch.Tensor]) -> None:
        """Each placeholder's bytes into its caller's tensor, on the current stream; a caller's
        tensor the node's outputs took takes the slow path (invariant 6)."""
        if self.output_spans and any(map(self._taken_by_outputs, callers)):
            self._write_around_outputs(callers)
            return
        torch._foreach_copy_(callers, self.placeholders)

    def _write_around_outputs(self, callers: list[torch.Tensor]) -> None:
        """Slow path: a caller's tensor the outputs took is marked overwritten, the others written."""
        dsts, srcs = [], []
        for caller, placeholder in zip(callers, self.placeholders):
            if self._taken_by_outputs(caller):
                torch._C._set_storage_access_error_msg(caller, OVERWRITTEN_MESSAGE)
            else:
                dsts.append(caller)
                srcs.append(placeholder)
        if dsts:
            torch._foreach_copy_(dsts, srcs)

    def _taken_by_outputs(self, t: torch.Tensor) -> bool:
        span = _span(t) if t.numel() > 0 else None
        if span is None:
            return False
        start, end = span
        return any(s < end and start < e for s, e in self.output_spans)


def copy_back_for(mutated_input_idxs: Sequence[int], non_static_input_idx: Sequence[int],
                  inputs: Sequence[Any]) -> Optional[CopyBack]:
    """The node's :class:`CopyBack` as it records, or None: off, or no mutated input it copies."""
    if not enabled():
        return None
    copied = set(non_static_input_idx)
    indices = [i for i in mutated_input_idxs if i in copied and isinstance(inputs[i], torch.Tensor)]
    return CopyBack(indices) if indices else None

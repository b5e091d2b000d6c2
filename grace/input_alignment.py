"""Which inputs a CUDA graph tree checks for alignment (those Inductor's kernels were compiled to
assume aligned, not only those aligned at the first call), and which clones it copies back (every
input the function mutates).

Inductor compiles a graph for its example inputs. An example input that is 16-byte aligned (and
not static) is assumed aligned by the kernels, which may then load it with vector instructions,
and is listed in ``CompiledFxGraph.inputs_to_check``: before a call, such an input found off
alignment is cloned (``copy_misaligned_inputs``). With CUDA graphs, stock
``cudagraphify_impl.deferred_cudagraphify`` drops that list and computes its own from the first
call of each size (``get_input_idxs_to_check`` on the runtime inputs). An input off alignment at
that call is left out, though the kernels still assume it aligned: the warm-up launches them on
it, and a vectorized load faults ("CUDA error: misaligned address", the CUDA context lost).
Whether it faults depends on the configuration autotuning picked (one element per thread loads
scalars), so stock and GraCE alike fault on some runs of one program
(``scripts/probes/misaligned_first_call.py --case new-size --cols 64``). A function SCG keeps
out of graphs runs the same unchecked inputs at every call.

The rule, with any GraCE switch on (``grace.trees.hardened``): check the union of the compiled
list, mapped to the function's inputs (a graph partition's inputs through its
``input_index_mapping``), and stock's runtime list: what Inductor checks without CUDA graphs
(``maybe_realign_inputs`` with the compiled list), and what the tree checked for every other
size. Checking costs one pointer test per input at a size's first call and, for the inputs
added, per call (``align_inputs_from_check_idxs``); an aligned input is never cloned, and an
input the example had off alignment is never in the compiled list (the kernels do not assume it
aligned, as PyTorch's ``test_unaligned_static_input_trees`` requires). What GraCE adds is one
clone of an input that arrives off alignment where the kernels assume it aligned. A function
whose compiled list is unknown (compiled by another path, or whose model was not seen by
:func:`remember`) keeps stock's list.

A clone must not swallow a mutation. Stock's tree clones at a size's first call
(``copy_misaligned_inputs``) and wraps the size's function in ``align_inputs_from_check_idxs``,
both told of no mutated inputs, reasoning that a graph copies its inputs anyway; but a function
that mutates an input the tree does not manage runs eagerly, on what it is given: an input off
alignment is cloned, the function mutates the clone, and the caller's tensor keeps its old values
(eager's result differs). With any switch on both copy the function's mutated inputs back
(:func:`mutations_copied_back`): after a call that cloned one, one ``_foreach_copy_`` of the clone
into the caller's tensor; a call that cloned none pays nothing. So a mutated input is checked as
any other.

The compiled list is kept on the model callable itself (:data:`ATTRIBUTE`), which lives as long
as the function does: the callable Inductor hands to ``cudagraphify`` is the one the tree later
runs. Identical generated modules share a callable; lists remembered twice are joined, which
can only add checks, never drop one.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

from torch.utils._ordered_set import OrderedSet

from grace.log import get_logger

log = get_logger("grace.input_alignment")

# The attribute of a model callable that holds its compiled list, a frozenset of input indices.
ATTRIBUTE = "_grace_inputs_to_check"


def remember(model: Callable[..., Any], compiled_checks: Optional[Sequence[int]]) -> None:
    """Note the inputs ``model``'s kernels assume aligned (indices into its own inputs)."""
    if compiled_checks is None:
        return
    try:
        setattr(model, ATTRIBUTE, getattr(model, ATTRIBUTE, frozenset()) | frozenset(compiled_checks))
    except (AttributeError, TypeError):  # a callable without attributes: stock's runtime list applies to it
        log.debug("input alignment: cannot note the compiled list on %r; stock's runtime list applies", model)


def partition_checks(input_index_mapping: Sequence[Optional[int]], graph_checks: Sequence[int]) -> list[int]:
    """The graph's compiled list in a partition's own input indices. A partition input that is
    not a graph input (``None``: a buffer of an earlier partition) is allocated by Inductor, with
    the alignment its kernels were generated for."""
    wanted = frozenset(graph_checks)
    return [i for i, graph_index in enumerate(input_index_mapping) if graph_index is not None and graph_index in wanted]


def remembering(cudagraphify: Callable[[Callable[..., Any]], Any], compiled_checks: Sequence[int]
                ) -> Callable[[Callable[..., Any]], Any]:
    """``cudagraphify``, remembering ``compiled_checks`` for the model it is applied to."""

    def apply(model: Callable[..., Any]) -> Any:
        remember(model, compiled_checks)
        return cudagraphify(model)

    return apply


def _compiled_for(model: Callable[..., Any]) -> frozenset[int] | None:
    """What was remembered for ``model`` or, under wrappers (``__wrapped__``, as SCG's unwired
    partitions carry), for the callable it wraps."""
    for _ in range(8):
        found = getattr(model, ATTRIBUTE, None)
        if found is not None:
            return found
        model = getattr(model, "__wrapped__", None)
        if model is None:
            return None
    return None


def inputs_to_check(model: Callable[..., Any], runtime_checks: Sequence[int]) -> list[int]:
    """Stock's runtime list joined with what ``model``'s kernels assume aligned, in ascending
    order, as stock's. A mutated input among them is copied back after a clone
    (:func:`mutations_copied_back`)."""
    compiled = _compiled_for(model)
    if not compiled:
        return list(runtime_checks)
    added = compiled - frozenset(runtime_checks)
    if not added:
        return list(runtime_checks)
    log.debug("input alignment: also checking inputs %s of %s, which its kernels assume aligned",
              sorted(added), getattr(model, "__name__", model))
    return sorted(frozenset(runtime_checks) | added)


def mutations_copied_back(mutated_input_idxs: Sequence[int]) -> OrderedSet[int]:
    """The inputs whose clones the tree copies back into the caller's tensors after a call, at a
    size's first call and in its alignment wrapper: every input the function mutates (stock:
    none)."""
    return OrderedSet(mutated_input_idxs)

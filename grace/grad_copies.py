"""A backward graph's outputs, copied into ``.grad`` instead of adopted as it.

Design note
-----------
``AccumulateGrad`` adopts a gradient as a parameter's ``.grad``, without a copy, where the
parameter has none yet and nothing else references the gradient's ``TensorImpl``
(``at::caching::adjusted_use_count``, which leaves out the cached-tensor registry's own
reference). A CUDA graph tree's outputs pass that test: a node's cached outputs are registered
as cached tensors (``torch._C._add_cached_tensor``), and an output the node does not cache (one
sharing storage with another output, say) is a new tensor on every replay that nothing else
holds. ``.grad`` is then a tensor over the graph's memory. The next replay of that backward
writes its gradients into the same memory, and ``AccumulateGrad`` adds them to a ``.grad`` that
already holds them: gradients kept across steps (gradient accumulation) come out as twice the
last step's instead of the sum, silently (pytorch/pytorch#96693).
``zero_grad(set_to_none=True)`` before every backward hides it.

With :func:`copies_grads`, ``AccumulateGrad`` sees a reference it does not count on every
output of a backward graph, and copies. Invariants:

1. A node's cached outputs of a backward graph are not registered: the node's own reference to
   them counts (:func:`outputs_unregistered`, decided as the node is made). Forward and
   inference graphs register theirs as stock does.
2. Every output a call of a backward graph returns, cached or not, warm-up, recording or replay,
   is referenced by :class:`BackwardOutputHold` until autograd's backward pass ends (an engine
   callback), so that the reference counts while ``AccumulateGrad`` runs and not after: the
   outputs die when the pass ends as copied gradients' sources do, and the tree's liveness
   tests see the same thing at a recording and at its replays. A pass that raised runs no
   callback: the next call outside a backward pass releases what it held. With graph
   partitions the tree runs the partitions, and Inductor's wrapper around them returns the
   graph's outputs, among them views it makes of the partitions' outputs (new tensors over
   graph memory on every call that the tree never sees): what the wrapper returns is held too
   (:func:`hold_partitioned_backward_outputs`), by the hold of the device's tree manager, so
   that the tree's next call outside a backward pass lets go of what a raised pass left.
3. The cost is autograd's own where it cannot adopt: one copy of each gradient that reaches a
   parameter without one, and an out-of-place sum where two gradients for one tensor meet;
   besides, per backward call, one list a partition and one for the wrapper around them, and
   per backward pass one engine callback. A call of a backward graph outside autograd's engine
   (no backward pass to end) holds nothing, and its outputs are adopted as in stock; that is
   logged once.
4. The tree's liveness tests read Python and ``TensorImpl`` counts, which the registry does not
   move; removing a tensor that was never registered is a no-op, so the tree's own clean-up
   needs no change.
5. On only with :func:`grace.trees.hardened` and ``grace.config.copy_grads``, as the tree and
   its nodes are made; otherwise registration is stock's and the manager holds nothing.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Optional, Sequence

from grace.log import get_logger

_log = get_logger("grace.grad_copies")


def copies_grads() -> bool:
    """Whether backward graphs' outputs are copied into ``.grad`` (invariant 5)."""
    from grace import config
    from grace.trees import hardened

    return bool(config.copy_grads) and hardened()


def outputs_unregistered(backward: bool) -> bool:
    """Whether a node of a ``backward`` graph or not, as it is made, leaves its cached outputs out
    of the cached-tensor registry (``CUDAGraphNode._initialize_cached_tensors`` registers them
    otherwise, as stock does): a backward's, with :func:`copies_grads` (invariant 1)."""
    return backward and copies_grads()


class BackwardOutputHold:
    """The outputs of the backward graphs that each backward pass in progress called, referenced
    until that pass ends (invariant 2). ``CUDAGraphTreeManager.run`` calls :meth:`before_call` as
    a call begins and hands each backward call's outputs to :meth:`hold`. Passes are told apart
    by autograd's graph task, so a pass nested in another (a reentrant checkpoint's) lets go of
    its own outputs only."""

    def __init__(self) -> None:
        self._held: dict[int, list[list[Any]]] = {}  # autograd graph task -> its calls' outputs
        self._outside_engine_logged = False

    def before_call(self) -> None:
        """Outside a backward pass, drop what passes that raised left held (autograd runs no
        callback of a pass that raised)."""
        if self._held:
            import torch

            if torch._C._current_graph_task_id() == -1:
                self._held.clear()

    def hold(self, outputs: Sequence[Any]) -> None:
        """Reference ``outputs`` until the backward pass in progress ends."""
        import torch

        task = torch._C._current_graph_task_id()
        if task == -1:  # not inside a backward pass: nothing will end it
            if not self._outside_engine_logged:
                self._outside_engine_logged = True
                _log.info("gradient copies: a backward graph ran outside autograd's engine; its "
                          "outputs are not held and autograd may adopt them, as in stock")
            return
        held = self._held.get(task)
        if held is None:
            held = self._held[task] = []
            torch.autograd.Variable._execution_engine.queue_callback(partial(self._release, task))
        held.append(list(outputs))

    def _release(self, task: int) -> None:
        self._held.pop(task, None)

    @property
    def held_calls(self) -> int:
        """How many backward calls' outputs are referenced now (0 between backward passes)."""
        return sum(len(calls) for calls in self._held.values())


def backward_output_hold() -> Optional[BackwardOutputHold]:
    """The manager's hold as the tree is made: one with :func:`copies_grads`, else None."""
    return BackwardOutputHold() if copies_grads() else None


def hold_partitioned_backward_outputs(compiled_graph: Any, is_backward: bool, device_index: int) -> None:
    """Once the partitions of ``compiled_graph`` (an Inductor ``CompiledFxGraph``) are CUDA-graphed:
    for a backward graph with :func:`copies_grads`, wrap its ``current_callable`` so that what it
    returns is held until the backward pass ends (invariant 2), by the hold of the tree manager
    of ``device_index``, which the partitions' calls have made by then; otherwise leave it."""
    if not (is_backward and copies_grads()):
        return
    from torch._inductor.cudagraph_trees import get_manager

    run = compiled_graph.current_callable

    def run_and_hold(inputs: list[Any]) -> Any:
        out = run(inputs)
        manager = get_manager(device_index, create_if_none_exists=False)
        hold = manager.grace_backward_outputs if manager is not None else None
        if hold is not None:
            hold.hold(out)
        return out

    compiled_graph.current_callable = run_and_hold

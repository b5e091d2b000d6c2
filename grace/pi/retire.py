"""A PI graph that failed its check after its capture let an earlier graph's output die.

Design note
-----------
Under strategy (1) the capture holds neither the placeholders nor the recording inputs that
earlier graphs of the tree made (the node's ``cudagraph_managed_idxs``: a forward's
activations, read last by its backward), so that the graph may reuse their memory after their
last use, as stock's capture does (:class:`grace.pi.tree_hook.HeldInputs`). The check does not
need them held: nothing runs in the pool between the capture and the check, which reads them
through views of their memory made before the capture and puts their bytes back after its own
replay. A failed check does: a second, stock capture must find such an input alive at its
address (the tree does not copy it). One that something else kept alive is captured again as
before; where one died during the capture, the graph is retired instead:

1. This call's outputs are the stock kernels': the recorded function runs once more on the
   recording inputs (their bytes as they were: the check put them back) and its results are
   copied into the capture's outputs, which the tree hands out and tracks as any recording's.
   It mutates what the tree's first replay would have mutated, once.
2. The node's graph becomes a :class:`RetiredGraph`: the tree's first replay, which follows the
   recording, does nothing; ``node.grace_retired`` makes ``check_invariants`` refuse the node
   from then on (``patches/pi/0004``), so the tree never replays it and records the function
   again at its next call, as it does for a node whose invariants no longer hold.
3. That recording, and every later one of the same function, is stock (:func:`refused`): the
   check failed for this function's code, and it would fail again. The report keeps the
   retired graph's record (``none (recorded again, stock)``, from the failed check) and adds
   the stock one's.

Only a function that a warm-up ran to its end and found checkable
(:func:`grace.pi.observe.verifiable_at_warmup`) is recorded so: the stock run of step 1 is then
one its warm-up already made, and the function holds that verdict as an attribute, as it holds
this one (:func:`refused`), which lives and dies with it. Any other keeps every managed input
held through the capture and is captured again on a failed check.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from grace.log import get_logger
from grace.pi.check import RandomUse, stock_run

log = get_logger("grace.pi")

# Where the compiled code (a node's ``wrapped_function.model``) keeps why its PI graph was retired,
# beside its warm-up's verdicts (grace.pi.observe)
_RETIRED_ATTR = "_grace_pi_retired"


class RetiredGraph:
    """``node.graph`` of a retired node. The tree replays a node's graph once right after its
    recording; here the outputs already hold the stock run's values, so that replay does
    nothing. The node never passes ``check_invariants`` again, so a later replay is a bug."""

    def __init__(self, captured: Any, why: str) -> None:
        self.captured = captured  # never replayed; kept, so the pool's graphs are the tree's count
        self.why = why
        self._first_replay_done = False

    def replay(self) -> None:
        if self._first_replay_done:
            raise RuntimeError(f"GraCE internal error: a retired PI graph was replayed (retired: {self.why})")
        self._first_replay_done = True


def refused(model: Any) -> str | None:
    """Why PI retired a graph of ``model`` (its later recordings are stock), or None."""
    return getattr(model, _RETIRED_ATTR, None)


def retire(node: Any, model: Any, inputs: Sequence[Any], outputs: Sequence[Any], device: Any,
           random: RandomUse, name: str, why: str) -> None:
    """Retire ``node`` (see the design note): ``outputs`` get the stock run's values on
    ``inputs``, the node's graph a :class:`RetiredGraph`, and ``model`` is refused from now on."""
    import torch

    returned = stock_run(model, list(inputs), device, random)
    if not isinstance(returned, (list, tuple)):
        returned = (returned,)
    for out, value in zip(outputs, returned, strict=True):
        if isinstance(out, torch.Tensor) and out.data_ptr() != value.data_ptr():
            out.copy_(value)  # an output that is a view of an input is the same memory already
    del returned
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)
    node.graph = RetiredGraph(node.graph, why)
    node.grace_retired = True
    node.grace_pi = None
    setattr(model, _RETIRED_ATTR, why)  # it holds its warm-up's verdict: it takes attributes
    log.warning("PI %s: retired: its check failed (%s) and an earlier graph's output it reads died during "
                "the capture, so it cannot be captured again; this call's outputs are the stock kernels', "
                "and the function records again, stock, at its next call", name, why)

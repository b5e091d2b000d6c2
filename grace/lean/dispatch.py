"""The tree manager's dispatch for a call that replays, without the manager's full ``_run``.

Design note
-----------
``CUDAGraphTreeManager._run`` decides on every call among: ending a recording or a warm-up,
running the function's code without a graph (SCG keeps it out; it mutates inputs the tree does
not manage; it passed its re-record limit), warming it up, replaying a recorded node, or
recording a new one. Once a function's graphs are recorded nearly every call replays, and the
first function of a compiled call (a root of the tree) pays for ``_run`` twice: the first pass
finds no child under the previous call's last node, ends that path and calls ``run`` again.

:meth:`LeanDispatch.replay` takes the replaying case, and only that, in one pass that keeps
every test ``_run`` makes before a replay, in ``_run``'s order, and replays the node ``_run``
would replay. Its invariants:

1. It acts only in the states where ``_run`` reaches its candidate loop without ending a
   recording or a warm-up: the path is executing, or there is no path.
2. A function that ``_run`` would not replay here returns None, before any state changes, and
   ``_run`` decides: SCG keeps it out; its mutation hint for the current node is unknown or
   true; it is past its re-record limit; it is not warmed up, or warm-ups are forced.
3. The candidates are ``_run``'s, in its order: the current node's children of the function;
   where there are none and the function is a root, the roots, after ending the path exactly
   as ``try_end_curr_execution`` ends it when a new generation may start (then invariant 2 is
   tested again for the empty path). The other way that ends a path (every output of the
   current node dead) is left to ``_run``.
4. A candidate replays only after ``check_invariants`` returns SUCCESS, through the manager's
   ``execute_node``, as in ``_run``; a failed check changes nothing, and with no candidate left
   the call returns None and ``_run`` decides (it checks the candidates again, and records).

So a call either replays exactly the node stock would, with the same state changes, or leaves
everything to stock. Nothing here allocates on the replaying path beyond what
``check_invariants`` and the node's ``run`` do.
"""

from __future__ import annotations

from typing import Any


class LeanDispatch:
    """One per tree manager (``CUDAGraphTreeManager.grace_lean``)."""

    __slots__ = ("_executing", "_no_path", "_success", "_force_warmup", "_skip_warmup", "_inline_modules")

    def __init__(self) -> None:
        import torch._dynamo.config as dynamo_config
        from torch._inductor import config
        from torch._inductor.cudagraph_trees import CheckInvariantStatus, ExecutionState

        from grace.lean.config_reads import ConfigRead

        self._executing = ExecutionState.EXECUTION
        self._no_path = ExecutionState.NONE
        self._success = CheckInvariantStatus.SUCCESS
        # the settings _run reads, read as it reads them on every call (grace.lean.config_reads)
        self._force_warmup = ConfigRead(config, "triton.force_cudagraphs_warmup")
        self._skip_warmup = ConfigRead(config, "triton.skip_cudagraph_warmup")
        self._inline_modules = ConfigRead(dynamo_config, "inline_inbuilt_nn_modules")

    def replay(self, manager: Any, new_inputs: list[Any], function_id: Any) -> Any:
        """The replayed node's outputs, or None: ``manager._run`` decides this call."""
        state = manager.path_state
        if (state is not self._executing and state is not self._no_path) or function_id in manager.grace_no_graph_functions:
            return None
        # _run's warm-up test; no code runs between its two passes, so one reading holds for both
        if self._force_warmup() or not (function_id in manager.warmed_up_functions or self._skip_warmup()):
            return None
        counted = not self._inline_modules()  # re-record limits apply
        node = manager.current_node
        if node is not None:
            if not self._may_replay(manager, node.id, function_id, counted):
                return None
            children = node.children.get(function_id)
            if children:
                return self._first_valid(manager, children, new_inputs)
            if function_id not in manager.roots or not manager.can_start_new_generation():
                return None
            manager.clear_current_path_state_and_set_to_none()
        if not self._may_replay(manager, None, function_id, counted):
            return None
        roots = manager.roots.get(function_id)
        return self._first_valid(manager, roots, new_inputs) if roots else None

    @staticmethod
    def _may_replay(manager: Any, node_id: Any, function_id: Any, counted: bool) -> bool:
        """``_run``'s per-node tests before its candidate loop: the function's mutation hint
        under the node the path stands on is known and false, and it is within its re-record
        limit there."""
        hints = manager.non_cudagraph_managed_mutation_hint.get(node_id)
        if hints is None or hints.get(function_id) is not False:
            return False
        return not (counted and manager.exceed_rerecord_limit(node_id, function_id))

    def _first_valid(self, manager: Any, candidates: list[Any], new_inputs: list[Any]) -> Any:
        success = self._success
        for child in candidates:
            if child.check_invariants(new_inputs)[0] == success:
                return manager.execute_node(child, new_inputs)
        return None

"""A PI node's replay, which stands for the tree's ``_copy_inputs_and_remove_from_src`` and
``run_graph``: a check, the pointers or copies, the launch.

Design note
-----------
Everything a replay needs is decided at capture and bound here once: which inputs are read in
place (*indirected*), which are still copied and into which placeholder views, and the object
that hands the graph its pointers (``pointers``: a :class:`grace.pi.table.PointerTable` for
strategy "ptx", a :class:`grace.pi.prelude.PreludePointers` for "prelude", a
:class:`grace.pi.exec_update.ExecPatch` for "exec-update"; each has ``fill(ptrs)``, and the
graph reads what it holds for the node's lifetime). Per replay, only one thing is decided: which
indirected inputs the recorded kernels may not read in place this time (the guard,
:class:`grace.pi.guard.ReplayGuard`: alignment, strides, storage offset, and bytes the replay
itself writes). Those are copied into their placeholders, as PT2-CG copies every input, and their
pointers are the placeholders' for this replay: the slow path, split out by name.

The inputs stay referenced (by the caller's list) until the replay is queued. A node whose graph
reads a pointer table but indirects no input (every input blocked after its kernels were
redirected) replays as stock through :class:`CopyingReplay`, which keeps the table alive.
"""

from __future__ import annotations

from typing import Any

from grace.pi.guard import ReplayGuard
from grace.pi.plan import GraphPlan


class PIReplay:
    """The replay of a node with indirected inputs."""

    def __init__(self, node: Any, plan: GraphPlan, pointers: Any, guard: ReplayGuard,
                 placeholder_ptrs: list[int]) -> None:
        import torch
        from torch._inductor.cudagraph_trees import index_expanded_dims

        indirected = set(plan.indirected)
        if not indirected:
            raise ValueError("no input is indirected: the node replays as stock (CopyingReplay)")
        if sorted(guard.inputs) != sorted(indirected):  # its pointers are the table's values
            raise ValueError(f"the replay guard checks inputs {guard.inputs}, not the indirected {plan.indirected}")
        self.plan = plan
        self.pointers = pointers
        self.guard = guard
        self._placeholder_ptrs = placeholder_ptrs
        self._ptrs = list(placeholder_ptrs)  # the table's values; the guard writes the indirected ones
        # (input index, its expanded dims) of every tensor input still copied, and its placeholder view
        self._copied = tuple((i, node.expanded_dims[i]) for i in node.non_static_input_idx
                             if isinstance(node.reconstructed_inputs[i], torch.Tensor) and i not in indirected)
        self._dst = [index_expanded_dims(node.reconstructed_inputs[i], dims) for i, dims in self._copied]
        self._expand = index_expanded_dims
        self._foreach_copy = torch._foreach_copy_

    def replay(self, node: Any, new_inputs: list[Any]) -> None:
        ptrs = self._ptrs
        fallback = self.guard.must_copy(new_inputs, ptrs)  # also writes the indirected inputs' pointers
        if fallback:
            self._replay_copying(node, new_inputs, fallback)
            return
        if self._copied:
            expand = self._expand
            self._foreach_copy(self._dst, [expand(new_inputs[i], dims) for i, dims in self._copied])
        self.pointers.fill(ptrs)
        node.run_graph()

    def _replay_copying(self, node: Any, new_inputs: list[Any], fallback: list[int]) -> None:
        """A replay where some indirected inputs cannot be read in place: they are copied into
        their placeholders, and their pointers are the placeholders' for this replay."""
        expand = self._expand
        ptrs = self._ptrs
        dst = list(self._dst)
        src = [expand(new_inputs[i], dims) for i, dims in self._copied]
        for i in fallback:
            ptrs[i] = self._placeholder_ptrs[i]
            dst.append(expand(node.reconstructed_inputs[i], node.expanded_dims[i]))
            src.append(expand(new_inputs[i], node.expanded_dims[i]))
        self._foreach_copy(dst, src)
        self.pointers.fill(ptrs)
        node.run_graph()


class CopyingReplay:
    """The replay of a node whose graph reads a pointer table that holds its placeholders'
    addresses (its kernels were redirected, every input then kept its copy): as stock, with
    the table kept alive for the graph."""

    def __init__(self, plan: GraphPlan, pointers: Any) -> None:
        self.plan = plan
        self.pointers = pointers

    def replay(self, node: Any, new_inputs: list[Any]) -> None:
        node._copy_inputs_and_remove_from_src(node.reconstructed_inputs, new_inputs)
        node.run_graph()


def indirects(node: Any) -> bool:
    """Whether the CUDA graph tree's ``node`` replays with PI, some input indirected."""
    replay = getattr(node, "grace_pi", None)
    return replay is not None and bool(replay.plan.indirected)

"""After a PI capture: each strategy's plan, check and deploy, behind one interface.

Design note
-----------
A capture under PI ends in :meth:`grace.pi.observe.Recording.finish`, which hands the
recording to the finisher of its strategy, chosen once when the recording started:

- :class:`PtxFinisher`, strategy (1): the graph's Triton kernels were redirected to a pointer
  table during the capture; the table is the graph's pointers.
- :class:`PreludeFinisher`, strategy (2): the kept graph is read, the argument sites that point
  into placeholders are found, and a prelude kernel that rewrites them from a pointer table is
  added before the graph is instantiated. That changes the graph, so a failed check, or an
  installation that failed halfway, makes :func:`grace.pi.tree_hook.record` capture it again
  stock.
- :class:`ExecUpdateFinisher`, strategy (3): the same sites are rewritten in the instantiated
  graph from the host before each replay. The kernels are stock, so a failed check only drops
  the rewrite (every input copied), unless the patch could not be undone.

Each ends one of three ways, all reported to :mod:`grace.pi.report`: :func:`deploy` (the node
gets its :class:`grace.pi.replay.PIReplay`, whose guard keeps an input read by pointer out of
the ranges a replay may write), :func:`every_copy_kept` (the node replays as stock), or
:func:`rerecord` (not trusted: captured again stock). Whatever indirects is first checked
against the function run with stock kernels (:func:`why_untrusted`, :mod:`grace.pi.check`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from grace.log import get_logger
from grace.option_values import EXEC_UPDATE, PRELUDE, PTX
from grace.pi import check, report
from grace.pi.check import Captured
from grace.pi.guard import ReplayGuard
from grace.pi.plan import GraphPlan, Reference, Slot, plan_graph
from grace.pi.replay import CopyingReplay, PIReplay
from grace.pi.table import PointerTable

if TYPE_CHECKING:
    from grace.pi.observe import Recording

log = get_logger("grace.pi")

FORCED_UNTRUSTED = "untrusted as grace.config.pi_force_untrusted asks (testing PI's fallbacks)"
RNG_UNCHECKABLE = "a generator is among the graph's inputs, so it cannot be run twice to be checked"
UNVERIFIABLE_AT_WARMUP = "its warm-up showed the graph cannot be run outside its capture to be checked"


@dataclass
class Finished:
    """What a recording leaves: the node's PI replay state, or why to record it again as stock."""

    replay: PIReplay | CopyingReplay | None
    rerecord: str | None = None


class Finisher(Protocol):
    def finish(self, rec: Recording, captured: Captured) -> Finished:
        """The node's replay state after ``rec``'s capture of ``captured``, or why to record again."""
        ...


class PtxFinisher:
    """Strategy (1): the slots handed out during the capture are the graph's pointer table."""

    def finish(self, rec: Recording, captured: Captured) -> Finished:
        plan = plan_of(rec)
        if not rec.slots:
            return every_copy_kept(rec, captured.name, plan)
        table = PointerTable(rec.slots, rec.device, storage=rec.table_storage)
        placeholder_ptrs = placeholder_pointers(rec)
        why = why_untrusted(rec, captured, plan, table, placeholder_ptrs)
        if why is not None:
            kernels = ", ".join(sorted({slot.kernel for slot in rec.slots}))
            return rerecord(rec, captured.name, plan, why, f"indirected kernels: {kernels}")
        table.fill(placeholder_ptrs)  # the tree's first replay reads the recording inputs
        return deploy(rec, captured, plan, table, placeholder_ptrs)


class ExecUpdateFinisher:
    """Strategy (3): read the kept graph, plan, instantiate, bind the patch, check."""

    def finish(self, rec: Recording, captured: Captured) -> Finished:
        from grace.pi import exec_update

        node, name = captured.node, captured.name
        graph, plan, sites = scan_kept_graph(rec, node)
        node.graph.instantiate()
        if not sites:
            return every_copy_kept(rec, name, plan)
        placeholder_ptrs = placeholder_pointers(rec)
        try:
            patch = exec_update.bind(graph, node.graph.raw_cuda_graph_exec(), sites)
        except Exception as e:  # noqa: BLE001 - nothing was patched yet
            log.info("PI %s: exec-update not bound (%s); every input copied", name, e)
            return every_copy_kept(rec, name, every_input_copied(rec, f"exec-update not bound: {e}"), log_plan=False)
        why = why_untrusted(rec, captured, plan, patch, placeholder_ptrs)
        if why is not None:
            log.warning("PI %s: exec-update dropped: %s", name, why)
            if why.startswith(check.UNDO_FAILED):
                return rerecord(rec, name, plan, why, "exec-update")
            return every_copy_kept(rec, name, every_input_copied(rec, why), log_plan=False)
        return deploy(rec, captured, plan, patch, placeholder_ptrs)


class PreludeFinisher:
    """Strategy (2): read the kept graph, plan, add the prelude, instantiate, upload, check."""

    def finish(self, rec: Recording, captured: Captured) -> Finished:
        from grace.pi import exec_update, prelude

        node, name = captured.node, captured.name
        graph, plan, sites = scan_kept_graph(rec, node)
        try:
            if not sites:
                raise prelude.PreludeError("no argument points into an indirected input")
            kernels = [n for n in graph.nodes if isinstance(n, exec_update.KernelNode)]
            slots, entries = prelude.layout(sites, kernels)
            prelude.load(rec.device)  # compiled and loaded before the graph is touched
        except Exception as e:  # noqa: BLE001 - the graph is as captured: every input copied
            node.graph.instantiate()
            if sites:
                log.info("PI %s: no prelude (%s); every input copied", name, e)
                plan = every_input_copied(rec, str(e))
            return every_copy_kept(rec, name, plan)
        table = PointerTable(slots, rec.device)
        try:
            installed = prelude.install(graph, node.graph.raw_cuda_graph(), entries, table, rec.device)
            node.graph.instantiate()
            prelude.upload(node.graph.raw_cuda_graph_exec(), rec.device)
        except Exception as e:  # noqa: BLE001 - the graph may be half changed: not trusted
            return rerecord(rec, name, plan, f"the prelude could not be installed ({type(e).__name__}: {e})",
                            "prelude")
        placeholder_ptrs = placeholder_pointers(rec)
        pointers = prelude.PreludePointers(table, installed)
        why = why_untrusted(rec, captured, plan, pointers, placeholder_ptrs)
        if why is not None:
            return rerecord(rec, name, plan, why, f"prelude rewriting {installed.nodes} node(s)")
        return deploy(rec, captured, plan, pointers, placeholder_ptrs)


FINISHERS: dict[str, Finisher] = {PTX: PtxFinisher(), PRELUDE: PreludeFinisher(), EXEC_UPDATE: ExecUpdateFinisher()}


def scan_kept_graph(rec: Recording, node: Any) -> tuple[Any, GraphPlan, list[Any]]:
    """The kept graph's nodes, the plan, and the argument sites of the indirected inputs.

    Strategies (2) and (3) find their pointers the same way (:func:`grace.pi.exec_update.scan`);
    what else reaches a placeholder makes that input keep its copy.
    """
    from grace.pi import exec_update

    placeholders = list(rec.placeholders.values())
    try:
        graph = exec_update.read_graph(node.graph.raw_cuda_graph())
        found = exec_update.scan(graph.nodes, placeholders)
    except Exception as e:  # noqa: BLE001 - an unreadable graph keeps every copy
        found = exec_update.Scan([], {t.input_index: [f"graph not read ({type(e).__name__}: {e})"]
                                      for t in rec.placeholders.values()})
        graph = None
    for i, reasons in found.blocked.items():
        for why in reasons:
            rec.block(i, f"reached by {why}")
    names = {n.index: n.name for n in (graph.nodes if graph else ()) if isinstance(n, exec_update.KernelNode)}
    rec.slots = [Slot(s.input_index, s.offset, names.get(s.node, "?")) for s in found.sites]
    plan = plan_of(rec)
    rec.slots = [slot for slot in rec.slots if slot.input_index in plan.indirected]
    plan = plan_of(rec)  # the same decisions, with only the pointers it rewrites
    return graph, plan, [s for s in found.sites if s.input_index in plan.indirected]


def why_untrusted(rec: Recording, captured: Captured, plan: GraphPlan, pointers: Any,
                  placeholder_ptrs: list[int]) -> str | None:
    """Why the graph is not to be trusted as planned, or None: the check of :mod:`grace.pi.check`,
    told why this graph cannot be run outside its capture, if it cannot, and what its capture
    saw of random numbers; after it, :data:`FORCED_UNTRUSTED` where
    ``grace.config.pi_force_untrusted`` asks for every fallback."""
    if rec.has_rng:
        unverifiable = RNG_UNCHECKABLE
    elif rec.unverifiable is not None:  # run outside the capture it could differ, or crash
        unverifiable = f"the graph cannot be run outside its capture to be checked: {rec.unverifiable}"
    else:
        unverifiable = None
    why = check.validate(captured, plan, pointers, placeholder_ptrs,
                         [t.input_index for t in rec.placeholders.values()], unverifiable, rec.random)
    from grace import config

    if why is None and config.pi_force_untrusted:
        return FORCED_UNTRUSTED
    return why


def deploy(rec: Recording, captured: Captured, plan: GraphPlan, pointers: Any,
           placeholder_ptrs: list[int]) -> Finished:
    """Log and report a checked plan, and give the node its replay state. Its guard keeps an
    input read by pointer out of the device ranges a replay may write."""
    log_decisions(captured.name, plan)
    report.add(report.GraphRecord.of(captured.name, plan, strategy=rec.strategy))
    if not plan.indirected:
        return Finished(CopyingReplay(plan, pointers))
    layouts = [rec.layouts[i] for i in plan.indirected]
    return Finished(PIReplay(captured.node, plan, pointers, ReplayGuard(layouts, written_ranges(captured)),
                             placeholder_ptrs))


def every_copy_kept(rec: Recording, node_name: str, plan: GraphPlan, log_plan: bool = True) -> Finished:
    """Report a graph that keeps every copy, as captured: the node replays as stock."""
    if log_plan:
        log_decisions(node_name, plan)
    report.add(report.GraphRecord.of(node_name, plan, strategy=rec.strategy))
    return Finished(None)


def rerecord(rec: Recording, node_name: str, plan: GraphPlan, why: str, what: str) -> Finished:
    """Log and report that the graph is not trusted; :func:`grace.pi.tree_hook.record` captures
    it again stock."""
    log.warning("PI %s: recorded again without indirection: %s (%s)", node_name, why, what)
    report.add(report.GraphRecord.copying_all(node_name, "none (recorded again, stock)", plan.copy_bytes_before,
                                              {t.input_index: why for t in rec.placeholders.values()}))
    return Finished(None, rerecord=why)


def recorded_stock(rec: Recording, node_name: str, why: str) -> None:
    """Log and report a graph that :func:`grace.pi.tree_hook.record` captures stock from the
    start, each input keeping its copy for ``why``."""
    log.info("PI %s: recorded stock: %s", node_name, why)
    report.add(report.GraphRecord.copying_all(node_name, "none (recorded stock)", plan_of(rec).copy_bytes_before,
                                              {t.input_index: why for t in rec.placeholders.values()}))


def every_input_copied(rec: Recording, why: str) -> GraphPlan:
    """The plan that keeps every copy, each input's reason ``why``."""
    return plan_graph(list(rec.placeholders.values()), [],
                      [Reference(p.data_ptr, "other", why) for p in rec.placeholders.values()])


def placeholder_pointers(rec: Recording) -> list[int]:
    """Per input index, its placeholder's address (0 where it has none): what the graph reads
    as captured, and the table's values for the tree's first replay."""
    by_input = {t.input_index: t.data_ptr for t in rec.placeholders.values()}
    out = [0] * (max(by_input) + 1)
    for i, p in by_input.items():
        out[i] = p
    return out


def plan_of(rec: Recording) -> GraphPlan:
    """The per-input decisions for the slots handed out and the reasons noted so far."""
    placeholders = list(rec.placeholders.values())
    references = [Reference(p.data_ptr, "other", "; ".join(rec.blocked[p.input_index]))
                  for p in placeholders if p.input_index in rec.blocked]
    return plan_graph(placeholders, rec.slots, references)


def written_ranges(captured: Captured) -> list[tuple[int, int]]:
    """``(address, bytes)`` that a replay of the captured graph may write: the segments of the
    tree's memory pool as they are after this capture (the graph's outputs and intermediates
    are in them; segments added later hold later graphs' buffers, which this graph never
    writes) and the storages of the inputs it mutates (static ones, at fixed addresses). None
    off the GPU, where there is no pool."""
    import torch

    if torch.device(captured.device).type != "cuda":
        return []
    from torch._inductor.cudagraph_trees import get_cudagraph_segments

    ranges = [(int(s["address"]), int(s["total_size"]))
              for s in get_cudagraph_segments(captured.node.cuda_graphs_pool)]
    for i in captured.mutated_input_idxs:
        t = captured.inputs[i] if i < len(captured.inputs) else None
        if isinstance(t, torch.Tensor) and t.is_cuda:
            storage = t.untyped_storage()
            ranges.append((storage.data_ptr(), storage.nbytes()))
    return ranges


def log_decisions(node_name: str, plan: GraphPlan) -> None:
    """One line for what the plan indirects, and one per input that keeps its copy, with why."""
    if plan.indirected:
        log.info("PI %s: %d input(s) indirected through %d slot(s); per replay %d B copied instead of %d B",
                 node_name, len(plan.indirected), len(plan.slots), plan.copy_bytes_after, plan.copy_bytes_before)
    for d in plan.decisions:
        if not d.indirect:
            log.info("PI %s: input %d keeps its copy: %s", node_name, d.input_index, d.reason)

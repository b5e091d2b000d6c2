"""Probes on CUDA graph trees for diagnosing one failing program (``run-one --probe``).

A program that fails under a configuration and not under stock ends in one of the tree's own
checks: a liveness check at replay, a pool check after a recording, an assertion. Their
messages say what was violated, not why. The probes, installed on the tree's classes in this
process only, print to stderr what the messages leave out:

* ``gc``: each cyclic garbage collection that runs while a node records. A tensor kept alive
  only by a reference cycle dies whenever the collector happens to run; if that is during a
  recording, the node records it as dying there, and a replay that finds it alive fails.
* ``liveness``: when a replay's liveness check fails, which outputs of which nodes the
  recording saw die and the replay finds alive, and what still refers to them.
* ``paths``: a warm-up node whose outputs do not match its function's stack traces in number
  (the tree asserts they do when it ends a warm-up), named with its function and where it ran.
* ``history``: the allocator records stack traces, so that the tree's pool check names where
  a block nobody tracks was allocated.
* ``trace``: one line per call the tree manager takes (the function, whether SCG keeps it out,
  the node the tree stands on afterwards, its path, the generation, the addresses and object
  ids of the outputs handed back), and one per path the tree ends (whose outputs it marks dead). A held
  output that reads stale under one configuration and raises under stock is explained by
  the two traces side by side: which later call wrote its address, and whether its node was
  on the path the tree ended before.
* ``checkpoint``: when the tree's checkpoint of the allocator state (before a recording that
  follows a replay) raises, each output the current path still counts as live: its node, its
  index, its address, and whether its storage is one a path ended before has freed.
* ``outputs``: each step's compiled outputs are copied to the host as the call returns, before
  eager runs; at a mismatch, for each output: whether it changed after the call returned (so
  something wrote its memory since: a block the allocator holds free, a later kernel) or was
  wrong as returned, and the caching allocator's block under its address (pool, state, size).
* ``guard``: each way the tree ends a path or restores the allocator under it (a replayed
  path's end, a warm-up's, the restore before a warm-up or a recording below a replayed node),
  with the path, the generation, how many held outputs GraCE's stale-output guard has noted and
  has pending, before and after, and each cached output of a replayed node on the path (its
  address, reference counts and object id): which route a held output's path ended by, and
  whether the guard noted it there.
* ``gc-off`` (an experiment, not an observation): the cyclic collector is off while a node is
  built and recorded, so that only reference counts decide what dies during a recording.

With any probe, ``run-one`` announces each step of the program before it runs (``[probe] step
N: ...``, as ``show`` lists it), so that every probe line can be read against its step, and
the outputs a step holds (``[probe] step N holds ...``: their addresses and object ids). Nothing
here runs unless asked for; it is for a developer's replay of one seed, never a measured run.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable, Iterable
from typing import Any, TextIO

PROBES = ("gc", "liveness", "paths", "history", "trace", "checkpoint", "outputs", "guard", "gc-off")


def parse_probes(text: str) -> list[str]:
    """``"gc,liveness"`` or ``"all"`` (every observing probe) -> the names; an unknown name is an error."""
    names = [p for p in PROBES if p != "gc-off"] if text.strip() == "all" else [p.strip() for p in text.split(",") if p.strip()]
    unknown = [n for n in names if n not in PROBES]
    if unknown:
        raise ValueError(f"unknown probe(s) {', '.join(unknown)}; choose from {', '.join(PROBES)} or all")
    return names


def describe_referrers(obj: Any, depth: int = 3, width: int = 6,
                       ignore: Iterable[Any] = ()) -> list[str]:
    """What refers to ``obj``, as indented lines of types, ``depth`` levels up.

    Frames are shown with their code's name and line, so that a reference held by a traceback
    or a running function can be told from one held by a container.
    """
    skip = {id(x) for x in ignore}
    lines: list[str] = []

    def name(o: Any) -> str:
        if hasattr(o, "f_code"):
            return f"frame {o.f_code.co_name} ({o.f_code.co_filename}:{o.f_lineno})"
        if isinstance(o, dict):
            return f"dict({len(o)} keys: {', '.join(map(str, list(o)[:4]))})"
        if isinstance(o, (list, tuple)):
            return f"{type(o).__name__}(len {len(o)})"
        return type(o).__qualname__

    def walk(o: Any, level: int, seen: set[int]) -> None:
        if level >= depth:
            return
        found = gc.get_referrers(o)
        skip.add(id(found))
        referrers = [r for r in found if id(r) not in skip and id(r) not in seen
                     and not (hasattr(r, "f_code") and r.f_code in own_code)]
        skip.add(id(referrers))
        for r in referrers[:width]:
            lines.append("  " * (level + 1) + name(r))
            walk(r, level + 1, seen | {id(r)})
        if len(referrers) > width:
            lines.append("  " * (level + 1) + f"... {len(referrers) - width} more")

    own_code = {describe_referrers.__code__, walk.__code__}
    walk(obj, 0, {id(obj)})
    return lines


class Probes:
    """The installed probes and what they replace, so that :meth:`remove` puts it back."""

    def __init__(self, names: Iterable[str], out: TextIO = sys.stderr) -> None:
        self.names = list(names)
        self.out = out
        self.recording: str | None = None  # the node being recorded, for the gc probe
        self.collections_in_recording = 0
        self._restore: list[Callable[[], None]] = []
        self.watch = OutputWatch(self.say) if "outputs" in self.names else None  # ProgramRun's watch

    def say(self, text: str) -> None:
        print(f"[probe] {text}", file=self.out, flush=True)

    def step_marker(self, index: int, step: Any) -> None:
        """A line before each step of the program (``ProgramRun``'s ``on_step``), so that the
        probes' lines can be read against the program's listing."""
        self.say(f"step {index}: {step.describe() if hasattr(step, 'describe') else step}")

    def hold_marker(self, index: int, outputs: list[Any]) -> None:
        """A line for the outputs a step holds (``ProgramRun``'s ``on_hold``): the addresses and
        object ids a stale read of them is traced by (:mod:`grace.difftest.stale_trace`)."""
        self.say(f"step {index} holds outputs at {[hex(t.data_ptr()) for t in outputs]}, "
                 f"objects {[id(t) for t in outputs]}")

    def install(self) -> Probes:
        from torch._inductor import cudagraph_trees as ct

        if "history" in self.names:
            from torch._inductor import config

            old = config.triton.cudagraph_trees_history_recording
            config.triton.cudagraph_trees_history_recording = True
            self._restore.append(lambda: setattr(config.triton, "cudagraph_trees_history_recording", old))
        if "gc" in self.names:
            self._wrap(ct.CUDAGraphNode, "_record", self._recording)
            gc.callbacks.append(self._on_gc)
            self._restore.append(lambda: gc.callbacks.remove(self._on_gc))
        if "liveness" in self.names:
            self._wrap(ct.CUDAGraphNode, "check_invariants", self._checking)
        if "paths" in self.names:
            self._wrap(ct.CUDAWarmupNode, "run", self._warming)
            self._wrap(ct.CUDAGraphTreeManager, "dealloc_current_path_weakrefs", self._ending_path)
        if "trace" in self.names:
            self._wrap(ct.CUDAGraphTreeManager, "run", self._tracing_run)
            self._wrap(ct.CUDAGraphTreeManager, "dealloc_current_path_weakrefs", self._tracing_end)
        if "checkpoint" in self.names:
            self._wrap(ct.CUDAGraphTreeManager, "apply_checkpoint_execution_state_in_allocator", self._checkpointing)
        if "guard" in self.names:
            for attr, route in (("clear_current_path_state_and_set_to_none", "a replayed path ends"),
                                ("try_end_curr_warmup", "a warm-up may end the path"),
                                ("apply_checkpoint_execution_state_in_allocator", "allocator restored below the path")):
                self._wrap(ct.CUDAGraphTreeManager, attr, self._guarding(route))
        if "gc-off" in self.names:
            self._wrap(ct.CUDAGraphNode, "__init__", self._without_gc)
        return self

    def remove(self) -> None:
        while self._restore:
            self._restore.pop()()

    def _wrap(self, cls: type, attr: str, make: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
        original = cls.__dict__[attr]
        setattr(cls, attr, make(original))
        self._restore.append(lambda: setattr(cls, attr, original))

    # -- gc ---------------------------------------------------------------------------------

    def _recording(self, original: Callable[..., Any]) -> Callable[..., Any]:
        probes = self

        def _record(node: Any, *args: Any, **kwargs: Any) -> Any:
            probes.recording = f"graph {node.id}"
            try:
                return original(node, *args, **kwargs)
            finally:
                probes.recording = None
                dead = node.expected_dead_indices_after_graph if hasattr(node, "expected_dead_indices_after_graph") else None
                if dead:
                    probes.say(f"graph {node.id} saw path outputs die while recording: {dead}")
        return _record

    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "stop" and self.recording is not None:
            self.collections_in_recording += 1
            self.say(f"gc generation {info.get('generation')} collected {info.get('collected')} object(s) "
                     f"while {self.recording} recorded")

    @staticmethod
    def _without_gc(original: Callable[..., Any]) -> Callable[..., Any]:
        def __init__(node: Any, *args: Any, **kwargs: Any) -> None:
            was = gc.isenabled()
            gc.disable()
            try:
                original(node, *args, **kwargs)
            finally:
                if was:
                    gc.enable()
        return __init__

    # -- paths ------------------------------------------------------------------------------

    def _warming(self, original: Callable[..., Any]) -> Callable[..., Any]:
        probes = self

        def run(node: Any, new_inputs: Any) -> Any:
            try:
                out = original(node, new_inputs)
            except BaseException as e:
                probes.say(f"warm-up node {node.id} raised {type(e).__name__} and stays on the path with "
                           f"{len(node.tensor_weakrefs)} outputs for "
                           f"{None if node.stack_traces is None else len(node.stack_traces)} stack traces")
                raise
            traces = node.stack_traces
            if traces is not None and len(node.tensor_weakrefs) != len(traces):
                import traceback

                model = node.wrapped_function.model
                probes.say(f"warm-up node {node.id} of {getattr(model, '__name__', model)} "
                           f"({getattr(model, '__module__', '?')}): {len(node.tensor_weakrefs)} outputs, "
                           f"{len(traces)} stack traces; function {node.wrapped_function.id}")
                for line in traceback.format_stack(limit=14)[:-1]:
                    probes.say("    " + line.rstrip().replace("\n", "\n[probe]     "))
            return out
        return run

    def _ending_path(self, original: Callable[..., Any]) -> Callable[..., Any]:
        return _reporting(original, AssertionError, lambda manager, _: self.report_path(manager.current_node))

    def report_path(self, node: Any) -> None:
        """Each node of ``node``'s path, with its outputs and stack traces counted."""
        for n in node._path_from_root:
            traces = n.stack_traces
            self.say(f"path: {type(n).__name__} {n.id}: {len(n.tensor_weakrefs)} outputs, "
                     f"{None if traces is None else len(traces)} stack traces")

    # -- trace ------------------------------------------------------------------------------

    def _tracing_run(self, original: Callable[..., Any]) -> Callable[..., Any]:
        probes = self

        def run(manager: Any, new_inputs: Any, function_id: Any) -> Any:
            kept_out = function_id in getattr(manager, "grace_no_graph_functions", ())
            out = original(manager, new_inputs, function_id)
            probes.say(describe_call(manager, function_id, kept_out, out))
            return out
        return run

    def _tracing_end(self, original: Callable[..., Any]) -> Callable[..., Any]:
        probes = self

        def dealloc_current_path_weakrefs(manager: Any) -> None:
            path = [] if manager.current_node is None else list(manager.current_node._path_from_root)
            probes.say(f"tree ends path {[n.id.id for n in path]}: their live outputs are marked dead")
            original(manager)
        return dealloc_current_path_weakrefs

    # -- guard ------------------------------------------------------------------------------

    def _guarding(self, route: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        probes = self

        def make(original: Callable[..., Any]) -> Callable[..., Any]:
            def ending(manager: Any, *args: Any, **kwargs: Any) -> Any:
                probes.say(f"{route}: before, {describe_guard(manager)}")
                out = original(manager, *args, **kwargs)
                probes.say(f"{route}: after, {describe_guard(manager)}")
                return out
            return ending
        return make

    # -- checkpoint -------------------------------------------------------------------------

    def _checkpointing(self, original: Callable[..., Any]) -> Callable[..., Any]:
        return _reporting(original, RuntimeError, lambda manager, _: self.report_live_path(manager.current_node))

    def report_live_path(self, node: Any) -> None:
        """Every output the path of ``node`` counts as live, and whether its storage was freed."""
        import torch

        self.say(f"checkpoint at graph {node.id} failed; path {[n.id.id for n in node._path_from_root]}; "
                 f"live after graph: {node.live_indices_after_graph}")
        for depth, index, owner, ref in live_path_outputs(node, node.live_indices_after_graph):
            try:
                torch.UntypedStorage._new_with_weak_ptr(ref()).data_ptr()
                state = "accessible"
            except RuntimeError as e:
                state = f"freed ({str(e)[:60]})"
            self.say(f"  output {index} of graph {owner.id} (depth {depth}), data_ptr {ref.data_ptr():#x}: {state}")

    # -- liveness ---------------------------------------------------------------------------

    def _checking(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def report(node: Any, e: BaseException) -> None:
            if "deallocate during graph" in str(e):
                self.report_liveness(node)
        return _reporting(original, RuntimeError, report)

    def report_liveness(self, node: Any) -> None:
        """The expected-dead outputs a replay finds alive, each with its node and referrers."""
        import torch

        self.say(f"graph {node.id}: liveness check failed; expected dead after recording: "
                 f"{node.expected_dead_indices_after_graph}")
        for depth, index, owner, ref in live_path_outputs(node, node.expected_dead_indices_after_graph):
            ptr = ref.data_ptr()
            self.say(f"  alive: output {index} of graph {owner.id} (depth {depth}), data_ptr {ptr:#x}")
            tensors = [o for o in gc.get_objects() if _storage_ptr(o, torch) == ptr]
            for t in tensors[:3]:
                self.say(f"    tensor {tuple(t.shape)} {t.dtype}, referred to by:")
                for line in describe_referrers(t, ignore=[tensors]):
                    self.say("    " + line)


def _reporting(original: Callable[..., Any], error: type[BaseException],
               report: Callable[[Any, BaseException], None]) -> Callable[..., Any]:
    """``original`` (a method of the tree), reporting on its object when it raises ``error``,
    then raising it on."""
    def wrapper(owner: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return original(owner, *args, **kwargs)
        except error as e:
            report(owner, e)
            raise
    return wrapper


def live_path_outputs(node: Any, indices: Iterable[tuple[int, int]]) -> Iterable[tuple[int, int, Any, Any]]:
    """(depth, output index, the node at that depth, its storage weakref) for each of ``indices``
    (pairs of depth on ``node``'s path and output index) whose storage is still alive."""
    path = list(node._path_from_root)
    for depth, index in indices:
        ref = node.path_weakrefs[depth][index]
        if ref is not None and ref() is not None:
            yield depth, index, path[depth], ref


def describe_guard(manager: Any) -> str:
    """The tree's path and generation, the stale-output guard's noted and pending outputs, and
    each cached output of the path's replayed nodes (address, Python and ``TensorImpl`` counts, id),
    read without calling anything that could change them."""
    guard = getattr(manager, "grace_stale_outputs", None)
    counts = "no guard" if guard is None else f"guard noted {len(guard._path_held)}, pending {len(guard._pending)}"
    node = manager.current_node
    if node is None:
        return f"no path; generation {manager.current_gen}; {counts}"
    parts = []
    for near in node._path_from_root:
        cached = getattr(near, "cached_tensor_outputs", None)
        kind = "graph" if cached is not None else "warm-up"
        outs = [None if t is None else f"{t.untyped_storage().data_ptr():#x} py {sys.getrefcount(t) - 1} "
                f"uses {t._use_count()} obj {id(t)}" for t in (cached or ())]
        parts.append(f"{kind} {near.id.id}" + (f" ({', '.join(map(str, outs))})" if outs else ""))
    return f"path {' -> '.join(parts)}; generation {manager.current_gen}; {counts}"


def describe_call(manager: Any, function_id: Any, kept_out: bool, out: Any) -> str:
    """One line for a call the tree manager took: what it ran and where the tree stands after."""
    node = manager.current_node
    where = "no node" if node is None else (
        f"{type(node).__name__} {node.id.id}, path {[n.id.id for n in node._path_from_root]}")
    tensors = [t for t in (out or ()) if hasattr(t, "data_ptr")]
    state = getattr(manager.path_state, "name", manager.path_state)
    # the objects' ids tell an output handed out again (the same tensor) from new memory at its address
    return (f"call function {function_id.id}{' (kept out by SCG)' if kept_out else ''}: {where}, "
            f"generation {manager.current_gen}, {state}; outputs at {[hex(t.data_ptr()) for t in tensors]}, "
            f"objects {[id(t) for t in tensors]}")


def _storage_ptr(obj: Any, torch: Any) -> int | None:
    """``obj``'s storage address if it is a plain CUDA tensor or parameter (a fake or
    functional tensor has none to give)."""
    if type(obj) not in (torch.Tensor, torch.nn.Parameter):
        return None
    try:
        return obj.untyped_storage().data_ptr() if obj.device.type == "cuda" else None
    except RuntimeError:
        return None


class OutputWatch:
    """The ``outputs`` probe: was a mismatching output wrong as the call returned it, or written
    afterwards, and what the allocator holds under it."""

    def __init__(self, say: Callable[[str], None]) -> None:
        self.say = say
        self.copies: list[Any] = []  # host copies of the last step's compiled outputs

    def returned(self, index: int, outputs: list[Any]) -> None:
        # to the host, so that the copies allocate nothing on the device that eager could take
        self.copies = [t.detach().to("cpu", copy=True) for t in outputs]
        self.say(f"step {index} returned {', '.join(describe_output(t) for t in outputs)}")

    def mismatched(self, index: int, outputs: list[Any], expected: list[Any], tol: float) -> None:
        import torch

        from grace.difftest.execute import difference  # the harness's own closeness

        segments = torch.cuda.memory_snapshot() if outputs and outputs[0].is_cuda else []
        for j, (out, copy, want) in enumerate(zip(outputs, self.copies, expected)):
            now = out.detach().cpu()
            changed = not torch.equal(now.nan_to_num(), copy.nan_to_num())
            right_then = difference(copy, want.detach().cpu(), tol) is None
            self.say(f"step {index} output {j} at {out.data_ptr():#x} ({out.untyped_storage().nbytes()} B): "
                     f"{'changed' if changed else 'unchanged'} since the call returned; as returned "
                     f"{'right' if right_then else 'wrong'}; block: {describe_block(segments, out.data_ptr())}")


def describe_output(t: Any) -> str:
    """An output's address and what tensor it is: a graph node's cached output (the one tensor
    the stale-output guard marks), a view of one, or another tensor over the same memory."""
    import torch

    if torch._C._is_cached_tensor(t):
        kind = "cached"
    elif t._base is not None:
        kind = "view of a cached output" if torch._C._is_cached_tensor(t._base) else "view"
    else:
        kind = "uncached"
    return f"{t.data_ptr():#x} {kind}"


def describe_block(segments: list[dict[str, Any]], address: int) -> str:
    """The caching allocator's segment and block under ``address`` (``torch.cuda.memory_snapshot``)."""
    for seg in segments:
        start = seg["address"]
        if not start <= address < start + seg["total_size"]:
            continue
        at = start
        for block in seg["blocks"]:
            begin = block.get("address", at)
            if begin <= address < begin + block["size"]:
                return (f"pool {seg.get('segment_pool_id')}, segment {start:#x} ({seg.get('segment_type')}), "
                        f"block {begin:#x} {block['size']} B {block['state']}")
            at = begin + block["size"]
        return f"pool {seg.get('segment_pool_id')}, segment {start:#x}: no block covers it"
    return "in no segment of the caching allocator"

"""Where a replay's host time goes, per mode: why a graph that copies nothing may still lose to
no graph at all (micro-eos under GraCE-CGCT-PI against PT2-NoCG).

Diagnostic only: its numbers are read, not reported. One mode per process (the modes need
different environments, as in the benchmark):

    python scripts/probes/replay_overhead.py --mode pt2-nocg|pt2-cg|grace-cgct-pi|grace-cgct-pi-prelude|grace-cgct-pi-exec

For the mode's environment it compiles the workload, then prints, in microseconds per call:
synchronised calls (the benchmark's measure), back-to-back calls synchronised once (host-bound
throughput), the GPU time of a call between CUDA events, the host time of each step of the
replay (input copies, launch, and PI's guard, pointer fill and remaining copies), each recorded
graph replayed alone back to back (does its own GPU work differ by mode?), and a cProfile of as
many calls sorted by own time, which names the Python frames of CUDA graph trees and of GraCE's
replay. A PI mode compiles its variants too: allow it a minute. Run the modes one after another
in one device call:

    for m in pt2-nocg pt2-cg grace-cgct-pi grace-cgct-pi-prelude grace-cgct-pi-exec; do
      python scripts/probes/replay_overhead.py --mode $m > $OUT/replay.$m.log 2>&1; done
"""

from __future__ import annotations

import copy
import cProfile
import gc
import io
import os
import pstats
import sys
import threading
import time
from typing import Any

from _in_mode import mode_parser, run_in_mode


def child(mode: str, workload: str, calls: int, cudnn_tf32: bool) -> None:
    import torch

    from grace.bench.modes import MODES
    from grace.bench.precision import exact_float32
    from grace.bench.workloads import get
    from grace.stats import summary

    exact_float32()  # the benchmark's arithmetic, so that this times the benchmark's kernels
    torch.backends.cudnn.allow_tf32 = cudnn_tf32
    print(f"cuDNN TF32 {'on (PyTorch default, not the benchmark)' if cudnn_tf32 else 'off (as the benchmark)'}")
    wl = get(workload)
    torch.manual_seed(0)
    model = wl.build("cuda", wl.batch_size, "full")
    samples = [wl.inputs(model, i, "cuda", wl.batch_size, "full") for i in range(8)]
    reference = copy.deepcopy(model)
    fn = torch.compile(model, mode=MODES[mode].compile_mode)
    sync = torch.cuda.synchronize
    with torch.no_grad():
        for s in samples * 2:
            fn(*s)
        sync()
        synced = []
        for i in range(calls):
            sync()
            t = time.perf_counter()
            fn(*samples[i % 8])
            sync()
            synced.append((time.perf_counter() - t) * 1e6)
        t, cpu = time.perf_counter(), time.process_time()
        for i in range(calls):
            fn(*samples[i % 8])
        sync()
        back_to_back = (time.perf_counter() - t) * 1e6 / calls
        # CPU seconds of all the process's threads per wall second: about 1 when only the
        # calling thread works; more when another thread of the process competes with it.
        cpu_per_wall = (time.process_time() - cpu) / (back_to_back * calls / 1e6)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        gpu = []
        for i in range(min(calls, 100)):
            start.record()
            fn(*samples[i % 8])
            end.record()
            end.synchronize()
            gpu.append(start.elapsed_time(end) * 1e3)
        bench_like = _bench_like(fn, wl, model, calls)
        worker_like = _worker_like(fn, reference, wl, model, min(calls, 200))
        phases = _phase_times(fn, samples, calls)
        replay_only = _replay_only(calls)
        prof = cProfile.Profile()
        prof.enable()
        out = None
        for i in range(calls):  # as the benchmark calls: no_grad per call, output held
            with torch.no_grad():
                out = fn(*samples[i % 8])
        sync()
        del out
        prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(30)
    print(f"==== {mode} {workload} ({calls} calls)")
    print(f"synchronised call us: {summary(synced)}")
    print(f"back-to-back us per call: {back_to_back:.1f}")
    print(f"process: {len(os.listdir('/proc/self/task'))} threads; {cpu_per_wall:.2f} CPU s per wall s "
          f"back to back; Python threads {[t.name for t in threading.enumerate()]}; gc collections "
          f"{sum(s['collections'] for s in gc.get_stats())}")
    print(f"as the benchmark times it (20 fresh inputs, no_grad per call, output held), us per call: {bench_like}")
    print(f"as the benchmark's worker times a sample (fresh inputs, one synchronised call), us: {worker_like}")
    print(f"between CUDA events us: {summary(gpu)}")
    print(f"host us per call in the replay's phases (back-to-back): {phases}")
    print(f"the recorded graphs alone, replayed back to back, us per replay: {replay_only}")
    print(f"what each graph's PI rewrites per replay: {_pi_shape()}")
    print(out.getvalue())


def _bench_like(fn: Any, wl: Any, model: Any, calls: int) -> dict[str, float]:
    """Per call, as ``grace.bench.worker`` times an iteration: 20 distinct input samples made
    before the clock, ``torch.no_grad()`` entered per call, each output held until the next
    call returns, one synchronisation per 20 calls."""
    import torch

    from grace.stats import summary

    per_call = []
    for r in range(max(calls // 20, 1)):
        inputs = [wl.inputs(model, 100 + 20 * r + i, "cuda", wl.batch_size, "full") for i in range(20)]
        torch.cuda.synchronize()
        t = time.perf_counter()
        out = None
        for args in inputs:
            with torch.no_grad():
                out = fn(*args)
        torch.cuda.synchronize()
        per_call.append((time.perf_counter() - t) * 1e6 / 20)
        del out
    return summary(per_call)


def _worker_like(fn: Any, reference: Any, wl: Any, model: Any, calls: int) -> dict[str, dict[str, float]]:
    """Per call, as ``grace.bench.worker`` times a sample at ``--inner 1``: the sample's inputs
    made before the clock, one call between two synchronisations. Between samples, in blocks of
    ten that alternate: nothing, or the worker's check (the eager twin on the same sample, then
    the comparison). The harness's median is twice the synchronised call's on ALNET; this says
    whether the check between samples is why, and counts the cyclic garbage collections that
    ran inside timed calls (the check's allocations may trigger them there)."""
    import torch

    from grace.bench.check import compare
    from grace.stats import summary

    times: dict[str, list[float]] = {"nothing between": [], "eager check between": []}
    collections = {label: 0 for label in times}  # cyclic collections that ran inside a timed call
    timing: list[str] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and timing:
            collections[timing[0]] += 1

    gc.callbacks.append(count)
    for i in range(calls):
        label = "eager check between" if (i // 10) % 2 else "nothing between"
        args = wl.inputs(model, 300 + i, "cuda", wl.batch_size, "full")
        torch.cuda.synchronize()
        timing.append(label)
        t = time.perf_counter()
        with torch.no_grad():
            got = fn(*args)
        torch.cuda.synchronize()
        times[label].append((time.perf_counter() - t) * 1e6)
        timing.clear()
        if label == "eager check between":
            with torch.no_grad():
                compare(got, reference(*wl.inputs(model, 300 + i, "cuda", wl.batch_size, "full")))
        del got
    gc.callbacks.remove(count)
    return {label: {**summary(v), "gc_in_timed_calls": collections[label]} for label, v in times.items()}


def _phase_times(fn: Any, samples: list[Any], calls: int) -> dict[str, float]:
    """Host time per call of each step of a node's replay, over ``calls`` back-to-back calls:
    the input copy and the launch (every mode with graphs), the guard and the pointer fill (PI).
    Each step is wrapped on the node's objects for the measurement, then put back."""
    import torch
    from torch._inductor import cudagraph_trees
    from torch._inductor.output_code import CompiledFxGraph

    from grace.pi.replay import PIReplay
    from grace.trees import recorded_nodes

    totals: dict[str, float] = {}
    depth: dict[str, int] = {}
    undo = []

    def timed(owner: Any, attr: str, label: str) -> None:
        # On a class, or on the instance where it can be (put back as it was), else on its class
        # (slotted objects). A recursive method (the tree's run calls itself once it has ended a generation) is
        # timed at its outermost call only.
        target = owner if isinstance(owner, type) or hasattr(owner, "__dict__") else type(owner)
        had_own = attr in getattr(target, "__dict__", {})
        original = getattr(target, attr)

        def wrapper(*a: Any, **k: Any) -> Any:
            depth[label] = depth.get(label, 0) + 1
            t = time.perf_counter()
            try:
                return original(*a, **k)
            finally:
                depth[label] -= 1
                if depth[label] == 0:
                    totals[label] = totals.get(label, 0.0) + time.perf_counter() - t

        setattr(target, attr, wrapper)
        undo.append((target, attr, original if had_own else None))

    timed(CompiledFxGraph, "__call__", "compiled graph call (Inductor's output code)")
    managers = [cudagraph_trees.get_manager(d, create_if_none_exists=False) for d in range(torch.cuda.device_count())]
    for manager in (m for m in managers if m is not None):
        timed(manager, "run", "tree: manager run (all of the tree)")
        timed(manager, "try_end_curr_execution", "tree: end the previous generation")
        timed(manager, "execute_node", "tree: execute_node")
    for node in recorded_nodes():
        timed(node, "check_invariants", "tree: check_invariants")
        timed(node, "run", "tree: node run")
        timed(node, "reconstruct_outputs", "tree: reconstruct_outputs")
        timed(node, "check_static_inputs_are_stable", "tree: static inputs stable")
        timed(node, "run_graph", "launch (run_graph)")
        timed(node, "_copy_inputs_and_remove_from_src", "input copies (stock path)")
        pi = getattr(node, "grace_pi", None)
        if pi is not None:
            timed(pi, "replay", "PI: whole replay step (guard, copies, fill, launch)")
        if isinstance(pi, PIReplay):  # a CopyingReplay runs the stock copy, timed above
            timed(pi.guard, "must_copy", "PI guard")
            timed(pi.pointers, "fill", "PI pointer fill")
            timed(pi, "_foreach_copy", "PI remaining copies")
    t = time.perf_counter()
    for i in range(calls):
        fn(*samples[i % len(samples)])
    torch.cuda.synchronize()
    whole = time.perf_counter() - t
    for target, attr, original in reversed(undo):
        if original is None:
            delattr(target, attr)  # the class's method is found again
        else:
            setattr(target, attr, original)
    out = {label: round(v * 1e6 / calls, 1) for label, v in sorted(totals.items())}
    out["whole call"] = round(whole * 1e6 / calls, 1)
    return out


def _pi_shape() -> dict[str, str]:
    """Per recorded graph: how many pointer-table slots, or exec-update nodes and sites, its
    replay rewrites (none for a graph without PI)."""
    from grace.trees import recorded_nodes

    out = {}
    for k, node in enumerate(recorded_nodes()):
        pi = getattr(node, "grace_pi", None)
        pointers = getattr(pi, "pointers", None)
        if pointers is None:
            out[f"graph {k}"] = "no PI"
        elif hasattr(pointers, "sites"):
            out[f"graph {k}"] = f"{len(pointers.sites)} sites in {len({s.node for s in pointers.sites})} kernel nodes"
        else:
            out[f"graph {k}"] = f"{len(getattr(pointers, 'slots', getattr(getattr(pointers, 'table', None), 'slots', ())))} table slots"
    return out


def _replay_only(calls: int) -> dict[str, float]:
    """Per recorded graph: back-to-back ``replay()`` of its instantiated graph, timed with CUDA
    events (GPU time when the GPU is the bottleneck, launch time when the host is), with the
    inputs the last call left in place. Tells whether a graph's own GPU work differs by mode."""
    import torch

    from grace.trees import recorded_nodes

    out = {}
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for k, node in enumerate(recorded_nodes()):
        graph = node.graph
        for _ in range(10):
            graph.replay()
        torch.cuda.synchronize()
        start.record()
        for _ in range(calls):
            graph.replay()
        end.record()
        end.synchronize()
        out[f"graph {k}"] = round(start.elapsed_time(end) * 1e3 / calls, 1)
    return out


def main() -> int:
    ap = mode_parser(__doc__.splitlines()[0], "micro-eos")
    ap.add_argument("--calls", type=int, default=400)
    ap.add_argument("--cudnn-tf32", action="store_true",
                    help="cuDNN convolutions in TF32 (PyTorch's default; the benchmark turns it off)")
    args = ap.parse_args()
    return run_in_mode(args, __file__, lambda: child(args.mode, args.workload, args.calls, args.cudnn_tf32),
                       header=False)  # the child prints its own, with the calls


if __name__ == "__main__":
    sys.exit(main())

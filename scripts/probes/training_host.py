"""Where a training step's host time goes, per mode: why GraCE's steady training step spends
more host time than PT2-CG's (the replay map: micro-mlp16-T 1,751 against 1,596 us, DR-T 1,684
against 1,542), when its inference calls do not.

Diagnostic only: its numbers are read, not reported. One mode per process, as in the benchmark:

    python scripts/probes/training_host.py --workload micro-mlp16-T --mode pt2-cg|grace|grace-no-guard|...

For the mode's environment it compiles the workload's training step (gradients set to None,
forward, loss, backward, as the benchmark's worker steps), warms it up, then prints:

- how often, per 100 steady steps, the paths a steady step should not take were taken: the
  tree's full ``_run``, the lean dispatch declining, the liveness check's slow path, the
  stale-output guard's swaps and path ends, the gradient-adoption bookkeeping;
- under GraCE, the microseconds per step in each of its per-call parts (gradient copies,
  stale-output guard, hardened liveness check), each timed from outside;
- the synchronised step's median, in microseconds;
- the host time of a step by layer (``grace.bench.layers``, as the replay map measures it);
- a cProfile of steady steps with autograd's backward on the calling thread (otherwise the
  backward graph's tree calls run on autograd's device thread, which cProfile does not see),
  sorted by own time, and GraCE's and the tree's frames by cumulative time.
"""

from __future__ import annotations

import collections
import cProfile
import io
import os
import pstats
import statistics
import sys
import time
from typing import Any, Callable

from _in_mode import mode_parser, run_in_mode

SAMPLES = 8  # input samples the steps cycle through


class Instruments:
    """Wrappers put on chosen functions while installed: call counts (``count``) and the
    nanoseconds spent inside (``time``), per label."""

    def __init__(self) -> None:
        self.counts: collections.Counter[str] = collections.Counter()
        self.ns: collections.Counter[str] = collections.Counter()
        self._installed: list[tuple[Any, str, Any]] = []

    def count(self, owner: Any, name: str, label: str, none_too: bool = False) -> None:
        counts = self.counts

        def wrap(original: Callable[..., Any]) -> Callable[..., Any]:
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                result = original(*args, **kwargs)
                counts[label] += 1
                if none_too and result is None:
                    counts[f"{label} (declined)"] += 1
                return result
            return wrapper

        self._install(owner, name, wrap)

    def time(self, owner: Any, name: str, label: str) -> None:
        ns, clock = self.ns, time.perf_counter_ns

        def wrap(original: Callable[..., Any]) -> Callable[..., Any]:
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                start = clock()
                try:
                    return original(*args, **kwargs)
                finally:
                    ns[label] += clock() - start
            return wrapper

        self._install(owner, name, wrap)

    def _install(self, owner: Any, name: str, wrap: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
        original = getattr(owner, name)
        self._installed.append((owner, name, original))
        setattr(owner, name, wrap(original))

    def remove(self) -> None:
        for owner, name, original in reversed(self._installed):
            setattr(owner, name, original)
        self._installed.clear()


def child(workload: str, steps: int, device: str, size: str) -> None:
    import torch
    import torch._inductor.cudagraph_trees as trees

    from grace.bench.layers import LAYERS, timing
    from grace.bench.precision import exact_float32
    from grace.bench.workloads import get

    exact_float32()
    wl = get(workload)
    if wl.kind != "training":
        raise SystemExit(f"{workload} is an inference workload; this probe steps training workloads")
    torch.manual_seed(0)
    model = wl.build(device, wl.batch_size, size)
    fn = torch.compile(model, mode="reduce-overhead")
    samples = [wl.inputs(model, i, device, wl.batch_size, size) for i in range(SAMPLES)]
    params = [p for p in model.parameters() if p.requires_grad]
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)

    def step(args: tuple) -> None:
        for p in params:
            p.grad = None
        wl.loss(fn(*args)).backward()

    for i in range(40):
        step(samples[i % SAMPLES])
    sync()

    counter = Instruments()
    counter.count(trees.CUDAGraphTreeManager, "_run", "tree _run")
    counter.count(trees.CUDAGraphTreeManager, "execute_node", "tree execute_node")
    if os.environ.get("GRACE_DISABLE") != "1":
        import grace.grad_copies as grad_copies
        import grace.lean.dispatch as lean
        import grace.stale_outputs as stale
        import grace.tree_liveness as liveness

        counter.count(lean.LeanDispatch, "replay", "lean replay", none_too=True)
        counter.count(liveness, "release_dead_histories", "liveness slow path")
        counter.count(stale, "_swap_cached_output", "stale-output swap")
        counter.count(stale.StaleOutputGuard, "path_ends", "stale-output path end")
        counter.count(grad_copies.AdoptedGrads, "noted", "adopted grads noted")
    for i in range(100):
        step(samples[i % SAMPLES])
    sync()
    counter.remove()
    print("calls per 100 steady steps:", dict(sorted(counter.counts.items())))
    print("parameters:", len(params))

    if os.environ.get("GRACE_DISABLE") != "1":
        # the time of each of GraCE's per-call parts a training step runs, per step (grace.grad_copies,
        # grace.stale_outputs, grace.tree_liveness: the guard, the gradient copies, the hardened liveness check)
        import grace.grad_copies as grad_copies
        import grace.stale_outputs as stale
        import grace.tree_liveness as liveness

        hooks = Instruments()
        hooks.time(grad_copies.AdoptedGrads, "before_call", "gradient copies: before_call")
        hooks.time(grad_copies.AdoptedGrads, "noted", "gradient copies: noted")
        hooks.time(stale.StaleOutputGuard, "path_ends", "stale-output guard: path_ends")
        hooks.time(stale.StaleOutputGuard, "call_ends", "stale-output guard: call_ends")
        hooks.time(stale.StaleOutputGuard, "replayed", "stale-output guard: replayed")
        hooks.time(liveness.CachedOutputLiveness, "__call__", "liveness check")
        hook_steps = 200
        for i in range(hook_steps):
            step(samples[i % SAMPLES])
        sync()
        hooks.remove()
        print("GraCE's per-call parts, us per step (wrappers included):",
              {k: round(v / 1e3 / hook_steps, 2) for k, v in sorted(hooks.ns.items())})

    def synchronised(n: int) -> float:
        times = []
        for i in range(n):
            sync()
            start = time.perf_counter()
            step(samples[i % SAMPLES])
            sync()
            times.append((time.perf_counter() - start) * 1e6)
        return round(statistics.median(times), 1)

    print("synchronised step us (median):", synchronised(steps))
    per_layer: dict[str, list[float]] = {layer: [] for layer in LAYERS}
    with timing() as clock:
        for k in range(100):
            for _ in range(3):  # the measured step follows three with the wrappers in place
                clock.call(step, samples[k % SAMPLES])
            sync()
            clock.reset()
            clock.call(step, samples[k % SAMPLES])
            sync()
            for layer, us in clock.exclusive_us().items():
                per_layer[layer].append(us)
    print("host us by layer (medians):", {k: round(statistics.median(v), 1) for k, v in per_layer.items()})

    torch.autograd.set_multithreading_enabled(False)
    print("synchronised step us, backward on this thread:", synchronised(steps))
    profile = cProfile.Profile()
    profile.enable()
    for i in range(steps):
        step(samples[i % SAMPLES])
    sync()
    profile.disable()
    out = io.StringIO()
    stats = pstats.Stats(profile, stream=out)
    stats.sort_stats("tottime").print_stats(40)
    stats.sort_stats("cumulative").print_stats("grace|cudagraph_trees|output_code", 45)
    print(f"cProfile of {steps} steps")
    print(out.getvalue())


def main() -> int:
    ap = mode_parser(__doc__, "micro-mlp16-T", exclude=("eager", "pt2-nocg"), dry_run="no graphs")
    ap.add_argument("--steps", type=int, default=300, help="synchronised steps timed, and steps profiled")
    args = ap.parse_args()
    return run_in_mode(args, __file__, lambda: child(args.workload, args.steps, args.device, args.size))


if __name__ == "__main__":
    sys.exit(main())

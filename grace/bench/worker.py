"""One (workload, mode) in its own process: build, compile, warm up, then time on demand.

The runner starts this module with the mode's environment and talks to it over a JSON-lines
protocol on stdin/stdout (stdout is moved to stderr first, so nothing torch prints can corrupt
the protocol; stderr goes to the case's log file):

    worker -> {"event": "ready", "compile_s": ...}          after warm-up
    runner -> {"cmd": "run", "samples": [i, j, ...]}         timed iterations, in this order
    worker -> {"event": "samples", "us": [...], "gpu_us": [...] or None}
    runner -> {"cmd": "layers", "samples": [...]}            with --layers, once, after the last timed round
    worker -> {"event": "layers", "layers_us": [{...}, ...], "seconds": ...}
    runner -> {"cmd": "finish"}
    worker -> {"event": "summary", "peak_replay_mem_bytes": ..., "cuda_graphs": ..., "scg": ..., "gpu_busy_us": ...}
    worker -> {"event": "error", "error": "..."}             at any point, then exit 1

Every timed iteration gets a fresh input sample, and its output is compared, after the clock
stops, with an eager copy of the same model run on the same sample. A stochastic workload
(dropout in training) is compiled with Inductor's ``fallback_random``, so that its random ops
are eager's, and the RNG is seeded from the sample index, outside the clock, before both the
compiled and the eager step: both then draw the same masks. That applies to every mode of the
workload alike, so the modes stay comparable. ``scg`` is SCG's decision
report for the process (:mod:`grace.scg.report`), or None where SCG decided nothing.

With ``--gpu-time``, each timed sample (or each whose number is a multiple of
``--gpu-time-every``) is followed by one more iteration on the same input sample whose device time
alone is measured (:meth:`Case.gpu_timed`): what the GPU spends on an
iteration (input copies, pointer writes, a prelude kernel, the replay) apart from the host's
part, as the paper's Figure 9 compares its ways of dereferencing pointers. With ``--layers``,
after the last timed round, one more iteration per timed sample is timed with a clock at each
layer's entry (:meth:`Case.layered`, :mod:`grace.bench.layers`): the host's microseconds per
layer. The clock's wrappers go on and come off around each of those calls; no timed sample
follows them.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import faulthandler
import os
import re
import signal
import sys
import time
import traceback
from collections.abc import Iterator
from typing import IO, Any, Callable

from grace.bench import check, options
from grace.bench.modes import MODES, Mode
from grace.bench.pinning import pin_backward_thread, pin_timing_thread
from grace.bench.precision import exact_float32
from grace.bench.reference import Reference, as_float64
from grace.bench.workloads import SIZES, Workload, get
from grace.scg import quiet

WARMUP_SAMPLE_BASE = 1_000_000  # warm-up samples never coincide with timed ones
COVERAGE_SAMPLE_BASE = 2_000_000  # profiled samples, apart from warm-up and timed ones
BUSY_ITERATIONS = 3  # iterations profiled for their device-busy time where gpu_timed gave up
REWARM_MIN_ITERATIONS = 1  # Case.rewarm's least, whatever its time: the cold first sample of a round
# weighs least where an iteration is long (DR-T's 7 ms: 2%), and XLNET-T's takes 270 ms
REWARM_MAX_ITERATIONS = 1000  # and its most, whatever its time
MAX_SLEEP_CYCLES = 1 << 27  # gpu_timed's longest head start for the host, about 80 ms
RNG_SEED_BASE = 7_000_000  # stochastic workloads' per-sample seeds, apart from the weights' seed 0
STACKS_SIGNAL = signal.SIGUSR1  # on it, every thread's Python stack goes to the log (the runner's timeouts)


class SkipLog(logging.Handler):
    """Collects why Inductor skipped a CUDA graph or split one into partitions.

    Listens to the ``cudagraphs`` log artifact while it is on: only during warm-up, because
    with it on, CUDA graph trees format debug records on every replay, which would be timed.
    """

    LOGGERS = ("torch._inductor.cudagraph_utils.__cudagraphs",
               "torch._inductor.cudagraph_trees.__cudagraphs",
               "torch._inductor.scheduler.__cudagraphs")
    PARTITION_REASON = re.compile(r"reason=([^,]+)")

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.skips: list[str] = []
        self.partition_reasons: dict[str, int] = {}

    def emit(self, record: logging.LogRecord) -> None:
        msg = record.getMessage()
        if "skipping cudagraphs" in msg.lower() and msg not in self.skips:
            self.skips.append(msg)
        match = self.PARTITION_REASON.search(msg)
        if match:
            reason = match.group(1).strip()
            self.partition_reasons[reason] = self.partition_reasons.get(reason, 0) + 1

    def __enter__(self) -> "SkipLog":
        import torch

        torch._logging.set_logs(cudagraphs=True)
        for name in self.LOGGERS:
            logging.getLogger(name).addHandler(self)
        return self

    def __exit__(self, *exc: object) -> None:
        import torch

        for name in self.LOGGERS:
            logging.getLogger(name).removeHandler(self)
        torch._logging.set_logs()


class Case:
    """A workload compiled in one mode, with an eager twin for checking outputs."""

    def __init__(self, workload: Workload, mode: Mode, device: str, batch_size: int, size: str,
                 check_after: bool = False, distinct_inputs: int = 0, lead_in_below_us: int = 0):
        import torch

        self.workload, self.mode, self.device, self.batch, self.size = workload, mode, device, batch_size, size
        self.cuda = device.startswith("cuda")
        if workload.stochastic and mode.compiled:
            import torch._inductor.config as inductor_config

            inductor_config.fallback_random = True
        torch.manual_seed(0)
        model = workload.build(device, batch_size, size)
        # the eager twin every timed output of a compiled mode is checked against (none in eager)
        self.reference = (Reference(model, self._run_reference, workload.kind == "training", workload.stochastic)
                          if mode.compiled else None)
        self.model = model
        # id(module) -> (module, its parameters that take gradients), listed at the module's first step
        self._trainable: dict[int, tuple[Any, list[Any]]] = {}
        self.fn: Callable[..., Any] = (
            torch.compile(model, mode=mode.compile_mode) if mode.compiled else model)
        self.peak_mem = 0
        self._sleep_cycles = 1 << 20  # gpu_timed's head start for the host: about 0.6 ms on an H100
        # why gpu_timed gave up for the rest of the run (the longest head start was not enough), or None
        self.gpu_time_unavailable: str | None = None
        self._last_gpu_inputs: tuple = ()  # held until the next gpu_timed call has made its own
        self.check_after = check_after
        self._unchecked: list[tuple[int, Any]] = []  # (sample, kept output), with check_after
        self.distinct_inputs = distinct_inputs  # timed samples' inputs cycle over this many (0: each its own)
        self.lead_in_below_us = lead_in_below_us  # timed samples shorter than this follow an untimed iteration
        self.last_timed_us: float | None = None  # the last timed sample's microseconds per iteration

    def sync(self) -> None:
        if self.cuda:
            import torch

            torch.cuda.synchronize()

    def step(self, fn: Callable[..., Any], module: Any, inputs: tuple) -> Any:
        """One iteration: a forward pass, or forward and backward for training."""
        import torch

        if self.workload.kind == "inference":
            with torch.no_grad():
                return fn(*inputs)
        params = self.trainable(module)
        for p in params:
            p.grad = None
        loss = self.workload.loss(fn(*inputs))
        loss.backward()
        return (loss.detach(), [p.grad for p in params])

    def trainable(self, module: Any) -> list[Any]:
        """``module``'s parameters that take gradients, listed once, at its first step. Walking
        the module tree on every step cost 59 us for micro-mlp16-T's model on the development CPU
        (209 for ResNet-50's 161 tensors; ``scripts/probes/param_walk_cost.py``), inside every
        mode's timed iteration, where a training loop's optimizer holds its list. Workloads fix
        ``requires_grad`` when they build."""
        entry = self._trainable.get(id(module))
        if entry is None or entry[0] is not module:
            entry = (module, [p for p in module.parameters() if p.requires_grad])
            self._trainable[id(module)] = entry
        return entry[1]

    def seed(self, sample: int) -> None:
        """Seed the RNG for ``sample``'s step, where the workload draws random numbers."""
        if self.workload.stochastic:
            import torch

            torch.manual_seed(RNG_SEED_BASE + sample)

    def inputs(self, sample: int) -> tuple:
        if self.distinct_inputs:
            sample %= self.distinct_inputs
        return self.workload.inputs(self.model, sample, self.device, self.batch, self.size)

    def warm_up_samples(self, iterations: int) -> list[int]:
        """The warm-up's samples: inputs no timed sample uses, or, where timed samples cycle over
        a few inputs, each of those four times in turn (Dynamo recompiles when the second input's
        shapes differ from the first's; then a CUDA graph tree warms each shape up, records it and
        replays it), and at least ``iterations`` in all."""
        if not self.distinct_inputs:
            return [WARMUP_SAMPLE_BASE + i for i in range(iterations)]
        return [i % self.distinct_inputs for i in range(max(iterations, 4 * self.distinct_inputs))]

    def warm_up(self, iterations: int) -> float:
        """Run the warm-up; seconds from the first call's start to the last one's end."""
        self.sync()
        start = time.perf_counter()
        for sample in self.warm_up_samples(iterations):
            self.seed(sample)
            self.step(self.fn, self.model, self.inputs(sample))
        self.sync()
        return time.perf_counter() - start

    def untimed_step(self, avoid: int | None = None) -> None:
        """One iteration on a warm-up input, or where timed samples cycle over a few inputs, on
        one that is not ``avoid``'s: a replay that read this call's data in the next (timed) call
        on ``avoid`` then fails that call's check."""
        sample = self.warm_up_samples(1)[0]
        if self.distinct_inputs and avoid is not None and sample % self.distinct_inputs == avoid % self.distinct_inputs:
            sample += 1
        self.seed(sample)
        self.step(self.fn, self.model, self.inputs(sample))
        self.sync()

    def rewarm(self, milliseconds: int, avoid: int | None = None) -> int:
        """Untimed iterations, each synchronised as a timed one is, until ``milliseconds`` have
        passed and at least :data:`REWARM_MIN_ITERATIONS` ran (at most
        :data:`REWARM_MAX_ITERATIONS`); how many ran. The worker slept while the other modes took
        their round, and what its iterations touch (its own caches, the timing core's clock) went
        cold meanwhile: the first iterations of a round ran 1.5 to 3 times as long as the rest.
        A training step leaves the parameters as it found them (no optimizer), so the eager twin
        still matches. ``avoid``: the input sample the next timed call runs on, which these
        iterations do not use (:meth:`untimed_step`)."""
        if milliseconds <= 0:
            return 0
        deadline = time.perf_counter() + milliseconds / 1e3
        iterations = 0
        while iterations < REWARM_MAX_ITERATIONS and (
                iterations < REWARM_MIN_ITERATIONS or time.perf_counter() < deadline):
            self.untimed_step(avoid)
            iterations += 1
        return iterations

    def release_memory(self) -> None:
        """Return the caching allocator's free blocks (CUDA graph pools stay) to the device."""
        if self.cuda:
            import torch

            self.sync()
            torch.cuda.empty_cache()

    def timed(self, sample: int, inner: int = 1) -> float:
        """Microseconds per iteration over ``inner`` iterations run back to back, synchronised once.

        They run on input samples ``sample * inner`` onwards, all made before the clock starts;
        the last one's output is checked afterwards (a CUDA graph's earlier outputs are already
        overwritten by then): at once, or with ``check_after`` copied now and checked by
        :meth:`check_kept`, so that the next timed sample does not follow an eager forward.
        A stochastic workload seeds its RNG before each, on the clock. Where the last timed
        iteration took less than ``lead_in_below_us``, one untimed iteration runs before the
        sample's inputs are made (:meth:`untimed_step`), as the previous iteration of a loop
        would: a host-bound call after a pause, even of 200 us, ran up to 40% longer.
        """
        import torch

        samples = range(sample * inner, (sample + 1) * inner)
        if self.lead_in_below_us and (self.last_timed_us is None or self.last_timed_us < self.lead_in_below_us):
            self.untimed_step(avoid=samples[0])
        inputs = [self.inputs(s) for s in samples]
        if self.cuda:
            torch.cuda.reset_peak_memory_stats()
        self.seed(samples[0])
        self.sync()
        start = time.perf_counter()
        out = self.step(self.fn, self.model, inputs[0])
        for s, args in zip(samples[1:], inputs[1:]):
            self.seed(s)
            out = self.step(self.fn, self.model, args)
        self.sync()
        elapsed = (time.perf_counter() - start) * 1e6 / inner
        self.last_timed_us = elapsed
        if self.cuda:
            self.peak_mem = max(self.peak_mem, torch.cuda.max_memory_allocated())
        if self.reference is not None:
            if self.check_after:
                self._unchecked.append((samples[-1], check.kept(out)))
            else:
                self.reference.check(samples[-1], out)
        return elapsed

    def check_kept(self) -> None:
        """Check the outputs :meth:`timed` kept under ``check_after``, oldest first."""
        while self._unchecked:
            self.reference.check(*self._unchecked.pop(0))

    def gpu_timed(self, sample: int) -> float | None:
        """Microseconds of device time of one iteration on input ``sample``; None if it
        cannot be isolated.

        The stream is held behind a sleeping kernel while the host queues the iteration, so
        the events around it time the device's work alone, without the gaps where the GPU
        waits for the host. If the host was still queuing when the sleep ended, the sleep is
        doubled and the iteration run again; an iteration that waits for the device itself
        (a ``.item()``) never gets ahead, and gives None. Once the longest head start
        (:data:`MAX_SLEEP_CYCLES`) was not enough, every later call gives None at once
        (:attr:`gpu_time_unavailable` says why): the doubled sleep stays, and each further try
        would cost the longest sleep for nothing (about 75 ms a sample). The previous call's
        inputs are held while this one's are made, so that the two never share addresses: a
        replay that updates pointers (PI) then does so on every measured call, as on every
        timed one.
        """
        import torch

        if self.gpu_time_unavailable is not None:
            return None
        args = self.inputs(sample)
        self._last_gpu_inputs = args
        start, end, slept = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True),
                             torch.cuda.Event())
        while True:
            self.seed(sample)
            self.sync()
            torch.cuda._sleep(self._sleep_cycles)
            slept.record()
            start.record()
            out = self.step(self.fn, self.model, args)
            end.record()
            host_was_ahead = not slept.query()
            end.synchronize()
            del out
            if host_was_ahead:
                return start.elapsed_time(end) * 1e3
            if self._sleep_cycles >= MAX_SLEEP_CYCLES:
                self.gpu_time_unavailable = (
                    f"the host was still queuing the iteration after a head start of {MAX_SLEEP_CYCLES} cycles: "
                    "it waits for the device inside (a .item(), a data-dependent shape) or its host work outlasts "
                    "the head start")
                return None
            self._sleep_cycles *= 2

    def layered(self, sample: int) -> dict[str, float]:
        """Host microseconds per layer (:mod:`grace.bench.layers`) of one iteration on input
        ``sample``, synchronised before and after but not inside: the host's own time, the
        device's work overlapping it. The iteration measured follows ``layers.WARM_CALLS``
        unmeasured ones with the clock's wrappers in place: the first calls after they go in are cold."""
        from grace.bench import layers

        args = self.inputs(sample)
        with layers.timing() as clock:
            for _ in range(layers.WARM_CALLS):
                self.seed(sample)
                clock.call(self.step, self.fn, self.model, args)
            self.seed(sample)
            self.sync()
            clock.reset()
            out = clock.call(self.step, self.fn, self.model, args)
        self.sync()
        del out
        return clock.exclusive_us()

    def _run_reference(self, module: Any, sample: int, float64: bool) -> Any:
        """One seeded step of the eager twin ``module`` on ``sample``'s fresh inputs, in float64
        when asked (:class:`grace.bench.reference.Reference`)."""
        self.seed(sample)
        inputs = self.inputs(sample)
        return self.step(module, module, as_float64(inputs) if float64 else inputs)

    def coverage(self, iterations: int) -> dict[str, Any]:
        """Kernels that ran inside CUDA graphs over ``iterations`` profiled steps (Table 2), untimed."""
        from dataclasses import asdict

        from grace.cgct.coverage import measure

        step = self._profiled_step([COVERAGE_SAMPLE_BASE + i for i in range(iterations)])
        self.sync()
        cov = measure(step, iterations)
        return {**asdict(cov), "share": cov.share, "iterations": iterations}

    def device_busy(self, iterations: int) -> list[float]:
        """Device-busy microseconds of ``iterations`` profiled steps on warm-up inputs, untimed
        (:mod:`grace.bench.device_busy`): the device time of a step ``gpu_timed`` cannot isolate."""
        from grace.bench import device_busy

        return device_busy.measure(self._profiled_step(self.warm_up_samples(iterations)[:iterations]), iterations)

    def _profiled_step(self, samples: list[int]) -> Callable[[int], None]:
        """``step(i)``: one seeded iteration on ``samples[i]``, whose inputs are made now, before a
        profiler starts, so that the kernels making them are not the step's."""
        inputs = [self.inputs(s) for s in samples]

        def step(i: int) -> None:
            self.seed(samples[i])
            self.step(self.fn, self.model, inputs[i])

        return step

    def summary(self, skips: SkipLog) -> dict[str, Any]:
        from dataclasses import asdict

        from grace import trees
        from grace.pi import report as pi_report
        from grace.scg import report
        from grace.switches import running_switches

        scg = report.records()
        pi = pi_report.records()
        return {
            "switches": running_switches(),
            "scg": {"summary": report.summarize(scg), "graphs": [asdict(r) for r in scg]} if scg else None,
            "pi": {"summary": pi_report.summarize(pi), "graphs": [asdict(r) for r in pi]} if pi else None,
            "peak_replay_mem_bytes": self.peak_mem if self.cuda else None,
            "gpu_time_unavailable": self.gpu_time_unavailable,
            "graph_pool_bytes": trees.graph_pool_bytes() if self.cuda else None,
            "cuda_graphs": count_cuda_graphs() if self.cuda else 0,
            "cudagraph_skips": skips.skips,
            "partition_reasons": skips.partition_reasons,
            "check": (self.reference.summary(fallback_random=self.workload.stochastic)
                      if self.reference is not None else Reference.unchecked()),
        }


def device_timed(samples: list[int], every: int) -> list[int]:
    """The samples of a round whose device time ``--gpu-time`` measures: those whose number is a
    multiple of ``every`` (``--gpu-time-every``), so that the measured ones spread over every round."""
    return [s for s in samples if s % every == 0]


def count_cuda_graphs() -> int:
    """CUDA graphs recorded in this process's CUDA graph trees (all devices)."""
    from grace.trees import recorded_nodes

    return len(recorded_nodes())


def _protocol_stream() -> IO[str]:
    """A private copy of stdout for the protocol; fd 1 then points at stderr."""
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return proto


class RoundPhases:
    """Wall seconds of each part of a timed round (the timed samples, their checks, the device
    timing, the layers), so that a run's rows say where a slow workload's rounds went."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextlib.contextmanager
    def __call__(self, phase: str) -> Iterator[None]:
        start = time.monotonic()
        try:
            yield
        finally:
            self.seconds[phase] = round(self.seconds.get(phase, 0.0) + time.monotonic() - start, 3)


def serve(args: argparse.Namespace, proto: IO[str]) -> None:
    import torch

    def send(message: dict[str, Any]) -> None:
        proto.write(json.dumps(message) + "\n")

    exact_float32()
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError("no CUDA GPU is visible to torch in the worker")
    with quiet.compiling() as gate:  # SCG's profiles, here or in another worker, wait for it to end
        case = Case(get(args.workload), MODES[args.mode], args.device, args.batch_size, args.size,
                    check_after=args.check_after, distinct_inputs=args.distinct_inputs,
                    lead_in_below_us=args.lead_in_below_us)
        with SkipLog() as skips:
            compile_s = case.warm_up(args.warmup)
    waited_s = gate.waited_s if gate is not None else 0.0  # not compile time: others compiled then
    if args.release_memory:
        case.release_memory()  # room for the next mode's warm-up
    send({"event": "ready", "compile_s": compile_s - waited_s if case.mode.compiled else None,
          "scg_quiet_wait_s": round(waited_s, 3) if gate is not None else None})
    pinned = False
    for line in sys.stdin:
        command = json.loads(line)
        if command["cmd"] == "run":
            if not pinned and args.pin_cpu >= 0:
                pin_timing_thread(args.pin_cpu)
                if args.pin_backward and case.cuda and case.workload.kind == "training":
                    pin_backward_thread(args.pin_cpu, case.device)
                pinned = True
            phases = RoundPhases()
            if args.release_memory:
                with phases("untimed"):
                    # allocations after the cache was emptied stay off the clock
                    case.untimed_step(avoid=command["samples"][0] * args.inner)
            if args.rewarm_ms:
                with phases("rewarm"):
                    case.rewarm(args.rewarm_ms, avoid=command["samples"][0] * args.inner)
            with phases("timed"):
                us = [case.timed(s, args.inner) for s in command["samples"]]
            with phases("check"):
                case.check_kept()
            gpu_us = None
            if args.gpu_time and case.cuda:
                with phases("gpu_time"):
                    gpu_us = [case.gpu_timed(s) for s in device_timed(command["samples"], args.gpu_time_every)]
            send({"event": "samples", "us": us, "gpu_us": gpu_us, "phase_s": phases.seconds})
            if args.release_memory:
                case.release_memory()
        elif command["cmd"] == "layers":  # after the last timed round: no timed sample follows the clock's wrappers
            begun = time.perf_counter()
            layers_us = [case.layered(s) for s in command["samples"]]
            if args.release_memory:
                case.release_memory()
            send({"event": "layers", "layers_us": layers_us, "seconds": round(time.perf_counter() - begun, 3)})
        elif command["cmd"] == "finish":
            coverage = case.coverage(args.coverage) if args.coverage and case.cuda else None
            # device time from a profile where the events could not isolate it (grace.bench.device_busy)
            busy = None
            if args.gpu_time and case.gpu_time_unavailable:
                try:
                    busy = case.device_busy(BUSY_ITERATIONS)
                except Exception as e:  # noqa: BLE001 - the row's timings stand without it
                    print(f"{args.workload} / {args.mode}: no device time from the profile either: "
                          f"{type(e).__name__}: {e}", file=sys.stderr)
            send({"event": "summary", **case.summary(skips), "coverage": coverage, "gpu_busy_us": busy})
            return
        else:
            raise ValueError(f"unknown command {command!r}")


RUNNER_PID_ENV = "GRACE_BENCH_RUNNER_PID"  # the runner that started this worker (grace.bench.runner.worker_env)


def die_with_runner() -> None:
    """Have the kernel kill this worker when the runner that started it dies, however it dies
    (SIGKILL included), so that no worker runs on, orphaned, on the GPU beside the next run.
    Linux only; elsewhere, or without the runner's pid, a no-op."""
    runner = os.environ.get(RUNNER_PID_ENV)
    if sys.platform != "linux" or not runner:
        return
    import ctypes

    pr_set_pdeathsig = 1
    if ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL) != 0:
        return
    if os.getppid() != int(runner):  # the runner died before the request took
        os._exit(1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="one (workload, mode) benchmark worker")
    parser.add_argument("--workload", required=True)
    parser.add_argument("--mode", required=True, choices=sorted(MODES))
    parser.add_argument("--batch-size", type=int, required=True)
    # the runner passes every flag (grace.bench.runner.start_worker): its Settings hold the defaults
    parser.add_argument("--device", required=True)
    parser.add_argument("--size", required=True, choices=SIZES)
    parser.add_argument("--pin-cpu", type=int, required=True, help="core for the timing thread; -1: none")
    options.add_arguments(parser)  # one flag per grace.bench.options.WorkerOptions field
    args = parser.parse_args(argv)
    die_with_runner()
    proto = _protocol_stream()
    # a crash in native code (a segmentation fault, an abort) leaves every thread's Python stack in the
    # log, and so does the runner's signal before it kills a worker that outlived its limit
    faulthandler.enable(file=sys.stderr, all_threads=True)
    faulthandler.register(STACKS_SIGNAL, file=sys.stderr, all_threads=True)
    try:
        serve(args, proto)
    except Exception as e:  # noqa: BLE001 - every failure becomes an error row, with its reason
        traceback.print_exc()
        proto.write(json.dumps({"event": "error", "error": f"{type(e).__name__}: {e}"}) + "\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

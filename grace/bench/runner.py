"""Run workloads in every mode, interleaved, and write one row per (workload, mode).

For each workload the runner starts one worker per mode, one after another so that their
compilations do not compete, and waits for each to warm up (``compile_together`` starts them all
at once instead, for workloads whose compilations would not fit a shard's time one after
another; their rows say so, since compile times then overlap; a workload's config line can start
them a few at a time instead, :class:`grace.bench.targets.Target`). Then it runs rounds: in
round ``r`` every live worker times the same ``chunk`` input samples, the order of modes
rotating from round to round, so drift (clocks, temperature, other tenants) hits all modes alike
and the ``r``-th samples of two modes are a fair pair. Before its timed samples in a round, each
worker runs untimed iterations for ``rewarm_ms`` (at least one): it slept while the others took
their turn on the same core, and without them the first samples of each round ran up to three
times as long as the rest. A worker that crashes, or outlives the
per-case timeout, is killed and becomes an error row with the reason and its log's tail; the
others go on. Runners that share a GPU (shards run side by side to overlap their compilations)
pass the same ``timing_lock``: a workload's timed rounds then hold it, so no two shards time at
once. The limit applies to each phase of a case: compiling and warming up, then the timed
rounds; a timed round also has a limit of its own (:func:`round_deadline`), so that a worker
hanging mid-timing does not use up the others' time. Every worker's timing thread runs on the
same core once timing starts, so no mode is luckier than another in where the scheduler puts it.
With ``release_memory`` each worker returns its cached GPU memory after its chunk and runs one
untimed step before the next, so that only the timing worker holds its activations: for
workloads whose modes do not fit on the GPU together. With ``inner`` above 1 a timed sample is
the mean of that many iterations run back to back on their own inputs, synchronised once: for
micro-workloads of a few hundred microseconds, where one synchronised iteration is mostly host
jitter. A worker that outlives the limit first writes its threads' stacks to its log; a runner
stopped by SIGTERM kills the workers it started before it exits, and one killed outright takes
them with it (the kernel's parent-death signal), so none is left on the GPU beside the next run.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import fcntl
import json
import os
import selectors
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median
from typing import Any, Callable, Iterable, Iterator

from grace.bench import layers, results, walls
from grace.bench.modes import Mode
from grace.bench.options import WorkerOptions
from grace.bench.progress import Progress
from grace.bench.targets import Target, modes_for
from grace.bench.workloads import SIZES
from grace.bench.worker import RUNNER_PID_ENV, STACKS_SIGNAL
from grace.stats import summary
from grace.log import get_logger
from grace.paths import REPO_ROOT

log = get_logger("grace.bench")


class Interrupted(Exception):
    """The runner was asked to stop (SIGTERM): its workers are killed on the way out."""


class WorkerFailed(Exception):
    """The worker died, reported an error, or ran out of time; the message says which."""


MIN_ROUNDS = 4  # rounds a workload times whatever --end-after says: 20 samples a mode at chunk 5
CONFIG_GPU_GIB = 80.0  # the GPU memory the configs' wave sizes (together=N) were written for: an H100's


def _flag(default: Any, flag: str, help: str, **argparse_options: Any) -> Any:
    """A :class:`Settings` field that ``python -m grace.bench`` sets with ``flag``
    (:func:`add_arguments`): the field declares its default, flag and help once."""
    return field(default=default, metadata={"flag": flag, "help": help, **argparse_options})


@dataclass
class Settings:
    run_id: str
    experiment: str = _flag("single_gpu", "--experiment", "results/raw/<experiment>/<run-id>/ receives the rows")
    repeat: int = _flag(100, "--repeat", "timed iterations per mode")
    chunk: int = _flag(5, "--chunk", "iterations per mode per interleaved round")
    timeout_s: float = _flag(300.0, "--timeout", "seconds per (workload, mode)")
    device: str = _flag("cuda", "--device", "cuda (default) or cpu (runner tests only)")
    size: str = _flag("full", "--size", "tiny: CPU-test sizes", choices=SIZES)
    pin_cpu: int = -1  # every worker's timing thread on this core (-1: unpinned; --pin-cpu claims one)
    scg_cache: Path | None = _flag(
        None, "--scg-cache", "SCG decision cache to use (default: a fresh one in the run directory); point it "
        "at an earlier run's scg-cache to measure a second run", type=Path)
    scg_cache_per_mode: bool = _flag(
        False, "--scg-cache-per-mode", "give each mode a decision cache of its own (<cache>/<mode>): modes of a run "
        "otherwise share one, and a mode that profiles a code second reads the first's decision "
        "(python -m grace.report.scg_agreement compares two modes' decisions)")
    timing_lock: Path | None = _flag(
        None, "--timing-lock", "a file that runners sharing one GPU lock around each workload's timed rounds",
        type=Path)
    stop_after_s: float | None = _flag(
        None, "--stop-after", "start no new workload after this many seconds (finish with --resume)",
        type=float, metavar="SECONDS")
    end_after_s: float | None = _flag(
        None, "--end-after", "write every workload's rows within this many seconds: once it has timed "
        f"{MIN_ROUNDS} rounds, a workload begins no round that would end later (its rows say how many rounds "
        "of how many it timed)", type=float, metavar="SECONDS")
    compile_together: bool = _flag(
        False, "--compile-together", "start every mode's worker at once, so their compilations overlap (for "
        "workloads whose compiles do not fit a shard one after another)")
    walls_from: str | None = _flag(
        None, "--walls-from", "EXPERIMENT/RUN of an earlier run of these workloads: with --end-after, a workload "
        "whose wall time there (scaled by grace.bench.walls.MARGIN) exceeds the time left is left for a later "
        "call and the next one that fits starts instead (the first of a call always starts, but with --walls-strict)",
        type=str, metavar="EXP/RUN")
    walls_strict: bool = _flag(
        False, "--walls-strict", "with --walls-from, every workload of the call, its first too, starts only if its "
        "wall time there is known and fits: for a call that goes on with the sweep after other work, whose time left "
        "a later call would exceed")
    wave_gib: float = _flag(
        CONFIG_GPU_GIB, "--wave-gib", "the GPU's memory in GiB, to which config lines' together=N scale: they are "
        f"written for an H100 of {CONFIG_GPU_GIB:g} GB, and a larger GPU warms up N x GIB / {CONFIG_GPU_GIB:g} modes "
        "at once (scripts/run_single_gpu_experiments.sh passes the GPU's)", type=float, metavar="GIB")
    worker: WorkerOptions = WorkerOptions()  # how each worker times (warm-up, inner, coverage, ...)
    results_dir: Path = results.RESULTS_DIR

    @staticmethod
    def from_args(args: argparse.Namespace, **others: Any) -> Settings:
        """The settings a parser that :func:`add_arguments` set up parsed, and ``others``; paths
        made absolute (workers run elsewhere)."""
        given = {f.name: getattr(args, f.name) for f in _flagged()}
        given = {name: v.resolve() if isinstance(v, Path) else v for name, v in given.items()}
        return Settings(**given, **others)


def _flagged() -> list[dataclasses.Field]:
    return [f for f in dataclasses.fields(Settings) if "flag" in f.metadata]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """One argument per flagged :class:`Settings` field, its value in ``args.<field name>``."""
    for f in _flagged():
        options = {k: v for k, v in f.metadata.items() if k not in ("flag", "help")}
        if isinstance(f.default, bool):
            parser.add_argument(f.metadata["flag"], dest=f.name, action="store_true", help=f.metadata["help"])
            continue
        if f.default is None and "type" not in options:  # type(None) would refuse every value given
            raise TypeError(f"Settings.{f.name}: a flag whose default is None declares its type")
        options.setdefault("type", type(f.default))
        parser.add_argument(f.metadata["flag"], dest=f.name, default=f.default, help=f.metadata["help"], **options)


def settings_for(settings: Settings, target: Target) -> Settings:
    """The run's settings as ``target``'s config line adjusts them."""
    worker = settings.worker
    if target.release_memory:  # and no copies of a chunk's outputs held for a later check: they would not fit
        worker = dataclasses.replace(worker, release_memory=True, check_after=False)
    if target.inputs:
        worker = dataclasses.replace(worker, distinct_inputs=target.inputs)
    return dataclasses.replace(settings, worker=worker, repeat=target.repeat or settings.repeat,
                               timeout_s=target.timeout_s or settings.timeout_s)


def wave_size(settings: Settings, target: Target, modes: int) -> int:
    """How many of ``target``'s mode workers start at once: every one under
    ``compile_together``, one after another otherwise, unless its config line says; a line's
    ``together=N`` scaled to the GPU's memory (``--wave-gib``), rounded down (an H100's 79.6 GiB
    keeps N), at most ``modes``."""
    if target.together:
        return max(1, min(modes, int(target.together * settings.wave_gib / CONFIG_GPU_GIB + 0.05)))
    if settings.compile_together and not target.release_memory:
        return modes
    return 1


@dataclass
class Worker:
    """A live worker process and the row it is filling in."""

    mode: Mode
    process: subprocess.Popen
    log_path: Path
    deadline: float
    row: dict[str, Any]
    samples: list[float] = field(default_factory=list)
    gpu_samples: list[float] = field(default_factory=list)
    layer_samples: list[dict[str, float]] = field(default_factory=list)  # host us per layer, per sample
    round_s: list[float] = field(default_factory=list)  # seconds each timed round took, request to answer
    phase_s: dict[str, float] = field(default_factory=dict)  # the worker's seconds per part of its rounds
    limit: str = "the per-case limit"  # what ``deadline`` is, for a timeout's message
    buffer: str = ""

    def send(self, message: dict[str, Any]) -> None:
        try:
            assert self.process.stdin is not None
            self.process.stdin.write(json.dumps(message) + "\n")
            self.process.stdin.flush()
        except (BrokenPipeError, OSError) as e:
            raise WorkerFailed(self._died(f"could not write to the worker ({e})")) from e

    def receive(self, expected: str) -> dict[str, Any]:
        """The next protocol message, which must be ``expected``; raises WorkerFailed."""
        assert self.process.stdout is not None
        with selectors.DefaultSelector() as sel:
            sel.register(self.process.stdout, selectors.EVENT_READ)
            while "\n" not in self.buffer:
                left = self.deadline - time.monotonic()
                if left <= 0 or not sel.select(timeout=left):
                    self.dump_stacks()
                    self.kill()
                    raise WorkerFailed(f"timeout: exceeded {self.limit} while waiting for '{expected}' "
                                       f"(its threads' stacks: {self.log_path.name})")
                chunk = os.read(self.process.stdout.fileno(), 65536).decode()
                if not chunk:
                    self.process.wait()
                    raise WorkerFailed(self._died("worker exited"))
                self.buffer += chunk
        line, self.buffer = self.buffer.split("\n", 1)
        message = json.loads(line)
        if message.get("event") == "error":
            self.process.wait()
            raise WorkerFailed(f"{message['error']} (log: {self.log_path.name})")
        if message.get("event") != expected:
            self.kill()
            raise WorkerFailed(f"protocol: expected '{expected}', got {message!r}")
        return message

    def _died(self, what: str) -> str:
        code = self.process.poll()
        tail = _tail(self.log_path)
        return f"{what} (exit code {code}); log tail: {tail}"

    def dump_stacks(self, wait_s: float = 2.0) -> None:
        """Have a live worker write every thread's Python stack to its log (the worker registers
        :data:`STACKS_SIGNAL` with faulthandler), so that a timeout says where it was."""
        if self.process.poll() is None:
            self.process.send_signal(STACKS_SIGNAL)
            time.sleep(wait_s)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def _tail(path: Path, lines: int = 6) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return "(no log)"


def worker_env(mode: Mode, cache_root: Path, scg_cache: Path | None = None,
               scg_report: Path | None = None, quiet_lock: Path | None = None,
               quiet_wait_s: float = 0.0) -> dict[str, str]:
    env = dict(os.environ)
    env.update(mode.env)
    env["PYTHONUNBUFFERED"] = "1"
    env[RUNNER_PID_ENV] = str(os.getpid())  # the worker dies with this process (worker.die_with_runner)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(mode.tree or REPO_ROOT), env.get("PYTHONPATH")]))
    # One kernel cache per run, with the FX graph and AOT autograd caches off: every worker
    # really lowers and generates its code (so no mode is served a graph another mode compiled;
    # that cache's key does not know GraCE's switches), while kernel binaries, keyed by their
    # source, are shared. So only the first compiled mode of a run pays cold kernel builds.
    env["TORCHINDUCTOR_CACHE_DIR"] = str(cache_root / "inductor")
    env["TRITON_CACHE_DIR"] = str(cache_root / "triton")
    env["TORCHINDUCTOR_FX_GRAPH_CACHE"] = "0"
    env["TORCHINDUCTOR_AUTOGRAD_CACHE"] = "0"
    # SCG's decisions: by default a cache that starts empty with the run, so the run measures
    # profiling; pointing a later run at it (--scg-cache) measures a second run of the program.
    if scg_cache is not None:
        env["GRACE_SCG_CACHE_DIR"] = str(scg_cache)
    if scg_report is not None:
        env["GRACE_SCG_REPORT"] = str(scg_report)
    # SCG's profiles wait until no other worker of the run compiles (grace.scg.quiet): modes
    # compiled together, or shards side by side, would otherwise time them on a shared CPU
    if quiet_lock is not None:
        env["GRACE_SCG_QUIET_LOCK"] = str(quiet_lock)
        env["GRACE_SCG_QUIET_WAIT_S"] = f"{quiet_wait_s:g}"
    return env


def base_row(settings: Settings, target: Target, mode: Mode, compiled_together: bool = False) -> dict[str, Any]:
    wl = target.workload
    return {
        "experiment": settings.experiment, "run_id": settings.run_id,
        "workload": wl.name, "model": wl.model, "suite": wl.suite, "kind": wl.kind,
        "batch_size": target.batch_size, "idiom": wl.idiom, "mode": mode.name,
        "device": settings.device, "size": settings.size, "repeat": settings.repeat,
        "worker": dataclasses.asdict(settings.worker), "pinned_cpu": settings.pin_cpu,
        "compiled_together": compiled_together, "workload_wall_s": None, "gpu_us": None,
        "gpu_samples_us": None, "gpu_time_unavailable": None, "gpu_busy_us": None, "layers_us": None,
        "host_us": None,
        "timing_lock": str(settings.timing_lock) if settings.timing_lock else None,
        "status": "error", "error": None,
        "iter_us": None, "samples_us": None, "compile_s": None, "peak_replay_mem_bytes": None,
        "scg_quiet_wait_s": None,  # seconds SCG's profiles waited for other workers' compilations
        "graph_pool_bytes": None,
        "switches": None,  # GraCE's switches as the worker ran (grace.switches)
        "cuda_graphs": None, "cudagraph_skips": [], "partition_reasons": {}, "check": None, "scg": None, "pi": None,
        "coverage": None,
        "machine": results.machine(), "versions": results.versions(), "command": results.command_line(),
        "invocation": results.invocation(),
    }


def quiet_wait_s(timeout_s: float) -> float:
    """How long a worker's SCG profiles may wait in all for the others to compile: a third of
    the phase's limit, which its own compilation shares."""
    return round(timeout_s / 3, 1)


def scg_cache_dir(settings: Settings, out_dir: Path, mode: Mode) -> Path:
    """The SCG decision cache ``mode``'s worker reads and fills: the run's (or ``--scg-cache``),
    or with ``--scg-cache-per-mode`` the mode's own folder in it."""
    shared = settings.scg_cache or out_dir / "scg-cache"
    return shared / mode.name if settings.scg_cache_per_mode else shared


def start_worker(settings: Settings, target: Target, mode: Mode, out_dir: Path, scratch: Path,
                 compiled_together: bool = False) -> Worker:
    log_path = out_dir / "logs" / f"{target.workload.name}.{mode.name}.log"
    cmd = [sys.executable, "-m", "grace.bench.worker", "--workload", target.workload.name,
           "--mode", mode.base or mode.name, "--batch-size", str(target.batch_size),
           "--device", settings.device, "--size", settings.size, "--pin-cpu", str(settings.pin_cpu),
           *settings.worker.argv()]
    scg_cache = scg_cache_dir(settings, out_dir, mode)
    scg_report = out_dir / "scg" / f"{target.workload.name}.{mode.name}.json"
    scg_report.parent.mkdir(exist_ok=True)
    with open(log_path, "w") as log_file:
        process = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log_file, text=True,
            env=worker_env(mode, scratch, scg_cache, scg_report, out_dir / "scg-quiet.lock",
                           quiet_wait_s(settings.timeout_s)),
            cwd=mode.tree or REPO_ROOT)
    return Worker(mode, process, log_path, time.monotonic() + settings.timeout_s,
                  base_row(settings, target, mode, compiled_together))


def run_target(settings: Settings, target: Target, modes: list[Mode], out_dir: Path,
               scratch: Path, progress: Progress, end_by: float | None = None) -> list[dict[str, Any]]:
    """All modes of one workload; returns their rows (error rows included). However it ends,
    an interruption included, no worker it started outlives it. With ``end_by`` (a
    ``time.monotonic()`` instant), rounds past MIN_ROUNDS that would end after it are left out."""
    settings = settings_for(settings, target)
    started: list[Worker] = []
    begun = time.monotonic()
    try:
        rows = _run_target(settings, target, modes, out_dir, scratch, progress, started, end_by)
        for row in rows:  # what the workload took end to end, its modes' compilations and timing all in
            row["workload_wall_s"] = round(time.monotonic() - begun, 1)
        return rows
    finally:
        for worker in started:
            worker.kill()


def _run_target(settings: Settings, target: Target, modes: list[Mode], out_dir: Path,
                scratch: Path, progress: Progress, started: list[Worker],
                end_by: float | None = None) -> list[dict[str, Any]]:
    live: list[Worker] = []
    done: list[dict[str, Any]] = []

    at_once = wave_size(settings, target, len(modes))

    def start(mode: Mode) -> Worker:
        worker = start_worker(settings, target, mode, out_dir, scratch, compiled_together=at_once > 1)
        started.append(worker)
        return worker

    def fail(worker: Worker, reason: str) -> None:
        worker.kill()
        worker.row["status"] = "timeout" if reason.startswith("timeout") else "error"
        worker.row["error"] = reason
        log.error("%s / %s: %s", target.workload.name, worker.mode.name, reason)
        done.append(worker.row)
        if worker in live:
            live.remove(worker)

    def await_ready(worker: Worker) -> None:
        try:
            ready = worker.receive("ready")
            worker.row["compile_s"] = ready["compile_s"]
            worker.row["scg_quiet_wait_s"] = ready.get("scg_quiet_wait_s")
            live.append(worker)
        except WorkerFailed as e:
            fail(worker, str(e))
        state = "ready" if worker in live else "failed"
        progress.advance(note=f"{target.workload.name}: {worker.mode.name} {state}")

    for wave in (modes[i:i + at_once] for i in range(0, len(modes), at_once)):
        for worker in [start(mode) for mode in wave]:
            await_ready(worker)

    rounds = _rounds(settings.repeat, settings.chunk)
    with exclusive(settings.timing_lock, target.workload.name):
        # The per-case limit applies to each phase: compiling, then timing; within the timing, a
        # round also has a limit of its own, so that one worker that hangs costs its row only.
        phase_end = time.monotonic() + settings.timeout_s
        timed, longest = 0, 0.0  # rounds begun; the longest one's wall time, every mode's turn in it
        for r, samples in enumerate(rounds):
            reserve = layer_phase_s(live, len(samples) * (r + 1)) if settings.worker.layers else 0.0
            if end_by is not None and r >= MIN_ROUNDS and time.monotonic() + longest + reserve + END_MARGIN_S > end_by:
                log.warning("%s: %d of %d rounds timed: another would end after --end-after (rows written now)",
                            target.workload.name, r, len(rounds))
                progress.advance(len(rounds) - r, note=f"{target.workload.name}: rounds left out")
                break
            round_begun = time.monotonic()
            timed += 1
            for worker in _rotated(list(live), r):
                try:
                    begun = time.monotonic()
                    worker.deadline, worker.limit = round_deadline(worker.round_s, begun, phase_end)
                    worker.send({"cmd": "run", "samples": samples})
                    message = worker.receive("samples")
                    worker.round_s.append(time.monotonic() - begun)
                    worker.samples.extend(message["us"])
                    worker.gpu_samples.extend(us for us in message.get("gpu_us") or [] if us is not None)
                    for phase, seconds in (message.get("phase_s") or {}).items():
                        worker.phase_s[phase] = worker.phase_s.get(phase, 0.0) + seconds
                except WorkerFailed as e:
                    fail(worker, str(e))
            longest = max(longest, time.monotonic() - round_begun)
            progress.advance(note=f"{target.workload.name}: round {r + 1}/{len(rounds)}")
        if settings.worker.layers and timed:  # a phase of its own, under its own per-case limit
            progress.advance(0, note=f"{target.workload.name}: host time by layer, {len(live)} modes in turn")
            _measure_layers(live, [s for samples in rounds[:timed] for s in samples], fail, settings.timeout_s)

    for worker in live:
        worker.row["rounds"] = {"timed": timed, "planned": len(rounds)}
    # profiled iterations of a workload whose modes do not fit on the GPU together, one mode at a time
    done.extend(_finish_all(live, fail, one_at_a_time=settings.worker.release_memory and settings.worker.coverage > 0))
    order = {m.name: i for i, m in enumerate(modes)}
    return sorted(done, key=lambda row: order[row["mode"]])


def _finish_all(live: list[Worker], fail: Callable[[Worker, str], None],
                one_at_a_time: bool = False) -> list[dict[str, Any]]:
    """Every live worker's finished row. Each is told to finish before any is waited on: a
    worker's summary and exit take seconds to tens of seconds on a large model (its process's
    teardown), which ``--end-after`` must budget for once, not once per mode. With
    ``one_at_a_time`` (a summary that runs the model, ``--coverage``, where the modes do not fit
    on the GPU together) each is told once the one before has exited. A worker that fails here
    goes through ``fail``, which takes it out of ``live``."""
    begun = time.monotonic()

    def tell(worker: Worker) -> None:
        try:
            worker.send({"cmd": "finish"})
        except WorkerFailed as e:
            fail(worker, str(e))

    if not one_at_a_time:
        for worker in list(live):
            tell(worker)
    rows = []
    for worker in list(live):
        if one_at_a_time:
            tell(worker)
            if worker not in live:
                continue
        try:
            summary_msg = worker.receive("summary")
            worker.process.wait(timeout=60)
        except (WorkerFailed, subprocess.TimeoutExpired) as e:
            fail(worker, str(e))
            continue
        row = _finish_row(worker, summary_msg)
        row["finish_s"] = round(time.monotonic() - begun, 1)  # from the finish requests to its exit
        rows.append(row)
        live.remove(worker)
    return rows


@contextlib.contextmanager
def stop_on_sigterm() -> Iterator[None]:
    """Turn SIGTERM into :class:`Interrupted` while a run is under way, so that the workers it
    started are killed on the way out instead of running on, orphaned, on the GPU (a deadline's
    ``timeout`` sends SIGTERM). Outside the main thread, where no handler can be set, a no-op."""
    def interrupt(signum: int, frame: Any) -> None:
        raise Interrupted(f"signal {signum}")

    try:
        previous = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def exclusive(lock_path: Path | None, what: str) -> Iterator[None]:
    """Hold an exclusive lock on ``lock_path`` (no-op when None), logging any wait."""
    if lock_path is None:
        yield
        return
    with open(lock_path, "a") as f:
        start = time.monotonic()
        fcntl.flock(f, fcntl.LOCK_EX)
        waited = time.monotonic() - start
        if waited > 1.0:
            log.info("%s: waited %.1f s for the timing lock %s", what, waited, lock_path)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


SUMMARY_KEYS = ("switches", "peak_replay_mem_bytes", "graph_pool_bytes", "cuda_graphs", "cudagraph_skips",
                "partition_reasons", "check", "scg", "pi", "coverage", "gpu_time_unavailable", "gpu_busy_us")


def _finish_row(worker: Worker, message: dict[str, Any]) -> dict[str, Any]:
    row = worker.row
    for key in SUMMARY_KEYS:
        row[key] = message.get(key)
    row["samples_us"] = worker.samples
    # where the timed rounds' wall time went: the requests' round trips, and the worker's parts
    row["rounds_s"] = round(sum(worker.round_s), 3)
    row["round_phases_s"] = {phase: round(s, 3) for phase, s in worker.phase_s.items()}
    row["iter_us"] = summary(worker.samples)
    if worker.gpu_samples:
        row["gpu_samples_us"] = worker.gpu_samples
        row["gpu_us"] = summary(worker.gpu_samples)
    if worker.layer_samples:
        # the median of each layer over the samples, and of each sample's total (the host's time)
        row["layers_us"] = {layer: summary([s[layer] for s in worker.layer_samples])["median"]
                            for layer in worker.layer_samples[0]}
        row["host_us"] = summary([sum(s.values()) for s in worker.layer_samples])
    if worker.mode.compiled and not message["check"]["ok"]:
        row["status"] = "mismatch"
        row["error"] = f"outputs differ from eager: {message['check']['detail']}"
        log.error("MISMATCH %s / %s: %s", row["workload"], row["mode"], row["error"])
    else:
        row["status"] = "ok"
    return row


END_MARGIN_S = 30.0  # what the workers' summaries and the rows take after the last round, at most

ROUND_FLOOR_S = 120.0  # a timed round may always take this long
ROUND_FACTOR = 10.0  # ... or this many times the worker's slowest earlier round


def _measure_layers(live: list[Worker], samples: list[int], fail: Callable[[Worker, str], None],
                    limit_s: float) -> None:
    """Each mode's host time by layer on the timed samples' inputs, one mode after another, after
    the last timed round: the layer clock's wrappers go on and come off around each measured call
    (:meth:`grace.bench.worker.Case.layered`), and no timed sample may follow a call that ran with
    them. Each worker within ``limit_s`` (the per-case limit, as each phase has); one that fails
    goes through ``fail``."""
    for worker in list(live):
        try:
            worker.deadline, worker.limit = time.monotonic() + limit_s, "the per-case limit"
            worker.send({"cmd": "layers", "samples": samples})
            message = worker.receive("layers")
            worker.layer_samples.extend(message["layers_us"])
            worker.phase_s["layers"] = message["seconds"]
        except WorkerFailed as e:
            fail(worker, str(e))


def layer_phase_s(live: list[Worker], samples: int) -> float:
    """About how long the layer phase takes for ``samples`` samples a mode: each costs
    ``layers.WARM_CALLS`` + 1 iterations, at each mode's median timed iteration so far."""
    per_sample_s = sum(median(w.samples) for w in live if w.samples) / 1e6
    return (layers.WARM_CALLS + 1) * per_sample_s * samples


def round_deadline(earlier_s: list[float], now: float, phase_end: float) -> tuple[float, str]:
    """When a worker's timed round must have answered, and what that limit is: the timing
    phase's end for its first round (which may build a float64 arbiter or meet a recompilation),
    then :data:`ROUND_FACTOR` times its slowest earlier round, at least :data:`ROUND_FLOOR_S`,
    never past the phase's end."""
    if not earlier_s:
        return phase_end, "the per-case limit"
    limit = max(ROUND_FLOOR_S, ROUND_FACTOR * max(earlier_s))
    if now + limit >= phase_end:
        return phase_end, "the per-case limit"
    return now + limit, (f"a round's limit ({limit:.0f} s: {ROUND_FACTOR:.0f} times its slowest earlier round, "
                         f"at least {ROUND_FLOOR_S:.0f} s)")


def _rounds(repeat: int, chunk: int) -> list[list[int]]:
    chunk = max(1, chunk)
    return [list(range(s, min(s + chunk, repeat))) for s in range(0, repeat, chunk)]


def _rotated(items: list[Worker], r: int) -> list[Worker]:
    if not items:
        return items
    k = r % len(items)
    return items[k:] + items[:k]


def prepare_tree(mode: Mode) -> None:
    """Build the overlay of ``mode``'s tree from its own patch series, in its own cache (the
    autoload hook then serves it to that mode's workers). No-op for the modes of this checkout."""
    if mode.tree is None or mode.env.get("GRACE_DISABLE") == "1":
        return
    code = ("from grace import install as i; i.overlay.build(i.load_series(), i.pins().upstream_sha256, "
            "{'torch': i.installed_version('torch') or '', 'triton': i.installed_version('triton') or ''})")
    env = {**os.environ, **mode.env, "PYTHONPATH": str(mode.tree), "GRACE_DISABLE": "1"}
    done = subprocess.run([sys.executable, "-c", code], cwd=mode.tree, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"mode {mode.name}: could not build the overlay of {mode.tree}: "
                           f"{(done.stderr or done.stdout).strip().splitlines()[-1:]}")


def run(settings: Settings, targets: Iterable[Target], modes: list[Mode]) -> Path:
    """Run every target in every mode; rows go to the run directory, which is returned."""
    import tempfile

    targets = list(targets)
    out_dir = results.run_dir(settings.experiment, settings.run_id, settings.results_dir)
    meta = {"settings": {k: str(v) for k, v in vars(settings).items()},
            "modes": [m.name for m in modes], "workloads": [t.workload.name for t in targets],
            "trees": {m.name: str(m.tree) for m in modes if m.tree is not None},
            "machine": results.machine(), "versions": results.versions(), "command": results.command_line(),
            # the modes set their own switches; these are what every worker inherits besides
            "environment": {k: v for k, v in sorted(os.environ.items()) if k.startswith("GRACE_")}}
    with open(out_dir / f"meta.{os.getpid()}.json", "w") as f:
        json.dump(meta, f, indent=2)
    for mode in modes:
        prepare_tree(mode)
    progress = Progress(sum(len(modes_for(t, modes)) + len(_rounds(settings_for(settings, t).repeat, settings.chunk))
                            for t in targets))
    expected = walls.read(settings.walls_from, settings.results_dir) if settings.walls_from else {}
    started = time.monotonic()
    end_by = None if settings.end_after_s is None else started + settings.end_after_s
    ran, late, wont_fit, waiting = 0, [], [], []  # workloads started by this call; not started, why, and which
    with stop_on_sigterm(), tempfile.TemporaryDirectory(prefix="grace-bench-") as scratch:
        for n, target in enumerate(targets):
            name, now = target.workload.name, time.monotonic()
            known = end_by is not None and name in expected  # else --stop-after decides
            if (ran or settings.walls_strict) and known and not walls.fits(expected[name], end_by - now):
                wont_fit.append(f"{name} ({expected[name]:.0f} s before, {end_by - now:.0f} s left)")
                waiting.append(name)
                continue
            if settings.walls_strict and not known:
                wont_fit.append(f"{name} (no wall time before)")
                waiting.append(name)
                continue
            if ran and not known and settings.stop_after_s is not None and now - started > settings.stop_after_s:
                late.append(name)
                waiting.append(name)
                continue
            left_s = walls.seconds_left(expected, waiting + [t.workload.name for t in targets[n:]])
            if left_s is not None:  # the run's time left, from the earlier run's walls (this call may end first)
                progress.expect(left_s)
            results.note_attempt(out_dir, name, "started")
            for row in run_target(settings, target, modes_for(target, modes), out_dir, Path(scratch), progress,
                                  end_by):
                results.append_row(out_dir, row)
            results.note_attempt(out_dir, name, "finished")
            ran += 1
    if late:
        log.warning("stopping after %.0f s (--stop-after); not started: %s (rerun with --resume)",
                    settings.stop_after_s, ", ".join(late))
    if wont_fit:
        log.warning("left for a later call, their wall time in %s not fitting before --end-after (or unknown, "
                    "with --walls-strict): %s "
                    "(rerun with --resume)", settings.walls_from, ", ".join(wont_fit))
    results.mark_latest(settings.experiment, settings.run_id, settings.results_dir)
    return out_dir

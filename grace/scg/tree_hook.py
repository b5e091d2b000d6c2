"""SCG inside CUDA graph trees: whether a function about to be recorded gets a CUDA graph at all,
and whether that graph uses parameter indirection.

Hook point (``patches/scg/0001-scg-hook-points.patch``): where
``CUDAGraphTreeManager._run`` is about to record a function, it asks
:func:`keep_out_of_graph`. On True the manager adds the function to its
``grace_no_graph_functions`` and from then on calls its compiled code directly; on False it
records the graph exactly as stock PyTorch does.

Invariants
----------
- The decision comes before the tree ever records the function, so a function kept out never
  becomes a tree node: paths, generations, liveness checks, checkpointing of the memory pool
  and forward/backward pairing only ever see deployed graphs. A kept-out function runs its
  Inductor code between its neighbours' replays, outside the pool, just like the ops Inductor
  leaves out of partitions (CPU ops, device copies); the graph after it then copies the
  outputs it reads as inputs, and that graph's own decision measures that cost.
- A kept-out partition is also unwired from the CUDA graph wrappers in the generated module's
  runner (:func:`_unwrap_partition`), so its calls cost what they cost without
  ``reduce-overhead``; the tree's check stays as the path for anything that still reaches it.
  An unwired partition of a backward tells the tree that the backward runs, as the tree's
  dispatch would have, so the forwards before it stop pending.
- Where ``grace.config.pi`` is on, the graph is recorded with PI off (copies, as PT2-CG) and
  with PI on under each strategy of :func:`profiled_strategies` (``grace.config.scg_pi_strategies``,
  or the configured strategy alone), each on its own private tree; a PI variant competes only
  if its recording indirected some input. A graph whose variants were measured records in the
  real tree under :func:`recording_config`, PI and its strategy as measured; any other records
  with the switches as they are.
- In training, forward graphs always keep their graph (:data:`TRAINING_FORWARD_RULE`); the
  backward graphs are decided by profile, but for those that read random-number state their
  captured forward saved (:data:`RANDOM_STATE_RULE`): outside a capture they would crash.
  Inference graphs are decided by profile, but for graphs that launch collectives
  (:data:`COLLECTIVES_RULE`): every rank must run the same collectives, so no rank runs them in
  a profile.
- Each function is decided once per tree. A function decided for a graph that is recorded again
  later (a new path, new static addresses) is recorded again as in stock PyTorch.
- Profiling never touches the tree. The graph choice is timed on a private
  ``CUDAGraphTreeManager`` with its own memory pool, shut down afterwards and its memory
  given back to the device. Inputs the real tree reads in place (static ones, outputs of
  graphs on the current path) are static there too, so the private graph copies exactly the
  inputs the real one would: same copies, same replay, same bookkeeping per call.
- Profiling does not change what the program computes: it runs on copies of every input but
  parameters (a backward graph reuses donated saved activations, static inputs there, as
  scratch), and of any input the function mutates; the CUDA RNG state is restored after it,
  and its outputs are dropped.
- When anything goes wrong while deciding (an exception, out of memory) SCG does what PT2-CG
  does, records the graph, and logs and reports why.
- Where processes compile side by side (a benchmark's modes), a profile runs while none of the
  others compiles (:mod:`grace.scg.quiet`), as in a user's process; one that could not wait so
  long says so in its reason and is not cached.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import re
import time
import weakref
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

import grace
from grace import config, input_alignment, trees
from grace.generated import is_inductor_generated
from grace.log import get_logger
from grace.pi import report as pi_report
from grace.pi.replay import indirects
from grace.scg import cache, quiet, report
from grace.generated import innermost
from grace.scg.candidate import Candidate, describe
from grace.scg.choose import PI_STRATEGY, SIMPLICITY, Choice, check_force, decide, forced, pi_choice
from grace.scg.profile import ProfileSettings, time_choices
from grace.stats import percentile
from grace.versions import installed_version

if TYPE_CHECKING:
    from torch._inductor.cudagraph_trees import CUDAGraphTreeManager, FunctionID

log = get_logger("grace.scg")

# Choices SCG can deploy. A graph with PI is profiled only with grace.config.pi on, once per
# strategy of profiled_strategies(), and only where its recording indirected some input.
AVAILABLE: tuple[Choice, ...] = SIMPLICITY

# Why forward graphs of training keep their graph, untimed. AOTAutograd marks the backward's
# saved-activation inputs static, counting on the forward's outputs staying at their addresses
# in the graph pool; run outside it, they would move every iteration and the backward graph
# would be recorded again on every call (measured: DCGAN, 9 recordings, p90 2.6x the median).
TRAINING_FORWARD_RULE = ("forward graph of a training step: its saved outputs are static inputs of the "
                         "backward graphs, so it keeps its graph (kept out, the backward would re-record)")

# Why a function that is not Inductor's generated code keeps its graph, untimed: profiling runs it
# dozens of times, and only generated code is known to do nothing a caller could observe then.
NOT_GENERATED_RULE = ("not Inductor's generated code: SCG runs it no more often than stock does, so it records "
                      "the graph as PT2-CG does")

# Why a graph that launches collectives keeps its graph, untimed: a profile runs its collectives
# dozens of times on this rank, and every peer must run them as often, in the same order, or
# the ranks wait on each other for ever. A peer that reads the decision from the cache, or
# whose profile fails, would not; so no rank profiles such a graph, and every rank records it.
COLLECTIVES_RULE = ("launches collectives ({}): profiled, it would run them a different number of times than a peer "
                    "that skips or fails its profile, and the ranks would wait on each other; it records the graph "
                    "as PT2-CG does on every rank")


# Why a graph that reads saved random-number state keeps its graph, untimed: run outside a capture
# (the profile's choice without a graph, and that choice deployed) beside a captured forward, its
# operator takes the forward's device-side philox seed for a host value and crashes the process.
RANDOM_STATE_RULE = ("reads random-number state its captured forward saved ({}): run outside a capture it would "
                     "read that device memory from the host and crash, so it records the graph as PT2-CG does")


@dataclasses.dataclass
class TreeDecisions:
    """What SCG decided for the functions of one tree (a ``CUDAGraphTreeManager``)."""

    decided: dict[Any, Choice] = dataclasses.field(default_factory=dict)  # function id -> deployed choice
    # functions whose graph without PI was measured against one with PI: they record as decided
    pi_measured: set[Any] = dataclasses.field(default_factory=set)


# Per tree, for the tree's life: a tree made again (a reset) decides again.
_trees: weakref.WeakKeyDictionary[Any, TreeDecisions] = weakref.WeakKeyDictionary()
# SCG's own private trees, which record what they are told to.
_profiling_trees: weakref.WeakSet[Any] = weakref.WeakSet()


def decisions(manager: CUDAGraphTreeManager) -> TreeDecisions:
    """``manager``'s decisions, made empty the first time it is asked about."""
    return _trees.setdefault(manager, TreeDecisions())


def keep_out_of_graph(manager: CUDAGraphTreeManager, new_inputs: list[Any], function_id: FunctionID) -> bool:
    """True if ``function_id`` should run without a CUDA graph (measured, or cached, faster)."""
    from torch._inductor.cudagraph_trees import CompilationMode

    if manager in _profiling_trees:
        return False  # SCG's own private tree records what it is told to
    tree = decisions(manager)
    decided = tree.decided
    if function_id not in decided:
        force = config.scg_force
        check_force(force)  # a wrong setting is refused before anything is profiled
        quiet.gate()  # so is a wrong wait for the quiet gate
        record = _decide(manager, new_inputs, function_id)
        deployed = forced(Choice(record.choice), force, {Choice(c): t for c, t in record.medians_us.items()})
        if deployed.value != record.choice:
            record = dataclasses.replace(record, choice=deployed.value, reason=(
                f"{record.reason} [measured {record.choice}; deployed {deployed.value}: "
                f"grace.config.scg_force={force!r}]"))
        decided[function_id] = deployed
        if any(c.value in record.medians_us for c in PI_STRATEGY):
            tree.pi_measured.add(function_id)
            if decided[function_id] is Choice.GRAPH:  # recorded with PI off: Table 3 counts its copies
                pi_report.add(pi_report.GraphRecord.copying_all(
                    record.name, "none (SCG measured the graph without PI faster)", record.copied_bytes))
        if decided[function_id] is Choice.NO_GRAPH:
            wrapped = manager.ids_to_funcs[function_id]
            backward = manager.id_to_mode[function_id] is CompilationMode.BACKWARD
            _unwrap_partition(wrapped.model, new_inputs, wrapped.static_input_idxs, wrapped.mutated_input_idxs,
                              backward_of=manager if backward else None)
        report.add(record)
    return decided[function_id] is Choice.NO_GRAPH


def recording_config(manager: CUDAGraphTreeManager, function_id: FunctionID) -> contextlib.AbstractContextManager:
    """The switches to record ``function_id`` under: PI on or off, and its strategy, as
    profiled; else unchanged.

    A graph whose choice between copying and indirection was measured records as measured; a
    graph decided by rule, fallback, or before PI applied records with the switches as they are.
    """
    tree = _trees.get(manager)
    if tree is None or function_id not in tree.pi_measured:
        return contextlib.nullcontext()
    choice = tree.decided[function_id]
    if not config.pi or choice not in PI_STRATEGY:
        return config.patch(pi=False)
    return config.patch(pi=True, pi_strategy=PI_STRATEGY[choice])


def profiled_strategies() -> tuple[str, ...]:
    """The PI strategies profiled as choices: ``grace.config.scg_pi_strategies``, or the
    configured ``pi_strategy`` alone; each checked by name."""
    from grace.option_values import checked
    from grace.pi.tree_hook import strategy

    listed = tuple(s.strip() for s in checked("scg_pi_strategies").split(",") if s.strip())
    return tuple(dict.fromkeys(listed)) or (strategy(),)


def _unwrap_partition(model: Callable[..., Any], inputs: list[Any], static_input_idxs: Sequence[int],
                      mutated_input_idxs: Sequence[int], backward_of: CUDAGraphTreeManager | None = None) -> bool:
    """Let the generated code call a kept-out partition directly, without the CUDA graph wrappers.

    Inductor's generated module calls partition ``i`` through ``runner.partitions[i]``, which
    ``cudagraph_partition_post_compile`` replaced with a chain of wrappers (the tree's deferred
    recording, input alignment, the tree's dispatch) worth some 15 us per call. A kept-out
    partition only needs the alignment guard (the inputs its kernels assume aligned,
    :func:`grace.input_alignment.inputs_to_check`), so that is all it keeps. Without a runner slot to
    rewrite (no graph partitioning, or symbolic sizes keyed per value) the tree's own check in
    ``_run`` keeps it out instead; both paths run the same compiled code.

    A partition of a backward (``backward_of``, its tree) also tells its tree that the backward
    runs, as stock does for a backward compiled without CUDA graphs
    (``maybe_handle_backward_generation``): the tree's dispatch, which it no longer passes
    through, is where a backward clears the pending-backward state of the forwards before it.
    Left pending, the next forward could not start a new generation and would be recorded again
    below the last one on every step. The tree is held by weak reference: the generated module
    outlives a reset.
    """
    from torch._inductor.compile_fx import get_input_idxs_to_check
    from torch._inductor.utils import align_inputs_from_check_idxs

    given, model = model, innermost(model)  # a module loaded again after a reset may carry our earlier wrapper
    match = re.fullmatch(r"partition_(\d+)", getattr(model, "__name__", ""))
    runner = getattr(model, "__globals__", {}).get("runner")
    partitions = getattr(runner, "partitions", None)
    if match is None or not isinstance(partitions, list) or int(match.group(1)) >= len(partitions):
        return False
    if any(isinstance(v, int) for v in inputs):
        return False  # the slot serves every value of a symbolic size, some of which may want graphs
    check = input_alignment.inputs_to_check(given, get_input_idxs_to_check(inputs, static_input_idxs))
    direct = align_inputs_from_check_idxs(model, check, input_alignment.mutations_copied_back(mutated_input_idxs))
    if backward_of is not None:
        direct = _running_backward(direct, weakref.ref(backward_of))
    if direct is not model:
        direct.__wrapped__ = model  # type: ignore[attr-defined]  # so a later compile still sees partition_N
    partitions[int(match.group(1))] = direct
    log.debug("SCG: %s now runs without CUDA graph wrappers", model.__name__)
    return True


def _running_backward(run: Callable[[list[Any]], Any], tree: Callable[[], Any]) -> Callable[[list[Any]], Any]:
    """``run``, telling the tree ``tree`` refers to, while it lives, that a backward runs."""

    def backward_partition(new_inputs: list[Any]) -> Any:
        manager = tree()
        if manager is not None:
            manager.set_to_running_backward()
        return run(new_inputs)

    return backward_partition


def _decide(manager: CUDAGraphTreeManager, new_inputs: list[Any], function_id: FunctionID) -> report.GraphRecord:
    start = time.perf_counter()
    wrapped = manager.ids_to_funcs[function_id]
    candidate = describe(wrapped.model, manager.id_to_mode[function_id].name.lower(), new_inputs,
                         wrapped.static_input_idxs, manager._get_cuda_graph_recorded_tensor_checker())
    log.debug("SCG candidate %s: kernels %s; inputs %s", candidate.name, candidate.kernels,
              [(i.role, i.shape, i.dtype) for i in candidate.inputs])
    if not is_inductor_generated(wrapped.model):
        return _record(candidate, Choice.GRAPH, "rule", NOT_GENERATED_RULE, start)
    if candidate.mode == "forward":
        return _record(candidate, Choice.GRAPH, "rule", TRAINING_FORWARD_RULE, start)
    if candidate.collectives:
        return _record(candidate, Choice.GRAPH, "rule", COLLECTIVES_RULE.format(", ".join(candidate.collectives)), start)
    if candidate.random_state_readers:
        return _record(candidate, Choice.GRAPH, "rule",
                       RANDOM_STATE_RULE.format(", ".join(candidate.random_state_readers)), start)
    key = _cache_key(candidate, manager.device_index)
    try:
        if key is not None and (hit := cache.load(key)) is not None and hit.choice in AVAILABLE:
            return _record(candidate, hit.choice, "cache", hit.reason, start,
                           medians={c.value: t for c, t in hit.medians_us.items()})
        with quiet.profiling_alone() as alone:
            samples = _profile(manager, new_inputs, function_id, candidate)
    except Exception as e:  # noqa: BLE001 - capture time only: a failed profile must not fail the program
        log.debug("SCG profile of %s failed", candidate.name, exc_info=True)
        return _record(candidate, Choice.GRAPH, "fallback",
                       f"profiling failed ({type(e).__name__}: {e}); recording the graph as PT2-CG does", start)
    decision = decide(samples, margin=config.scg_margin)
    if key is not None and alone is not False:  # a profile beside compilations is not kept for later runs
        cache.store(key, decision)
    reason = decision.reason if key is not None else decision.reason + " [not cached: generated source unreadable]"
    if alone is False:
        reason += " [profiled beside other processes' compilations: the quiet gate's wait ran out]"
    return _record(candidate, decision.choice, "profiled", reason, start,
                   medians={c.value: t for c, t in decision.medians_us.items()},
                   p10={c.value: percentile(v, 10) for c, v in samples.items()},
                   p90={c.value: percentile(v, 90) for c, v in samples.items()})


def _record(candidate: Candidate, choice: Choice, source: str, reason: str, start: float, *,
            medians: dict[str, float] | None = None, p10: dict[str, float] | None = None,
            p90: dict[str, float] | None = None) -> report.GraphRecord:
    return report.GraphRecord(
        name=candidate.name, mode=candidate.mode, kernels=list(candidate.kernels),
        copied_inputs=candidate.copied_inputs, copied_bytes=candidate.copied_bytes,
        choice=choice.value, source=source, reason=reason, medians_us=medians or {},
        p10_us=p10 or {}, p90_us=p90 or {}, profile_s=time.perf_counter() - start,
        code_sha256=candidate.code_sha256)


def _cache_key(candidate: Candidate, device_index: int) -> cache.DecisionKey | None:
    import torch

    if candidate.code_sha256 is None:
        return None
    return cache.DecisionKey(
        code_sha256=candidate.code_sha256,
        inputs=tuple(i.signature() for i in candidate.inputs),
        gpu=torch.cuda.get_device_name(device_index),
        driver=_driver_version(),
        torch=torch.__version__,
        triton=installed_version("triton") or "none",
        # decisions made with PI available, and with which strategies profiled, differ
        grace=grace.__version__ + ("+pi:" + ",".join(profiled_strategies()) if config.pi else ""),
    )


@functools.cache
def _driver_version() -> str:
    """The kernel driver's version (``580.159.04``); the CUDA driver API version if unreadable."""
    try:
        with open("/proc/driver/nvidia/version") as f:
            for word in f.readline().split():
                if word.count(".") >= 1 and word.replace(".", "").isdigit():
                    return word
    except OSError:
        pass
    import torch

    return f"cuda-driver-api-{torch._C._cuda_getDriverVersion()}"


def _profile(manager: CUDAGraphTreeManager, new_inputs: list[Any], function_id: FunctionID,
             candidate: Candidate) -> dict[Choice, list[float]]:
    import torch
    from torch._inductor.cudagraph_trees import CompilationMode, CUDAGraphTreeManager

    wrapped = manager.ids_to_funcs[function_id]
    # Profile on copies of every input but parameters: the function may write into them
    # (declared mutations; a backward graph reuses donated saved activations as scratch, and
    # those count as static inputs there), and the real call after the profile must see the
    # values it was given. Parameters are only ever written through declared mutations.
    inputs = list(new_inputs)
    mutated = set(wrapped.mutated_input_idxs)
    for i, value in enumerate(inputs):
        if isinstance(value, torch.Tensor) and (i in mutated or not isinstance(value, torch.nn.Parameter)):
            inputs[i] = _same_layout_copy(value)
    read_in_place = [i for i, info in enumerate(candidate.inputs) if info.role in ("static", "managed")]
    settings = ProfileSettings(config.scg_warmup, config.scg_rounds, config.scg_calls)
    device = manager.device_index
    with (torch.cuda.device(device), torch.random.fork_rng(devices=[device]), _generator_states(new_inputs),
          _counters_kept(), _quiet_tree_logs(), pi_report.discarded()):
        private_trees: list[Any] = []
        fns: dict[Choice, Any] = {}

        def graphed(pi: bool, strategy: str | None = None) -> tuple[Any, Any]:
            private = CUDAGraphTreeManager(device)
            _profiling_trees.add(private)
            private_trees.append(private)
            # A tree warms a function up on its first call and records it on the second: both
            # happen here, so that the graph is recorded with this candidate's switches.
            with config.patch(pi=pi, pi_strategy=strategy or config.pi_strategy):
                fn, first = private.add_function(
                    wrapped.model, list(inputs), read_in_place, None, CompilationMode.INFERENCE,
                    wrapped.constants, wrapped.placeholders, wrapped.mutated_input_idxs,
                    manager.id_to_compile_id.get(function_id))
                del first
                second = fn(list(inputs))
                del second
            if not trees.nodes(private):
                raise RuntimeError("the private tree recorded no graph on the candidate's second call")
            return fn, private

        try:
            fns[Choice.GRAPH], _ = graphed(pi=False)
            if config.pi:
                for strategy in profiled_strategies():
                    fn, private = graphed(pi=True, strategy=strategy)
                    if any(indirects(n) for n in trees.nodes(private)):
                        fns[pi_choice(strategy)] = fn
            runners: dict[Choice, Callable[[], object]] = {Choice.NO_GRAPH: lambda: wrapped.model(list(inputs))}
            for choice, fn in fns.items():
                runners[choice] = functools.partial(_call_on_list, fn, inputs)
            return time_choices(runners, torch.cuda.synchronize, settings)
        finally:
            fns.clear()  # their finalizers release the private trees' hold on the device's container
            fn = None
            runners = {}
            for private in private_trees:
                private.shutdown()
            private_trees.clear()
            torch.cuda.synchronize()
            _release_profiling_memory(device)


def _release_profiling_memory(device: int) -> None:
    """Give back the memory the profile's private trees and input copies held.

    A shut-down tree's pool stays reserved by the caching allocator until its cached blocks are
    released: without this, every profiled candidate would leave a pool the size of its graph's
    in the process (measured on LCNET under ``grace``: 1.4 GB of pools against PT2-CG's 466 MB).
    ``empty_cache`` also returns the default pool's free segments; this runs at capture time
    only, and the real tree's pool, still in use, is untouched.
    """
    import gc

    gc.collect()  # a graph still held by an uncollected reference cycle would keep its pool
    log.debug("SCG: released %.1f MB reserved by the profile", trees.release_cached_memory(device) / 1e6)


def _call_on_list(fn: Callable[[list[Any]], object], inputs: list[Any]) -> object:
    return fn(list(inputs))


def _same_layout_copy(t: Any) -> Any:
    """A copy with ``t``'s sizes and strides (Inductor's code is specialized on them)."""
    from torch._inductor.compile_fx import get_expanded_dims, index_expanded_dims_and_copy_, static_input

    dst = static_input(t)
    index_expanded_dims_and_copy_(dst, t, get_expanded_dims(t))
    return dst


@contextlib.contextmanager
def _generator_states(inputs: Sequence[Any]) -> Iterator[None]:
    """Put back the state of every generator among ``inputs`` (AOTAutograd passes the generators
    of ``graphsafe_run_with_rng_state`` to the graph, selective activation checkpointing's
    recomputation among them): the profile's calls and replays draw from them, and the real
    call after it must draw what it would have drawn without the profile."""
    import torch

    generators = [g for g in inputs if isinstance(g, torch.Generator)]
    states = [g.get_state() for g in generators]
    try:
        yield
    finally:
        for g, state in zip(generators, states):
            g.set_state(state)


@contextlib.contextmanager
def _counters_kept() -> Iterator[None]:
    """Put back torch's compile counters (``torch._dynamo.utils.counters``): the private trees'
    recordings count their copies and graphs there, and the program's counters must read as if
    no profile ran."""
    from torch._dynamo.utils import counters

    saved = {kind: dict(c) for kind, c in counters.items()}
    try:
        yield
    finally:
        counters.clear()
        for kind, c in saved.items():
            counters[kind].update(c)


@contextlib.contextmanager
def _quiet_tree_logs() -> Iterator[None]:
    """Keep CUDA graph trees' debug records (``TORCH_LOGS=cudagraphs``) out of the timed calls."""
    from torch._inductor import cudagraph_trees

    logger = cudagraph_trees.log
    was = logger.disabled
    logger.disabled = True
    try:
        yield
    finally:
        logger.disabled = was

"""GraCE's switches, in the style of ``torch._inductor.config``.

Each optimization is one switch, on by default once GraCE is installed; every switch off is
stock PyTorch. Set them from Python::

    import grace.config
    grace.config.scg = False
    with grace.config.patch(pi=False): ...

or from the environment, read when this module is first imported: ``GRACE_CGCT=0``,
``GRACE_PI=0``, ``GRACE_SCG=0``, ``GRACE_LEAN_REPLAY=0`` ("1" turns one on; "true"/"false",
"on"/"off" and "yes"/"no" are read too, any other text is refused by name, and an empty
variable leaves the default: :func:`grace.option_values.switch_text`). The environment
sets a switch's default
and Python settings override it, so that GraCE's own scoped patches (SCG records a candidate
graph with PI off to time it against PI on) hold in a process started with ``GRACE_PI=1``.
``GRACE_DISABLE=1`` goes further and keeps the patched sources from loading at all (see
:mod:`grace._autoload`).

This module imports torch (it reuses torch's config machinery), so only code that already runs
inside torch.compile, or user code, imports it; the interpreter-start hook never does.
"""


import sys
from typing import Callable

from torch.utils._config_module import Config, _Config, install_config_module

from grace.scg.choose import DEFAULT_MARGIN as _DEFAULT_MARGIN
from grace.scg.profile import ProfileSettings as _ProfileSettings

# CUDA-Graph-aware code transformation: rewrite IR so CPU scalars, CPU tensors copied in
# forward and needless CPU outputs stop keeping kernels out of CUDA graphs.
cgct: bool = Config(default=True, env_name_default="GRACE_CGCT")

# Parameter indirection: graph replays copy 8-byte pointers, not input tensors.
pi: bool = Config(default=True, env_name_default="GRACE_PI")

# How PI redirects a graph's reads (grace.pi.tree_hook): "ptx", Triton kernels recompiled to
# load their inputs' pointers from a per-graph table (the paper's way); "prelude", a kernel at
# the graph's root rewriting every kernel's arguments from that table on the device (the
# paper's way for vendor kernels); "exec-update", the instantiated graph's kernel arguments
# rewritten from the host before each replay.
pi_strategy: str = Config(default="ptx", env_name_default="GRACE_PI_STRATEGY")

# For testing PI's fallbacks: every graph's check (grace.pi.check), once it has run, reports the
# graph untrusted, so that each takes the path a real failure takes (captured again stock, its
# rewrite dropped, or retired: grace.pi.retire), which real failures take too rarely to be
# tested by running workloads. Off except in the "-untrusted" configurations (one per PI strategy)
# and "untrusted-all-mut-lean-copy" (grace.report.upstream).
pi_force_untrusted: bool = Config(default=False, env_name_default="GRACE_PI_FORCE_UNTRUSTED")

# How a replay writes the pointer table on the GPU (grace.pi.table): "copy", one
# cuMemcpyHtoDAsync from a pageable buffer the driver stages (0.8 us of device time at any slot
# count); "memop", one cuStreamBatchMemOp (about 0.65 us per slot).
pi_table_write: str = Config(default="copy", env_name_default="GRACE_PI_TABLE_WRITE")

# Selective CUDA graphs: profile each candidate graph at capture and deploy the fastest of
# no graph, graph, graph with PI.
scg: bool = Config(default=True, env_name_default="GRACE_SCG")

# What SCG deploys whatever it measured: "" deploys the measured choice; "graph" never keeps a
# function out of CUDA graphs (it still profiles on private trees, reports and caches what it
# measured, and picks between a graph with and without PI as measured). For users who want SCG's
# report without its keep-out, and for running PyTorch's CUDA graph trees tests, which expect
# every function recorded.
scg_force: str = Config(default="", env_name_default="GRACE_SCG_FORCE")

# The PI strategies SCG profiles as further choices for each candidate graph, comma-separated
# ("ptx,prelude,exec-update"); "" profiles grace.config.pi_strategy alone. Each strategy records
# the graph once more on a private tree at capture; the fastest choice is deployed and cached.
scg_pi_strategies: str = Config(default="", env_name_default="GRACE_SCG_PI_STRATEGIES")

# A lock file that processes compiling side by side share, so that SCG's profiles run while none
# of the others compiles (grace.scg.quiet); "" (a user's process): no lock. The benchmark sets
# it when it compiles several modes at once. scg_quiet_wait_s bounds a process's waits in total
# (seconds, a number as a string: the environment's).
scg_quiet_lock: str = Config(default="", env_name_default="GRACE_SCG_QUIET_LOCK")
scg_quiet_wait_s: str = Config(default="300", env_name_default="GRACE_SCG_QUIET_WAIT_S")

# Lean replay: a call that replays a recorded graph is dispatched by the tree in one pass with
# every test the tree makes before a replay (grace.lean.dispatch), instead of the full _run, which
# runs twice for the first graph of each call. Anything it does not expect goes down _run.
lean_replay: bool = Config(default=True, env_name_default="GRACE_LEAN_REPLAY")

# With lean replay on: AOTAutograd's runtime wrappers leave out the work a graph's metadata rules
# out (grace.lean.aot_runtime). Off keeps stock's wrappers under lean replay, so that their part
# of lean replay's saving can be measured against the rest in one run.
lean_aot: bool = Config(default=True, env_name_default="GRACE_LEAN_AOT")

# With any switch on: an output of a replayed CUDA graph that the user still holds when a new
# generation ends its path raises on its next read, as outputs of warm-ups and recordings do in
# stock (grace.stale_outputs); stock lets it read what the next graph wrote there, silently.
stale_outputs_raise: bool = Config(default=True, env_name_default="GRACE_STALE_OUTPUTS_RAISE")

# With any switch on: a .grad that autograd adopted from a backward CUDA graph's outputs is
# copied before the tree runs again (grace.grad_copies), so that gradients kept across steps
# (accumulation, zero_grad(set_to_none=False)) sum; stock leaves it on the graph's memory, and the
# next replay writes over it. Costs one copy of such a .grad, once; nothing where zero_grad sets
# .grad to None.
copy_grads: bool = Config(default=True, env_name_default="GRACE_COPY_GRADS")

# With any switch on: a function that mutates a non-static input, which stock leaves without a
# graph ("skipping cudagraphs due to mutated inputs"), gets one; the input is copied in as stock
# copies every non-static input, and the graph's write is copied back into the caller's tensor
# after each replay (grace.mutated_inputs).
mutated_inputs: bool = Config(default=True, env_name_default="GRACE_MUTATED_INPUTS")

# Inductor autotunes each Triton kernel only among configurations whose compiled form does not
# load a pointer it also stores in another layout; where every one does, among the same ones
# compiled with a barrier before the racy stores, else race-free variants of them
# (grace.layout_race): Triton 3.6 compiles some small in-place reductions so that a thread reads
# back what another has already stored. Compile workers read it from the environment. It can
# cost a kernel its fastest configuration, or a barrier, never a right result.
race_free_kernels: bool = Config(default=True, env_name_default="GRACE_RACE_FREE_KERNELS")

# How SCG profiles a candidate graph (grace.scg.profile): untimed calls per choice, interleaved
# rounds, timed calls per choice per round; and the margin by which a more involved choice must
# beat a simpler one's median to replace it (grace.scg.choose). The defaults are those modules'.
scg_warmup: int = _ProfileSettings.warmup
scg_rounds: int = _ProfileSettings.rounds
scg_calls: int = _ProfileSettings.calls
scg_margin: float = _DEFAULT_MARGIN
del _DEFAULT_MARGIN, _ProfileSettings  # not settings themselves


def _env_names_of(declared: dict) -> "Callable[[], dict[str, str]]":
    names = {name: option.env_name_default[0] for name, option in declared.items()
             if isinstance(option, _Config) and option.env_name_default}

    def env_names() -> dict[str, str]:
        """Each option that an environment variable sets, with that variable's name, in the
        order declared here (what :func:`grace.switches.running_switches` reports)."""
        return dict(names)

    return env_names


env_names = _env_names_of(dict(globals()))  # a function: install_config_module leaves it as it is
del _env_names_of

install_config_module(sys.modules[__name__])


def _switches_read_as_switches() -> None:
    """Each switch's variable read by :func:`grace.option_values.switch_text` in place of
    torch's reading, which keeps any text but "1" and "0" as a (true) string."""
    from grace.option_values import switch_text

    entries = sys.modules[__name__]._config
    for name, variable in env_names().items():
        entry = entries[name]
        if isinstance(entry.default, bool) and isinstance(entry.env_value_default, str):
            value = switch_text(variable, entry.env_value_default)
            entry.env_value_default = entry.default if value is None else value


_switches_read_as_switches()
del _switches_read_as_switches

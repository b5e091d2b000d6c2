"""The modes of the paper's Figures 10 and 11, as what a worker process needs to run them.

A mode is an environment (read at interpreter start, so it must be set before the worker
starts) and a ``torch.compile`` mode. PT2 modes run with ``GRACE_DISABLE=1``: the stock
modules, not GraCE's patched ones with the switches off, so the baselines are stock by
construction.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from grace.option_values import EXEC_UPDATE, PRELUDE, PTX


@dataclass(frozen=True)
class Mode:
    name: str
    label: str  # as in the paper's figures
    compile_mode: str | None  # torch.compile(mode=...); None with compiled=False means eager
    compiled: bool = True
    env: dict[str, str] = field(default_factory=dict)
    tree: Path | None = None  # another checkout of GraCE whose code this mode's worker runs
    base: str = ""  # for MODE@TREE, MODE: the name that checkout's worker knows


    @property
    def uses_cuda_graphs(self) -> bool:
        return self.compile_mode == "reduce-overhead"


def _grace(cgct: bool, pi: bool, scg: bool, pi_strategy: str = PTX, lean: bool | None = None,
           lean_aot: bool = True, guard: bool = True, copy_grads: bool = True, mutated_inputs: bool = True,
           pi_choices: str = "") -> dict[str, str]:
    flag = {True: "1", False: "0"}
    env = {"GRACE_DISABLE": "0", "GRACE_CGCT": flag[cgct], "GRACE_PI": flag[pi], "GRACE_SCG": flag[scg],
           "GRACE_PI_STRATEGY": pi_strategy}
    # lean replay (None), the guard and gradient copies are set only away from their defaults: a
    # MODE@TREE worker takes this environment, and an earlier checkout keeps its own defaults.
    # Mutated inputs are always set: an earlier checkout may have them off by default.
    if lean is not None:
        env["GRACE_LEAN_REPLAY"] = flag[lean]
    if not lean_aot:
        env["GRACE_LEAN_AOT"] = "0"
    if not guard:
        env["GRACE_STALE_OUTPUTS_RAISE"] = "0"
    if not copy_grads:
        env["GRACE_COPY_GRADS"] = "0"
    env["GRACE_MUTATED_INPUTS"] = flag[mutated_inputs]
    if pi_choices:
        env["GRACE_SCG_PI_STRATEGIES"] = pi_choices
    return env


_STOCK = {"GRACE_DISABLE": "1"}

MODES: dict[str, Mode] = {m.name: m for m in (
    Mode("eager", "Eager", None, compiled=False, env=_STOCK),
    Mode("pt2-nocg", "PyTorch2-No-CG", None, env=_STOCK),
    Mode("pt2-cg", "PyTorch2-CG", "reduce-overhead", env=_STOCK),
    # Figure 11's bars add one optimization at a time: CGCT, PI, SCG, then lean replay (GraCE)
    Mode("grace-cgct", "CGCT", "reduce-overhead", env=_grace(True, False, False, lean=False)),
    Mode("grace-cgct-pi", "+PI", "reduce-overhead", env=_grace(True, True, False, lean=False)),
    Mode("grace-no-lean", "+SCG", "reduce-overhead", env=_grace(True, True, True, lean=False)),
    Mode("grace", "GraCE", "reduce-overhead", env=_grace(True, True, True)),
    # PI's strategies (2) and (3), for Figure 9: the graph's kernel arguments rewritten by a
    # prelude kernel on the device, or by the host in the instantiated graph.
    Mode("grace-cgct-pi-prelude", "+PI (prelude)", "reduce-overhead", env=_grace(True, True, False, "prelude", lean=False)),
    Mode("grace-cgct-pi-exec", "+PI (exec update)", "reduce-overhead",
         env=_grace(True, True, False, "exec-update", lean=False)),
    # GraCE with lean replay but stock's AOTAutograd wrappers (grace.config.lean_aot), to measure
    # the lean wrappers' part of lean replay interleaved with GraCE in one run
    Mode("grace-no-lean-aot", "GraCE, stock AOTAutograd wrappers", "reduce-overhead",
         env=_grace(True, True, True, lean_aot=False)),
    # GraCE without the stale-output guard (grace.config.stale_outputs_raise), to measure the
    # guard's cost on the replay path interleaved with GraCE in one run
    Mode("grace-no-guard", "GraCE, no stale-output guard", "reduce-overhead", env=_grace(True, True, True, guard=False)),
    # GraCE without gradient copies (grace.config.copy_grads), to measure the copies' cost on
    # training workloads interleaved with GraCE in one run
    Mode("grace-no-copy-grads", "GraCE, gradients not copied", "reduce-overhead",
         env=_grace(True, True, True, copy_grads=False)),
    # GraCE with graphs for functions that mutate the inputs the tree copies
    # (grace.config.mutated_inputs), as "grace" has them: the mode TKE's committed rows name, and
    # the switch on for MODE@TREE with a checkout whose default is off
    Mode("grace-mutated-inputs", "GraCE, mutated inputs copied back", "reduce-overhead",
         env=_grace(True, True, True, mutated_inputs=True)),
    # and without them, stock's refusal of such functions: what TKE loses without its graph
    Mode("grace-no-mutated-inputs", "GraCE, mutated inputs refused", "reduce-overhead",
         env=_grace(True, True, True, mutated_inputs=False)),
    # GraCE's tree alone: its hardening, the stale-output guard, gradient copies and lean replay
    # over stock's graphs (no CGCT, PI, SCG, nor graphs for functions mutating their inputs), to
    # tell what the tree's bookkeeping costs a workload of many graph calls (VM) from what CGCT does
    Mode("grace-tree", "GraCE's tree, stock's graphs", "reduce-overhead",
         env=_grace(False, False, False, lean=True, mutated_inputs=False)),
    # GraCE with SCG profiling each of PI's strategies as a further choice per graph
    # (grace.config.scg_pi_strategies) and deploying the fastest: Table 3's rows whose inputs a
    # vendor kernel reads (MMC, ST, DR-I), which strategy (1) leaves copied
    Mode("grace-pi-choice", "GraCE, SCG choosing PI's strategy", "reduce-overhead",
         env=_grace(True, True, True, pi_choices=f"{PTX},{PRELUDE},{EXEC_UPDATE}")),
)}

# The paper's Figures 10 and 11 (and Figure 11's fourth bar, lean replay).
DEFAULT_MODES: tuple[str, ...] = ("eager", "pt2-nocg", "pt2-cg", "grace-cgct", "grace-cgct-pi", "grace-no-lean", "grace")


TREE_CACHE = ".grace-cache"  # a tree's own GraCE cache (overlay, SCG decisions), inside the tree


def parse_modes(spec: str, trees: dict[str, Path] | None = None) -> list[Mode]:
    """Modes by name; ``MODE@TREE`` is MODE run from the checkout ``trees[TREE]`` (its own GraCE
    code and patch series, its own overlay in the tree's ``.grace-cache``), for same-run
    comparisons of two versions of GraCE. ``~K`` after either (``grace~2``, ``grace@before~2``)
    is one more worker of the same mode, timed in the same rounds: two replicas of one mode
    differ only by what a process brings (its placement, its allocator's history), which is the
    floor a comparison of two modes must clear."""
    trees = trees or {}
    out = []
    for name in (s.strip() for s in spec.split(",") if s.strip()):
        named, _, replica = name.partition("~")
        base, _, tree = named.partition("@")
        if base not in MODES:
            raise ValueError(f"unknown mode {base}; known: {', '.join(MODES)}")
        if replica and not (replica.isdigit() and int(replica) >= 2):
            raise ValueError(f"mode {name}: a replica is ~2, ~3, ...; the first is the mode itself")
        mode = MODES[base]
        if tree:
            if tree not in trees:
                raise ValueError(f"mode {name}: no tree {tree!r} (give it with --tree {tree}=PATH)")
            mode = replace(mode, name=named, label=f"{mode.label} @{tree}", tree=trees[tree], base=base,
                           env={**mode.env, "GRACE_CACHE_DIR": str(trees[tree] / TREE_CACHE)})
        if replica:
            mode = replace(mode, name=name, label=f"{mode.label} ({replica})", base=base)
        out.append(mode)
    names = [m.name for m in out]
    if len(set(names)) != len(names):
        raise ValueError(f"modes {spec!r}: a mode named twice (one more worker of a mode is MODE~2)")
    return out


def parse_tree(spec: str) -> tuple[str, Path]:
    """``NAME=PATH`` -> (NAME, PATH resolved), PATH a checkout of GraCE."""
    name, sep, path = spec.partition("=")
    if not sep or not name or "@" in name or "," in name:
        raise ValueError(f"--tree {spec!r}: expected NAME=PATH")
    folder = Path(path).resolve()
    if not (folder / "grace" / "bench" / "worker.py").is_file():
        raise ValueError(f"--tree {spec!r}: {folder} is not a checkout of GraCE (no grace/bench/worker.py)")
    return name, folder

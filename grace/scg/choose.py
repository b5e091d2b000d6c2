"""Choosing among no graph, graph, and graph with parameter indirection (by strategy), from trial timings.

The incumbent is what stock ``mode="reduce-overhead"`` deploys, a graph with copied inputs, and
another choice replaces the one standing only when its median is faster by more than
``margin`` (:data:`PREFERENCE`). A tie within noise keeps stock's graph: the user asked for
graphs, and a profile times one partition alone and synchronised, so it cannot see the host
work that graphs spare an iteration, which overlaps the device's (a backward kept out on a tie
can make the whole step slower than both stock modes). Among the graphs, PI must win by the
margin, and its strategies in order of simplicity (ptx, prelude, exec-update).

Trials interleave the choices (:func:`schedule`), so drift during profiling hits all alike.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from grace.option_values import EXEC_UPDATE, PRELUDE, PTX, refusal
from grace.stats import percentile

DEFAULT_MARGIN = 0.03


class Choice(enum.Enum):
    NO_GRAPH = "no-graph"  # run the partition's compiled code directly, between neighbours' replays
    GRAPH = "graph"  # a CUDA graph with input copies, as PT2-CG records it
    # A CUDA graph whose external inputs are reached through pointers, by PI strategy
    # (grace.config.pi_strategy): Triton kernels reading a pointer table; a prelude kernel
    # rewriting kernel arguments on the device; the host rewriting them in the instantiated graph.
    GRAPH_PI = "graph-pi"
    GRAPH_PI_PRELUDE = "graph-pi-prelude"
    GRAPH_PI_EXEC_UPDATE = "graph-pi-exec-update"


# Simplest first: the order of the profile's trials and of reports.
SIMPLICITY: tuple[Choice, ...] = (Choice.NO_GRAPH, Choice.GRAPH, Choice.GRAPH_PI, Choice.GRAPH_PI_PRELUDE,
                                  Choice.GRAPH_PI_EXEC_UPDATE)
# The order in which choices challenge the one standing, stock's graph first: each must beat it
# by the margin to replace it.
PREFERENCE: tuple[Choice, ...] = (Choice.GRAPH, Choice.NO_GRAPH, Choice.GRAPH_PI, Choice.GRAPH_PI_PRELUDE,
                                  Choice.GRAPH_PI_EXEC_UPDATE)
# The PI strategy of each choice that records with PI (grace.pi.plan's names).
PI_STRATEGY: dict[Choice, str] = {Choice.GRAPH_PI: PTX, Choice.GRAPH_PI_PRELUDE: PRELUDE,
                                  Choice.GRAPH_PI_EXEC_UPDATE: EXEC_UPDATE}
GRAPHS: tuple[Choice, ...] = (Choice.GRAPH, *PI_STRATEGY)
_BY_STRATEGY: dict[str, Choice] = {name: choice for choice, name in PI_STRATEGY.items()}


def pi_choice(strategy: str) -> Choice:
    """The choice that records with PI under ``strategy``."""
    if strategy not in _BY_STRATEGY:
        raise ValueError(f"no SCG choice for PI strategy {strategy!r}; known: {', '.join(_BY_STRATEGY)}")
    return _BY_STRATEGY[strategy]


def check_force(force: str) -> None:
    """Refuse a ``grace.config.scg_force`` value that is none of its values, by name
    (:mod:`grace.option_values`)."""
    problem = refusal("scg_force", force)
    if problem is not None:
        raise ValueError(problem)


def forced(measured: Choice, force: str, medians_us: dict[Choice, float] | None = None) -> Choice:
    """The choice to deploy when ``grace.config.scg_force`` is ``force`` and SCG measured
    ``measured`` (``medians_us``: the profile's medians, if any). "graph" turns a measured
    keep-out into the fastest of the graphs profiled (with or without PI; a plain graph if none
    was); "" deploys what was measured. Anything else is refused by name."""
    check_force(force)
    if force != "graph" or measured is not Choice.NO_GRAPH:
        return measured
    medians = medians_us or {}
    profiled = [c for c in GRAPHS if c in medians]
    return min(profiled, key=lambda c: medians[c]) if profiled else Choice.GRAPH


@dataclass(frozen=True)
class Decision:
    choice: Choice
    medians_us: dict[Choice, float]
    reason: str


def schedule(choices: list[Choice], trials: int) -> list[Choice]:
    """The order in which to run trials: every choice once per round, rotating the start."""
    if not choices:
        raise ValueError("nothing to profile")
    order = [c for c in SIMPLICITY if c in choices]
    return [order[(r + i) % len(order)] for r in range(trials) for i in range(len(order))]


def decide(samples_us: dict[Choice, list[float]], margin: float = DEFAULT_MARGIN) -> Decision:
    """The fastest choice by median, unless one earlier in :data:`PREFERENCE` is within
    ``margin`` of it."""
    if not samples_us or any(not v for v in samples_us.values()):
        raise ValueError("every profiled choice needs at least one sample")
    if not 0.0 <= margin < 1.0:
        raise ValueError(f"margin must be in [0, 1), got {margin}")
    medians = {c: percentile(v, 50) for c, v in samples_us.items()}
    ordered = [c for c in PREFERENCE if c in medians]
    best = ordered[0]
    for candidate in ordered[1:]:
        if medians[candidate] < medians[best] * (1.0 - margin):
            best = candidate
    summary = ", ".join(f"{c.value} {medians[c]:.1f} us" for c in SIMPLICITY if c in medians)
    return Decision(best, medians, f"{best.value} (medians: {summary}; margin {margin:.0%})")

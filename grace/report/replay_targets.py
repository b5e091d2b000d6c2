"""The lean replay path's targets, judged from a replay-map run.

A steady-state call should cost about a CUDA graph launch. The targets say what that means
on the replay map's workloads (``configs/workloads_replay_map.txt``), each a bound on a
measured median of GraCE's rows, or on GraCE's against a stock mode's of the same run:

* host time of a call at most 25 us on micro-eos and micro-ptr-1 (one input, one kernel);
* DNET's host time (hundreds of parameter tensors) at most 1.3 times micro-eos's: the host
  path must not grow with the number of inputs;
* an iteration at most 1.05 times its device time plus 15 us on micro-eos, micro-mlp16, ALNET,
  EOS and MMC, and micro-eos faster than under PT2-NoCG;
* a training step's host time at most half of PT2-CG's on DR-T and micro-mlp16-T.

"Host" is the row's ``host_us``: the median over samples of the layers' sum for one call
(:mod:`grace.bench.layers`); "device" the iteration alone on the GPU (``gpu_us``); "iteration"
the timed samples' median (``iter_us``). Each verdict gives the bound, the measured value and
their ratio (``over``, above 1 missed by that factor); a workload or mode the run lacks is
``not measured``, never a pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

COLUMNS = ("target", "workload", "mode", "measured_us", "bound_us", "over", "verdict")
MODE = "grace"


@dataclass(frozen=True)
class Target:
    """One bound: ``measure(rows of the workload, by mode)`` against ``bound(same)``."""

    name: str
    workloads: tuple[str, ...]
    measure: Callable[[dict[str, dict]], Optional[float]]
    bound: Callable[[dict[str, dict], dict[str, dict[str, dict]]], Optional[float]]


def _median(r: Optional[dict], key: str) -> Optional[float]:
    """The median of a row's ``host_us``, ``iter_us`` or ``gpu_us`` (None where it has none)."""
    return None if r is None or not r.get(key) else r[key]["median"]


def _scaled(value: Optional[float], factor: float, plus: float = 0.0) -> Optional[float]:
    return None if value is None else value * factor + plus


TARGETS: tuple[Target, ...] = (
    Target("host at most 25 us", ("micro-eos", "micro-ptr-1"),
           lambda m: _median(m.get(MODE), "host_us"), lambda m, _: 25.0),
    Target("host at most 1.3x micro-eos's", ("DNET",),
           lambda m: _median(m.get(MODE), "host_us"),
           lambda m, runs: _scaled(_median(runs.get("micro-eos", {}).get(MODE), "host_us"), 1.3)),
    Target("iteration at most 1.05x device + 15 us", ("micro-eos", "micro-mlp16", "ALNET", "EOS", "MMC"),
           lambda m: _median(m.get(MODE), "iter_us"),
           lambda m, _: _scaled(_median(m.get(MODE), "gpu_us"), 1.05, 15.0)),
    Target("iteration below PT2-NoCG's", ("micro-eos",),
           lambda m: _median(m.get(MODE), "iter_us"), lambda m, _: _median(m.get("pt2-nocg"), "iter_us")),
    Target("training host at most half PT2-CG's", ("DR-T", "micro-mlp16-T"),
           lambda m: _median(m.get(MODE), "host_us"), lambda m, _: _scaled(_median(m.get("pt2-cg"), "host_us"), 0.5)),
)


def judge(rows: Sequence[dict]) -> list[dict[str, Any]]:
    """A verdict per (target, workload) from a run's rows: ``met``, ``missed`` or ``not measured``."""
    runs: dict[str, dict[str, dict]] = {}
    for r in rows:
        if r.get("status") == "ok":
            runs.setdefault(r["workload"], {})[r["mode"]] = r
    out = []
    for target in TARGETS:
        for workload in target.workloads:
            modes = runs.get(workload, {})
            measured, bound = target.measure(modes), target.bound(modes, runs)
            if measured is None or bound is None:
                verdict, over = "not measured", None
            else:
                over = round(measured / bound, 3)
                verdict = "met" if measured <= bound else "missed"
            out.append({"target": target.name, "workload": workload, "mode": MODE,
                        "measured_us": None if measured is None else round(measured, 1),
                        "bound_us": None if bound is None else round(bound, 1), "over": over, "verdict": verdict})
    return out

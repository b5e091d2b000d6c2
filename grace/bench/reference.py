"""The eager twin a compiled mode's timed outputs are checked against, and what it found.

Each worker of a compiled mode keeps an eager copy of its model, made before compilation, and
runs it on every checked sample (:mod:`grace.bench.check` says how outputs compare). Where the
float32 comparison fails, two arbiters run in turn, each only on the leaves still failing:
eager's own second run of the sample (run-to-run variation), then a float64 copy of the model,
made on the first sample that needs it. What a worker reports (``check`` in its summary) is kept
here: how many samples were checked and arbitrated, the largest error and each sample's, the
tolerance, and the first mismatches.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable
from typing import Any

from grace.bench import check

MISMATCHES_KEPT = 5  # the first mismatches a summary names

# ``run(module, sample, float64)``: one seeded step of ``module`` on the sample's fresh inputs,
# cast to float64 when asked (the case's step, with its workload's kind and RNG)
Run = Callable[[Any, int, bool], Any]


class Reference:
    """The eager twin of one compiled mode, with its verdicts so far."""

    def __init__(self, model: Any, run: Run, training: bool, stochastic: bool) -> None:
        import torch

        # copied before compilation, so that nothing compilation does to the model reaches it
        self.model = copy.deepcopy(model) if isinstance(model, torch.nn.Module) else model
        self.model64: Any = None  # the float64 copy, made on the first float32 mismatch
        self._run = run
        self._training = training
        self._stochastic = stochastic  # its float64 run draws random numbers in float32
        self.checked = 0
        self.worst_error = 0.0
        self.errors_by_sample: dict[str, float | str] = {}  # for judging against PT2-NoCG (grace.report.judge)
        self.failed_samples: list[str] = []  # the samples that failed, arbiters included
        self.mismatches: list[str] = []
        self.tolerance = 0.0
        self.rerun_arbitrated = 0  # samples within eager's own run-to-run variation
        self.fp64_arbitrated = 0  # samples the float64 run found to be rounding
        self.no_fp64 = ""  # why no float64 run could be made, if none could

    def check(self, sample: int, out: Any) -> None:
        """Compare ``out``, a compiled step's output on ``sample``, with eager's."""
        ref = self._run(self.model, sample, False)  # fresh inputs: the compiled step may have updated its own
        err, mismatches = check.compare(out, ref, self._training)
        if mismatches:
            mismatches = self.arbitrate(sample, out, ref, mismatches)
        self.checked += 1
        self.worst_error = max(self.worst_error, err)
        self.errors_by_sample[str(sample)] = err if err != float("inf") else "inf"
        self.tolerance = max(self.tolerance, check.tolerance_for(ref, self._training))
        if mismatches:
            self.failed_samples.append(str(sample))
        for m in mismatches:
            if len(self.mismatches) < MISMATCHES_KEPT:
                self.mismatches.append(f"sample {sample}: {m}")

    def arbitrate(self, sample: int, out: Any, ref: Any, mismatches: list[check.Mismatch]) -> list[check.Mismatch]:
        """The mismatches that remain once eager's second run of the sample, then a float64 run
        of it, judge them."""
        from grace.bench.draws import Float32Draws

        try:
            rerun = self._run(self.model, sample, False)
        except RuntimeError:  # out of memory beside the kept outputs: the float64 run judges alone
            rerun = None
        if rerun is not None:
            remaining = check.judge_against_rerun(out, ref, rerun, self._training, failed=mismatches)
            del rerun
            if not remaining:
                self.rerun_arbitrated += 1
                return remaining
            mismatches = remaining
        try:
            if self.model64 is None:
                self.model64 = as_float64(copy.deepcopy(self.model))
            with Float32Draws() if self._stochastic else contextlib.nullcontext():
                ref64 = self._run(self.model64, sample, True)
        except Exception as e:  # a model with float32 baked in cannot run in float64: keep the verdict
            self.no_fp64 = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            return mismatches
        remaining = check.judge_against_fp64(out, ref, ref64, self._training, failed=mismatches)
        if not remaining:
            self.fp64_arbitrated += 1
        return remaining

    def summary(self, fallback_random: bool) -> dict[str, Any]:
        """The ``check`` field of the worker's summary; ``fallback_random``: whether the compiled
        mode's random ops were eager's (Inductor's ``fallback_random``)."""
        return {
            "ok": not self.mismatches,
            "fallback_random": fallback_random,
            "checked": self.checked,
            "max_rel_err": self.worst_error if self.worst_error != float("inf") else "inf",
            "errors_by_sample": self.errors_by_sample,
            "failed_samples": self.failed_samples,
            "tolerance": self.tolerance,
            "detail": "; ".join(self.mismatches),
            "rerun_arbitrated": self.rerun_arbitrated,
            "fp64_arbitrated": self.fp64_arbitrated,
            "no_fp64_reference": self.no_fp64,
        }

    @classmethod
    def unchecked(cls) -> dict[str, Any]:
        """The ``check`` field of a mode that is not checked (eager, the reference itself)."""
        return cls(None, lambda module, sample, float64: None, False, False).summary(fallback_random=False)


def as_float64(value: Any) -> Any:
    """A module or nested inputs with every float32 tensor (parameters, buffers) in float64."""
    import torch

    if isinstance(value, torch.nn.Module):
        return value.to(torch.float64)
    if isinstance(value, torch.Tensor):
        return value.to(torch.float64) if value.dtype == torch.float32 else value
    if isinstance(value, (list, tuple)):
        return type(value)(as_float64(v) for v in value)
    if isinstance(value, dict):
        return {k: as_float64(v) for k, v in value.items()}
    return value

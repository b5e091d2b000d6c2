"""Comparing a mode's outputs with eager's, with tolerances by dtype.

The measure is the relative error of the whole output, ``||out - ref|| / ||ref||`` (an
absolute norm when the reference is all zeros), computed in float64. Thresholds:

=========  =========  ==============================================================
dtype      tolerance  why
=========  =========  ==============================================================
float64    1e-9       Inductor reorders and fuses float64 arithmetic; nothing else
float32    1e-4       fused kernels reassociate; no TF32 (the runner keeps it off)
float16    1e-2       10-bit mantissa, fused vs unfused rounding
bfloat16   2e-2       7-bit mantissa
integers   exact      indices, masks, counts
bool       exact
=========  =========  ==============================================================

Training iterations are checked on the loss and every parameter's gradient, and float32
gradients get 5e-3: a backward pass chains two reassociated reductions per layer (the weight
gradient and the input gradient), and through normalisation layers the differences compound
with depth. DCGAN's first layers measured 2e-4 to 6e-4 on CPU and up to 2.3e-3 on the H100 in
PT2-NoCG and PT2-CG alike, the same digits in both: the compiled kernels' rounding, not a
graph's. Stale or wrong data, which is what the check is for, shows up as errors of order one.

A gradient can be zero in exact arithmetic and rounding noise in both modes: the bias of an
attention key projection (softmax ignores a shift shared by every key) comes out near 1e-12,
and its "relative" error is then a ratio of two noises (Speech2Text2 measured 3.1 on it). So
the norm a training leaf is divided by is floored at ``GRADIENT_NOISE_FLOOR`` times the norm of
the whole reference (loss and every gradient): a leaf a millionth the size of the whole is
held to an absolute error of ``tolerance * floor``, which stale data still breaks.

A NaN or inf where eager has none, a shape, dtype or structure difference, all fail.

Where the float32 comparison fails, a float64 run of the same model on the same sample is the
arbiter, as in PyTorch's own benchmark harness: eager's float32 output is itself off from the
float64 one, and a compiled output that is no further from it than ``FP64_MULTIPLIER`` times
eager's error (plus a tenth of the tolerance) is rounding, not wrong data
(:func:`judge_against_fp64`). Integer and bool leaves must still equal eager's exactly, so a
flipped label or detection count stays a mismatch; and a float64 run that eager's own output
misses by more than the tolerance arbitrates nothing. A stochastic workload's float64 run draws
its random numbers in float32 (:mod:`grace.bench.draws`), so that its masks are eager's.
Only the leaves that failed in float32 go to the arbiter, and one it cannot judge keeps its
float32 verdict.

Before the float64 run, eager is run again on the same sample: where eager's own second run
differs from its first (cuDNN's weight gradients accumulate with atomics, in an order that
changes from run to run), a compiled output no further from eager than ``FP64_MULTIPLIER`` times
that (plus a tenth of the tolerance) is within eager's own variation, not wrong data
(:func:`judge_against_rerun`), as PyTorch's benchmark harness runs eager twice before judging.
A deterministic eager run repeats exactly and passes nothing; a rerun further than the
tolerance from the first (random numbers drawn anew) judges nothing. Norms are taken in float64 pieces of ``CHECK_CHUNK`` elements, so that the
check never needs a float64 copy of a whole output beside the model.
"""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Callable
from typing import Any

TOLERANCE = {
    "torch.float64": 1e-9,
    "torch.float32": 1e-4,
    "torch.float16": 1e-2,
    "torch.bfloat16": 2e-2,
}
TRAINING_TOLERANCE = {**TOLERANCE, "torch.float32": 5e-3}
GRADIENT_NOISE_FLOOR = 1e-6
CHECK_CHUNK = 1 << 24  # elements per float64 piece (128 MiB)
FP64_MULTIPLIER = 3.0


@dataclass
class Mismatch:
    where: str
    detail: str

    def __str__(self) -> str:
        return f"{self.where}: {self.detail}"


def _walk(value: Any, leaf: Callable[[str, Any], Any], prefix: str) -> Any:
    """``value`` rebuilt with ``leaf(path, x)`` for each leaf: dicts as dicts, and lists, tuples,
    namedtuples and HuggingFace ModelOutputs alike as tuples. The one traversal of outputs that
    :func:`flatten` and :func:`kept` share, so that a kept output flattens as its original."""
    import torch

    if isinstance(value, torch.Tensor) or value is None or isinstance(value, (int, float, bool, str)):
        return leaf(prefix, value)
    if isinstance(value, dict):
        return {k: _walk(value[k], leaf, f"{prefix}.{k}") for k in sorted(value, key=str)}
    if isinstance(value, (list, tuple)):
        return tuple(_walk(v, leaf, f"{prefix}[{i}]") for i, v in enumerate(value))
    if hasattr(value, "to_tuple"):  # HuggingFace ModelOutput
        return _walk(value.to_tuple(), leaf, prefix)
    raise TypeError(f"{prefix}: outputs of type {type(value).__name__} are not handled (tensors, scalars, strings, None, and dicts, lists, tuples and ModelOutputs of them are)")


def flatten(value: Any, prefix: str = "out") -> list[tuple[str, Any]]:
    """Leaves of nested tuples/lists/dicts/dataclass-like outputs, with their paths."""
    leaves: list[tuple[str, Any]] = []
    _walk(value, lambda path, x: leaves.append((path, x)), prefix)
    return leaves


def kept(value: Any) -> Any:
    """``value`` with every tensor leaf copied, in the structure :func:`flatten` walks: what a
    CUDA graph's output holds now, for a check made after later replays have overwritten the
    graph's own."""
    import torch

    return _walk(value, lambda _, x: x.detach().clone() if isinstance(x, torch.Tensor) else x, "out")


def compare(out: Any, ref: Any, training: bool = False) -> tuple[float, list[Mismatch]]:
    """(largest relative error over tensor leaves, mismatches)."""
    import torch

    got, want = flatten(out), flatten(ref)
    if [p for p, _ in got] != [p for p, _ in want]:
        return float("inf"), [Mismatch("out", f"structure differs: {[p for p, _ in got]} vs {[p for p, _ in want]}")]
    floor = GRADIENT_NOISE_FLOOR * _global_norm(want) if training else 0.0
    worst = 0.0
    mismatches: list[Mismatch] = []
    for (path, a), (_, b) in zip(got, want):
        if not isinstance(b, torch.Tensor):
            if a != b:
                mismatches.append(Mismatch(path, f"{a!r} != {b!r}"))
            continue
        if not isinstance(a, torch.Tensor) or a.shape != b.shape or a.dtype != b.dtype:
            desc = f"{type(a).__name__} {getattr(a, 'shape', '')} {getattr(a, 'dtype', '')}"
            mismatches.append(Mismatch(path, f"{desc} vs tensor {tuple(b.shape)} {b.dtype}"))
            continue
        err, problem = _tensor_error(a, b, TRAINING_TOLERANCE if training else TOLERANCE, floor)
        worst = max(worst, err)
        if problem:
            mismatches.append(Mismatch(path, problem))
    return worst, mismatches


def _float64_chunks(t: Any) -> Any:
    """``t`` flattened, in float64 pieces of at most ``CHECK_CHUNK`` elements.

    The check runs beside the model in the benchmark's worker; a float64 copy of a whole output
    (12 GiB for DR-I's 8192 x 197951 reconstruction) would itself run the GPU out of memory.
    """
    import torch

    flat = t.detach().reshape(-1)
    if flat.is_complex():
        flat = torch.view_as_real(flat).reshape(-1)
    for start in range(0, flat.numel(), CHECK_CHUNK):
        yield flat[start:start + CHECK_CHUNK].double()


def _global_norm(leaves: list[tuple[str, Any]]) -> float:
    """The 2-norm of every finite floating-point value of ``leaves`` taken together."""
    import torch

    total = 0.0
    for _, t in leaves:
        if isinstance(t, torch.Tensor) and t.is_floating_point():
            for piece in _float64_chunks(t):
                total += torch.linalg.vector_norm(piece[torch.isfinite(piece)]).item() ** 2
    return total ** 0.5


def _tensor_error(a: Any, b: Any, tolerances: dict[str, float], floor: float = 0.0) -> tuple[float, str]:
    import torch

    if not (a.is_floating_point() or a.is_complex()):
        equal = torch.equal(a.cpu(), b.cpu())
        return (0.0 if equal else float("inf")), ("" if equal else "integer/bool values differ")
    ref_sq = diff_sq = 0.0
    for x, y in zip(_float64_chunks(a), _float64_chunks(b.to(a.device))):
        bad_x, bad_y = ~torch.isfinite(x), ~torch.isfinite(y)
        if not torch.equal(bad_x, bad_y):
            return float("inf"), "non-finite values where eager has finite ones (or the reverse)"
        if bad_y.any():
            x, y = x[~bad_y], y[~bad_y]
        ref_sq += torch.linalg.vector_norm(y).item() ** 2
        diff_sq += torch.linalg.vector_norm(x - y).item() ** 2
    scale = max(ref_sq ** 0.5, floor)
    err = diff_sq ** 0.5 / scale if scale > 0 else diff_sq ** 0.5
    tol = tolerances.get(str(a.dtype), 1e-4)
    return err, ("" if err <= tol else f"relative error {err:.3g} > tolerance {tol:g} ({a.dtype})")


def tolerance_for(value: Any, training: bool = False) -> float:
    """The loosest tolerance over an output's floating-point leaves (for reporting)."""
    import torch

    table = TRAINING_TOLERANCE if training else TOLERANCE
    tols = [table.get(str(t.dtype), 1e-4) for _, t in flatten(value)
            if isinstance(t, torch.Tensor) and t.is_floating_point()]
    return max(tols, default=0.0)


def _leaves_to_judge(out: Any, ref: Any, arbiter: Any, failed: list[Mismatch] | None
                     ) -> list[tuple[str, Any, Any, Any, Mismatch | None]] | None:
    """(path, compiled leaf, eager's, the arbiter's, the float32 verdict) for each of
    ``failed``'s leaves, or every leaf where it is None; None where the three differ in
    structure."""
    got, want, other = flatten(out), flatten(ref), flatten(arbiter)
    paths = [p for p, _ in got]
    if paths != [p for p, _ in want] or paths != [p for p, _ in other]:
        return None
    verdicts = None if failed is None else {m.where: m for m in failed}
    return [(path, a, b, c, None if verdicts is None else verdicts[path])
            for (path, a), (_, b), (_, c) in zip(got, want, other) if verdicts is None or path in verdicts]


def judge_against_rerun(out: Any, ref: Any, rerun: Any, training: bool = False,
                        failed: list[Mismatch] | None = None) -> list[Mismatch]:
    """The leaves where ``out`` is further from eager's ``ref`` than eager's own second run
    ``rerun`` of the same sample allows: ``err(out) <= FP64_MULTIPLIER * err(rerun) +
    tolerance / 10``, both relative to ``ref`` (floored as in :func:`compare` for training).

    Only ``failed``'s leaves are judged (all where None); other leaves must equal eager's exactly.
    A failed leaf that passes here is within eager's own run-to-run variation. A rerun further
    than the tolerance from eager (random ops that drew anew) judges nothing, so that no output
    passes for being no further from eager than another draw of its random numbers.
    """
    import torch

    leaves = _leaves_to_judge(out, ref, rerun, failed)
    if leaves is None:
        return [Mismatch("out", "structure differs from eager's second run")] if failed is None else list(failed)
    floor = GRADIENT_NOISE_FLOOR * _global_norm(flatten(ref)) if training else 0.0
    tolerances = TRAINING_TOLERANCE if training else TOLERANCE
    remaining: list[Mismatch] = []
    for path, a, b, c, verdict in leaves:
        kept = verdict or Mismatch(path, "differs from eager")
        if not (isinstance(b, torch.Tensor) and isinstance(c, torch.Tensor) and c.shape == b.shape
                and (b.is_floating_point() or b.is_complex())):
            remaining.append(kept)
            continue
        tol = tolerances.get(str(b.dtype), 1e-4)
        compiled_err, _ = _tensor_error(a, b, {}, floor)
        eager_err, _ = _tensor_error(c, b, {}, floor)
        # a rerun further than the tolerance from eager drew other random numbers: it judges nothing
        if not (eager_err <= tol and compiled_err <= FP64_MULTIPLIER * eager_err + tol / 10):
            remaining.append(kept)
    return remaining


def judge_against_fp64(out: Any, ref: Any, ref64: Any, training: bool = False,
                       failed: list[Mismatch] | None = None) -> list[Mismatch]:
    """The leaves where ``out`` is further from the float64 run ``ref64`` than eager's ``ref`` is.

    ``failed`` is the float32 comparison's verdict (:func:`compare`); only its leaves are judged,
    so a leaf that passed stays passed, and one the float64 run cannot judge keeps its float32
    verdict. Without it every leaf is judged. For each floating-point leaf, with errors relative
    to ``ref64`` (floored as in :func:`compare` for training):
    ``err(out) <= FP64_MULTIPLIER * err(ref) + tolerance / 10``. Other leaves must equal eager's
    exactly.
    """
    import torch

    leaves = _leaves_to_judge(out, ref, ref64, failed)
    if leaves is None:
        return [Mismatch("out", "structure differs from the float64 run")]
    floor = GRADIENT_NOISE_FLOOR * _global_norm(flatten(ref64)) if training else 0.0
    tolerances = TRAINING_TOLERANCE if training else TOLERANCE
    mismatches: list[Mismatch] = []
    for path, a, b, c, verdict in leaves:
        float32 = f"{verdict.detail}; " if verdict is not None else ""
        if not isinstance(b, torch.Tensor) or not (b.is_floating_point() or b.is_complex()):
            _, problems = compare(a, b)
            mismatches += [Mismatch(path, m.detail) for m in problems]
            continue
        if not isinstance(c, torch.Tensor) or c.shape != b.shape:
            mismatches.append(Mismatch(path, f"{float32}no float64 counterpart of this leaf"))
            continue
        tol = tolerances.get(str(b.dtype), 1e-4)
        compiled_err, _ = _tensor_error(a, c, {}, floor)
        eager_err, _ = _tensor_error(b, c, {}, floor)
        if not eager_err <= tol:
            mismatches.append(Mismatch(path, f"{float32}the float64 run is no arbiter: eager's own "
                                             f"output is {eager_err:.3g} from it (random ops draw "
                                             f"differently?)"))
            continue
        bound = FP64_MULTIPLIER * eager_err + tol / 10
        if not compiled_err <= bound:
            mismatches.append(Mismatch(path, f"error against float64 {compiled_err:.3g} > "
                                             f"{FP64_MULTIPLIER:g} x eager's {eager_err:.3g} + {tol / 10:g}"))
    return mismatches

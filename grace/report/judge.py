"""Whether a compiled mode's outputs count as right, on a workload where eager is no reference.

Every timed sample of a compiled mode is checked against the eager model on the same inputs
(:mod:`grace.bench.check`). On a few workloads PT2-NoCG itself fails that check, by about as much
as PT2-CG: eager's outputs are then no usable reference (VM's detections, where a near-tie in
a score reorders the boxes; DCGAN's gradients, summed in another order; TEFD). There a mode's
outputs count as right when, on every checked sample, they are no further from eager than
PT2-NoCG's are on the same sample, within :data:`NOCG_FACTOR`, or the sample passed the check
itself (PT2-NoCG may equal eager bit for bit on a sample where the mode rounds differently):
PT2-NoCG becomes the reference, and the figures mark such rows. A mode that matches eager
outright stays ``ok``. Rows name the samples that failed (``check.failed_samples``, after the
check's arbiters); for rows without that list, a sample passed if its error is within the row's
tolerance (``check.tolerance``, the loosest of its leaves').

No torch here: figures are redrawn anywhere from ``rows.jsonl``.
"""

from __future__ import annotations

import math
from typing import Any

OK = "ok"
MISMATCH = "mismatch"
# A row judged against PT2-NoCG's own distance from eager, and found no further.
NOCG_REFERENCE = "ok against PT2-NoCG"
# How much further than PT2-NoCG a sample may be: the same kernels in another order, or another
# fusion, round differently; a wrong result is orders of magnitude further.
NOCG_FACTOR = 1.5


def errors_by_sample(row: dict[str, Any]) -> dict[str, float]:
    """The row's largest relative error from eager per checked sample (``inf`` for a NaN)."""
    errors = ((row.get("check") or {}).get("errors_by_sample")) or {}
    return {str(s): float(e) for s, e in errors.items()}


def judged_status(row: dict[str, Any], nocg: dict[str, Any] | None) -> str:
    """``row``'s status, with a mismatch judged against ``nocg`` (PT2-NoCG's row of the same
    workload and run) where PT2-NoCG mismatches eager too. PT2-NoCG's own mismatch is then the
    reference itself."""
    status = str(row.get("status") or "error")
    if status != MISMATCH or nocg is None or nocg.get("status") != MISMATCH:
        return status
    if row is nocg:
        return NOCG_REFERENCE
    mine, reference = errors_by_sample(row), errors_by_sample(nocg)
    common = mine.keys() & reference.keys()
    if not common:
        return status  # rows from before per-sample errors were recorded: nothing to judge by
    if all(_passed(row, s, mine[s]) or _no_further(mine[s], reference[s]) for s in common):
        return NOCG_REFERENCE
    return status


def _passed(row: dict[str, Any], sample: str, error: float) -> bool:
    """Whether ``row``'s check passed ``sample``."""
    check = row.get("check") or {}
    if "failed_samples" in check:
        return sample not in check["failed_samples"]
    return error <= float(check.get("tolerance") or 0.0)


def _no_further(error: float, reference: float) -> bool:
    if math.isnan(error):
        return False
    return error <= reference * NOCG_FACTOR

"""Every registered workload builds at its tiny size and runs one iteration on the CPU.

This is what catches a broken workload without a GPU. The inputs must be deterministic in the
sample index and differ between samples (replays must never see their capture's inputs).
"""

from __future__ import annotations

import pytest
import torch

from grace.bench import check
from grace.bench.workloads import MissingPackage, all_workloads

WORKLOADS = all_workloads()


def _build_tiny(workload):
    try:
        return workload.build("cpu", 2, "tiny")
    except MissingPackage as e:
        pytest.skip(str(e))


@pytest.mark.parametrize("workload", WORKLOADS, ids=[w.name for w in WORKLOADS])
def test_builds_and_runs_one_step_on_cpu(workload) -> None:
    torch.manual_seed(0)
    model = _build_tiny(workload)
    first = workload.inputs(model, 0, "cpu", 2, "tiny")
    again = workload.inputs(model, 0, "cpu", 2, "tiny")
    other = workload.inputs(model, 1, "cpu", 2, "tiny")
    assert all(torch.equal(a, b) for a, b in zip(first, again)), "inputs must be deterministic"
    assert any(not torch.equal(a, b) for a, b in zip(first, other)), "samples must differ"
    if workload.kind == "training":
        loss = workload.loss(model(*first))
        loss.backward()
        assert torch.isfinite(loss)
    else:
        with torch.no_grad():
            out = model(*first)
        for _, leaf in check.flatten(out):
            if isinstance(leaf, torch.Tensor) and leaf.is_floating_point():
                assert torch.isfinite(leaf).all()


def test_weights_are_deterministic() -> None:
    for workload in WORKLOADS:
        torch.manual_seed(0)
        try:
            a = workload.build("cpu", 2, "tiny")
        except MissingPackage:
            continue
        torch.manual_seed(0)
        b = workload.build("cpu", 2, "tiny")
        if isinstance(a, torch.nn.Module):
            for pa, pb in zip(a.state_dict().values(), b.state_dict().values()):
                assert torch.equal(pa, pb), workload.name


def test_micro_workloads_keep_their_idioms() -> None:
    """The constructs CGCT exists to fix must survive clean-ups of the workloads."""
    import numpy as np

    from grace.bench.workloads import get

    attn = get("micro-attn-numpy").build("cpu", 1, "tiny")
    assert isinstance(attn.attn[0].temperature, np.floating)
    cpu_t = get("micro-attn-cputensor").build("cpu", 1, "tiny")
    assert isinstance(cpu_t.attn[0].temperature, torch.Tensor) and cpu_t.attn[0].temperature.dim() == 0
    table = get("micro-cpu-tensor").build("cpu", 1, "tiny").table
    assert table.device.type == "cpu" and "table" not in dict(get("micro-cpu-tensor").build("cpu", 1, "tiny").named_buffers())

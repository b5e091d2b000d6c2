"""Numpy float64 scalars traced like Python floats (CPU): a guarded constant until the value
changes, then the stock tensor input; other numpy types, NaN and the switch off stay stock."""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np
import pytest
import torch


def _patched() -> bool:
    from torch._dynamo.variables import builder

    return "specialize_like_float" in inspect.getsource(builder)


pytestmark = pytest.mark.skipif(not _patched(), reason="GraCE's overlay with the CGCT patches is not active here")


class Scale(torch.nn.Module):
    def __init__(self, t: Any) -> None:
        super().__init__()
        self.t = t

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x / self.t


def _run(values: list[Any], cgct: bool = True) -> list[list[tuple]]:
    """Placeholder shapes of each graph Dynamo made while ``self.t`` took ``values``."""
    import grace.config

    graphs: list[list[tuple]] = []

    def backend(gm: Any, example_inputs: Any) -> Any:
        graphs.append([tuple(n.meta["example_value"].shape) for n in gm.graph.nodes if n.op == "placeholder"])
        return gm.forward

    torch._dynamo.reset()
    m = Scale(values[0])
    x = torch.ones(3)
    with grace.config.patch(cgct=cgct):
        compiled = torch.compile(m, backend=backend)
        for v in values:
            m.t = v
            torch.testing.assert_close(compiled(x), x / float(v), equal_nan=True, msg=f"t = {v}")
    return graphs


def test_a_constant_numpy_float64_is_a_constant_in_the_graph() -> None:
    assert _run([np.float64(8.0)] * 4) == [[(3,)]], "one graph, the scalar folded in"


def test_a_changing_one_goes_to_a_tensor_input_after_one_recompile() -> None:
    graphs = _run([np.float64(v) for v in (8.0, 8.0, 2.0, 4.0, 5.0, 0.5)])
    assert graphs == [[(3,)], [(3,), ()]], "then no recompile however often it changes"


def test_other_numpy_types_nan_and_the_switch_off_are_stock() -> None:
    stock = [[(3,), ()]]
    assert _run([np.float32(8.0)] * 3) == stock
    assert _run([np.float64("nan")] * 2) == stock
    assert _run([np.float64(8.0)] * 3, cgct=False) == stock

"""The tree's runs of compiled code without a graph (grace.trees.EagerFallback), on the CPU: an
input a replay overwrote raises the tree's error before the compiled code runs, parameters are
not read, and every eager fallback of the patched tree goes through it. The GPU test is
tests/test_mutated_inputs_cuda.py (``x = f(x)``, whose fallback crashed the process)."""

from __future__ import annotations

import re
from types import SimpleNamespace
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import grace.config  # noqa: E402
from grace.trees import EagerFallback, eager_fallback  # noqa: E402

OVERWRITTEN = "accessing tensor output of CUDAGraphs that has been overwritten by a subsequent run"


def _overwritten(shape: int = 4) -> torch.Tensor:
    t = torch.ones(shape)
    torch._C._set_storage_access_error_msg(t, OVERWRITTEN)
    return t


class _Model:
    """A compiled function's stand-in: records the inputs of each call, returns their count."""

    def __init__(self) -> None:
        self.calls: list[list[Any]] = []

    def __call__(self, inputs: list[Any]) -> int:
        self.calls.append(list(inputs))
        return len(inputs)


def _fallback(static: tuple[int, ...] = ()) -> tuple[EagerFallback, _Model]:
    model = _Model()
    return EagerFallback({"f": SimpleNamespace(model=model, static_input_idxs=static)}), model


def test_a_run_returns_what_the_compiled_code_returns() -> None:
    fallback, model = _fallback()
    inputs = [torch.ones(3), 2, None, torch.ones(2)[1:]]
    assert fallback.run(inputs, "f") == 4 and fallback.run(inputs, "f") == 4
    assert len(model.calls) == 2


def test_an_overwritten_input_raises_before_the_compiled_code_runs() -> None:
    fallback, model = _fallback()
    fallback.run([torch.ones(3), torch.ones(3)], "f")
    with pytest.raises(RuntimeError, match="has been overwritten"):
        fallback.run([torch.ones(3), _overwritten()[1:]], "f")
    assert len(model.calls) == 1, "the compiled code never saw the overwritten input"


def test_static_inputs_are_not_read() -> None:
    fallback, model = _fallback(static=(0,))
    fallback.run([_overwritten(), torch.ones(3)], "f")
    assert len(model.calls) == 1


def test_the_fallback_exists_with_any_switch_on_and_not_with_all_off() -> None:
    with grace.config.patch(cgct=False, pi=False, scg=False, lean_replay=False):
        assert eager_fallback({}) is None
    with grace.config.patch(cgct=False, pi=False, scg=True, lean_replay=False):
        assert isinstance(eager_fallback({}), EagerFallback)


def test_every_eager_fallback_of_the_patched_tree_goes_through_it() -> None:
    """patches/scg/0013 in the overlay's tree: each place ``_run`` runs compiled code without a
    graph first hands the call to ``grace_eager`` where the manager has one."""
    import inspect

    from grace.patching.overlay import current

    if current() is None:
        pytest.skip("GraCE's overlay is not built here (run `make setup`)")
    from torch._inductor import cudagraph_trees as trees

    source = inspect.getsource(trees.CUDAGraphTreeManager._run)
    assert "self.ids_to_funcs[function_id].model(" not in source, "a fallback of _run that skips grace_eager"
    assert source.count("return self._grace_run_without_graph(new_inputs, function_id)") >= 6, \
        "the fallbacks of _run (stock's three, SCG's three)"
    helper = inspect.getsource(trees.CUDAGraphTreeManager._grace_run_without_graph)
    assert re.search(r"if self\.grace_eager is not None:\s+return self\.grace_eager\.run\(new_inputs, function_id\)", helper)
    assert "self.grace_eager = eager_fallback(self.ids_to_funcs)" in inspect.getsource(
        trees.CUDAGraphTreeManager.__init__)

"""Lean replay on the GPU: each scenario runs twice in fresh trees, with ``grace.config.lean_replay``
off (the tree's own ``_run``) and on, and must give the same values and raise where the other
raises; with it on, the lean dispatch must have served calls itself.

The scenarios are the cases where a replay path could skip a check it needs: two compiled
functions interleaved (a tree with children), outputs held across calls, ``x = f(x)``, a static
input whose address changes (a re-record), shape, dtype and grad-mode changes, training steps
with their backward pending, ``torch._dynamo.reset()`` and ``cudagraph_mark_step_begin``, and
inference under autocast, which AOTAutograd's lean wrapper must disable around the graph as
stock's does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a CUDA GPU")


def _fresh() -> None:
    import torch._dynamo
    from torch._inductor import cudagraph_trees

    torch._dynamo.reset()
    cudagraph_trees.reset_cudagraph_trees()


def _outcome(step: Callable[[], Any]) -> Any:
    """What a step gives: its tensors on the CPU, or the kind of error it raised."""
    try:
        out = step()
    except RuntimeError as e:
        return ("raised", "overwritten" if "overwritten" in str(e) else str(e).splitlines()[0])
    tensors = out if isinstance(out, (list, tuple)) else [out]
    return [t.detach().cpu().clone() if isinstance(t, torch.Tensor) else t for t in tensors]


def _both_ways(scenario: Callable[[], list[Any]], monkeypatch: pytest.MonkeyPatch, inference: bool = True,
               **config: Any) -> None:
    """``scenario`` with lean replay off, then on: the same values and errors; with it on, the
    lean dispatch served calls and, where the scenario has ``inference`` graphs, AOTAutograd's
    lean wrapper ran them (``grace.lean.aot_runtime``), and with it off never did."""
    import grace.config
    from grace.lean.aot_runtime import LeanInferenceWrapper
    from grace.lean.dispatch import LeanDispatch

    served = []
    original = LeanDispatch.replay

    def counting(self: LeanDispatch, manager: Any, new_inputs: list[Any], function_id: Any) -> Any:
        out = original(self, manager, new_inputs, function_id)
        served.append(out is not None)
        return out

    aot_calls = {False: 0, True: 0}
    lean_now = [False]
    wrapped = LeanInferenceWrapper.__call__

    def aot_counting(self: LeanInferenceWrapper, args: list[Any]) -> Any:
        aot_calls[lean_now[0]] += 1
        return wrapped(self, args)

    monkeypatch.setattr(LeanDispatch, "replay", counting)
    monkeypatch.setattr(LeanInferenceWrapper, "__call__", aot_counting)
    results = {}
    for lean in (False, True):
        _fresh()
        torch.manual_seed(0)
        lean_now[0] = lean
        with grace.config.patch(lean_replay=lean, scg_force="graph", **config):  # every function recorded
            results[lean] = scenario()
        _fresh()
    assert aot_calls[False] == 0, "lean AOTAutograd wrappers with lean replay off"
    assert (aot_calls[True] > 0) == inference, f"lean AOTAutograd wrapper calls: {aot_calls[True]}"
    unlike = {lean: [e[1] for e in res if isinstance(e, tuple) and e[0] == "steps unlike eager"] for lean, res in results.items()}
    assert not any(steps for lists in unlike.values() for steps in lists), f"unlike eager (lean replay off, on): {unlike}"
    assert len(results[True]) == len(results[False])
    for i, (off, on) in enumerate(zip(results[False], results[True])):
        if isinstance(off, tuple):
            assert on == off, f"step {i}: {on} with lean replay, {off} without"
        else:
            assert len(on) == len(off)
            for a, b in zip(on, off):
                torch.testing.assert_close(a, b, msg=f"step {i}")
    assert any(served), "the lean dispatch served no call"


def _compiled(fn: Callable[..., Any]) -> Callable[..., Any]:
    return torch.compile(fn, mode="reduce-overhead")


@pytest.mark.parametrize("stale_outputs_raise", [
    pytest.param(False, marks=pytest.mark.xfail(strict=True, reason=(
        "stock 2.11's gap: y read after g(y) holds g's output once g records or replays as a new "
        "root over the path f's replay ended; grace.config.stale_outputs_raise makes the read raise"))),
    True,
])
def test_two_functions_interleaved_and_fed_back(monkeypatch: pytest.MonkeyPatch, stale_outputs_raise: bool) -> None:
    def scenario() -> list[Any]:
        def eager_f(x: torch.Tensor) -> torch.Tensor:
            return torch.sin(x) * 2 + x

        f = _compiled(eager_f)
        g = _compiled(lambda x: (x @ x.T).relu())
        x = torch.randn(16, 16, device="cuda")
        out, unlike_eager = [], []
        for step in range(8):
            expected = eager_f(x).cpu()
            y = f(x)
            out.append(_outcome(lambda: g(y)))
            copied = _outcome(lambda: y.clone())  # raises where g's call overwrote y
            out.append(copied)
            if isinstance(copied, list) and not torch.allclose(copied[0].cpu(), expected):
                unlike_eager.append(f"f at step {step}")
            x = copied[0].cuda() if isinstance(copied, list) else torch.randn(16, 16, device="cuda")
        for step in range(5):  # x = f(x)
            expected = eager_f(x).cpu()
            torch.compiler.cudagraph_mark_step_begin()
            x = f(x)
            out.append(_outcome(lambda: x))
            # equal_nan: an x fed back stale above may have grown to inf, and sin(inf) is nan
            if isinstance(out[-1], list) and not torch.allclose(out[-1][0], expected, equal_nan=True):
                unlike_eager.append(f"x = f(x) at step {step}")
        return [("steps unlike eager", tuple(unlike_eager)), *out]

    _both_ways(scenario, monkeypatch, stale_outputs_raise=stale_outputs_raise)


def test_outputs_held_across_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    def scenario() -> list[Any]:
        f = _compiled(lambda x: x * 3 + 1)
        inputs = [torch.randn(64, device="cuda") for _ in range(6)]
        out, held = [], []
        for i, x in enumerate(inputs):
            held.append(f(x))
            out += [_outcome(lambda h=h: h + 0) for h in held]  # the older ones were overwritten
        return out

    _both_ways(scenario, monkeypatch)


def test_a_static_input_that_moves_records_again(monkeypatch: pytest.MonkeyPatch) -> None:
    def scenario() -> list[Any]:
        model = torch.nn.Linear(8, 8).cuda()
        f = _compiled(model)
        x = torch.randn(4, 8, device="cuda")
        out = []
        with torch.no_grad():
            for i in range(8):
                if i == 4:
                    model.weight = torch.nn.Parameter(torch.randn(8, 8, device="cuda"))
                out.append(_outcome(lambda: f(x) + 0))
        return out

    _both_ways(scenario, monkeypatch)


def test_shape_dtype_and_grad_mode_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    def scenario() -> list[Any]:
        model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()).cuda()
        f = _compiled(model)
        out = []
        # three calls each: a warm-up, a recording, then replays, which the lean dispatch serves
        for shape, grad in [((4, 8), False), ((6, 8), False), ((4, 8), True), ((4, 8), False),
                            ((6, 8), False), ((4, 8), True)]:
            for _ in range(3):
                x = torch.randn(*shape, device="cuda")
                with torch.set_grad_enabled(grad):
                    out.append(_outcome(lambda: f(x) + 0))
        g = _compiled(lambda x: x.cos() * 2)
        for dtype in (torch.float32, torch.float16, torch.float32, torch.float16):
            for _ in range(3):
                x = torch.randn(32, device="cuda", dtype=dtype)
                out.append(_outcome(lambda: g(x) + 0))
        return out

    _both_ways(scenario, monkeypatch)


def test_training_steps_with_their_backward_pending(monkeypatch: pytest.MonkeyPatch) -> None:
    def scenario() -> list[Any]:
        model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).cuda()
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        f = _compiled(model)
        out = []
        for i in range(8):
            x = torch.randn(8, 16, device="cuda")
            loss = f(x).square().mean()
            if i % 3 == 2:  # a second forward while the first's backward is pending
                extra = f(torch.randn(8, 16, device="cuda")).sum()
                loss = loss + 0 * extra
            loss.backward()
            opt.step()
            opt.zero_grad()
            out.append(_outcome(lambda: [loss.detach() + 0, *[p.detach() + 0 for p in model.parameters()]]))
        return out

    _both_ways(scenario, monkeypatch, inference=False)


def test_inference_under_autocast_and_without(monkeypatch: pytest.MonkeyPatch) -> None:
    """AOTAutograd disables autocast around a graph compiled under it; the lean wrapper must too."""
    def scenario() -> list[Any]:
        model = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.GELU(), torch.nn.Linear(32, 8)).cuda()
        f = _compiled(model)
        out = []
        with torch.no_grad():
            for autocast in (True, False, True, False):
                for _ in range(3):
                    x = torch.randn(4, 32, device="cuda")
                    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
                        out.append(_outcome(lambda: f(x) + 0))
                    assert torch.is_grad_enabled() is False and not torch.is_autocast_enabled("cuda")
        return out

    _both_ways(scenario, monkeypatch)


def test_dynamo_reset_and_mark_step(monkeypatch: pytest.MonkeyPatch) -> None:
    def scenario() -> list[Any]:
        fn = lambda x: torch.tanh(x) + x  # noqa: E731
        out = []
        for round_ in range(2):
            f = _compiled(fn)
            for i in range(6):
                if i % 2:
                    torch.compiler.cudagraph_mark_step_begin()
                x = torch.randn(128, device="cuda")
                out.append(_outcome(lambda: f(x) + 0))
            if round_ == 0:
                torch._dynamo.reset()
        return out

    _both_ways(scenario, monkeypatch)

"""grace.lean.aot_runtime and ``patches/lean_replay/0005``: with lean replay on, a plain inference
graph's AOTAutograd wrappers leave out the work its metadata rules out, and every other graph
keeps stock's; the lean wrapper computes what stock's computes, grad mode, autocast and the
first-invocation analysis included."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch

import grace.config
import grace.lean.aot_runtime as aot_runtime
from grace.lean.aot_runtime import LeanInferenceWrapper


@pytest.fixture
def made(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[LeanInferenceWrapper]]:
    """Every lean wrapper built while the test runs; Dynamo's caches fresh before and after."""
    built: list[LeanInferenceWrapper] = []
    init = LeanInferenceWrapper.__init__

    def spy(self: LeanInferenceWrapper, *args: Any, **kwargs: Any) -> None:
        built.append(self)
        init(self, *args, **kwargs)

    monkeypatch.setattr(LeanInferenceWrapper, "__init__", spy)
    torch._dynamo.reset()
    yield built
    torch._dynamo.reset()


def _calls(fn: Callable[..., Any], *inputs: torch.Tensor, lean: bool, calls: int = 3) -> list[Any]:
    compiled = torch.compile(fn, backend="aot_eager")
    with grace.config.patch(lean_replay=lean):
        return [compiled(*inputs) for _ in range(calls)]


def add_one(x: torch.Tensor) -> torch.Tensor:
    return torch.relu(x) + 1


def test_a_plain_inference_graph_gets_the_lean_wrapper_and_eagers_values(made: list) -> None:
    """New inputs at every call, each output kept: every one is its own call's."""
    compiled = torch.compile(add_one, backend="aot_eager")
    inputs = [torch.randn(8) for _ in range(5)]
    with grace.config.patch(lean_replay=True):
        outs = [compiled(x) for x in inputs]
    assert len(made) == 1
    for x, out in zip(inputs, outs):
        torch.testing.assert_close(out, add_one(x))
    assert torch.is_grad_enabled(), "grad mode as the caller left it"


def test_with_lean_replay_off_every_wrapper_is_stocks(made: list, monkeypatch: pytest.MonkeyPatch) -> None:
    left_out: list[str] = []
    for name in ("rng_wrapper_is_identity", "effect_tokens_wrapper_is_identity"):
        answer = getattr(aot_runtime, name)
        monkeypatch.setattr(aot_runtime, name,
                            lambda *a, _n=name, _f=answer: (left_out.append(_n) if _f(*a) else None) or _f(*a))
    _calls(add_one, torch.randn(8), lean=False)
    assert made == [] and left_out == []
    torch._dynamo.reset()
    _calls(add_one, torch.randn(8), lean=True)
    assert len(made) == 1 and sorted(set(left_out)) == ["effect_tokens_wrapper_is_identity",
                                                        "rng_wrapper_is_identity"]


def test_lean_aot_off_keeps_stocks_wrappers_under_lean_replay(made: list) -> None:
    compiled = torch.compile(add_one, backend="aot_eager")
    x = torch.randn(8)
    with grace.config.patch(lean_replay=True, lean_aot=False):
        outs = [compiled(x) for _ in range(3)]
    assert made == []
    torch.testing.assert_close(outs[-1], add_one(x))


def test_outputs_marked_dynamic_are_marked_as_stock_marks_them(made: list) -> None:
    """A graph compiled for dynamic shapes marks its outputs' dynamic dimensions on every call, so
    that Dynamo treats them as dynamic where they flow into another compiled function."""
    marks = {}
    for lean in (False, True):
        torch._dynamo.reset()
        compiled = torch.compile(add_one, backend="aot_eager", dynamic=True)
        with grace.config.patch(lean_replay=lean):
            outs = [compiled(torch.randn(n, 3)) for n in (4, 5, 6)]
        marks[lean] = [getattr(o, "_dynamo_weak_dynamic_indices", None) for o in outs]
    assert len(made) == 1
    assert marks[True] == marks[False] and marks[True][-1], marks


def mutate(x: torch.Tensor) -> torch.Tensor:
    x.add_(1)
    return x * 2


def view_of_input(x: torch.Tensor) -> torch.Tensor:
    return x.view(-1)[1:]


def test_an_input_the_graph_mutates_changes_and_bumps_its_version_as_under_stock(made: list) -> None:
    """Inductor keeps an inference graph's input mutations in the graph; autograd reads the
    input's version counter, which the wrapper bumps before the call."""
    seen = {}
    for lean in (False, True):
        torch._dynamo.reset()
        x = torch.zeros(4)
        outs = _calls(mutate, x, lean=lean)
        seen[lean] = (x.clone(), outs[-1].clone(), x._version)
    assert len(made) == 1
    assert torch.equal(seen[True][0], torch.full((4,), 3.0)) and torch.equal(seen[True][1], torch.full((4,), 6.0))
    assert seen[True][2] == seen[False][2] > 0, seen


def test_graphs_whose_epilogue_acts_keep_stocks_wrapper_and_its_effects(made: list) -> None:
    y = torch.arange(6.0).view(2, 3).clone()
    out = _calls(view_of_input, y, lean=True)[-1]
    assert made == [], "an output aliasing an input"
    assert out._base is y and torch.equal(out, torch.arange(1.0, 6.0))
    w = torch.randn(4, requires_grad=True)
    loss = _calls(add_one, w, lean=True)[-1].sum()
    loss.backward()
    assert made == [], "a training graph"
    torch.testing.assert_close(w.grad, (w > 0).float())


def test_plain_inference_names_what_would_act(monkeypatch: pytest.MonkeyPatch) -> None:
    answers: list[str | None] = []
    decide = aot_runtime.plain_inference
    monkeypatch.setattr(aot_runtime, "plain_inference",
                        lambda *a, **k: answers.append(decide(*a, **k)) or answers[-1])
    for fn, x in ((add_one, torch.randn(4)), (mutate, torch.zeros(4)), (view_of_input, torch.zeros(6)),
                  (add_one, torch.randn(4, requires_grad=True))):
        torch._dynamo.reset()
        _calls(fn, x, lean=True, calls=1)
    torch._dynamo.reset()
    assert answers == [None, None, "outputs that alias inputs or intermediates",
                       "a training graph (autograd.Function)"]


def _no_marks(t: Any, dims: set[int]) -> None:
    raise AssertionError("no output is marked dynamic here")


class _FirstCall:
    def __init__(self, first: bool) -> None:
        self._is_first = first


def _wrapper(graph: Callable[[list], Any], *, first: bool = False, expected: int = 1,
             disable_amp: bool = False) -> tuple[LeanInferenceWrapper, list[str]]:
    events: list[str] = []

    def stock(args: list) -> list:
        events.append("stock")
        return [graph(args)]

    def enter() -> str:
        events.append("prologue")
        return "cm"

    stock._boxed_call = True  # type: ignore[attr-defined]
    wrapper = LeanInferenceWrapper(stock, graph, expected, disable_amp, _FirstCall(first), enter,
                                   lambda cm: events.append(f"exit {cm}"), (), (), _no_marks)
    return wrapper, events


def test_the_first_invocations_analysis_runs_in_stocks_wrapper() -> None:
    wrapper, events = _wrapper(lambda args: args[0], first=True)
    assert wrapper([torch.ones(1)])[0].item() == 1.0 and events == ["stock"]
    wrapper._lean_first_invocation._is_first = False
    wrapper([torch.ones(1)])
    assert events == ["stock", "prologue", "exit cm"]


def test_the_graph_runs_with_grad_off_and_autocast_disabled_as_stocks_and_both_come_back() -> None:
    seen: list[tuple[bool, bool]] = []

    def graph(args: list) -> tuple:
        seen.append((torch.is_grad_enabled(), torch.is_autocast_enabled("cpu")))
        args.clear()  # a boxed graph frees its inputs
        return (torch.zeros(1),)

    plain, _ = _wrapper(graph)
    amp_off, _ = _wrapper(graph, disable_amp=True)
    with torch.autocast("cpu"):
        assert isinstance(plain([torch.ones(1)]), list)
        amp_off([torch.ones(1)])
        assert torch.is_autocast_enabled("cpu")
    assert seen == [(False, True), (False, False)] and torch.is_grad_enabled()

    def failing(args: list) -> None:
        raise RuntimeError("kernel failed")

    wrapper, _ = _wrapper(failing)
    with pytest.raises(RuntimeError, match="kernel failed"):
        wrapper([])
    assert torch.is_grad_enabled(), "grad mode restored when the graph raises"


def test_a_wrong_output_count_raises_as_stocks() -> None:
    wrapper, _ = _wrapper(lambda args: (torch.zeros(1), torch.zeros(1)))
    with pytest.raises(AssertionError, match="expected 1 outputs, got 2"):
        wrapper([])


def test_the_lean_wrapper_carries_what_stocks_wrapper_carries() -> None:
    def stock(args: list) -> list:
        return args

    stock._fx_graph_cache_key = "key"  # type: ignore[attr-defined]
    wrapper = LeanInferenceWrapper(stock, stock, 1, False, _FirstCall(False), lambda: None, lambda cm: None,
                                   (), (), _no_marks)
    assert wrapper._boxed_call is True and wrapper.__wrapped__ is stock
    assert wrapper._fx_graph_cache_key == "key"


def test_the_pass_through_wrappers_stay_where_they_act() -> None:
    class Meta:
        is_rng_op_functionalized = True
        tokens: dict = {}

    boxed = lambda args: args  # noqa: E731
    boxed._boxed_call = True  # type: ignore[attr-defined]
    with grace.config.patch(lean_replay=True):
        assert not aot_runtime.rng_wrapper_is_identity(Meta)
        Meta.is_rng_op_functionalized = False
        assert aot_runtime.rng_wrapper_is_identity(Meta)
        assert aot_runtime.effect_tokens_wrapper_is_identity(boxed, Meta)
        assert not aot_runtime.effect_tokens_wrapper_is_identity(lambda args: args, Meta), "not yet boxed"
        Meta.tokens = {"token": None}
        assert not aot_runtime.effect_tokens_wrapper_is_identity(boxed, Meta)
    with grace.config.patch(lean_replay=False):
        Meta.tokens = {}
        assert not aot_runtime.rng_wrapper_is_identity(Meta)
        assert not aot_runtime.effect_tokens_wrapper_is_identity(boxed, Meta)
    with grace.config.patch(lean_replay=True, lean_aot=False):
        assert not aot_runtime.rng_wrapper_is_identity(Meta)
        assert not aot_runtime.effect_tokens_wrapper_is_identity(boxed, Meta)

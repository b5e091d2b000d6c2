"""A function whose Triton kernels are armed to autotune is warmed up again before the tree
records it (grace.untuned_kernels, scg/0009), on the CPU: real ``CachingAutotuner`` objects
without compiled code, generated-style functions, and the patched ``record_function`` over a
fake manager."""

from __future__ import annotations

import functools
import logging
from typing import Any

import pytest
import torch._inductor.cudagraph_trees as ct
from torch._inductor.runtime.triton_heuristics import CachingAutotuner

import grace.config
from grace.untuned_kernels import kernels_to_tune, warm_up_first


def autotuner(launchers: int, tuned: bool = True) -> CachingAutotuner:
    """An autotuner with ``launchers`` launchers, tuned once or never, and nothing compiled: all
    the check reads."""
    kernel = object.__new__(CachingAutotuner)
    kernel.launchers = [object() for _ in range(launchers)]
    kernel.autotune_time_taken_ns = 1_000_000 if tuned else 0
    return kernel


def generated(kernels: dict[str, Any], nested: bool = False) -> Any:
    """A function in the shape of Inductor's generated ``call``: it launches its kernels by
    global name, directly or from a function nested in it."""
    body = "\n".join(f"    {name}.run(x)" for name in kernels) or "    pass"
    if nested:
        body = "    def inner(x):\n" + "\n".join("    " + line for line in body.splitlines()) + "\n    return inner"
    namespace: dict[str, Any] = {**kernels, "unrelated_tuner": autotuner(2)}
    exec(f"def call(x):\n{body}\n", namespace)  # noqa: S102 - a test's own source
    return namespace["call"]


@pytest.mark.parametrize("nested", [False, True])
def test_kernels_armed_to_tune_are_named_and_tuned_ones_are_not(nested: bool) -> None:
    fn = generated({"triton_poi_b": autotuner(2), "triton_poi_a": autotuner(0), "triton_red_c": autotuner(1)},
                   nested=nested)
    assert kernels_to_tune(fn) == ["triton_poi_a", "triton_poi_b"]


def test_a_kernel_never_tuned_is_left_to_stock() -> None:
    """One the last warm-up did not launch (a branch not taken): stock tunes it wherever it
    first launches, and another warm-up would not tune it either."""
    fn = generated({"triton_poi_a": autotuner(3, tuned=False), "triton_poi_b": autotuner(0, tuned=False)})
    assert kernels_to_tune(fn) == []


def test_a_wrapped_function_is_looked_at_under_its_wrappers() -> None:
    """The tree may hold the generated function under wrappers (``__wrapped__``, a partial)."""
    fn = generated({"triton_poi_a": autotuner(2)})

    def wrapper(args: Any) -> Any:
        return fn(args)

    wrapper.__wrapped__ = fn  # type: ignore[attr-defined]
    assert kernels_to_tune(wrapper) == ["triton_poi_a"]
    assert kernels_to_tune(functools.partial(fn)) == ["triton_poi_a"]


def test_globals_the_function_does_not_name_and_other_objects_are_ignored() -> None:
    fn = generated({"triton_poi_a": autotuner(1), "helper": [1, 2]})
    assert kernels_to_tune(fn) == []
    assert kernels_to_tune(len) == []  # not a Python function
    assert kernels_to_tune(object()) == []


def test_a_function_is_warmed_up_again_once_per_armed_set(caplog: pytest.LogCaptureFixture) -> None:
    kernel = autotuner(2)
    fn = generated({"triton_poi_a": kernel})
    with caplog.at_level(logging.INFO, logger="grace.untuned_kernels"):
        assert warm_up_first(fn, "f1")
        assert "f1 warmed up again" in caplog.text
        assert not warm_up_first(fn, "f1")  # the warm-up did not tune it: recorded, as stock would
        assert "still armed" in caplog.text
    kernel.launchers = kernel.launchers[:1]
    assert not warm_up_first(fn, "f1")  # tuned
    kernel.launchers = [object(), object()]  # armed again by a later compile
    assert warm_up_first(fn, "f1")


def test_a_callable_that_takes_no_attribute_is_recorded_as_stock() -> None:
    class Slotted:
        __slots__ = ("__code__", "__globals__")

    fn = generated({"triton_poi_a": autotuner(2)})
    slotted = Slotted()
    slotted.__code__, slotted.__globals__ = fn.__code__, fn.__globals__
    assert kernels_to_tune(slotted) == ["triton_poi_a"]
    assert not warm_up_first(slotted, "f1")


class FakeManager:
    """What ``record_function`` reads before it records, and a warm-up that says it ran."""

    def __init__(self, model: Any) -> None:
        self.current_node = None
        self.compile_id = None
        self.ids_to_funcs = {ct.FunctionID(0): ct.WrappedFunction(model, [], ct.FunctionID(0), (), [], [])}
        self.warmed: list[Any] = []

    def get_func_name(self, function_id: Any) -> str:
        return f"fn{function_id.id}"

    def run_eager(self, new_inputs: list[Any], function_id: Any) -> str:
        self.warmed.append(function_id)
        return "warm-up"

    def new_graph_id(self) -> Any:
        raise RecordingStarted


class RecordingStarted(Exception):
    pass


@pytest.mark.parametrize("launchers, switch_on, warmed", [(2, True, True), (1, True, False), (2, False, False)])
def test_record_function_warms_up_an_armed_function_with_a_switch_on(launchers: int, switch_on: bool,
                                                                     warmed: bool) -> None:
    manager = FakeManager(generated({"triton_poi_a": autotuner(launchers)}))
    with grace.config.patch(scg=switch_on, pi=False, cgct=False, lean_replay=False):
        if warmed:
            assert ct.CUDAGraphTreeManager.record_function(manager, [], ct.FunctionID(0)) == "warm-up"
        else:
            with pytest.raises(RecordingStarted):  # went on to record, as stock
                ct.CUDAGraphTreeManager.record_function(manager, [], ct.FunctionID(0))
    assert manager.warmed == ([ct.FunctionID(0)] if warmed else [])

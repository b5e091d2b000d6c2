"""The differential tester on the CPU: programs, judging, reports, and the subprocess path.

Programs are checked for determinism and validity over many seeds (pure Python, fast). The
child's execution runs in this process with ``backend="eager"`` (Dynamo only, no Inductor), so
that its comparisons, its failure reports and its handling of overwritten outputs are tested in
seconds; the parent's subprocess path runs with the same backend, and once, marked slow, with
Inductor and ``mode="reduce-overhead"`` (no CUDA graphs on the CPU).
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import subprocess
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from grace.difftest import programs
from grace.difftest.programs import INPUT_MODES, KINDS, Program, generate, parse_kinds
from grace.difftest.runner import (SUMMARY_COLUMNS, Settings, is_worse, parse_child, replay_command,
                                   summarize, worse_than_stock, write_reports)
from grace.paths import REPO_ROOT
from grace.report.upstream import CONFIGURATIONS

SEEDS = range(300)


# Programs.

def test_generation_is_deterministic_per_seed() -> None:
    for seed in SEEDS:
        assert generate(seed).to_json() == generate(seed).to_json()


def test_programs_vary_across_seeds() -> None:
    assert len({generate(seed).to_json() for seed in SEEDS}) == len(SEEDS)
    assert len({tuple(generate(seed).kinds) for seed in SEEDS}) > 50


def test_programs_round_trip_through_json() -> None:
    for seed in range(50):
        program = generate(seed)
        text = program.to_json()
        assert isinstance(json.loads(text), dict)
        assert Program.from_json(text) == program
        assert program.describe().startswith(f"program {seed}:")


def test_programs_respect_kinds_and_max_steps() -> None:
    for seed in range(100):
        program = generate(seed, ["pointwise", "scale"], max_steps=3)
        assert set(program.kinds) <= {"pointwise", "scale"}
        assert 2 <= len(program.steps) <= 3
        assert {s.kind for s in program.steps} <= set(program.kinds)
    assert all(1 <= len(generate(seed, max_steps=1).steps) <= 1 for seed in range(20))
    with pytest.raises(ValueError, match="unknown kind"):
        parse_kinds("pointwise,nope")
    assert parse_kinds(None) == programs.default_kinds() == [k for k in KINDS if k not in programs.OPT_IN_KINDS]
    assert programs.OPT_IN_KINDS == ("train_accum", "train_keep", "dropout", "mutate_input")


def test_opt_in_kinds_leave_every_earlier_program_as_it_was() -> None:
    """A program draws ``train_accum`` or ``train_keep`` only when asked: the default draw, and
    each kind's module weights, are what they were before they existed (seed 39308002 replays as
    recorded), and ``train_accum``'s weights are what they were before ``train_keep``."""
    assert all(not set(programs.OPT_IN_KINDS) & set(generate(seed).kinds) for seed in range(300))
    program = generate(39308002, max_steps=600)
    assert (program.kinds, len(program.steps)) == (["cpu_buf", "mutate_buf", "reduction"], 393)
    defaults = programs.default_kinds()
    assert len(defaults) == 10
    assert all(programs.weight_seed(7, k) == 7 * 10 + i for i, k in enumerate(defaults))
    taken = {programs.weight_seed(s, k) for s in range(100) for k in defaults}
    assert programs.weight_seed(7, "train_accum") == 2**40 + 7
    taken |= {programs.weight_seed(s, "train_accum") for s in range(100)}
    assert programs.weight_seed(7, "train_keep") not in taken
    taken |= {programs.weight_seed(s, "train_keep") for s in range(100)}
    assert programs.weight_seed(7, "dropout") not in taken
    taken |= {programs.weight_seed(s, "dropout") for s in range(100)}
    assert programs.weight_seed(7, "mutate_input") not in taken
    assert "train_accum" in generate(3, ["train_accum"]).kinds


@pytest.mark.parametrize("kind", ["train_accum", "train_keep", "dropout", "mutate_input"])
def test_an_opt_in_kind_named_is_in_every_program_and_called(kind: str) -> None:
    """``--kinds train_accum,pointwise`` runs gradient accumulation in every program, where a
    draw of one to four kinds alone would leave it out of some."""
    for seed in range(1, 40):
        program = generate(seed, [kind, "pointwise"], max_steps=40)
        assert kind in program.kinds
        assert any(step.kind == kind for step in program.steps), seed


def test_a_dropout_step_agrees_with_eager_and_a_side_that_draws_more_is_caught() -> None:
    """``dropout`` seeds both sides alike before each call: Dynamo's eager backend draws eager's
    masks, and the generator ends where eager's does. A compiled side that draws once more (a
    capture-time check that left the generator advanced) mismatches on the generator's state,
    with the loss and gradients still equal."""
    import torch._inductor.config as inductor_config

    program = Program(seed=12, kinds=["dropout"], width=6, channels=2, spatial=3, hidden=5)
    program.steps = [programs.Step("dropout", mode, 3, value_seed=40 + i)
                     for i, mode in enumerate(("fresh", "fresh", "transposed", "misaligned"))]
    fallback = inductor_config.fallback_random
    try:
        torch._dynamo.reset()
        result = execute.run_program(program, "cpu", backend="eager")
        assert result["status"] == "ok" and result["calls"] == 4, result

        def drawing_more(model: Any) -> Any:
            def loss(x: Any) -> Any:
                out = model(x)
                torch.rand(1)  # after the forward: the masks are eager's, the generator is not
                return out
            return loss

        torch._dynamo.reset()
        result = _run_with(program, drawing_more)
        assert result["status"] == "mismatch" and "generator state" in result["detail"], result
    finally:
        inductor_config.fallback_random = fallback


def test_an_input_updated_in_place_is_compared_and_one_left_stale_is_caught() -> None:
    """``mutate_input`` updates its input in place, as TKE does: the input is compared after the
    call as well as the output, and a compiled side whose update never reaches the caller's
    tensor (a graph writing only its placeholder) mismatches on it, its output still right."""
    program = Program(seed=13, kinds=["mutate_input"], width=5, channels=2, spatial=3, hidden=4)
    modes = ("fresh", "misaligned", "transposed", "rows", "fresh")
    program.steps = [programs.Step("mutate_input", mode, 3, value_seed=50 + i) for i, mode in enumerate(modes)]
    program.steps.append(programs.Step("mutate_input", "reuse", 3, value_seed=60, ref=4))
    program.steps.append(programs.Step("mutate_input", "feedback", 3, value_seed=61, ref=5))
    torch._dynamo.reset()
    result = execute.run_program(program, "cpu", backend="eager")
    assert result["status"] == "ok" and result["calls"] == 7, result

    def placeholder_only(fn: Any) -> Any:
        return lambda x: fn(x.clone())  # the update lands in a copy, as a graph's in its placeholder

    torch._dynamo.reset()
    result = _run_with(program, placeholder_only)
    assert result["status"] == "mismatch" and result["step"] == 0, result
    assert "input after the call" in result["detail"], result


def _accumulation_program(calls: int, kind: str = "train_accum") -> Program:
    program = Program(seed=11, kinds=[kind], width=6, channels=2, spatial=3, hidden=5)
    program.steps = [programs.Step(kind, "fresh", 3, value_seed=i) for i in range(calls)]
    return program


def test_gradient_accumulation_sums_gradients_between_updates_on_both_sides() -> None:
    """``train_accum`` updates and zeroes the gradients after every third call only; a compiled
    side whose ``.grad`` holds only its latest call's gradients (what a replay that writes over
    a stolen gradient buffer leaves) mismatches at the second call of a window."""
    assert programs.ACCUMULATED_CALLS == 3
    torch._dynamo.reset()
    assert _run_with(_accumulation_program(7), lambda model: model)["status"] == "ok"

    def overwriting(model: Any) -> Any:
        def loss(x: Any) -> Any:
            for p in model.parameters():
                if p.grad is not None:
                    p.grad.zero_()  # as if this call's backward wrote its gradients over the last ones
            return model(x)
        return loss

    result = _run_with(_accumulation_program(7), overwriting)
    assert (result["status"], result["step"], result["kind"]) == ("mismatch", 1, "train_accum"), result
    assert ".grad" in result["detail"]


def test_gradients_zeroed_in_place_are_compared_at_every_step() -> None:
    """``train_keep`` zeroes ``.grad`` in place after every call's update; a compiled side whose
    ``.grad`` still holds the last call's gradients when the next is added (what a replay into
    an adopted gradient leaves) mismatches at the second call."""
    torch._dynamo.reset()
    assert _run_with(_accumulation_program(5, "train_keep"), lambda model: model)["status"] == "ok"

    def doubled(model: Any) -> Any:
        def loss(x: Any) -> Any:
            out = model(x)
            for p in model.parameters():
                if p.grad is not None:
                    p.grad.fill_(1.0)  # a zeroed .grad that something wrote into before the backward adds
            return out
        return loss

    result = _run_with(_accumulation_program(5, "train_keep"), doubled)
    assert (result["status"], result["step"], result["kind"]) == ("mismatch", 1, "train_keep"), result


def _check_valid(program: Program) -> None:
    """Every reference names a live tensor of the right shape; every mode suits its kind."""
    live: dict[int, tuple[tuple[int, ...], bool]] = {}
    for i, step in enumerate(program.steps):
        info, shape = KINDS[step.kind], program.input_shape(step)
        assert step.mode in INPUT_MODES
        if step.mode in ("reuse", "realloc"):
            assert step.ref in live and live[step.ref][0] == shape, (i, step)
            assert live[step.ref][1] or not info.contiguous
            if step.mode == "realloc":
                del live[step.ref]
        if step.mode == "feedback":
            previous = program.steps[i - 1]
            assert step.ref == i - 1 and KINDS[previous.kind].feedback_output is not None
            assert program.input_shape(previous) == shape and not info.contiguous
        if step.mode == "overlap":
            assert info.inputs == 2 and 0 <= step.overlap_offset < step.batch
        if info.contiguous:
            assert step.mode not in ("transposed", "rows", "feedback")
        assert (step.scalar is not None) == (step.kind == "scale")
        assert step.cpu_buf_value is None or step.kind == "cpu_buf"
        if step.recheck:
            assert any(s.hold for s in program.steps[:i])
        if step.mode in programs.MADE_BY_HARNESS:
            live[i] = (shape, step.mode in programs.CONTIGUOUS_MODES)


def test_programs_are_valid_and_cover_every_mode() -> None:
    seen_modes, seen_kinds, seen_scalars = set(), set(), set()
    flags = {"mark_step": 0, "hold": 0, "recheck": 0}
    for seed in SEEDS:
        program = generate(seed)
        _check_valid(program)
        assert math.ceil(programs.DEFAULT_MAX_STEPS / 2) <= len(program.steps) <= programs.DEFAULT_MAX_STEPS
        for step in program.steps:
            seen_modes.add(step.mode)
            seen_kinds.add(step.kind)
            seen_scalars.add(step.scalar[0] if step.scalar else None)
            for name in flags:
                flags[name] += getattr(step, name)
        assert len({s.batch for s in program.steps}) <= 2
    assert seen_modes == set(INPUT_MODES)
    assert seen_kinds == set(programs.default_kinds())
    assert seen_scalars == {None, *programs.SCALAR_TYPES}
    assert all(n > 0 for n in flags.values())


# The child, in this process, with Dynamo's eager backend.

torch = pytest.importorskip("torch")
from grace.difftest import execute  # noqa: E402  (needs torch)


def test_programs_agree_with_eager_on_cpu() -> None:
    for seed in range(8):
        torch._dynamo.reset()
        result = execute.run_program(generate(seed), "cpu", backend="eager")
        assert result["status"] == "ok", result
        assert result["calls"] == len(generate(seed).steps)


def _run_with(program: Program, compile_fn: Any, watch: Any = None) -> dict[str, Any]:
    run = execute.ProgramRun(program, "cpu", backend="eager", watch=watch)
    run.compile_fn = compile_fn
    return run.run()


def _pointwise_program(steps: int = 3, **flags: Any) -> Program:
    program = Program(seed=5, kinds=["pointwise"], width=4, channels=2, spatial=3, hidden=4)
    program.steps = [programs.Step("pointwise", "fresh", 2, value_seed=i, **flags) for i in range(steps)]
    return program


def test_a_wrong_result_is_a_mismatch_at_its_step() -> None:
    calls = []

    def compile_fn(fn: Any) -> Any:
        def wrong(x: Any) -> Any:
            calls.append(1)
            return fn(x) + (0.01 if len(calls) == 2 else 0.0)
        return wrong

    result = _run_with(_pointwise_program(), compile_fn)
    assert (result["status"], result["step"], result["kind"], result["calls"]) == ("mismatch", 1, "pointwise", 2)
    assert "output 0" in result["detail"]


def test_a_compiled_exception_is_an_error_with_its_type() -> None:
    def compile_fn(fn: Any) -> Any:
        def broken(x: Any) -> Any:
            raise RuntimeError("CUDA error: misaligned address at 0x7f00")
        return broken

    result = _run_with(_pointwise_program(), compile_fn)
    assert (result["status"], result["step"]) == ("error", 0)
    assert result["detail"] == "step 0 (pointwise): RuntimeError: CUDA error: misaligned address at 0x7f00"
    assert result["error_kind"] == "RuntimeError: CUDA error: misaligned address at #"


def test_a_buffer_that_differs_from_eager_is_a_mismatch() -> None:
    program = Program(seed=3, kinds=["mutate_buf"], width=4, channels=2, spatial=3, hidden=4)
    program.steps = [programs.Step("mutate_buf", "fresh", 2, value_seed=1)]

    def compile_fn(module: Any) -> Any:
        def forward(x: Any) -> Any:
            out = module(x)
            module.buf.add_(1.0)  # a stray write the outputs do not show
            return out
        return forward

    result = _run_with(program, compile_fn)
    assert result["status"] == "mismatch" and "buf" in result["detail"]


class _Overwritten:
    """Stands for a CUDA graph output that a later replay overwrote: reading it raises."""

    def detach(self) -> Any:
        raise RuntimeError("Error: " + execute.OVERWRITTEN + " by a subsequent run.")


def test_reading_an_overwritten_held_output_is_expected() -> None:
    run = execute.ProgramRun(_pointwise_program(1), "cpu", backend="eager")
    good = torch.ones(2)
    run.held = [execute.Held(0, "pointwise", [_Overwritten()], [good], [good]),
                execute.Held(1, "pointwise", [good.clone()], [good], [good])]
    run.index = 2
    run.recheck()
    assert [h.step for h in run.held] == [1]
    assert run.expected == ["step 2: held output of step 0 (pointwise) overwritten"]


def test_an_overwritten_fed_back_input_skips_its_step_and_the_next_feedback_takes_a_fresh_input() -> None:
    program = _pointwise_program(1)
    program.steps += [programs.Step("pointwise", "feedback", 2, value_seed=7, ref=0),
                      programs.Step("pointwise", "feedback", 2, value_seed=8, ref=1)]
    seen: list[str] = []

    def compile_fn(fn: Any) -> Any:
        def compiled(x: Any) -> Any:
            seen.append("call")
            if len(seen) == 2:  # the first fed-back call: its input was overwritten
                raise RuntimeError("Error: " + execute.OVERWRITTEN + " by a subsequent run.")
            return fn(x)
        return compiled

    result = _run_with(program, compile_fn)
    assert result["status"] == "ok" and result["calls"] == 2
    assert result["expected_detail"] == ["step 1: fed-back input overwritten before the call"]


def test_the_overwritten_error_on_a_harness_made_input_is_still_an_error() -> None:
    def compile_fn(fn: Any) -> Any:
        def compiled(x: Any) -> Any:
            raise RuntimeError("Error: " + execute.OVERWRITTEN + " by a subsequent run.")
        return compiled

    assert _run_with(_pointwise_program(), compile_fn)["status"] == "error"


def test_a_held_output_that_reads_stale_is_recorded_and_dropped_not_a_failure() -> None:
    run = execute.ProgramRun(_pointwise_program(1), "cpu", backend="eager")
    run.held = [execute.Held(0, "pointwise", [torch.zeros(2)], [torch.ones(2)], [torch.ones(2)]),
                execute.Held(1, "pointwise", [torch.ones(2)], [torch.ones(2)], [torch.ones(2)])]
    run.index = 4
    run.recheck()
    assert run.stale == [(4, 0)] and [h.step for h in run.held] == [1]


def _held_then_mutated_program() -> Program:
    """A held pointwise output, fed back into ``mutate_input``, then every held output reread."""
    program = Program(seed=5, kinds=["pointwise", "mutate_input"], width=4, channels=2, spatial=3, hidden=4)
    program.steps = [programs.Step("pointwise", "fresh", 2, value_seed=1, hold=True),
                     programs.Step("mutate_input", "feedback", 2, value_seed=2, ref=0),
                     programs.Step("pointwise", "fresh", 2, value_seed=3, recheck=True)]
    return program


def test_a_held_output_mutated_in_place_by_a_later_step_is_not_stale() -> None:
    """Eager's output took the mutation as the compiled one did: the reference follows it."""
    result = _run_with(_held_then_mutated_program(), lambda fn: fn)
    assert result["status"] == "ok" and result["stale"] == [] and result["calls"] == 3


def test_a_held_output_that_missed_a_mutation_eager_made_is_stale() -> None:
    """The compiled side mutates a copy of the fed-back output: the held output keeps its old
    values where eager's changed."""
    def compile_fn(fn: Any) -> Any:
        if fn is not execute.mutate_input:
            return fn
        return lambda x: fn(x.clone())

    result = _run_with(_held_then_mutated_program(), compile_fn)
    assert result["status"] == "mismatch" and "input after the call" in result["detail"]


def _fed_back_into_mutate_input(marks: bool, mode: str = "feedback") -> dict[str, Any]:
    """pointwise, then mutate_input fed its output; the compiled mutate_input marks its input
    overwritten after mutating it (what the tree does where its outputs took that memory)."""
    program = Program(seed=5, kinds=["pointwise", "mutate_input"], width=4, channels=2, spatial=3, hidden=4)
    program.steps = [programs.Step("pointwise", "fresh", 2, value_seed=1),
                     programs.Step("mutate_input", mode, 2, value_seed=2, ref=0 if mode == "feedback" else None)]

    def compile_fn(fn: Any) -> Any:
        if fn is not execute.mutate_input or not marks:
            return fn

        def compiled(x: Any) -> Any:
            out = fn(x)
            torch._C._set_storage_access_error_msg(x, "Error: " + execute.OVERWRITTEN + " by a subsequent run.")
            return out
        return compiled

    return _run_with(program, compile_fn)


def test_a_fed_back_input_the_call_overwrote_is_expected_not_an_error() -> None:
    result = _fed_back_into_mutate_input(marks=True)
    assert result["status"] == "ok", result["detail"]
    assert result["expected_detail"] == ["step 1: fed-back input overwritten by the call"]


def test_a_harness_made_input_the_call_overwrote_is_an_error() -> None:
    assert _fed_back_into_mutate_input(marks=True, mode="fresh")["status"] == "error"


@pytest.mark.parametrize("stock_detected, other_stale, stock_step, worse", [
    ([], [[4, 0]], None, False),  # stock read it fine or stale too: outside the trees' contract either way
    ([[4, 0]], [[4, 0]], None, True),  # stock raised on this output; this configuration read it silently
    ([[5, 0]], [[4, 0]], None, True),  # caught by stock at another step: the same output
    ([[9, 2]], [[9, 2]], 7, False),  # after stock's program ended: nothing to judge by
])
def test_a_stale_read_is_worse_only_where_stock_caught_the_overwrite(
        stock_detected: list, other_stale: list, stock_step: int | None, worse: bool) -> None:
    stock = {"status": "ok" if stock_step is None else "error", "step": stock_step, "detected": stock_detected,
             "stale": [], "error_kind": "E"}
    other = {**stock, "stale": other_stale, "detected": []}
    assert is_worse(stock, other) is worse


def test_inputs_have_the_layout_their_mode_names() -> None:
    shape = (4, 6)
    assert execute.make_tensor(shape, "misaligned", 1, "cpu").storage_offset() == 1
    assert execute.make_tensor(shape, "transposed", 1, "cpu").stride() == (1, 4)
    assert execute.make_tensor(shape, "rows", 1, "cpu").stride() == (12, 1)
    assert execute.make_tensor((2, 3, 4, 4), "transposed", 1, "cpu").is_contiguous(memory_format=torch.channels_last)
    for mode in ("fresh", "misaligned", "transposed", "rows"):  # the same values in every layout
        torch.testing.assert_close(execute.make_tensor(shape, mode, 7, "cpu"),
                                   execute.make_tensor(shape, "fresh", 7, "cpu"))
    x, y = execute.make_overlapping(shape, 1, 3, "cpu")
    assert x.untyped_storage().data_ptr() == y.untyped_storage().data_ptr() and torch.equal(x[1:], y[:-1])
    same = execute.make_overlapping(shape, 0, 3, "cpu")
    assert same[0] is same[1]


# Judging and reports, on hand-made records.

def _r(config: str, status: str, seed: int = 1, kind: str = "", step: int | None = None,
       calls: int = 4) -> dict[str, Any]:
    return {"seed": seed, "configuration": config, "status": status, "error_kind": kind, "step": step,
            "calls": calls, "detail": f"{status} detail", "kind": None}


OVERWRITE = "RuntimeError: Error: accessing tensor output of CUDAGraphs that has been overwritten"


@pytest.mark.parametrize("stock, other, worse", [
    (_r("stock", "ok"), _r("all", "ok"), False),
    (_r("stock", "ok"), _r("all", "mismatch", step=2), True),
    (_r("stock", "ok"), _r("all", "error", kind="RuntimeError: x", step=2), True),
    (_r("stock", "ok"), _r("all", "crash"), True),
    (_r("stock", "ok"), _r("all", "timeout"), True),
    (_r("stock", "error", kind=OVERWRITE, step=3), _r("all", "error", kind=OVERWRITE, step=3), False),
    (_r("stock", "error", kind=OVERWRITE, step=3), _r("all", "error", kind=OVERWRITE, step=5), False),
    (_r("stock", "error", kind=OVERWRITE, step=3), _r("all", "error", kind=OVERWRITE, step=1), True),
    (_r("stock", "error", kind=OVERWRITE, step=3), _r("all", "error", kind="AssertionError: ", step=3), True),
    (_r("stock", "error", kind=OVERWRITE, step=3), _r("all", "error", kind="AssertionError: ", step=1), True),
    # ran the step stock failed, then failed later: no stock run to judge the later step by
    (_r("stock", "error", kind="AssertionError: ", step=2), _r("all", "error", kind="AcceleratorError: x", step=3), False),
    (_r("stock", "error", kind=OVERWRITE, step=3), _r("all", "ok"), False),
    (_r("stock", "error", kind=OVERWRITE, step=3), _r("all", "mismatch", step=3), True),
    (_r("stock", "error", kind=OVERWRITE, step=3), _r("all", "crash"), True),
    (_r("stock", "mismatch", step=2), _r("all", "mismatch", step=2), False),
    (_r("stock", "mismatch", step=2), _r("all", "error", kind="x", step=2), False),
    (_r("stock", "mismatch", step=2), _r("all", "crash"), True),
    (_r("stock", "crash"), _r("all", "mismatch"), False),
    (_r("stock", "timeout"), _r("all", "crash"), False),
])
def test_worse_than_stock(stock: dict, other: dict, worse: bool) -> None:
    assert is_worse(stock, other) is worse


def _records() -> list[dict[str, Any]]:
    return [
        _r("stock", "ok", seed=1), _r("all", "mismatch", seed=1, step=2), _r("cgct", "ok", seed=1),
        _r("stock", "error", seed=2, kind=OVERWRITE, step=3), _r("all", "error", seed=2, kind=OVERWRITE, step=3),
        _r("cgct", "crash", seed=2, calls=0),
        _r("stock", "ok", seed=3), _r("all", "ok", seed=3), _r("cgct", "timeout", seed=3, calls=0),
    ]


def test_summary_counts_and_columns(tmp_path: Path) -> None:
    settings = Settings(configs=["stock", "cgct", "all"], out=tmp_path, max_steps=5, kinds=["pointwise"])
    rows = write_reports(tmp_path, _records(), settings)
    with (tmp_path / "summary.csv").open() as f:
        reader = csv.DictReader(f)
        assert tuple(reader.fieldnames) == SUMMARY_COLUMNS == (
            "configuration", "programs", "calls", "ok", "mismatch", "error", "crash", "timeout", "stale_reads",
            "amplified", "worse_than_stock", "failed_past_stock")
        table = {row["configuration"]: row for row in reader}
    assert [r["configuration"] for r in rows] == ["stock", "cgct", "all"]
    assert table["stock"] == {"configuration": "stock", "programs": "3", "calls": "12", "ok": "2", "mismatch": "0",
                              "error": "1", "crash": "0", "timeout": "0", "stale_reads": "0", "amplified": "0",
                              "worse_than_stock": "", "failed_past_stock": ""}
    assert (table["cgct"]["crash"], table["cgct"]["timeout"], table["cgct"]["worse_than_stock"]) == ("1", "1", "2")
    assert (table["all"]["mismatch"], table["all"]["worse_than_stock"]) == ("1", "1")
    worse = {(r["seed"], r["configuration"]) for r in worse_than_stock(_records())}
    assert worse == {(1, "all"), (2, "cgct"), (3, "cgct")}


def test_a_failure_past_stocks_is_not_worse_but_counted_and_listed(tmp_path: Path) -> None:
    settings = Settings(configs=["stock", "all"], out=tmp_path, max_steps=5, kinds=["pointwise"])
    records = [_r("stock", "error", seed=4, kind="AssertionError: ", step=2),
               _r("all", "error", seed=4, kind="AcceleratorError: x", step=3)]
    rows = {r["configuration"]: r for r in write_reports(tmp_path, records, settings)}
    assert rows["all"]["worse_than_stock"] == 0 and rows["all"]["failed_past_stock"] == 1
    text = (tmp_path / "worse_than_stock.md").read_text()
    past = text.split("# Failed after stock's own failure", 1)[1].split("# Stock's own failures", 1)[0]
    assert "seed 4, all: error detail (stock: error detail)" in past and replay_command(4, "all", settings) in past


def test_a_wrong_value_past_stocks_error_is_listed_apart_and_one_before_it_is_worse(tmp_path: Path) -> None:
    settings = Settings(configs=["stock", "cgct", "all"], out=tmp_path, max_steps=5, kinds=["pointwise"])
    records = [_r("stock", "error", seed=4, kind="RuntimeError: overwritten", step=3),
               _r("cgct", "mismatch", seed=4, step=4), _r("all", "mismatch", seed=4, step=2)]
    rows = {r["configuration"]: r for r in write_reports(tmp_path, records, settings)}
    assert (rows["cgct"]["worse_than_stock"], rows["cgct"]["failed_past_stock"]) == (0, 1)
    assert (rows["all"]["worse_than_stock"], rows["all"]["failed_past_stock"]) == (1, 0)


def test_worse_md_lists_replay_commands_and_stock_failures(tmp_path: Path) -> None:
    settings = Settings(configs=["stock", "cgct", "all"], out=tmp_path, max_steps=5, kinds=["pointwise"])
    write_reports(tmp_path, _records(), settings)
    text = (tmp_path / "worse_than_stock.md").read_text()
    assert "## seed 1, all: mismatch (stock: ok)" in text
    assert replay_command(1, "all", settings) in text
    assert "GRACE_PI=1" in replay_command(1, "all", settings)
    assert "run-one --seed 1 --device cuda --max-steps 5 --kinds pointwise" in replay_command(1, "all", settings)
    stock_part = text.split("# Stock's own failures", 1)[1]
    assert "seed 2: error" in stock_part and "GRACE_DISABLE=1" in stock_part


def _stale_case(seed: int, again_detected: list) -> list[dict[str, Any]]:
    """A program where stock caught the overwrite of step 0's held output at step 4, the second
    stock run caught ``again_detected``, and cgct read step 0's output stale at step 4."""
    return [{**_r("stock", "ok", seed=seed), "detected": [[4, 0]], "stale": []},
            {**_r("stock-again", "ok", seed=seed), "detected": again_detected,
             "stale": [] if again_detected else [[4, 0]]},
            {**_r("cgct", "ok", seed=seed), "detected": [], "stale": [[4, 0]]}]


def test_a_configuration_is_worse_only_than_both_stock_runs(tmp_path: Path) -> None:
    records = _stale_case(1, again_detected=[[4, 0]]) + _stale_case(2, again_detected=[])
    worse = {(r["seed"], r["configuration"]) for r in worse_than_stock(records)}
    # seed 1: both stock runs caught it; seed 2: the second read it stale too, as cgct did, and is
    # itself worse than the first (the noise floor, judged against the first stock run alone)
    assert worse == {(1, "cgct"), (2, "stock-again")}
    settings = Settings(configs=["stock", "cgct", "stock-again"], out=tmp_path, max_steps=5)
    rows = {r["configuration"]: r for r in write_reports(tmp_path, records, settings)}
    assert (rows["cgct"]["worse_than_stock"], rows["stock-again"]["worse_than_stock"]) == (1, 1)
    text = (tmp_path / "worse_than_stock.md").read_text()
    assert "## seed 1, cgct: ok (stock: ok, ok)" in text and "- stock-again: ok detail; stale reads none" in text


def test_stock_runs_again_by_default_with_stocks_environment() -> None:
    from grace.difftest.__main__ import parse_args
    from grace.difftest.runner import CONFIGURATIONS as DIFF_CONFIGURATIONS, STOCK_AGAIN

    from grace.report.upstream import RUN_BY_DEFAULT

    assert parse_args(["run", "--out", "x"]).configs.split(",") == [*RUN_BY_DEFAULT, STOCK_AGAIN]
    assert DIFF_CONFIGURATIONS[STOCK_AGAIN] == CONFIGURATIONS["stock"]
    assert "GRACE_DISABLE=1" in replay_command(3, STOCK_AGAIN, Settings(configs=[STOCK_AGAIN], out=Path("x")))


def test_summary_without_stock_judges_nothing() -> None:
    rows = summarize([r for r in _records() if r["configuration"] != "stock"], ["cgct", "all"])
    assert all(row["worse_than_stock"] == "" for row in rows)


def test_child_output_is_read_and_crashes_are_recognised() -> None:
    line = json.dumps({"seed": 4, "status": "ok", "calls": 3, "step": None, "detail": ""})
    assert parse_child(f"noise\n{line}\n", 0, 4)["status"] == "ok"
    assert parse_child(f"{line}\nwarning\n", 0, 4)["calls"] == 3
    crashed = parse_child("Fatal Python error: Aborted\n", -6, 4)
    assert crashed["status"] == "crash" and "SIGABRT" in crashed["detail"]
    assert parse_child("", 1, 4)["status"] == "crash"
    late = parse_child(line, -11, 4)
    assert late["status"] == "crash" and "after reporting ok" in late["detail"]
    error = json.dumps({"seed": 4, "status": "error", "calls": 2, "step": 1, "detail": "CUDA error"})
    assert parse_child(error, -6, 4)["status"] == "error"  # a broken context aborting at exit
    assert parse_child(line.replace('"seed": 4', '"seed": 5'), 0, 4)["status"] == "crash"


# The real subprocess path.

def _run_cli(tmp_path: Path, *args: str, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "grace.difftest", "run", "--device", "cpu", "--out", str(tmp_path),
                           "--jobs", "2", "--timeout", "240", *args],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout)


def _check_run(tmp_path: Path, proc: subprocess.CompletedProcess, configs: list[str], seeds: int) -> None:
    assert proc.returncode == 0, proc.stdout + proc.stderr
    records = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert sorted((r["seed"], r["configuration"]) for r in records) == sorted(
        (s, c) for s in range(seeds) for c in configs)
    assert all(r["status"] == "ok" for r in records), records
    assert all(r["env"] == CONFIGURATIONS[r["configuration"]] for r in records)
    with (tmp_path / "summary.csv").open() as f:
        table = {row["configuration"]: row for row in csv.DictReader(f)}
    assert list(table) == configs
    assert all(int(table[c]["programs"]) == seeds and int(table[c]["calls"]) > 0 for c in configs)
    assert "seed 0 started" in proc.stdout and "configuration" in proc.stdout
    assert not (tmp_path / "scratch").exists()


def test_run_through_subprocesses_with_dynamo_only(tmp_path: Path) -> None:
    configs = ["stock", "all"]
    proc = _run_cli(tmp_path, "--configs", ",".join(configs), "--seconds", "60", "--programs", "2",
                    "--max-steps", "3", "--kinds", "pointwise,scale,alias", "--backend", "eager", timeout=180)
    _check_run(tmp_path, proc, configs, 2)


@pytest.mark.slow
def test_run_through_subprocesses_with_inductor(tmp_path: Path) -> None:
    proc = _run_cli(tmp_path, "--configs", "stock", "--seconds", "60", "--programs", "2", "--max-steps", "3",
                    "--kinds", "pointwise", timeout=300)
    _check_run(tmp_path, proc, ["stock"], 2)


# The probes of ``run-one --probe``.

def test_parse_probes_names_all_and_refuses_unknown() -> None:
    from grace.difftest.probe import parse_probes

    assert parse_probes("all") == ["gc", "liveness", "paths", "history", "trace", "checkpoint", "outputs", "guard"], \
        "all is every observing probe, no experiment"
    assert parse_probes("gc-off, liveness") == ["gc-off", "liveness"]
    with pytest.raises(ValueError, match="unknown probe"):
        parse_probes("gc,leaks")


def test_probes_install_on_the_tree_and_remove_puts_it_back() -> None:
    import io

    from torch._inductor import config
    from torch._inductor import cudagraph_trees as ct

    from grace.difftest.probe import Probes

    before = {a: ct.CUDAGraphNode.__dict__[a] for a in ("_record", "check_invariants", "__init__")}
    warm_run = ct.CUDAWarmupNode.__dict__["run"]
    dealloc = ct.CUDAGraphTreeManager.__dict__["dealloc_current_path_weakrefs"]
    manager_run = ct.CUDAGraphTreeManager.__dict__["run"]
    history = config.triton.cudagraph_trees_history_recording
    probes = Probes(["gc", "liveness", "paths", "history", "trace", "gc-off"], out=io.StringIO()).install()
    try:
        assert all(ct.CUDAGraphNode.__dict__[a] is not f for a, f in before.items())
        assert ct.CUDAWarmupNode.__dict__["run"] is not warm_run
        assert ct.CUDAGraphTreeManager.__dict__["run"] is not manager_run
        assert config.triton.cudagraph_trees_history_recording is True
        assert probes._on_gc in __import__("gc").callbacks
    finally:
        probes.remove()
    assert {a: ct.CUDAGraphNode.__dict__[a] for a in before} == before
    assert ct.CUDAWarmupNode.__dict__["run"] is warm_run
    assert ct.CUDAGraphTreeManager.__dict__["dealloc_current_path_weakrefs"] is dealloc
    assert ct.CUDAGraphTreeManager.__dict__["run"] is manager_run
    assert config.triton.cudagraph_trees_history_recording == history
    assert probes._on_gc not in __import__("gc").callbacks


def test_the_guard_probe_reports_each_route_that_ends_a_path_and_puts_the_tree_back() -> None:
    """``--probe guard`` wraps the three ways the tree ends a path or restores the allocator
    under it, and each line names the path, the generation and the guard's counts, reading the
    cached outputs without changing them."""
    import io

    from torch._inductor import cudagraph_trees as ct

    from grace.difftest.probe import Probes, describe_guard
    from grace.stale_outputs import StaleOutputGuard
    from tree_fakes import FakeNode

    routes = ("clear_current_path_state_and_set_to_none", "try_end_curr_warmup",
              "apply_checkpoint_execution_state_in_allocator")
    before = {a: ct.CUDAGraphTreeManager.__dict__[a] for a in routes}
    probes = Probes(["guard"], out=io.StringIO()).install()
    try:
        assert all(ct.CUDAGraphTreeManager.__dict__[a] is not f for a, f in before.items())
    finally:
        probes.remove()
    assert {a: ct.CUDAGraphTreeManager.__dict__[a] for a in routes} == before

    class Manager:
        current_gen = 3
        grace_stale_outputs = StaleOutputGuard(ct.CUDAGraphTreeManager.format_dealloc_msg)

    class Id:
        id = 7

    node = FakeNode(2)
    node.id = Id()
    held = node.cached_tensor_outputs[0]
    manager = Manager()
    manager.current_node = node
    line = describe_guard(manager)
    assert line.startswith("path graph 7 (0x") and line.endswith("; generation 3; guard noted 0, pending 0")
    assert node.cached_tensor_outputs[0] is held
    manager.current_node = None
    assert describe_guard(manager) == "no path; generation 3; guard noted 0, pending 0"
    for t in node.cached_tensor_outputs:
        torch._C._remove_cached_tensor(t)


def test_with_probes_each_step_is_announced_before_it_runs() -> None:
    import io

    from grace.difftest.probe import Probes

    out = io.StringIO()
    probes = Probes([], out=out)
    program = _pointwise_program(steps=3)
    announced: list[int] = []

    def marker(index: int, step: Any) -> None:
        announced.append(index)
        probes.step_marker(index, step)

    result = execute.run_program(program, "cpu", backend="eager", on_step=marker)
    assert result["status"] == "ok" and announced == [0, 1, 2]
    lines = out.getvalue().splitlines()
    assert lines == [f"[probe] step {i}: {program.steps[i].describe()}" for i in range(3)]


def test_the_gc_off_experiment_builds_a_node_with_the_collector_off() -> None:
    import gc

    from grace.difftest.probe import Probes

    seen = []
    wrapped = Probes._without_gc(lambda node, *a: seen.append(gc.isenabled()))
    wrapped(object())
    assert seen == [False] and gc.isenabled()


def test_the_gc_probe_reports_collections_only_while_a_node_records() -> None:
    import io

    from grace.difftest.probe import Probes

    out = io.StringIO()
    probes = Probes(["gc"], out=out)
    probes._on_gc("stop", {"generation": 0, "collected": 5})
    assert out.getvalue() == ""
    probes.recording = "graph 3"
    probes._on_gc("start", {"generation": 0})
    probes._on_gc("stop", {"generation": 0, "collected": 5})
    assert "collected 5 object(s) while graph 3 recorded" in out.getvalue()
    assert probes.collections_in_recording == 1


def test_the_trace_probe_says_what_a_call_ran_and_where_the_tree_stands() -> None:
    import enum
    from types import SimpleNamespace

    from grace.difftest.probe import describe_call

    state = enum.Enum("ExecutionState", "NONE WARMUP RECORDING EXECUTION")
    root = SimpleNamespace(id=SimpleNamespace(id=0))
    child = SimpleNamespace(id=SimpleNamespace(id=3))
    root._path_from_root, child._path_from_root = [root], [root, child]
    manager = SimpleNamespace(current_node=child, current_gen=7, path_state=state.EXECUTION)
    line = describe_call(manager, SimpleNamespace(id=2), False, [torch.zeros(2)])
    assert line.startswith("call function 2: SimpleNamespace 3, path [0, 3], generation 7, EXECUTION; outputs at ['0x")
    idle = SimpleNamespace(current_node=None, current_gen=-1, path_state=state.NONE)
    assert describe_call(idle, SimpleNamespace(id=5), True, None) == (
        "call function 5 (kept out by SCG): no node, generation -1, NONE; outputs at [], objects []")


def test_describe_referrers_walks_up_through_containers() -> None:
    from grace.difftest.probe import describe_referrers

    target = object()
    holder = {"held": [target]}
    lines = describe_referrers(target, depth=2)
    assert lines[0] == "  list(len 1)", "the list holding it, one level up"
    assert "    dict(1 keys: held)" in lines, "the dict holding that list, two levels up"
    assert not any(line.startswith("      ") for line in lines), "no deeper than asked"
    del holder


def test_a_resumed_run_keeps_its_results_and_adds_new_seeds(tmp_path: Path) -> None:
    configs = ["stock", "all"]
    common = ("--configs", ",".join(configs), "--seconds", "60", "--programs", "1", "--max-steps", "3",
              "--kinds", "pointwise,scale,alias", "--backend", "eager")
    first = _run_cli(tmp_path, *common, timeout=180)
    assert first.returncode == 0, first.stdout + first.stderr
    second = _run_cli(tmp_path, *common, "--resume", timeout=180)
    assert second.returncode == 0, second.stdout + second.stderr
    records = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert sorted((r["seed"], r["configuration"]) for r in records) == [
        (0, "all"), (0, "stock"), (1, "all"), (1, "stock")], "the earlier seed kept, the next one added"
    assert "seed 1 started" in second.stdout and "seed 0 started" not in second.stdout
    assert "resumed: 2 earlier results kept" in second.stdout
    with (tmp_path / "summary.csv").open() as f:
        assert all(int(row["programs"]) == 2 for row in csv.DictReader(f))
    other = _run_cli(tmp_path, "--configs", "stock", "--programs", "1", "--max-steps", "3", "--resume",
                     "--backend", "eager", timeout=60)
    assert other.returncode == 2 and "was run with other configs" in other.stderr


def test_children_take_the_visible_gpus_in_turn(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a machine of several GPUs each child runs on one of them, in turn; with one GPU, or
    on the CPU, a child's environment names none."""
    from grace.difftest import runner

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,5")
    assert runner.visible_gpus("cuda") == ["2", "5"] and runner.visible_gpus("cpu") == []
    started: list[str | None] = []

    class FakeProcess:
        def __init__(self, cmd: list[str], env: dict[str, str], **kwargs: Any) -> None:
            started.append(env.get("CUDA_VISIBLE_DEVICES"))

    monkeypatch.setattr(runner.subprocess, "Popen", FakeProcess)
    campaign = runner.Campaign(runner.Settings(configs=["stock", "all"], out=tmp_path / "two", jobs=3))
    for config in ("stock", "all", "stock"):
        campaign.start(7, config)
    assert started == ["2", "5", "2"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4")
    started.clear()
    runner.Campaign(runner.Settings(configs=["stock"], out=tmp_path / "one")).start(7, "stock")
    assert started == ["4"], "one GPU: the caller's choice, unchanged"


def test_an_output_judged_stale_dies_when_dropped_not_at_the_next_collection() -> None:
    """The tree learns which outputs died from reference counts: a held output that the recheck
    drops must die then, not whenever the cyclic collector next runs."""
    import gc
    import weakref

    from grace.difftest.execute import Mismatch, compare

    held = [torch.zeros(4)]
    alive = weakref.ref(held[0])
    gc.disable()
    try:
        raised = False
        try:  # as the recheck catches it (pytest.raises would keep the traceback)
            compare("held output 0", held[0], torch.ones(4), 1e-3)
        except Mismatch:
            raised = True
        assert raised
        held.clear()
        assert alive() is None, "the compared tensor outlived its last reference"
    finally:
        gc.enable()


def test_each_configuration_compiles_into_its_own_caches(tmp_path: Path) -> None:
    """Inductor's and Triton's cache keys do not hold GraCE's switches, and autotuning's choices
    live there: two configurations must never share them, while one configuration's programs do."""
    from grace.difftest.runner import child_env

    def caches(config: str, seed: int) -> tuple[str, str]:
        env = child_env(config, tmp_path / f"{config}-{seed}", None, tmp_path / "compile" / config)
        return env["TORCHINDUCTOR_CACHE_DIR"], env["TRITON_CACHE_DIR"]

    assert caches("stock", 1) == caches("stock", 2)
    assert not set(caches("stock", 1)) & set(caches("all", 1))
    assert not set(caches("stock", 1)) & set(caches("stock-again", 1))


def test_a_child_gets_absolute_cache_paths_from_a_relative_run_folder(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Inductor compiles C++ in a build folder of its own: a relative cache path names no file."""
    from grace.difftest.runner import child_env

    monkeypatch.chdir(tmp_path)
    env = child_env("stock", Path("run") / "scratch" / "stock-1", None, Path("run") / "compile" / "stock")
    for name in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "GRACE_SCG_CACHE_DIR", "GRACE_SCG_REPORT"):
        assert Path(env[name]).is_absolute(), name
        assert Path(env[name]).is_relative_to(tmp_path / "run"), name


def test_backends_name_inductor_with_and_without_graphs() -> None:
    from grace.difftest.execute import INDUCTOR_WITHOUT_GRAPHS, compile_options

    assert compile_options("inductor") == ("inductor", "reduce-overhead")
    assert compile_options(INDUCTOR_WITHOUT_GRAPHS) == ("inductor", None)
    assert compile_options("eager") == ("eager", None)


def test_the_outputs_probe_tells_an_output_wrong_as_returned_from_one_written_after() -> None:
    """A mismatch is either computed wrong or written after the call returned (a block the
    allocator held free): the probe tells which, from a host copy made before eager ran."""
    import io

    from grace.difftest.probe import Probes

    written_after: list[torch.Tensor] = []

    def wrong(fn: Any) -> Any:
        return lambda x: fn(x) + 1  # wrong as returned

    def overwritten(fn: Any) -> Any:
        def compiled(x: Any) -> Any:
            out = fn(x)
            written_after.append(out)
            return out
        return compiled

    def eager_writes_it(case_eager: Any) -> Any:
        def eager(x: Any) -> Any:
            for t in written_after:
                t.fill_(7)  # what an eager kernel writing into a block it was handed does
            return case_eager(x)
        return eager

    out = io.StringIO()
    probes = Probes(["outputs"], out=out)
    result = _run_with(_pointwise_program(1), wrong, watch=probes.watch)
    assert result["status"] == "mismatch"
    assert "output 0 at 0x" in out.getvalue() and "unchanged since the call returned; as returned wrong" in out.getvalue()
    assert "in no segment of the caching allocator" in out.getvalue(), "a CPU tensor"

    out.truncate(0), out.seek(0)
    probes = Probes(["outputs"], out=out)
    run = execute.ProgramRun(_pointwise_program(1), "cpu", backend="eager", watch=probes.watch)
    run.compile_fn = overwritten
    case = run.case("pointwise")
    run.cases["pointwise"] = dataclasses.replace(case, eager=eager_writes_it(case.eager))
    assert run.run()["status"] == "mismatch"
    assert "changed since the call returned; as returned right" in out.getvalue()


def test_describe_output_tells_a_cached_output_from_its_views_and_other_tensors() -> None:
    import torch

    from grace.difftest.probe import describe_output

    cached, other = torch.ones(4, 4), torch.ones(4)
    torch._C._set_cached_tensors_enabled(True)  # as the tree does while it runs
    torch._C._add_cached_tensor(cached)
    try:
        assert describe_output(cached) == f"{cached.data_ptr():#x} cached"
        assert describe_output(cached[1:]).endswith("view of a cached output")
        assert describe_output(other[1:]).endswith(" view")
        assert describe_output(other) == f"{other.data_ptr():#x} uncached"
    finally:
        torch._C._remove_cached_tensor(cached)
        torch._C._set_cached_tensors_enabled(False)


def test_describe_block_names_the_allocator_block_under_an_address() -> None:
    from grace.difftest.probe import describe_block

    segments = [{"address": 0x1000, "total_size": 0x800, "segment_pool_id": (0, 3), "segment_type": "small",
                 "blocks": [{"size": 0x200, "state": "active_allocated"}, {"size": 0x600, "state": "inactive"}]}]
    assert describe_block(segments, 0x1300) == "pool (0, 3), segment 0x1000 (small), block 0x1200 1536 B inactive"
    assert describe_block(segments, 0x1000).endswith("block 0x1000 512 B active_allocated")
    assert describe_block(segments, 0x2000) == "in no segment of the caching allocator"


def _huge_rows(seed: int) -> torch.Tensor:
    """Rows of float32 values near 2e8, where one rounding step is 16: softmax of them is as
    far from continuous in its input as it gets."""
    g = torch.Generator().manual_seed(seed)
    return 2.0e8 + 16.0 * torch.randint(0, 2, (4, 15), generator=g).float()


def test_rounding_of_a_fed_back_input_that_softmax_amplifies_is_explained() -> None:
    eager_in = _huge_rows(0)
    fed = eager_in.clone()
    fed[1, 3] += 16.0  # one rounding step: within 1e-3 of the value that produced it
    out_c = list(execute.reduction(fed))
    assert execute.difference(out_c[1], execute.reduction(eager_in)[1], 1e-4) is not None, "a mismatch"
    again = execute.drift_reference(execute.reduction, [fed], [eager_in], out_c, 1e-4, 1e-3, "cpu")
    assert again is not None and torch.equal(again[1], out_c[1]), "the reference on the compiled side's input"


def test_a_wrong_output_or_a_wrong_input_is_not_explained_by_drift() -> None:
    eager_in = _huge_rows(1)
    fed = eager_in.clone()
    fed[1, 3] += 16.0
    wrong = list(execute.reduction(fed))
    wrong[1] = wrong[1].roll(1, dims=-1)  # the kernel's fault, on the input it was given
    assert execute.drift_reference(execute.reduction, [fed], [eager_in], wrong, 1e-4, 1e-3, "cpu") is None
    stale = torch.zeros_like(eager_in)  # an input overwritten before the call: not rounding
    assert execute.drift_reference(execute.reduction, [stale], [eager_in], list(execute.reduction(stale)),
                                   1e-4, 1e-3, "cpu") is None


def test_a_feedback_step_whose_mismatch_is_drift_goes_on_and_is_recorded() -> None:
    program = Program(seed=5, kinds=["pointwise", "reduction"], width=15, channels=2, spatial=3, hidden=4)
    program.steps = [programs.Step("pointwise", "fresh", 4, value_seed=0),
                     programs.Step("reduction", "feedback", 4, value_seed=1, ref=0, hold=True),
                     programs.Step("pointwise", "fresh", 4, value_seed=2, recheck=True)]

    def compile_fn(fn: Any) -> Any:
        if fn is execute.pointwise:  # huge values, one rounding step off eager's in one element
            def compiled(x: Any) -> Any:
                out = _huge_rows(2)
                out[2, 7] += 16.0
                return out
            return compiled
        return fn

    run = execute.ProgramRun(program, "cpu", backend="eager")
    run.compile_fn = compile_fn
    run.cases["pointwise"] = execute.Case(compile_fn(execute.pointwise), lambda x: _huge_rows(2))
    result = run.run()
    assert result["status"] == "ok" and result["amplified"] == [1], result
    assert result["stale"] == [], "its held output is rechecked against the reference on its own input"


def test_a_stale_read_no_stock_run_judges_is_listed_with_its_replay(tmp_path: Path) -> None:
    """A held output read stale after stock had stopped: not worse, but listed with where stock
    ended and the command that replays it; one stock judged as worse is not listed again."""
    settings = Settings(configs=["stock", "cgct", "all"], out=tmp_path, max_steps=5, kinds=["pointwise"])
    records = [{**_r("stock", "error", seed=5, kind="RuntimeError: overwritten", step=2), "stale": []},
               {**_r("cgct", "ok", seed=5), "stale": [[4, 3]]},
               {**_r("all", "ok", seed=5), "stale": []}]
    write_reports(tmp_path, records, settings)
    text = (tmp_path / "worse_than_stock.md").read_text()
    part = text.split("# Stale reads no stock run judges", 1)[1].split("# Stock's own failures", 1)[0]
    assert "seed 5, cgct: [[4, 3]] (stock ended at step 2)" in part
    assert replay_command(5, "cgct", settings) in part and "seed 5, all" not in part
    worse = _stale_case(6, again_detected=[[4, 0]])
    write_reports(tmp_path, worse, Settings(configs=["stock", "stock-again", "cgct"], out=tmp_path, max_steps=5,
                                             kinds=["pointwise"]))
    text = (tmp_path / "worse_than_stock.md").read_text()
    assert "## seed 6, cgct" in text
    assert text.split("# Stale reads no stock run judges", 1)[1].split("# Stock's own failures", 1)[0].count("seed 6") == 0


def test_gc_threshold_sets_when_the_cyclic_collector_runs() -> None:
    """``run-one --gc-threshold``: a program's path through the tree can depend on when the
    collector frees a held output, so a diagnosis can fix when it runs."""
    import gc

    from grace.difftest.__main__ import parse_args, set_collector

    assert parse_args(["run-one", "--seed", "1", "--gc-threshold", "0"]).gc_threshold == 0
    assert parse_args(["run-one", "--seed", "1"]).gc_threshold is None
    before, enabled = gc.get_threshold(), gc.isenabled()
    try:
        set_collector(None)
        assert (gc.get_threshold(), gc.isenabled()) == (before, enabled)
        set_collector(0)
        assert not gc.isenabled()
        set_collector(50)
        assert gc.isenabled() and gc.get_threshold()[0] == 50
        with pytest.raises(SystemExit, match="expected 0"):
            set_collector(-1)
    finally:
        gc.set_threshold(*before)
        (gc.enable if enabled else gc.disable)()


def test_a_fed_back_input_a_mutating_kind_amplifies_is_explained_on_its_inputs_before_the_call() -> None:
    """mutate_input fed a grown value one rounding step off eager's: the sine of the updated
    input differs past the tolerance, explained on both sides' inputs as they were before the
    call (the call updates them in place)."""
    program = Program(seed=6, kinds=["pointwise", "mutate_input"], width=15, channels=2, spatial=3, hidden=4)
    program.steps = [programs.Step("pointwise", "fresh", 4, value_seed=0),
                     programs.Step("mutate_input", "feedback", 4, value_seed=1, ref=0, hold=True),
                     programs.Step("pointwise", "fresh", 4, value_seed=2, recheck=True)]
    grown = torch.full((4, 15), 131072.0)  # a step of float32 is 1/64 here

    def compile_fn(fn: Any) -> Any:
        if fn is execute.pointwise:
            def compiled(x: Any) -> Any:
                out = grown.clone()
                out[2, 7] += 1 / 64
                return out
            return compiled
        return fn

    run = execute.ProgramRun(program, "cpu", backend="eager")
    run.compile_fn = compile_fn
    run.cases["pointwise"] = execute.Case(compile_fn(execute.pointwise), lambda x: grown.clone())
    result = run.run()
    assert result["status"] == "ok" and result["amplified"] == [1], result


def test_a_crash_or_a_hang_is_placed_at_the_step_the_child_had_begun(tmp_path: Path) -> None:
    """The child's step file names where a crash left no result line (and where a child was
    killed at its timeout); a crash after an ok line is the teardown's, at no step."""
    from grace.difftest.runner import timeout_result
    from grace.difftest.step_file import StepWriter, read_step

    path = tmp_path / "step"
    assert read_step(path) is None
    write = StepWriter(path)
    write(123, programs.Step("train_keep", "fresh", 2, value_seed=0))
    write(5, programs.Step("alias", "fresh", 2, value_seed=0))
    assert read_step(path) == (5, "alias"), "a shorter line overwrites a longer one"
    crashed = parse_child("Fatal Python error: Segmentation fault\n", -11, 4, read_step(path))
    assert (crashed["status"], crashed["step"], crashed["kind"]) == ("crash", 5, "alias")
    assert crashed["detail"].startswith("step 5 (alias): ") and "SIGSEGV" in crashed["detail"]
    late = parse_child(json.dumps({"seed": 4, "status": "ok", "calls": 3, "step": None, "detail": ""}), -11, 4,
                       read_step(path))
    assert late["step"] is None and "after reporting ok" in late["detail"]
    hung = timeout_result(4, 300, read_step(path))
    assert (hung["step"], hung["kind"]) == (5, "alias") and hung["detail"].startswith("step 5 (alias): ")


def test_a_child_writes_each_step_it_begins(tmp_path: Path) -> None:
    """The real child, as the parent starts it: its step file holds its last step."""
    from grace.difftest import step_file

    path = tmp_path / "step"
    env = {**os.environ, step_file.ENV: str(path), "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.run([sys.executable, "-m", "grace.difftest", "run-one", "--seed", "0", "--device", "cpu",
                           "--backend", "eager", "--max-steps", "3", "--kinds", "pointwise"],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert step_file.read_step(path) == (2, "pointwise")


def test_a_run_with_probes_gives_them_to_every_child_and_keeps_the_log_of_a_stale_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stale read comes only under a run's load: the children of a run with ``probe`` carry
    it, the replay command does not, and the log of a run that read stale is kept."""
    from grace.difftest import runner

    commands: list[list[str]] = []

    class FakeProcess:
        def __init__(self, cmd: list[str], **kwargs: Any) -> None:
            commands.append(cmd)

    monkeypatch.setattr(runner.subprocess, "Popen", FakeProcess)
    settings = runner.Settings(configs=["all-lean-copy"], out=tmp_path, probe="trace,guard")
    campaign = runner.Campaign(settings)
    for seed in (7, 8, 9):
        campaign.start(seed, "all-lean-copy")
    assert all(cmd[-2:] == ["--probe", "trace,guard"] for cmd in commands)
    assert "--probe" not in runner.replay_command(7, "all-lean-copy", settings)
    stale, clean, failed = list(campaign.running)
    campaign.finish(stale, {"seed": 7, "status": "ok", "stale": [[422, 412]]})
    campaign.finish(clean, {"seed": 8, "status": "ok", "stale": []})
    campaign.finish(failed, {"seed": 9, "status": "mismatch", "detail": "step 3"})
    logs = tmp_path / "logs" / "all-lean-copy"
    assert sorted(p.name for p in logs.iterdir()) == ["seed-7.log", "seed-9.log"]
    assert runner.read_settings(tmp_path / "settings.json").probe == "trace,guard"


def test_a_run_refuses_an_unknown_probe_before_starting_a_child(tmp_path: Path) -> None:
    proc = _run_cli(tmp_path, "--configs", "stock", "--programs", "1", "--probe", "trace,nonsense", timeout=60)
    assert proc.returncode == 2 and "unknown probe(s) nonsense" in proc.stderr
    assert not (tmp_path / "results.jsonl").exists()


def test_each_step_marker_is_called_in_order() -> None:
    from grace.difftest.__main__ import each_of

    seen: list[tuple[str, int]] = []
    assert each_of([]) is None
    one = lambda i, step: seen.append(("one", i))  # noqa: E731
    assert each_of([one]) is one
    both = each_of([one, lambda i, step: seen.append(("two", i))])
    assert both is not None
    both(3, None)
    assert seen == [("one", 3), ("two", 3)]


def _probed_log(held_address: str, handed_again: bool = False) -> list[str]:
    """A child's log as ``--probe trace,guard`` writes it: step 3's output held, the path ended
    at step 4 with its address among the guard's counts, step 5's call handing back memory at its
    address (or, ``handed_again``, the held tensor itself), and the child's result line recording
    the stale read at step 6."""
    other, held_id = "0x7f0000002000", "140000000000001"
    again = held_id if handed_again else "140000000000005"
    return [
        "program seed 9: ...\n",
        "[probe] step 3: matmul     fresh      batch=8 hold\n",
        f"[probe] call function 1: CUDAGraphNode 0, path [0], generation 2, EXECUTION; outputs at ['{held_address}'], "
        f"objects [{held_id}]\n",
        f"[probe] step 3 holds outputs at ['{held_address}'], objects [{held_id}]\n",
        "[probe] step 4: scale      fresh      batch=8 mark_step\n",
        f"[probe] a replayed path ends: before, path graph 0 ({held_address} py 1 uses 1 obj {held_id}); generation 2; "
        "guard noted 0, pending 0\n",
        "[probe] a replayed path ends: after, no path; generation 3; guard noted 0, pending 0\n",
        f"[probe] call function 2: CUDAGraphNode 1, path [1], generation 3, EXECUTION; outputs at ['{other}'], "
        "objects [140000000000003]\n",
        "[probe] step 5: matmul     reuse      batch=8 ref=1\n",
        f"[probe] call function 1: CUDAGraphNode 0, path [1, 0], generation 3, EXECUTION; outputs at ['{held_address}'], "
        f"objects [{again}]\n",
        "[probe] step 6: train_keep fresh      batch=8 recheck\n",
        "[probe] step 7: pointwise  fresh      batch=8\n",
        json.dumps({"status": "ok", "stale": [[6, 3]]}) + "\n",
    ]


def test_a_stale_read_is_explained_from_the_probes_lines(tmp_path: Path) -> None:
    from grace.difftest import stale_trace

    held = "0x7f0000001000"
    log = tmp_path / "seed-9.log"
    log.write_text("".join(_probed_log(held)))
    lines = stale_trace.probe_lines(log.read_text().splitlines(keepends=True))
    read = stale_trace.explain(lines, 3, 6)
    assert read.addresses == [held] and read.objects == ["140000000000001"]
    assert read.path_ends == [f"step 4: a replayed path ends: before, path graph 0 ({held} py 1 uses 1 obj "
                              "140000000000001); generation 2; guard noted 0, pending 0"]
    assert len(read.writers) == 1 and read.writers[0].startswith("step 5: call function 1: CUDAGraphNode 0, path [1, 0]")
    assert read.handed_again == []
    assert read.window[0].startswith("step 3:") and read.window[-1].startswith("step 6:"), "held step to the read"
    report = stale_trace.explain_log(str(log))
    assert report.startswith("held output of step 3, read stale at step 6"), "the pair from the result line"
    assert f"* call function 1: CUDAGraphNode 0, path [1, 0], generation 3, EXECUTION; outputs at ['{held}']" in report
    again = stale_trace.explain(stale_trace.probe_lines(_probed_log(held, handed_again=True)), 3, 6)
    assert again.writers == [] and len(again.handed_again) == 1, "the held tensor itself, handed out again"
    assert "no probe lines" in stale_trace.explain(lines, 8, 9).report()
    with pytest.raises(ValueError):
        stale_trace.explain(lines, 6, 3)
    log.write_text("[probe] step 0: pointwise\n" + json.dumps({"status": "ok", "stale": []}) + "\n")
    assert "records no stale read" in stale_trace.explain_log(str(log))


def test_the_trace_probes_call_line_gives_the_outputs_explain_reads() -> None:
    import enum
    from types import SimpleNamespace

    from grace.difftest import stale_trace
    from grace.difftest.probe import describe_call

    state = enum.Enum("ExecutionState", "NONE EXECUTION")
    node = SimpleNamespace(id=SimpleNamespace(id=0))
    node._path_from_root = [node]
    manager = SimpleNamespace(current_node=node, current_gen=1, path_state=state.EXECUTION)
    out = torch.zeros(2)
    lines = ["step 0: matmul", describe_call(manager, SimpleNamespace(id=1), False, [out]), "step 1: scale"]
    read = stale_trace.explain(lines, 0, 1)
    assert read.addresses == [hex(out.data_ptr())] and read.objects == [str(id(out))]


def test_with_probes_the_outputs_a_step_holds_are_announced_with_their_ids() -> None:
    import io

    from grace.difftest.probe import Probes

    out = io.StringIO()
    probes = Probes([], out=out)
    program = _pointwise_program(steps=4)
    program.steps[1] = dataclasses.replace(program.steps[1], hold=True)
    held: list[tuple[int, list[int]]] = []

    def on_hold(index: int, outputs: list[Any]) -> None:
        held.append((index, [id(t) for t in outputs]))
        probes.hold_marker(index, outputs)

    result = execute.run_program(program, "cpu", backend="eager", on_hold=on_hold)
    assert result["status"] == "ok" and [i for i, _ in held] == [1]
    assert out.getvalue().startswith("[probe] step 1 holds outputs at ['0x")
    assert out.getvalue().rstrip().endswith(f"objects {held[0][1]}")


def test_explain_stale_on_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from grace.difftest.__main__ import main

    log = tmp_path / "seed-9.log"
    log.write_text("".join(_probed_log("0x7f0000001000")))
    assert main(["explain-stale", str(log)]) == 0
    assert "read stale at step 6" in capsys.readouterr().out
    assert main(["explain-stale", str(log), "--held", "3"]) == 2
    assert "name both the held step" in capsys.readouterr().err

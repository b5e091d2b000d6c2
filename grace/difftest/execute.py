"""Run one program in this process: every compiled call against eager, on the same device.

Each kind's function is compiled once per program; its eager reference is the same function
uncompiled, with its own copy of any module state (deep-copied before the first call) and its
own inputs (the same values and layout in separate storage), so that a mutation on one side
cannot reach the other. The compiled side builds its inputs and runs first, so that a freed and
reallocated input really lands where the freed one was.

A step's result is the first of: ``error`` (an exception, from the compiled side or from eager),
``mismatch`` (an output, a buffer or a gradient not close to eager's), else the next step runs.
Reading a held output that a later replay overwrote raises by design under CUDA graph trees; at
a re-check that is recorded as *expected* and the output dropped, never counted as a failure. A
held output that reads fine must still hold eager's values. The same error from a call whose
input is fed back (``x = f(x)`` with another call in between) is expected too: that step is
skipped on both sides, and a fed-back step that follows takes a fresh input instead.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import re
import sys
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

import numpy as np
import torch
from torch import nn

from grace.difftest.programs import ACCUMULATED_CALLS, KINDS, MADE_BY_HARNESS, Program, Step, weight_seed

OVERWRITTEN = "accessing tensor output of CUDAGraphs that has been overwritten"
LR = 0.05  # the training step's SGD update


class Mismatch(Exception):
    """A compiled result not close to eager's."""


class OutputWatcher(Protocol):
    """Told of a step's compiled outputs as the call returns, and of a mismatch among them
    (``grace.difftest.probe.OutputWatch``)."""

    def returned(self, index: int, outputs: list[torch.Tensor]) -> None: ...

    def mismatched(self, index: int, outputs: list[torch.Tensor], expected: list[torch.Tensor],
                   tol: float) -> None: ...


class EagerFailed(Exception):
    """Eager raised: the program itself is invalid, which is the generator's fault."""


# The compiled functions. Plain module-level functions and small modules, so that Dynamo traces
# what a user's code would give it.

def pointwise(x: torch.Tensor) -> torch.Tensor:
    return torch.sin(x) * 2 + x


def binary(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return x * y + torch.cos(y)


def reduction(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return x.sum(dim=-1), x.softmax(-1)


def alias(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return x.view(-1), x[0]


def scale(x: torch.Tensor, s: Any) -> torch.Tensor:
    return x * s


def mutate_input(x: torch.Tensor) -> torch.Tensor:
    """Updates its input in place, as pyhpc's TKE does, and returns a function of the result."""
    x.mul_(0.5).add_(1.0)
    return torch.sin(x) * 2


class MatMul(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.w = nn.Parameter(torch.randn(width, width) / math.sqrt(width), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.w


class CpuBuf(nn.Module):
    """Holds a CPU tensor and copies it to the input's device in forward (never moved itself)."""

    def __init__(self, width: int):
        super().__init__()
        self.register_buffer("cpu_buf", torch.randn(width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.cpu_buf.to(x.device)


class MutateBuf(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.register_buffer("buf", torch.zeros(width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.buf.add_(x.sum())
        return x + self.buf


class MLPLoss(nn.Module):
    def __init__(self, width: int, hidden: int):
        super().__init__()
        self.fc1 = nn.Linear(width, hidden)
        self.fc2 = nn.Linear(hidden, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.tanh(self.fc1(x))).square().mean()


class DropoutLoss(nn.Module):
    """A training forward through dropout; its input read first by a Triton kernel (PI can
    indirect it), its random draws from the device's generator."""

    def __init__(self, width: int):
        super().__init__()
        self.fc = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(nn.functional.dropout(torch.tanh(x) * 2, p=0.25, training=True)).square().mean()


def conv_bn(channels: int) -> nn.Module:
    """Conv2d + BatchNorm2d in train mode: every call updates the running statistics."""
    module = nn.Sequential(nn.Conv2d(channels, channels, 3, padding=1), nn.BatchNorm2d(channels)).train()
    return module.requires_grad_(False)


Compile = Callable[[Any], Any]
StatePairs = Callable[[], list[tuple[str, torch.Tensor, torch.Tensor]]]


@dataclass
class Case:
    """One kind's compiled function and eager reference, plus what else is compared."""

    compiled: Callable[..., Any]
    eager: Callable[..., Any]
    states: StatePairs = lambda: []  # (name, compiled side, eager side), compared after each call
    before: Callable[[Step], None] = lambda step: None  # sets up a call on both sides
    after: Callable[[], None] = lambda: None  # runs on both sides after the comparison


def _module_case(module: nn.Module, device: str, compile_fn: Compile, state_names: tuple[str, ...] = (),
                 move: bool = True) -> tuple[Case, nn.Module, nn.Module]:
    module = module.to(device) if move else module
    eager = copy.deepcopy(module)
    named = lambda m: dict(m.named_buffers()) | dict(m.named_parameters())  # noqa: E731

    def states() -> list[tuple[str, torch.Tensor, torch.Tensor]]:
        c, e = named(module), named(eager)
        return [(name, c[name], e[name]) for name in state_names]

    return Case(compile_fn(module), eager, states), module, eager


def _grad_pairs(model: nn.Module, eager_model: nn.Module) -> list[tuple[str, torch.Tensor, torch.Tensor]]:
    """Each parameter's ``.grad`` on both sides, named, for :class:`Case`'s comparison."""
    pairs = zip(model.named_parameters(), eager_model.parameters())
    return [(f"{name}.grad", p.grad, q.grad) for (name, p), q in pairs]


def _train_case(program: Program, device: str, compile_fn: Compile, accumulate: int = 1,
                set_to_none: bool = True) -> Case:
    """A training step on both sides: the loss, its backward, and the gradients compared after
    each call; the SGD update and ``zero_grad(set_to_none)`` after every ``accumulate``-th call,
    so that gradients of the calls between sum in ``.grad`` (gradient accumulation) on both
    sides, and ``.grad`` stays from step to step where it is zeroed in place."""
    model = MLPLoss(program.width, program.hidden).to(device)
    eager_model = copy.deepcopy(model)
    compiled_loss = compile_fn(model)
    calls = [0]

    def train(loss_fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        loss = loss_fn(x)
        loss.backward()
        return loss

    def grads() -> list[tuple[str, torch.Tensor, torch.Tensor]]:
        return _grad_pairs(model, eager_model)

    def sgd_and_zero_grad() -> None:
        calls[0] += 1
        if calls[0] % accumulate:
            return
        with torch.no_grad():
            for m in (model, eager_model):
                for p in m.parameters():
                    p -= LR * p.grad
                m.zero_grad(set_to_none=set_to_none)

    return Case(lambda x: train(compiled_loss, x), lambda x: train(eager_model, x), grads,
                after=sgd_and_zero_grad)


def _dropout_case(program: Program, device: str, compile_fn: Compile) -> Case:
    """A training step through dropout on both sides, each seeded with the step's seed before its
    call, Inductor drawing with eager's operators (``fallback_random``) so that both draw the same
    masks: the loss and gradients compared, and the generator's state after each side's call,
    which a graph, or a check of one at capture, must leave where eager leaves it."""
    import torch._inductor.config as inductor_config

    inductor_config.fallback_random = True  # read as Inductor compiles; only random operators care
    model = DropoutLoss(program.width).to(device)
    eager_model = copy.deepcopy(model)
    compiled_loss = compile_fn(model)
    seed = [0]
    after: dict[str, torch.Tensor] = {}

    def generator_state() -> torch.Tensor:
        state = torch.cuda.get_rng_state(device) if torch.device(device).type == "cuda" else torch.get_rng_state()
        return state.to(torch.float64)

    def train(side: str, loss_fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        torch.manual_seed(seed[0])
        loss = loss_fn(x)
        loss.backward()
        after[side] = generator_state()
        return loss

    def states() -> list[tuple[str, torch.Tensor, torch.Tensor]]:
        return [*_grad_pairs(model, eager_model), ("generator state", after["compiled"], after["eager"])]

    def zero_grad() -> None:
        model.zero_grad(set_to_none=True)
        eager_model.zero_grad(set_to_none=True)

    def before(step: Step) -> None:
        seed[0] = step.value_seed

    return Case(lambda x: train("compiled", compiled_loss, x), lambda x: train("eager", eager_model, x), states,
                before=before, after=zero_grad)


def _mutate_input_case(compile_fn: Compile) -> Case:
    """:func:`mutate_input` on both sides, each side's input compared after the call as well as
    the output: the caller's tensor must hold the update, as eager's does."""
    compiled = compile_fn(mutate_input)
    last: dict[str, torch.Tensor] = {}

    def run(side: str, fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        last[side] = x
        return fn(x)

    return Case(lambda x: run("compiled", compiled, x), lambda x: run("eager", mutate_input, x),
                lambda: [("input after the call", last["compiled"], last["eager"])], after=last.clear)


def _cpu_buf_case(program: Program, device: str, compile_fn: Compile) -> Case:
    case, module, eager = _module_case(CpuBuf(program.width), device, compile_fn, ("cpu_buf",), move=False)

    def refill(step: Step) -> None:
        if step.cpu_buf_value is not None:
            module.cpu_buf.fill_(step.cpu_buf_value)
            eager.cpu_buf.fill_(step.cpu_buf_value)

    case.before = refill
    return case


def build_case(kind: str, program: Program, device: str, compile_fn: Compile) -> Case:
    torch.manual_seed(weight_seed(program.seed, kind))  # module weights
    if kind in ("pointwise", "binary", "reduction", "alias", "scale"):
        fn = globals()[kind]
        return Case(compile_fn(fn), fn)
    if kind == "matmul":
        return _module_case(MatMul(program.width), device, compile_fn)[0]
    if kind == "conv_bn":
        stats = ("1.running_mean", "1.running_var", "1.num_batches_tracked")
        return _module_case(conv_bn(program.channels), device, compile_fn, stats)[0]
    if kind == "mutate_buf":
        return _module_case(MutateBuf(program.width), device, compile_fn, ("buf",))[0]
    if kind == "cpu_buf":
        return _cpu_buf_case(program, device, compile_fn)
    if kind == "train_step":
        return _train_case(program, device, compile_fn)
    if kind == "train_accum":
        return _train_case(program, device, compile_fn, accumulate=ACCUMULATED_CALLS)
    if kind == "train_keep":
        return _train_case(program, device, compile_fn, set_to_none=False)
    if kind == "dropout":
        return _dropout_case(program, device, compile_fn)
    if kind == "mutate_input":
        return _mutate_input_case(compile_fn)
    raise ValueError(f"unknown kind {kind!r}")


# Inputs.

def _values(shape: tuple[int, ...], seed: int) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


def make_tensor(shape: tuple[int, ...], mode: str, seed: int, device: str) -> torch.Tensor:
    """A tensor of ``shape`` with seeded values in the layout ``mode`` names. Storage the view
    does not cover is NaN, so a kernel that reads past its input's strides shows in the result."""
    values = _values(shape, seed)
    if mode == "misaligned":
        flat = torch.full((values.numel() + 1,), math.nan, device=device)
        flat[1:].copy_(values.flatten())
        return flat[1:].view(shape)
    if mode == "transposed":
        order = (1, 0) if len(shape) == 2 else (0, 2, 3, 1)  # (batch, width) or channels-last
        back = (1, 0) if len(shape) == 2 else (0, 3, 1, 2)
        return values.permute(order).contiguous().to(device).permute(back)
    if mode == "rows":
        tall = torch.full((2 * shape[0], *shape[1:]), math.nan, device=device)
        tall[::2].copy_(values)
        return tall[::2]
    return values.to(device)


def make_overlapping(shape: tuple[int, ...], offset: int, seed: int, device: str) -> list[torch.Tensor]:
    """Two arguments viewing one storage, ``offset`` rows apart (0: the same tensor twice)."""
    if offset == 0:
        t = make_tensor(shape, "fresh", seed, device)
        return [t, t]
    base = make_tensor((shape[0] + offset, *shape[1:]), "fresh", seed, device)
    return [base[:shape[0]], base[offset:offset + shape[0]]]


def make_scalar(spec: tuple[str, float]) -> Any:
    kind, value = spec
    if kind == "numpy":
        return np.float32(value)
    if kind == "tensor":
        return torch.tensor(value)  # 0-d, on the CPU
    return float(value)


@dataclass
class Side:
    """One side's (compiled or eager) live inputs and the outputs a feedback step will take."""

    pool: dict[int, torch.Tensor] = field(default_factory=dict)
    last: list[torch.Tensor] | None = None

    def inputs(self, index: int, step: Step, program: Program, device: str) -> list[Any]:
        info, shape = KINDS[step.kind], program.input_shape(step)
        if step.mode == "feedback":
            if self.last is None:
                raise RuntimeError("difftest harness: no previous outputs to feed back")
            args = [self.last[KINDS[program.steps[index - 1].kind].feedback_output]]
        elif step.mode == "reuse":
            args = [self.pool[step.ref]]
        elif step.mode == "realloc":
            del self.pool[step.ref]  # the last reference: its block goes back to the allocator
            args = [make_tensor(shape, "fresh", step.value_seed, device)]
        elif step.mode == "overlap":
            args = make_overlapping(shape, step.overlap_offset, step.value_seed, device)
        else:
            args = [make_tensor(shape, step.mode, step.value_seed, device)]
        if step.mode in MADE_BY_HARNESS:
            self.pool[index] = args[0]
        if info.inputs == 2 and len(args) == 1:
            args.append(make_tensor(shape, "fresh", step.value_seed + 1, device))
        if step.scalar is not None:
            args.append(make_scalar(step.scalar))
        return args


@dataclass
class Held:
    step: int
    kind: str
    compiled: list[torch.Tensor]
    eager: list[torch.Tensor]  # clones, so later eager work cannot change them
    eager_live: list[torch.Tensor]  # eager's outputs themselves, which a later step may mutate

    def follow_mutation(self, mutated: set[int]) -> None:
        """After a step that mutated its inputs in place: a held output over one of their
        storages (``mutated``: the compiled side's) takes eager's mutated values as its
        reference, as eager's own output over the eager input took the mutation."""
        for j, c in enumerate(self.compiled):
            if _storage_of(c) in mutated:
                self.eager[j] = self.eager_live[j].detach().clone()


def _storage_of(t: Any) -> int | None:
    """The address of a tensor's storage; None for a non-tensor, or an output the tree has
    overwritten (reading it raises, as the recheck reports)."""
    if not isinstance(t, torch.Tensor):
        return None
    try:
        return t.untyped_storage().data_ptr()
    except RuntimeError:
        return None


def as_tensors(out: Any) -> list[torch.Tensor]:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:300]
    return ""


def error_kind(exc_type: str, message: str) -> str:
    """An error's type and message with numbers and addresses masked: two runs raising the same
    error in different sizes or places compare equal."""
    return f"{exc_type}: " + re.sub(r"0x[0-9a-fA-F]+|\d+", "#", first_line(message))[:160]


# Kinds whose eager reference is a pure function of its arguments: it can be run again on the
# compiled side's input without changing any state the program compares later.
PURE_KINDS = ("pointwise", "binary", "reduction", "alias", "scale", "matmul")


def _host_copy(arg: Any) -> Any:
    """A tensor argument copied to the host (no device allocation to perturb the run); others as is."""
    return arg.detach().to("cpu", copy=True) if isinstance(arg, torch.Tensor) else arg


def drift_reference(eager_fn: Callable[..., Any], fed: list[Any], eager_args: list[Any], out_c: list[torch.Tensor],
                    tol: float, input_tol: float, device: str) -> list[torch.Tensor] | None:
    """The eager reference on the compiled side's own input, where a mismatch on a fed-back input
    is rounding the function amplified, not a wrong result; else None.

    ``x = f(x)`` chains feed compiled outputs back in; they differ from eager's by rounding
    within the tolerance, and a chain through a mutated buffer grows the values until that
    rounding is whole units (at 2e8 a float32 step is 16), which softmax turns into completely
    different probabilities (and the sine of a value grown to 6e4 differs by 0.016 for one step of
    its argument). The difference is then the input's, not this call's. It is, only if the
    compiled side's input (``fed``, copied to the host before the call) is close to eager's
    (``eager_args``, copied before the call where the function mutates them) under the
    tolerance of the step that produced it, and the compiled outputs are close
    to the eager reference run again on that same input; a wrong kernel, or an input overwritten
    before the call, fails one of the two. The reference returned is what a held output of the
    step is rechecked against later.
    """
    for mine, theirs in zip(fed, eager_args):
        if isinstance(mine, torch.Tensor) and difference(mine, theirs.detach().cpu(), input_tol) is not None:
            return None
    again = as_tensors(eager_fn(*[a.to(device) if isinstance(a, torch.Tensor) else a for a in fed]))
    if len(again) != len(out_c) or any(
            difference(c.detach().to("cpu", copy=True), a.detach().cpu(), tol) is not None for c, a in zip(out_c, again)):
        return None
    return again


def compare(name: str, compiled: torch.Tensor, eager: torch.Tensor, tol: float) -> None:
    """Raise Mismatch unless close. Reading the compiled tensor may raise the overwritten-output
    RuntimeError, which the caller decides about."""
    message = difference(compiled.detach().to("cpu", copy=True), eager.detach().cpu(), tol)
    if message is not None:
        raise Mismatch(f"{name}: {message}")


def difference(got: torch.Tensor, expected: torch.Tensor, tol: float) -> str | None:
    """assert_close's first lines, or None where close.

    torch.testing's assertion sits in a reference cycle through its frames' locals, and its
    traceback reaches this frame and every caller's: left so, the outputs they hold (a held
    output the recheck is about to drop) live until the next garbage collection, and the tree
    sees them die at whatever later call that collection happens in. Clearing the finished
    frames breaks the cycle now."""
    try:
        torch.testing.assert_close(got, expected, rtol=tol, atol=tol, equal_nan=True)
    except AssertionError as e:
        traceback.clear_frames(e.__traceback__)
        return "; ".join([line.strip() for line in str(e).splitlines() if line.strip()][:4])
    return None


# Inductor without CUDA graphs: the same program and kernels, to tell a wrong value of the
# graphs from one of Inductor's code.
INDUCTOR_WITHOUT_GRAPHS = "inductor-nocg"


def compile_options(backend: str) -> tuple[str, str | None]:
    """(torch.compile's backend, its mode) for a ``--backend`` name: "inductor" compiles with
    ``mode="reduce-overhead"`` (CUDA graph trees), :data:`INDUCTOR_WITHOUT_GRAPHS` with Inductor's
    default mode, any other backend as named."""
    if backend == "inductor":
        return "inductor", "reduce-overhead"
    if backend == INDUCTOR_WITHOUT_GRAPHS:
        return "inductor", None
    return backend, None


class ProgramRun:
    """The state of one program's execution."""

    def __init__(self, program: Program, device: str, backend: str = "inductor",
                 on_step: Callable[[int, Step], None] | None = None, watch: OutputWatcher | None = None,
                 on_hold: Callable[[int, list[torch.Tensor]], None] | None = None):
        self.program, self.device = program, device
        self.on_step = on_step  # told of each step before it runs (the probes' step markers)
        self.on_hold = on_hold  # told of the compiled outputs a step holds (the probes' hold lines)
        self.watch = watch  # told of each step's compiled outputs, and of a mismatch (the outputs probe)
        backend, mode = compile_options(backend)
        self.compile_fn: Compile = lambda fn: torch.compile(fn, mode=mode, backend=backend)
        self.cases: dict[str, Case] = {}
        self.compiled_side, self.eager_side = Side(), Side()
        self.held: list[Held] = []
        self.expected: list[str] = []
        self.stale: list[tuple[int, int]] = []  # (step read at, held step): see recheck
        self.detected: list[tuple[int, int]] = []  # (step read at, held step): reading raised
        self.amplified: list[int] = []  # steps whose difference was the fed-back input's rounding (drift_reference)
        self.calls = 0
        self.index: int | None = None
        self.kind: str | None = None

    def run(self) -> dict[str, Any]:
        start = time.monotonic()
        try:
            for index, step in enumerate(self.program.steps):
                self.index, self.kind = index, step.kind
                if self.on_step is not None:
                    self.on_step(index, step)
                self.step(index, step)
            self.index, self.kind = len(self.program.steps), "end"
            self.recheck()  # every output still held
            result = self.outcome("ok", "")
        except Mismatch as e:
            result = self.outcome("mismatch", str(e), "mismatch")
        except EagerFailed as e:
            result = self.outcome("error", f"eager raised {e}", error_kind("eager", str(e)))
        except Exception as e:  # noqa: BLE001 - every failure is a result
            traceback.print_exc(file=sys.stderr)  # the log keeps where it was raised
            message = f"{type(e).__name__}: {first_line(str(e))}"
            result = self.outcome("error", message, error_kind(type(e).__name__, str(e)))
        result["seconds"] = round(time.monotonic() - start, 3)
        return result

    def outcome(self, status: str, detail: str, kind: str = "") -> dict[str, Any]:
        where = "" if status == "ok" else f"step {self.index} ({self.kind}): "
        return {"seed": self.program.seed, "status": status, "calls": self.calls,
                "step": None if status == "ok" else self.index, "kind": None if status == "ok" else self.kind,
                "detail": where + detail, "error_kind": kind, "expected": len(self.expected),
                "expected_detail": self.expected[:5], "stale": [list(x) for x in self.stale],
                "detected": [list(x) for x in self.detected], "amplified": list(self.amplified)}

    def case(self, kind: str) -> Case:
        if kind not in self.cases:
            self.cases[kind] = build_case(kind, self.program, self.device, self.compile_fn)
        return self.cases[kind]

    def step(self, index: int, step: Step) -> None:
        case = self.case(step.kind)
        if step.recheck:
            self.recheck()
        if step.mark_step:
            torch.compiler.cudagraph_mark_step_begin()
        case.before(step)
        if step.mode == "feedback" and self.compiled_side.last is None:
            # the previous step fed nothing forward (its input had been overwritten): both sides
            # take a fresh input instead, so the program goes on the same way on both
            step = dataclasses.replace(step, mode="fresh", ref=None)
        args = self.compiled_side.inputs(index, step, self.program, self.device)
        # a fed-back input is a compiled output: it may differ from eager's by rounding, which an
        # ill-conditioned function amplifies past the tolerance (see drift_reference); a kind that
        # mutates its input is checked on the inputs as they were before the call
        mutates = KINDS[step.kind].mutates_input
        drift_checked = step.mode == "feedback" and (step.kind in PURE_KINDS or mutates)
        fed = [_host_copy(a) for a in args] if drift_checked else None
        # the storages a mutating kind updates in place: held outputs over them change in eager too
        mutated = {_storage_of(a) for a in args} - {None} if mutates else set()
        try:
            out_c = as_tensors(case.compiled(*args))
        except RuntimeError as e:
            if step.mode != "feedback" or OVERWRITTEN not in str(e):
                raise
            # x = f(x) where a call in between overwrote x: stock raises by design, before the
            # graph runs; the step is skipped on both sides and the program goes on
            self.expected.append(f"step {index}: fed-back input overwritten before the call")
            self.compiled_side.last = self.eager_side.last = None
            return
        self.calls += 1
        del args
        self.synchronize()  # an asynchronous fault of the compiled call surfaces here, not in eager
        if self.watch is not None:
            self.watch.returned(index, out_c)
        eager_args = self.eager_side.inputs(index, step, self.program, self.device)
        eager_fed = [_host_copy(a) for a in eager_args] if fed is not None and mutates else eager_args
        out_e = self.eager_call(case, eager_args)
        self.synchronize()
        tol = KINDS[step.kind].tolerance
        if len(out_c) != len(out_e):
            raise Mismatch(f"{len(out_c)} outputs, eager gave {len(out_e)}")
        try:
            for j, (c, e) in enumerate(zip(out_c, out_e)):
                compare(f"output {j}", c, e, tol)
        except Mismatch:
            if self.watch is not None:
                self.watch.mismatched(index, out_c, out_e, tol)
            again = None if fed is None else drift_reference(
                case.eager, fed, eager_fed, out_c, tol, KINDS[self.program.steps[index - 1].kind].tolerance, self.device)
            if again is None:
                raise
            self.amplified.append(index)
            out_e = again  # what a held output of this step is rechecked against
        del eager_args, eager_fed
        for name, c, e in case.states():
            try:
                compare(name, c, e, tol)
            except RuntimeError as error:
                if not (step.mode == "feedback" and KINDS[step.kind].mutates_input and OVERWRITTEN in str(error)):
                    raise
                # a graph output fed back into a function that mutates it: the call's own graph
                # took that memory for its outputs, and the tree marks the input overwritten
                # (grace.mutated_inputs, invariant 6), as it marks any output it overwrote
                self.expected.append(f"step {index}: fed-back input overwritten by the call")
        case.after()
        if mutated:
            for held in self.held:
                held.follow_mutation(mutated)
        if step.hold:
            self.held.append(Held(index, step.kind, out_c, [e.detach().clone() for e in out_e], out_e))
            if self.on_hold is not None:
                self.on_hold(index, out_c)
        feeds_next = index + 1 < len(self.program.steps) and self.program.steps[index + 1].mode == "feedback"
        self.compiled_side.last = out_c if feeds_next else None
        self.eager_side.last = out_e if feeds_next else None

    @staticmethod
    def eager_call(case: Case, args: list[Any]) -> list[torch.Tensor]:
        try:
            return as_tensors(case.eager(*args))
        except Exception as e:  # noqa: BLE001
            raise EagerFailed(f"{type(e).__name__}: {first_line(str(e))}") from e

    def recheck(self) -> None:
        """Re-read every held output; one a later replay overwrote is expected to raise.

        One that reads but no longer holds its values is a *stale read*: CUDA graph trees do not
        detect every overwrite of an output held across later replays (stock 2.11 reads some
        silently; pytorch/pytorch#144961). It is recorded as (the step, the held step) and the
        output dropped; the runner judges a configuration's stale reads against stock's."""
        kept = []
        for held in self.held:
            tol = KINDS[held.kind].tolerance
            try:
                for j, (c, e) in enumerate(zip(held.compiled, held.eager)):
                    compare(f"held output {j} of step {held.step} ({held.kind})", c, e, tol)
            except RuntimeError as e:
                if OVERWRITTEN not in str(e):
                    raise
                self.expected.append(f"step {self.index}: held output of step {held.step} "
                                     f"({held.kind}) overwritten")
                self.detected.append((self.index, held.step))
                continue
            except Mismatch:
                self.stale.append((self.index, held.step))
                continue
            kept.append(held)
        self.held = kept

    def synchronize(self) -> None:
        if self.device.startswith("cuda"):
            torch.cuda.synchronize()


def configure_torch() -> None:
    """Exact float32 on both sides: TF32 would make eager and compiled convolutions differ by
    more than the comparison allows, for reasons that have nothing to do with graphs."""
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False


def run_program(program: Program, device: str, backend: str = "inductor",
                on_step: Callable[[int, Step], None] | None = None,
                watch: OutputWatcher | None = None,
                on_hold: Callable[[int, list[torch.Tensor]], None] | None = None) -> dict[str, Any]:
    configure_torch()
    torch.manual_seed(program.seed)
    return ProgramRun(program, device, backend, on_step, watch, on_hold).run()

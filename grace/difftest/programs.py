"""Random programs for the differential tester: pure data, fully determined by a seed.

A :class:`Program` is a list of :class:`Step`\\ s, each one call to a compiled function (a
*kind*) with an input chosen to stress what CUDA graph trees assume about their inputs and
outputs. This module imports no torch: the parent process generates and prints programs
cheaply, and a program's JSON form is all a child needs to rerun it exactly.

The same ``(seed, kinds, max_steps)`` always gives the same program, so a failure is replayed
with ``python -m grace.difftest run-one --seed S`` (plus the same ``--kinds``/``--max-steps``).
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence


@dataclass(frozen=True)
class KindInfo:
    """What the generator must know about a compiled function to feed it valid inputs."""

    inputs: int  # tensor arguments, all of the same shape
    image: bool  # takes (batch, channels, spatial, spatial) rather than (batch, width)
    feedback_output: int | None  # the output that has the input's shape (x = f(x)); None: none
    tolerance: float  # rtol and atol of the comparison with eager (float32)
    contiguous: bool = False  # needs a contiguous input (x.view(-1) fails on strided ones)
    mutates_input: bool = False  # updates its tensor argument in place, as eager sees it


KINDS: dict[str, KindInfo] = {
    "pointwise": KindInfo(1, False, 0, 1e-4),  # torch.sin(x) * 2 + x
    "binary": KindInfo(2, False, 0, 1e-4),  # x * y + torch.cos(y): two inputs, may overlap
    "reduction": KindInfo(1, False, 1, 1e-4),  # (x.sum(-1), x.softmax(-1))
    "matmul": KindInfo(1, False, 0, 1e-3),  # x @ w, w a module's frozen parameter
    "conv_bn": KindInfo(1, True, 0, 1e-3),  # Conv2d + BatchNorm2d in train mode (running stats)
    "train_step": KindInfo(1, False, None, 1e-3),  # MLP loss, backward; loss and grads compared
    "cpu_buf": KindInfo(1, False, 0, 1e-4),  # x + self.cpu_buf.to(x.device)
    "scale": KindInfo(1, False, 0, 1e-4),  # x * scale, scale a numpy / Python / 0-d CPU scalar
    "alias": KindInfo(1, False, None, 1e-4, contiguous=True),  # (x.view(-1), x[0]): outputs alias the input
    "mutate_buf": KindInfo(1, False, 0, 1e-3),  # self.buf.add_(x.sum()); x + self.buf
    # train_step with gradient accumulation: the SGD update and zero_grad after every
    # ACCUMULATED_CALLS-th call of it, the gradients summed over the calls between
    "train_accum": KindInfo(1, False, None, 1e-3),
    # train_step whose gradients are zeroed in place (zero_grad(set_to_none=False)) after the SGD
    # update of every call: .grad is kept from step to step
    "train_keep": KindInfo(1, False, None, 1e-3),
    # a training step through dropout, both sides seeded alike before each call (Inductor's
    # fallback_random, so the same masks): loss, gradients and the generator's state compared
    "dropout": KindInfo(1, False, None, 1e-3),
    # updates its input in place, as TKE does (x.mul_(0.5).add_(1); sin(x) * 2): no graph under
    # stock; a graph with grace.config.mutated_inputs; the input compared after each call too
    "mutate_input": KindInfo(1, False, 0, 1e-4, mutates_input=True),
}
# Kinds a program draws from only when asked for by name (``--kinds``): a kind added to the
# default draw would change the program of every earlier seed. In the order they were added,
# which their weight seeds keep.
OPT_IN_KINDS = ("train_accum", "train_keep", "dropout", "mutate_input")
ACCUMULATED_CALLS = 3

# How a step's (first) input is made. "fresh" a new contiguous tensor; "reuse" the tensor an
# earlier step made; "realloc" that tensor deleted, then a new one of its size allocated (the
# caching allocator usually hands back the same address with other contents); "misaligned" a
# view at storage offset 1 of a larger tensor; "transposed" a transposed (2-D) or channels-last
# (4-D) view; "rows" every other row of a tensor twice as tall; "overlap" two arguments viewing
# one storage; "feedback" the previous step's output (x = f(x)).
INPUT_MODES = ("fresh", "reuse", "realloc", "misaligned", "transposed", "rows", "overlap", "feedback")
MADE_BY_HARNESS = ("fresh", "realloc", "misaligned", "transposed", "rows", "overlap")
CONTIGUOUS_MODES = ("fresh", "realloc", "misaligned", "overlap")
SCALAR_TYPES = ("numpy", "float", "tensor")
SCALE_VALUES = (0.5, 1.5, 2.0, -1.0, 3.25)
CPU_BUF_VALUES = (0.5, -1.0, 2.0)
DEFAULT_MAX_STEPS = 12

# Probabilities of the optional parts of a step.
P_FEEDBACK = 0.2
P_OTHER_BATCH = 0.15
P_MARK_STEP = 0.2
P_HOLD = 0.25
P_RECHECK = 0.3
P_CPU_BUF_UPDATE = 0.5


@dataclass
class Step:
    """One call of a compiled function, and what happens around it."""

    kind: str
    mode: str  # one of INPUT_MODES
    batch: int
    value_seed: int  # seeds the values of the tensors this step makes
    ref: int | None = None  # reuse/realloc: the step whose input; feedback: the previous step
    overlap_offset: int = 0  # overlap: rows between the two arguments' starts (0: one tensor twice)
    scalar: tuple[str, float] | None = None  # scale: (one of SCALAR_TYPES, value)
    cpu_buf_value: float | None = None  # cpu_buf: refill the module's CPU buffer first
    mark_step: bool = False  # torch.compiler.cudagraph_mark_step_begin() before the call
    hold: bool = False  # keep this call's outputs and re-read them at later re-checks
    recheck: bool = False  # before the call, re-read every held output and compare

    def describe(self) -> str:
        extra = []
        if self.ref is not None:
            extra.append(f"ref={self.ref}")
        if self.mode == "overlap":
            extra.append(f"offset={self.overlap_offset}")
        if self.scalar is not None:
            extra.append(f"scale={self.scalar[0]}:{self.scalar[1]}")
        if self.cpu_buf_value is not None:
            extra.append(f"cpu_buf<-{self.cpu_buf_value}")
        flags = [name for name in ("mark_step", "hold", "recheck") if getattr(self, name)]
        return " ".join([f"{self.kind:<10} {self.mode:<10} batch={self.batch}", *extra, *flags])


@dataclass
class Program:
    """A seed's sizes, the compiled functions it uses, and its steps."""

    seed: int
    kinds: list[str]
    width: int  # features of (batch, width) inputs
    channels: int  # (batch, channels, spatial, spatial) inputs of conv_bn
    spatial: int
    hidden: int  # the training step's MLP
    steps: list[Step] = field(default_factory=list)

    def input_shape(self, step: Step) -> tuple[int, ...]:
        if KINDS[step.kind].image:
            return (step.batch, self.channels, self.spatial, self.spatial)
        return (step.batch, self.width)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "Program":
        data = json.loads(text)
        steps = [Step(**{**s, "scalar": tuple(s["scalar"]) if s["scalar"] else None}) for s in data.pop("steps")]
        return cls(**data, steps=steps)

    def describe(self) -> str:
        head = (f"program {self.seed}: kinds {','.join(self.kinds)}; width {self.width}, "
                f"image {self.channels}x{self.spatial}x{self.spatial}, hidden {self.hidden}; "
                f"{len(self.steps)} steps")
        return "\n".join([head, *(f"  {i:>2} {s.describe()}" for i, s in enumerate(self.steps))])


def weight_seed(seed: int, kind: str) -> int:
    """The seed of ``kind``'s module weights in the program of ``seed``: for the default kinds
    what it has always been (``seed`` times their number, plus the kind's place), for an
    opt-in kind a range of its own."""
    defaults = default_kinds()
    if kind in defaults:
        return seed * len(defaults) + defaults.index(kind)
    return 2**40 + OPT_IN_KINDS.index(kind) * 2**36 + seed


def default_kinds() -> list[str]:
    """The kinds a program draws from unless told otherwise: every kind but the opt-in ones."""
    return [k for k in KINDS if k not in OPT_IN_KINDS]


def parse_kinds(text: str | None) -> list[str]:
    """``"a,b"`` -> ``["a", "b"]``, checked against KINDS; None or "" -> :func:`default_kinds`."""
    if not text:
        return default_kinds()
    kinds = [k.strip() for k in text.split(",") if k.strip()]
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        raise ValueError(f"unknown kind(s) {', '.join(unknown)}; choose from {', '.join(KINDS)}")
    return kinds


def generate(seed: int, kinds: Sequence[str] | None = None, max_steps: int = DEFAULT_MAX_STEPS) -> Program:
    """The program of ``seed``: between half of ``max_steps`` and ``max_steps`` calls to one to
    four of ``kinds`` (default: :func:`default_kinds`), and to every opt-in kind ``kinds`` names,
    which is named to be run."""
    if max_steps < 1:
        raise ValueError("max_steps must be at least 1")
    allowed = sorted(kinds if kinds is not None else default_kinds())
    rng = random.Random(seed)
    drawn = rng.sample(allowed, k=rng.randint(1, min(4, len(allowed))))
    program = Program(
        seed=seed,
        kinds=sorted(set(drawn) | (set(OPT_IN_KINDS) & set(allowed))),
        width=rng.randint(4, 32), channels=rng.randint(2, 4), spatial=rng.randint(3, 6),
        hidden=rng.randint(4, 16))
    batches = rng.sample(range(2, 9), k=2)  # the usual batch, and the occasional other one
    pool: dict[int, tuple[tuple[int, ...], bool]] = {}  # live harness-made inputs: step -> shape, contiguous
    for i in range(rng.randint(math.ceil(max_steps / 2), max_steps)):
        step = _step(rng, program, i, batches, pool)
        program.steps.append(step)
        if step.mode in MADE_BY_HARNESS:
            pool[i] = (program.input_shape(step), step.mode in CONTIGUOUS_MODES)
    return program


def _step(rng: random.Random, program: Program, i: int, batches: list[int],
          pool: dict[int, tuple[tuple[int, ...], bool]]) -> Step:
    kind = rng.choice(program.kinds)
    info = KINDS[kind]
    step = Step(kind=kind, mode="fresh", batch=batches[0], value_seed=rng.randrange(2**31))
    previous = program.steps[-1] if program.steps else None
    if _can_feed_back(previous, info) and rng.random() < P_FEEDBACK:
        step.mode, step.ref, step.batch = "feedback", i - 1, previous.batch
    else:
        if rng.random() < P_OTHER_BATCH:
            step.batch = batches[1]
        shape = program.input_shape(step)
        same_shape = sorted(j for j, (s, contiguous) in pool.items()
                            if s == shape and (contiguous or not info.contiguous))
        modes = ["fresh", "fresh", "misaligned"]
        modes += [] if info.contiguous else ["transposed", "rows"]
        modes += ["reuse", "reuse", "realloc"] if same_shape else []
        modes += ["overlap", "overlap"] if info.inputs == 2 else []
        step.mode = rng.choice(modes)
        if step.mode in ("reuse", "realloc"):
            step.ref = rng.choice(same_shape)
            if step.mode == "realloc":
                del pool[step.ref]
        if step.mode == "overlap":
            step.overlap_offset = rng.randint(0, step.batch - 1)
    if kind == "scale":
        step.scalar = (rng.choice(SCALAR_TYPES), rng.choice(SCALE_VALUES))
    if kind == "cpu_buf" and rng.random() < P_CPU_BUF_UPDATE:
        step.cpu_buf_value = rng.choice(CPU_BUF_VALUES)
    step.mark_step = rng.random() < P_MARK_STEP
    step.hold = rng.random() < P_HOLD
    step.recheck = any(s.hold for s in program.steps) and rng.random() < P_RECHECK
    return step


def _can_feed_back(previous: Step | None, info: KindInfo) -> bool:
    """x = f(x) needs the previous call to have returned a tensor of this kind's input shape."""
    if previous is None:
        return False
    produced = KINDS[previous.kind]
    # an output's layout follows its input's (a transposed input gives a transposed output)
    return produced.feedback_output is not None and produced.image == info.image and not info.contiguous


def program_summary(program: Program) -> dict[str, Any]:
    """Counts of modes and flags, for progress lines and tests."""
    modes = {m: sum(s.mode == m for s in program.steps) for m in INPUT_MODES}
    return {"steps": len(program.steps), "modes": {m: n for m, n in modes.items() if n},
            "mark_steps": sum(s.mark_step for s in program.steps),
            "holds": sum(s.hold for s in program.steps)}

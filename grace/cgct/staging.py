"""CGCT's input rewrites: CPU scalars and module-owned CPU tensors become GPU-resident inputs.

Design note
-----------
Dynamo hands Inductor a graph whose inputs include CPU tensors that the graph only uses on the
GPU: a numpy or Python scalar (a 0-d CPU tensor, e.g. ``scores / self.temperature`` with a
``np.float64`` temperature, Fig. 2 of the paper) feeding GPU operators, or a module-owned CPU
tensor copied to the GPU in forward (``self.table.to(x.device)``). Inductor 2.11 packs the
scalars on the CPU and copies them, and copies the tensor with a blocking ``copy_``, each call;
those copies split the graph into a CPU partition and a CUDA graph, and the copied values are
non-static inputs that the tree copies again before each replay.

Here, before Inductor sees the graph (``_maybe_wrap_and_compile_fx_main``, like Inductor's own
input-flattening wrappers), each such input is replaced by a persistent GPU tensor marked as a
static input, and the compiled function is wrapped to refresh it before each call:

* **staged scalars** each get a persistent 0-d GPU tensor. Before a call each value is read
  from its CPU input; only if it differs from the value the GPU tensor holds is it copied, on
  the current stream, so that the copy is ordered after the previous replay's reads and before
  the next one's. A value that changes between calls is therefore always the one the kernels
  read, and a constant one costs no copy.
* **mirrored tensors** are copied to their GPU mirror when the CPU tensor is another object,
  has another data pointer, or its version counter moved (an in-place write, ``set_``, an
  optimizer step); otherwise the mirror is reused. Writes that bypass the version counter
  (through ``.data``, a numpy view, or the array behind ``torch.from_numpy``) are not seen;
  that is the one assumption this rewrite makes, and it is logged with each mirror. The mirror
  holds the value in the dtype its copies convert it to, when they all convert to one (OpenAI
  CLIP's ``self.attn_mask = self.attn_mask.to(dtype=x.dtype, device=x.device)`` in an fp16
  model, as DALLE2 runs it), so each copy is the mirror itself: what forward returns or keeps
  on the module is then persistent memory, never a graph output that the next replay
  overwrites (stock CUDA graph trees fail on DALLE2 for that). The price is a second
  assumption, logged too: a copy that forward hands out is the mirror, so a caller who writes
  it in place after the call (stock hands out a fresh copy) would change what the next call
  reads unless the CPU tensor also changes.

Each rewrite checks its precondition on the graph and leaves the input as stock PyTorch would
otherwise, saying why (``GRACE_LOGS=info``): exactly one GPU device in the graph; the input is a
CPU tensor without ``requires_grad``; for a scalar, 0-d, and every user an operator whose output
is a GPU tensor (no ``.item()``, no in-place method, no ``out=``); for a mirror, every user a
``.to(<that GPU>)``/``.cuda()`` of it, and no copy written in place in the graph (the writes
would land in the mirror, which the next call would read unrefreshed).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from grace.cgct.constants import move_index_constants
from grace.log import get_logger

log = get_logger("grace.cgct")

SCALAR, MIRROR = "scalar", "mirror"


@dataclass(frozen=True)
class Stage:
    """One graph input that becomes GPU-resident."""

    index: int
    kind: str  # SCALAR or MIRROR
    source: str  # Dynamo's name for where the value comes from, for the log


@dataclass
class Plan:
    device: Any
    stages: list[Stage] = field(default_factory=list)
    refused: list[tuple[int, str, str]] = field(default_factory=list)  # (index, source, why)


def _value(node: Any) -> Any:
    return node.meta.get("example_value") if hasattr(node, "meta") else None


def _source(node: Any) -> str:
    grapharg = node.meta.get("grapharg")
    source = getattr(grapharg, "source", None)
    return source.name if source is not None else node.name


def _gpu_devices(gm: Any, example_inputs: Sequence[Any]) -> set[Any]:
    import torch

    found = {t.device for t in example_inputs if isinstance(t, torch.Tensor) and t.device.type == "cuda"}
    for node in gm.graph.nodes:
        v = _value(node)
        if isinstance(v, torch.Tensor) and v.device.type == "cuda":
            found.add(v.device)
    return found


def _why_not_scalar_use(user: Any, device: Any) -> str | None:
    import torch

    if user.op not in ("call_function", "call_method"):
        return f"used by {user.op} {user.target}"
    name = _name(user)
    if user.op == "call_method" and (name in ("item", "tolist", "numpy", "cpu", "data_ptr", "__bool__")
                                     or name.endswith("_")):
        return f"read on the host by .{name}()"
    if "out" in user.kwargs:
        return f"written by {name}(out=...)"
    v = _value(user)
    if not (isinstance(v, torch.Tensor) and v.device == device):
        return f"{name} does not produce a tensor on {device}"
    return None


def _is_copy_to(user: Any, node: Any, device: Any) -> bool:
    import torch

    v = _value(user)
    if not (isinstance(v, torch.Tensor) and v.device == device) or not user.args or user.args[0] is not node:
        return False
    if user.op == "call_method":
        return user.target in ("to", "cuda")
    return user.op == "call_function" and user.target in (torch.Tensor.to, torch.Tensor.cuda)


# Operators whose output is a view of their first argument: a write through it writes the copy.
_VIEWS = frozenset({"view", "view_as", "reshape", "reshape_as", "transpose", "permute", "t", "expand",
                    "expand_as", "unsqueeze", "squeeze", "flatten", "unflatten", "narrow", "select",
                    "as_strided", "split", "chunk", "unbind", "getitem", "__getitem__", "contiguous",
                    "detach", "to", "type_as", "movedim", "swapaxes", "diagonal", "unfold", "T", "mT"})


def _name(node: Any) -> str:
    return node.target if isinstance(node.target, str) else getattr(node.target, "__name__", str(node.target))


def _why_copy_written(copy: Any) -> str | None:
    """Why the graph may write ``copy`` (a ``.to()`` of a staged tensor) in place, or None."""
    seen, stack = set(), [copy]
    while stack:
        node = stack.pop()
        for user in node.users:
            if user in seen or user.op not in ("call_function", "call_method"):
                continue
            seen.add(user)
            name = _name(user)
            if user.kwargs.get("out") is node:
                return f"its copy is written by {name}(out=...)"
            if not (user.args and user.args[0] is node):
                continue
            if name in _WRITES or (name.endswith("_") and not name.startswith("__")):
                return f"its copy is written in place by {name}"
            if name in _VIEWS:
                stack.append(user)
    return None


_WRITES = frozenset({"setitem", "__setitem__", "iadd", "isub", "imul", "itruediv", "ifloordiv", "imod",
                     "ipow", "iand", "ior", "ixor", "ilshift", "irshift", "imatmul"})


def plan_inputs(gm: Any, example_inputs: Sequence[Any]) -> Plan | None:
    """Which inputs of Dynamo's graph ``gm`` to make GPU-resident; None when there is no GPU."""
    import torch

    devices = _gpu_devices(gm, example_inputs)
    if len(devices) != 1:
        return None
    (device,) = devices
    plan = Plan(device)
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(example_inputs):
        return None
    for i, (node, t) in enumerate(zip(placeholders, example_inputs)):
        if not isinstance(t, torch.Tensor) or t.device.type != "cpu" or not node.users:
            continue
        source = _source(node)
        if t.requires_grad:
            plan.refused.append((i, source, "requires grad"))
            continue
        users = list(node.users)
        if t.dim() == 0:
            why = next((w for w in (_why_not_scalar_use(u, device) for u in users) if w), None)
            if why is None:
                plan.stages.append(Stage(i, SCALAR, source))
            else:
                plan.refused.append((i, source, why))
        elif all(_is_copy_to(u, node, device) for u in users):
            why = next((w for w in map(_why_copy_written, users) if w), None)
            if why is None:
                plan.stages.append(Stage(i, MIRROR, source))
            else:
                plan.refused.append((i, source, why))
        else:
            plan.refused.append((i, source, "used on the CPU, not only copied to the GPU"))
    return plan


def rewrite(gm: Any, example_inputs: Sequence[Any], plan: Plan) -> tuple[list[Any], StagedInputs]:
    """Give each staged placeholder a GPU example and static marking; drop the mirrors' copies.

    Returns the new example inputs and the runtime state that refreshes the GPU tensors. The
    GPU tensors themselves are made on the first call (compilation may run under a fake mode,
    whose tensors cannot hold data); the examples have their shapes, strides and dtypes.
    """
    import torch
    from torch._guards import detect_fake_mode

    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    fake_mode = detect_fake_mode(example_inputs)
    new_inputs = list(example_inputs)
    layouts: dict[int, tuple] = {}
    for s in plan.stages:
        node, t = placeholders[s.index], example_inputs[s.index]
        dtype = t.dtype
        if s.kind == MIRROR:
            converted_to = {_value(user).dtype for user in node.users}
            dtype = converted_to.pop() if len(converted_to) == 1 else t.dtype
        layouts[s.index] = (tuple(t.size()), tuple(t.stride()), dtype)
        with fake_mode if fake_mode is not None else contextlib.nullcontext():
            example = torch.empty_strided(t.size(), t.stride(), dtype=dtype, device=plan.device)
        if s.kind == MIRROR:
            for user in list(node.users):
                if _value(user).dtype == dtype:
                    user.replace_all_uses_with(node)
                    gm.graph.erase_node(user)
                else:
                    user.args, user.kwargs = (node, _value(user).dtype), {}
        new_inputs[s.index] = example
        node.meta["example_value"] = example
        node.meta.setdefault("tensor_dict", {})["_dynamo_static_input_type"] = "unguarded"
    gm.graph.lint()
    gm.recompile()
    return new_inputs, StagedInputs(plan, layouts)


class StagedInputs:
    """Per call: refresh the GPU-resident inputs from the caller's CPU ones, and substitute them."""

    def __init__(self, plan: Plan, layouts: dict[int, tuple]) -> None:
        self.plan = plan
        self.layouts = layouts
        self.gpu: dict[int, Any] = {}  # index -> the persistent GPU tensor, made on the first call
        self._scalars = [s.index for s in plan.stages if s.kind == SCALAR]
        self._mirrors = [s.index for s in plan.stages if s.kind == MIRROR]
        self._uploaded: dict[int, Any] = {}  # scalar index -> the value its GPU tensor holds
        self._mirrored: dict[int, tuple[Any, int, int]] = {}  # index -> (tensor, version, data_ptr)

    def _materialize(self) -> None:
        import torch

        for i, (size, stride, dtype) in self.layouts.items():
            self.gpu[i] = torch.empty_strided(size, stride, dtype=dtype, device=self.plan.device)

    def substitute(self, args: list[Any]) -> None:
        """Refresh, then put the GPU tensors in ``args`` in place of the CPU ones (in place).

        Copies go on the current stream, the one the compiled graph then runs on, so a new
        value is ordered after the previous call's reads and before this call's.
        """
        if not self.gpu:
            self._materialize()
        gpu = self.gpu
        for i in self._scalars:
            src = args[i]
            value = src.item()
            if self._uploaded.get(i, _NOTHING) != value:  # NaN never equals itself: always re-uploaded
                gpu[i].copy_(src, non_blocking=True)
                self._uploaded[i] = value
            args[i] = gpu[i]
        for i in self._mirrors:
            src = args[i]
            seen = self._mirrored.get(i)
            if seen is None or seen[0] is not src or seen[1] != src._version or seen[2] != src.data_ptr():
                gpu[i].copy_(src)
                self._mirrored[i] = (src, src._version, src.data_ptr())
            args[i] = gpu[i]


_NOTHING = object()


def maybe_stage(gm: Any, example_inputs: Sequence[Any], compile_gm: Callable[..., Any]) -> Any:
    """The compiled function with staged inputs, or None to compile as stock PyTorch would."""
    plan = plan_inputs(gm, example_inputs)
    if plan is None:
        return None
    # In place: compiled as rewritten whether or not an input is staged below.
    move_index_constants(gm, example_inputs, plan.device)
    for i, source, why in plan.refused:
        log.info("CGCT: input %d (%s) stays on the CPU: %s", i, source, why)
    if not plan.stages:
        return None
    new_inputs, state = rewrite(gm, example_inputs, plan)
    for s in plan.stages:
        what = ("refreshed per call when its value changes" if s.kind == SCALAR else
                "mirrored on the GPU, recopied when the CPU tensor is replaced or its version counter moves "
                "(writes through .data or numpy views are not seen; a copy that forward returns is the mirror "
                "itself, not to be written after the call)")
        log.info("CGCT: input %d (%s) made GPU-resident: %s", s.index, s.source, what)
    return refreshing(compile_gm(gm, new_inputs), state)


def refreshing(compiled: Callable[..., Any], state: StagedInputs) -> Callable[..., Any]:
    """``compiled`` called with the staged inputs refreshed and substituted.

    What ``_compile_fx_main`` returns for a GraphModule is called unboxed, with the inputs as
    positional arguments, even though AOTAutograd copies ``_boxed_call`` onto it from the boxed
    function inside (``simple_wraps``). So no attribute of ``compiled`` is copied here: that
    flag would make a caller pass one list.
    """

    def call(*args: Any) -> Any:
        args_list = list(args)
        state.substitute(args_list)
        return compiled(*args_list)

    call.grace_cgct = state  # type: ignore[attr-defined]
    return call

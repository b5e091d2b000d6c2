"""What SCG knows about one candidate CUDA graph before it is recorded.

A candidate is one function CUDA graph trees is about to record: on torch 2.11 a cudagraphable
partition (``partition_0``...) of an Inductor-generated module, or the module's whole ``call``.
Its identity for the decision cache is the generated source it was compiled from, with the
parts that vary between runs but not between programs (Inductor's cache directory in
``# kernel path:`` comments) taken out, plus the function's name within it.

Each input plays one of four roles, which decide what a replay costs:

- ``static``: parameters, buffers and other inputs Inductor marked static; a replay reads them
  in place.
- ``managed``: outputs of graphs earlier on the tree's current path; they already live in the
  graph pool, so they are read in place too.
- ``copied``: everything else that is a tensor; PT2-CG copies it into a placeholder before
  every replay. These bytes are what parameter indirection removes.
- ``scalar``: Python numbers and symbolic sizes, part of the graph's specialization.
"""

from __future__ import annotations

import hashlib
import inspect
import re
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from grace.generated import innermost

ROLES = ("static", "managed", "copied", "scalar")

_KERNEL_CALLS = (
    re.compile(r"\b(\w+)\.run\("),  # Triton kernels: triton_poi_fused_add_0.run(...)
    re.compile(r"\bextern_kernels\.(\w+)\("),  # vendor kernels through aten: mm, addmm, bmm, convolution
    re.compile(r"\btorch\.ops\.(\w+\.\w+)(?:\.\w+)?\("),  # fallback and custom ops
)
_KERNEL_PATH_COMMENT = re.compile(r"^\s*# kernel path: .*$", re.MULTILINE)
# Operator namespaces of PyTorch's collectives as generated code calls them
# (torch.ops._c10d_functional.all_reduce_.default, ...); in kernels_called they read
# "_c10d_functional.all_reduce_".
_COLLECTIVE_NAMESPACES = frozenset({"_c10d_functional", "c10d_functional", "_c10d_functional_autograd", "c10d"})


@dataclass(frozen=True)
class InputInfo:
    shape: tuple[int, ...]
    dtype: str
    stride: tuple[int, ...]
    role: str
    nbytes: int

    def signature(self) -> tuple[tuple[int, ...], str, tuple[int, ...], str]:
        return (self.shape, self.dtype, self.stride, self.role)


@dataclass(frozen=True)
class Candidate:
    name: str  # e.g. "partition_1", or "call" when the graph was not partitioned
    mode: str  # "inference", "forward" or "backward"
    source_file: str | None
    code_sha256: str | None  # None: the generated source could not be read; never cached
    kernels: tuple[str, ...]
    inputs: tuple[InputInfo, ...]

    @property
    def copied_bytes(self) -> int:
        """Bytes PT2-CG copies into placeholders before each replay of this graph."""
        return sum(i.nbytes for i in self.inputs if i.role == "copied")

    @property
    def copied_inputs(self) -> int:
        return sum(1 for i in self.inputs if i.role == "copied")

    @property
    def random_state_readers(self) -> tuple[str, ...]:
        """The operators this graph calls that read random-number state a captured forward saved
        (attention's philox seed and offset, :mod:`grace.random_state`)."""
        from grace.random_state import operator_reads_random_state

        return tuple(k for k in self.kernels if operator_reads_random_state(k))

    @property
    def collectives(self) -> tuple[str, ...]:
        """The collective operators this graph launches (all_reduce_, wait_tensor, ...)."""
        return tuple(k for k in self.kernels if k.partition(".")[0] in _COLLECTIVE_NAMESPACES)


def normalized_source(text: str) -> str:
    """Generated module source without what differs between identical compilations."""
    return _KERNEL_PATH_COMMENT.sub("", text)


def code_digest(module_source: str, function_name: str) -> str:
    payload = normalized_source(module_source) + "\0" + function_name
    return hashlib.sha256(payload.encode()).hexdigest()


def kernels_called(function_source: str) -> tuple[str, ...]:
    """Kernels a generated function launches, in order of first appearance."""
    found: dict[int, str] = {}
    for pattern in _KERNEL_CALLS:
        for match in pattern.finditer(function_source):
            found.setdefault(match.start(), match.group(1))
    names = [found[pos] for pos in sorted(found)]
    return tuple(dict.fromkeys(names))


def describe_input(value: Any, index: int, static: set[int], is_managed: Callable[[Any], bool]) -> InputInfo:
    import torch

    if not isinstance(value, torch.Tensor):
        return InputInfo((), type(value).__name__, (), "scalar", 0)
    if index in static:
        role = "static"
    elif is_managed(value):
        role = "managed"
    else:
        role = "copied"
    return InputInfo(tuple(value.shape), str(value.dtype), tuple(value.stride()), role,
                     value.numel() * value.element_size())


def describe(model: Callable[..., Any], mode: str, inputs: Sequence[Any], static_input_idxs: Sequence[int],
             is_managed: Callable[[Any], bool]) -> Candidate:
    """The candidate for ``model`` called on ``inputs`` (the real ones, at recording time)."""
    fn = innermost(model)
    name = getattr(fn, "__name__", type(fn).__name__)
    source_file = None
    digest = None
    kernels: tuple[str, ...] = ()
    try:
        source_file = inspect.getsourcefile(fn)
        if source_file:
            with open(source_file) as f:
                digest = code_digest(f.read(), getattr(fn, "__qualname__", name))
        kernels = kernels_called(inspect.getsource(fn))
    except (OSError, TypeError):
        pass
    static = set(static_input_idxs)
    described = tuple(describe_input(v, i, static, is_managed) for i, v in enumerate(inputs))
    return Candidate(name, mode, source_file, digest, kernels, described)

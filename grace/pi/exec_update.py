"""Strategy (3) of parameter indirection: rewrite the instantiated graph's kernel arguments.

Design note
-----------
Strategy (1) recompiles the Triton kernels that read an input so that they load its pointer
from a table. This strategy leaves every kernel as it was captured (Triton's, cuBLAS's, any
vendor's) and changes the instantiated graph instead: before a replay, each kernel node whose
arguments hold a pointer into an indirected input's placeholder is given the new input's
pointer there (``cuGraphExecKernelNodeSetParams``, which affects launches made after it and
never one already queued). No bytes are copied and nothing is recompiled; the cost is one
driver call per node that reads such an input.

Finding the pointers (:func:`scan`): after the capture, every kernel node's arguments are read
back with their layout (``cuFuncGetParamInfo``), and every 8-byte-aligned word of every
argument is taken as a possible pointer, so a pointer inside a by-value struct (a CUTLASS
``Params``) is found as well as a plain pointer argument. That is sound here because the
placeholders are held through a capture under this strategy (``grace.pi.tree_hook.HeldInputs``): no buffer of the graph can
sit at a placeholder's address, so a word inside a placeholder's bytes points into that input,
or is an integer that happens to equal such an address, which the check against stock kernels
with the inputs moved would catch. An input keeps its copy if a memcpy or memset node touches
its placeholder; every input does if the graph has a node of another type (child graph, host
node, conditional) or a kernel whose arguments cannot be read. A pointer that a kernel derives
and stores in device memory (a descriptor built on the device) is invisible to any scan; that
too is left to the check.

:func:`scan` and :class:`ExecPatch` are pure (CPU-tested); :func:`read_graph` and
:func:`bind` are the thin layer over the CUDA driver (``cuda.bindings``).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from grace.pi.plan import Placeholder, owner

WORD = 8


@dataclass(frozen=True)
class KernelNode:
    """A kernel node: its position in the graph's node list, name, its arguments' bytes, and
    each argument's byte offset in the node's parameter buffer (where known)."""

    index: int
    name: str
    params: tuple[bytes, ...]
    offsets: tuple[int, ...] = ()


@dataclass(frozen=True)
class CopyNode:
    """A memcpy or memset node and the device ranges (address, bytes) it touches."""

    index: int
    kind: str
    ranges: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class OpaqueNode:
    """A node whose pointers cannot be read (child graph, host node, ...)."""

    index: int
    kind: str


GraphNode = KernelNode | CopyNode | OpaqueNode


@dataclass(frozen=True)
class Site:
    """Argument ``param`` of kernel node ``node`` holds, at byte ``byte``, input ``input_index``'s
    data pointer plus ``offset``."""

    node: int
    param: int
    byte: int
    input_index: int
    offset: int


@dataclass
class Scan:
    sites: list[Site]
    blocked: dict[int, list[str]]  # input index -> what else reaches its placeholder


def scan(nodes: Sequence[GraphNode], placeholders: Sequence[Placeholder]) -> Scan:
    """Where the graph's kernel arguments point into placeholders, and what else reaches them."""
    out = Scan([], {})

    def block(input_index: int, why: str) -> None:
        reasons = out.blocked.setdefault(input_index, [])
        if why not in reasons:
            reasons.append(why)

    for node in nodes:
        if isinstance(node, KernelNode):
            for k, param in enumerate(node.params):
                for byte in range(0, len(param) - WORD + 1, WORD):
                    word = int.from_bytes(param[byte:byte + WORD], "little")
                    p = owner(placeholders, word)
                    if p is not None:
                        out.sites.append(Site(node.index, k, byte, p.input_index, word - p.data_ptr))
        elif isinstance(node, CopyNode):
            for address, size in node.ranges:
                for p in placeholders:
                    if address < p.data_ptr + max(p.storage_bytes, 1) and p.data_ptr < address + size:
                        block(p.input_index, f"{node.kind} node {node.index}")
        else:
            for p in placeholders:
                block(p.input_index, f"{node.kind} node {node.index}")
    return out


class ExecPatch:
    """Per replay: the new pointers written into each affected node's argument buffers, then
    one ``set_params(node)`` per node (the driver call). Filled with the placeholders' own
    addresses, the graph is the one captured."""

    def __init__(self, sites: Sequence[Site], buffers: dict[int, list[Any]],
                 set_params: Callable[[int], None], keep: Sequence[Any] = ()) -> None:
        """``buffers[node][param]``: writable buffers holding each affected node's arguments,
        the ones ``set_params`` hands to the driver; ``keep``: what else the driver reads."""
        self._keep = tuple(keep)
        self.sites = tuple(sites)
        self._writes = tuple((buffers[s.node][s.param], s.byte, s.input_index, s.offset) for s in self.sites)
        self._nodes = tuple(sorted({s.node for s in self.sites}))
        self._inputs = tuple(sorted({s.input_index for s in self.sites}))
        self._set_params = set_params
        self._pack = struct.Struct("<Q").pack_into
        self._last: tuple[int, ...] | None = None  # the pointers the graph holds now

    def fill(self, base_ptrs: Sequence[int]) -> None:
        current = tuple(base_ptrs[i] for i in self._inputs)
        if current == self._last:  # the same tensors as last time: nothing to rewrite
            return
        self._last = None  # until every node is set
        pack = self._pack
        for buffer, byte, input_index, offset in self._writes:
            pack(buffer, byte, base_ptrs[input_index] + offset)
        for node in self._nodes:
            self._set_params(node)
        self._last = current


# --- the CUDA driver layer ------------------------------------------------------------------


class ScanError(RuntimeError):
    """The graph could not be read or patched; its inputs keep their copies."""


@dataclass
class DriverGraph:
    """The nodes of a kept ``cudaGraph_t``, with what :func:`bind` needs to patch them."""

    nodes: list[GraphNode]
    handles: dict[int, Any]  # node index -> CUgraphNode
    params: dict[int, Any]  # kernel node index -> its CUDA_KERNEL_NODE_PARAMS


def read_graph(raw_graph: int) -> DriverGraph:
    """The nodes of ``raw_graph`` (``torch.cuda.CUDAGraph(keep_graph=True).raw_cuda_graph()``)."""
    from cuda.bindings import driver

    graph = driver.CUgraph(raw_graph)
    _, count = _check(driver.cuGraphGetNodes(graph))
    handles, _ = _check(driver.cuGraphGetNodes(graph, count))
    out = DriverGraph([], {}, {})
    kinds = driver.CUgraphNodeType
    for index, node in enumerate(handles):
        (kind,) = _check(driver.cuGraphNodeGetType(node))
        out.handles[index] = node
        if kind == kinds.CU_GRAPH_NODE_TYPE_KERNEL:
            (p,) = _check(driver.cuGraphKernelNodeGetParams(node))
            name = _function_name(driver, p.func)
            try:
                args, offsets = _kernel_args(driver, p)
            except ScanError as e:  # its arguments may hold any pointer: it blocks every input
                out.nodes.append(OpaqueNode(index, f"kernel {name} ({e})"))
                continue
            out.params[index] = p
            out.nodes.append(KernelNode(index, name, args, offsets))
        elif kind == kinds.CU_GRAPH_NODE_TYPE_MEMCPY:
            (p,) = _check(driver.cuGraphMemcpyNodeGetParams(node))
            ranges = tuple(r for r in (_copy_range(p, "src"), _copy_range(p, "dst")) if r[0])
            out.nodes.append(CopyNode(index, "memcpy", ranges))
        elif kind == kinds.CU_GRAPH_NODE_TYPE_MEMSET:
            (p,) = _check(driver.cuGraphMemsetNodeGetParams(node))
            row = max(int(p.pitch), int(p.width) * int(p.elementSize))
            out.nodes.append(CopyNode(index, "memset", ((int(p.dst), row * max(int(p.height), 1)),)))
        elif kind != kinds.CU_GRAPH_NODE_TYPE_EMPTY:
            out.nodes.append(OpaqueNode(index, kinds(kind).name))
    return out


def bind(graph: DriverGraph, raw_exec: int, sites: Sequence[Site]) -> ExecPatch:
    """An :class:`ExecPatch` whose ``set_params`` updates ``raw_exec`` (the instantiated graph).

    Each affected node gets its own copy of its arguments, in buffers that live as long as the
    patch, and a params struct pointing at them; the rest of the struct is the captured one.
    """
    import ctypes

    from cuda.bindings import driver

    exec_ = driver.CUgraphExec(raw_exec)
    buffers: dict[int, list[Any]] = {}
    keep: list[Any] = []
    setters: dict[int, Callable[[], None]] = {}
    by_index = {n.index: n for n in graph.nodes if isinstance(n, KernelNode)}
    for index in sorted({s.node for s in sites}):
        args = [ctypes.create_string_buffer(param, len(param)) for param in by_index[index].params]
        pointers = (ctypes.c_void_p * len(args))(*(ctypes.addressof(a) for a in args))
        params = graph.params[index]
        params.kernelParams = ctypes.addressof(pointers)
        params.extra = 0
        buffers[index] = args
        keep += [args, pointers, params]  # every argument buffer: the driver reads them all
        handle = graph.handles[index]
        setters[index] = _setter(driver, exec_, handle, params)

    return ExecPatch(sites, buffers, lambda node: setters[node](), keep)


def _setter(driver: Any, exec_: Any, handle: Any, params: Any) -> Callable[[], None]:
    set_params, success = driver.cuGraphExecKernelNodeSetParams, driver.CUresult.CUDA_SUCCESS

    def call() -> None:
        (err,) = set_params(exec_, handle, params)
        if err != success:
            raise ScanError(f"cuGraphExecKernelNodeSetParams failed: {driver.CUresult(err).name}")

    return call


def _kernel_args(driver: Any, p: Any) -> tuple[tuple[bytes, ...], tuple[int, ...]]:
    """Each argument's bytes and its offset in the parameter buffer."""
    import ctypes

    if not int(p.kernelParams):
        raise ScanError("arguments given as an extra buffer, which is not read")
    if not int(p.func):
        raise ScanError("no CUfunction to query its parameters")
    pointers = ctypes.cast(int(p.kernelParams), ctypes.POINTER(ctypes.c_void_p))
    args, offsets = [], []
    k = 0
    while True:
        err, offset, size = driver.cuFuncGetParamInfo(p.func, k)
        if err == driver.CUresult.CUDA_ERROR_INVALID_VALUE:
            return tuple(args), tuple(offsets)  # past the last parameter
        if err != driver.CUresult.CUDA_SUCCESS:
            raise ScanError(f"cuFuncGetParamInfo failed: {driver.CUresult(err).name}")
        args.append(ctypes.string_at(pointers[k], size))
        offsets.append(int(offset))
        k += 1


def _copy_range(p: Any, side: str) -> tuple[int, int]:
    """(device address, bytes) one side of a 3-D memcpy may touch, rounded up to whole rows and slices."""
    base = int(getattr(p, f"{side}Device"))
    row = max(int(getattr(p, f"{side}Pitch")), int(p.WidthInBytes))
    rows = int(getattr(p, f"{side}Y")) + max(int(p.Height), 1)
    slices = int(getattr(p, f"{side}Z")) + max(int(p.Depth), 1)
    height = max(int(getattr(p, f"{side}Height")), rows)
    return base, int(getattr(p, f"{side}XInBytes")) + row * height * slices


def _function_name(driver: Any, func: Any) -> str:
    err, name = driver.cuFuncGetName(func)
    if err != driver.CUresult.CUDA_SUCCESS:
        return "<unnamed kernel>"
    return name.decode() if isinstance(name, bytes) else str(name)


def _check(result: tuple) -> tuple:
    from cuda.bindings import driver

    err, *values = result
    if err != driver.CUresult.CUDA_SUCCESS:
        raise ScanError(f"CUDA driver call failed: {driver.CUresult(err).name}")
    return tuple(values)

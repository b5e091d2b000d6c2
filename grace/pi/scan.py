"""Finding the pointers into given device ranges that a recorded CUDA graph's nodes hold.

This is the graph-level view that strategies (2) and (3) of PI need (rewriting a vendor
kernel's parameters on the device or in the instantiated graph): which node holds which pointer
at which parameter. The tree hook does not use it to decide safety
(:mod:`grace.pi.tree_hook` matches placeholders by storage identity during the capture),
because a placeholder is freed during its own capture and later buffers of the same graph may
sit at its address: an address match after the capture over-approximates. Each kernel node's
parameters are read back with their layout from
``cuFuncGetParamInfo``, and every 8-byte-aligned word of every parameter is taken as a possible
pointer, so a pointer inside a by-value struct (a CUTLASS ``Params``, a TMA descriptor passed as
a ``__grid_constant__``) is found as well as a plain pointer argument. Memcpy and memset nodes
are read from their own parameters. A node of any other type (a child graph, host node, event,
conditional) cannot be read this way and blocks every input: the plan then keeps all copies.

Treating any word as a pointer errs one way only: an integer that happens to fall inside a
placeholder blocks that input (it keeps its copy), never the reverse. What this cannot see is a
pointer stored in device memory by an earlier node (a descriptor written by a kernel); the
validation replay on perturbed inputs, before a plan is deployed, is the net for that.

The words are matched by :func:`references`, which is pure; :func:`read_graph` is the thin layer
over the CUDA driver (``cuda.bindings``) that produces its input.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from grace.pi.plan import Placeholder, Reference, owner

WORD = 8


@dataclass(frozen=True)
class KernelNode:
    """A kernel node's name (for the log) and its parameters' bytes, in order."""

    name: str
    params: tuple[bytes, ...]
    triton: bool = False  # a Triton kernel (Inductor's or an indirected variant)


@dataclass(frozen=True)
class CopyNode:
    """A memcpy or memset node: the device ranges it touches, as (address, bytes)."""

    kind: str  # "memcpy" or "memset"
    ranges: tuple[tuple[int, int], ...]
    index: int


@dataclass(frozen=True)
class OpaqueNode:
    """A node whose parameters cannot be read for pointers (child graph, host node, ...)."""

    kind: str
    index: int


GraphNode = KernelNode | CopyNode | OpaqueNode


def words(param: bytes) -> list[int]:
    """Every 8-byte-aligned little-endian word of a parameter (a shorter one holds no pointer)."""
    return [int.from_bytes(param[i:i + WORD], "little") for i in range(0, len(param) - WORD + 1, WORD)]


def references(nodes: Sequence[GraphNode], placeholders: Sequence[Placeholder]) -> list[Reference]:
    """Every pointer into a placeholder that the graph's nodes hold."""
    found: list[Reference] = []
    for node in nodes:
        if isinstance(node, KernelNode):
            kind = "triton-kernel" if node.triton else "vendor-kernel"
            for param in node.params:
                for word in words(param):
                    if owner(placeholders, word) is not None:
                        found.append(Reference(word, kind, node.name))
        elif isinstance(node, CopyNode):
            for address, size in node.ranges:
                for p in placeholders:
                    if address < p.data_ptr + max(p.span, 1) and p.data_ptr < address + size:
                        found.append(Reference(max(address, p.data_ptr), node.kind, f"{node.kind} node {node.index}"))
        else:
            found += [Reference(p.data_ptr, "other", f"{node.kind} node {node.index}") for p in placeholders]
    return found


# --- reading a recorded graph through the CUDA driver -------------------------------------


class ScanError(RuntimeError):
    """The graph could not be read; the caller keeps every copy."""


def read_graph(raw_graph: int) -> list[GraphNode]:
    """The nodes of the ``cudaGraph_t`` ``raw_graph`` (as ``torch.cuda.CUDAGraph.raw_cuda_graph``)."""
    from cuda.bindings import driver

    graph = driver.CUgraph(raw_graph)
    _, count = _check(driver.cuGraphGetNodes(graph))
    nodes_list, _ = _check(driver.cuGraphGetNodes(graph, count))
    out: list[GraphNode] = []
    for index, node in enumerate(nodes_list):
        (node_type,) = _check(driver.cuGraphNodeGetType(node))
        if node_type == driver.CUgraphNodeType.CU_GRAPH_NODE_TYPE_KERNEL:
            out.append(_kernel_node(driver, node))
        elif node_type == driver.CUgraphNodeType.CU_GRAPH_NODE_TYPE_MEMCPY:
            (p,) = _check(driver.cuGraphMemcpyNodeGetParams(node))
            ranges = tuple(r for r in (_copy_range(p, "src"), _copy_range(p, "dst")) if r[0])
            out.append(CopyNode("memcpy", ranges, index))
        elif node_type == driver.CUgraphNodeType.CU_GRAPH_NODE_TYPE_MEMSET:
            (p,) = _check(driver.cuGraphMemsetNodeGetParams(node))
            row = max(int(p.pitch), int(p.width) * int(p.elementSize))
            out.append(CopyNode("memset", ((int(p.dst), row * max(int(p.height), 1)),), index))
        elif node_type == driver.CUgraphNodeType.CU_GRAPH_NODE_TYPE_EMPTY:
            continue
        else:
            out.append(OpaqueNode(driver.CUgraphNodeType(node_type).name, index))
    return out


def _copy_range(p: object, side: str) -> tuple[int, int]:
    """(device address, bytes) one side of a 3-D memcpy may touch, rounded up to whole rows and slices."""
    base = int(getattr(p, f"{side}Device"))
    row = max(int(getattr(p, f"{side}Pitch")), int(p.WidthInBytes))
    rows = int(getattr(p, f"{side}Y")) + max(int(p.Height), 1)
    slices = int(getattr(p, f"{side}Z")) + max(int(p.Depth), 1)
    height = max(int(getattr(p, f"{side}Height")), rows)
    return base, int(getattr(p, f"{side}XInBytes")) + row * height * slices


def _kernel_node(driver: object, node: object) -> KernelNode:
    import ctypes

    (p,) = _check(driver.cuGraphKernelNodeGetParams(node))
    name = _function_name(driver, p.func)
    params = []
    pointers = ctypes.cast(int(p.kernelParams), ctypes.POINTER(ctypes.c_void_p)) if int(p.kernelParams) else None
    k = 0
    while True:
        err, offset, size = driver.cuFuncGetParamInfo(p.func, k)
        if err != driver.CUresult.CUDA_SUCCESS:
            break  # past the last parameter
        if pointers is None:
            raise ScanError(f"{name}: parameters given as an extra buffer, which this scan does not read")
        params.append(ctypes.string_at(pointers[k], size))
        k += 1
    return KernelNode(name, tuple(params), triton=name.startswith("triton_"))


def _function_name(driver: object, func: object) -> str:
    err, name = driver.cuFuncGetName(func)
    if err != driver.CUresult.CUDA_SUCCESS:
        return "<unnamed kernel>"
    return name.decode() if isinstance(name, bytes) else str(name)


def _check(result: tuple) -> tuple:
    err, *values = result
    from cuda.bindings import driver

    if err != driver.CUresult.CUDA_SUCCESS:
        raise ScanError(f"CUDA driver call failed: {driver.CUresult(err).name}")
    return tuple(values)

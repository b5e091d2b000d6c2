"""Strategy (2) of parameter indirection, the paper's: a prelude kernel rewrites the graph's
kernel arguments on the device.

Design note
-----------
Strategy (1) reaches only Triton kernels, which it recompiles; a cuBLAS or cuDNN kernel reads
its inputs through arguments that nothing can recompile. Strategy (3) rewrites those arguments
from the host, one driver call per kernel node per replay. This strategy, the paper's, moves the
rewrite onto the GPU: one kernel node, the prelude, is added at the root of the captured graph;
at every launch it reads the graph's pointer table (strategy (1)'s :class:`PointerTable`,
filled by one host-to-device copy when the pointers change) and writes each new pointer into
the argument buffers of the nodes that read an indirected input, with the device graph API
(``cudaGraphKernelNodeSetParam``, CUDA 12.4+). The replay then costs the table's copy and one
small kernel, whatever the number of nodes.

Where to write: the sites of :func:`grace.pi.exec_update.scan` (every 8-byte word of every
kernel argument that points into a placeholder; sound because placeholders are held through a
capture under this strategy), each as a byte offset into its node's parameter buffer (``cuFuncGetParamInfo``).
Before the graph is instantiated, each such node is marked device-updatable, which gives its
device handle, and the prelude gets an edge to every root, so it runs before any kernel and its
writes take effect in the same launch. A write persists in the executable graph; the prelude
repeats it on every launch, so a launch always runs with the pointers the table holds.

The prelude is compiled once per process by NVRTC (``-rdc``) and linked with the device
runtime (``libcudadevrt.a``, from the CUDA wheel or a toolkit) by nvJitLink. Both are host
libraries, so :func:`compile_prelude` runs and is tested without a GPU. :func:`layout` is pure;
:func:`install` is the thin layer over the CUDA driver.

The driver forbids cloning a graph with device-updatable nodes or updating its executable
with ``cudaGraphExecUpdate``; CUDA graph trees do neither. A graph whose nodes are updated from
the device within the graph is uploaded (``cuGraphUpload``) before its first launch: launched
without it, the launch's own upload can overwrite the prelude's writes, and some kernels then read
the placeholders instead of the inputs (measured on real graphs, ``docs/pi.md``).
:func:`upload` runs once, after instantiation, before the check's replay, the graph's first launch.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grace.pi.exec_update import DriverGraph, KernelNode, ScanError, Site
from grace.pi.plan import Slot

KERNEL_NAME = "grace_pi_prelude"
THREADS = 128

# One thread per entry. An entry is three 64-bit words: the node's device handle, the byte
# offset in its parameter buffer, and the table slot whose value goes there.
PRELUDE_SOURCE = r"""
struct Entry { cudaGraphDeviceNode_t node; unsigned long long offset; unsigned long long slot; };

extern "C" __global__ void grace_pi_prelude(const Entry* entries, unsigned int count,
                                            const unsigned long long* table) {
  const unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count) {
    const Entry e = entries[i];
    const unsigned long long value = table[e.slot];
    cudaGraphKernelNodeSetParam(e.node, e.offset, &value, sizeof(value));
  }
}
"""


class PreludeError(ScanError):
    """The prelude could not be built or installed; the graph's inputs keep their copies."""


@dataclass(frozen=True)
class Entry:
    """Write table slot ``slot`` at byte ``offset`` of kernel node ``node``'s parameters."""

    node: int
    offset: int
    slot: int


def layout(sites: Sequence[Site], nodes: Sequence[KernelNode]) -> tuple[list[Slot], list[Entry]]:
    """The table's slots (one per distinct input and offset) and the prelude's writes."""
    by_index = {n.index: n for n in nodes}
    slots: list[Slot] = []
    slot_of: dict[tuple[int, int], int] = {}
    entries: list[Entry] = []
    for site in sites:
        node = by_index[site.node]
        if len(node.offsets) != len(node.params):
            raise PreludeError(f"kernel {node.name}: parameter offsets unknown")
        key = (site.input_index, site.offset)
        if key not in slot_of:
            slot_of[key] = len(slots)
            slots.append(Slot(site.input_index, site.offset, node.name))
        entries.append(Entry(site.node, node.offsets[site.param] + site.byte, slot_of[key]))
    return slots, entries


def entry_words(entries: Sequence[Entry], device_nodes: dict[int, int]) -> list[int]:
    """The entries as the prelude reads them: (device handle, offset, slot) per entry."""
    return [word for e in entries for word in (device_nodes[e.node], e.offset, e.slot)]


# --- building the prelude ------------------------------------------------------------------


def cudadevrt_candidates() -> list[Path]:
    """Where ``libcudadevrt.a`` may be: ``GRACE_CUDADEVRT``, the CUDA wheels, a toolkit."""
    found: list[Path] = []
    if os.environ.get("GRACE_CUDADEVRT"):
        found.append(Path(os.environ["GRACE_CUDADEVRT"]))
    try:
        import nvidia

        for root in nvidia.__path__:
            found += sorted(Path(root).glob("*/lib/libcudadevrt.a"))
    except ImportError:
        pass
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home:
            found += [Path(home) / "lib64" / "libcudadevrt.a", Path(home) / "lib" / "libcudadevrt.a"]
    return found


def find_cudadevrt() -> Path:
    candidates = cudadevrt_candidates()
    for path in candidates:
        if path.is_file():
            return path
    raise PreludeError("libcudadevrt.a (the CUDA device runtime, which the prelude links) not found; "
                       f"looked in: {', '.join(map(str, candidates)) or 'nowhere'}; set GRACE_CUDADEVRT")


@functools.lru_cache(maxsize=None)
def compile_prelude(arch: str) -> bytes:
    """The prelude's cubin for ``arch`` (e.g. ``"sm_90"``): NVRTC, then nvJitLink with cudadevrt."""
    try:
        from cuda.bindings import nvjitlink, nvrtc
    except ImportError as e:
        raise PreludeError(f"cuda-bindings with nvrtc and nvjitlink is needed: {e}") from e
    ptx = _nvrtc_ptx(nvrtc, arch)
    options = [f"-arch={arch}"]
    try:
        handle = nvjitlink.create(len(options), options)
    except Exception as e:  # noqa: BLE001 - the library is missing or refuses the options
        raise PreludeError(f"nvJitLink: {e}") from e
    try:
        nvjitlink.add_data(handle, nvjitlink.InputType.PTX, ptx, len(ptx), KERNEL_NAME)
        nvjitlink.add_file(handle, nvjitlink.InputType.LIBRARY, str(find_cudadevrt()))
        nvjitlink.complete(handle)
        cubin = bytearray(nvjitlink.get_linked_cubin_size(handle))
        nvjitlink.get_linked_cubin(handle, cubin)
        return bytes(cubin)
    except PreludeError:
        raise
    except Exception as e:  # noqa: BLE001 - a link error: say what the linker said
        raise PreludeError(f"nvJitLink could not link the prelude: {e}: {_link_log(nvjitlink, handle)}") from e
    finally:
        nvjitlink.destroy(handle)


def _nvrtc_ptx(nvrtc: Any, arch: str) -> bytes:
    err, program = nvrtc.nvrtcCreateProgram(PRELUDE_SOURCE.encode(), f"{KERNEL_NAME}.cu".encode(), 0, [], [])
    _nvrtc_check(nvrtc, err, "nvrtcCreateProgram")
    try:
        options = [b"-rdc=true", f"--gpu-architecture={arch}".encode()]
        (err,) = nvrtc.nvrtcCompileProgram(program, len(options), options)
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            _, size = nvrtc.nvrtcGetProgramLogSize(program)
            log = b" " * size
            nvrtc.nvrtcGetProgramLog(program, log)
            raise PreludeError(f"NVRTC could not compile the prelude: {log.decode(errors='replace').strip()}")
        err, size = nvrtc.nvrtcGetPTXSize(program)
        _nvrtc_check(nvrtc, err, "nvrtcGetPTXSize")
        ptx = b" " * size
        (err,) = nvrtc.nvrtcGetPTX(program, ptx)
        _nvrtc_check(nvrtc, err, "nvrtcGetPTX")
        return ptx
    finally:
        nvrtc.nvrtcDestroyProgram(program)


def _nvrtc_check(nvrtc: Any, err: Any, what: str) -> None:
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise PreludeError(f"{what} failed: {err}")


def _link_log(nvjitlink: Any, handle: int) -> str:
    try:
        log = bytearray(nvjitlink.get_error_log_size(handle))
        nvjitlink.get_error_log(handle, log)
        return log.decode(errors="replace").strip("\x00 \n")
    except Exception:  # noqa: BLE001 - the log is a courtesy
        return "(no log)"


# --- the CUDA driver layer ------------------------------------------------------------------


@dataclass
class Prelude:
    """What an installed prelude needs alive as long as its graph: the entries it reads, the
    argument buffers its node was added with, and its module."""

    entries: Any  # int64 device tensor
    keep: tuple[Any, ...]
    nodes: int  # kernel nodes it rewrites
    writes: int


class PreludePointers:
    """The replay's pointer state under this strategy: the table the prelude reads (filled as
    strategy (1) fills it), kept alive with the prelude that reads it."""

    def __init__(self, table: Any, prelude: Prelude) -> None:
        self.table = table
        self.prelude = prelude
        self.fill = table.fill  # the replay path calls it directly


def load(device: Any) -> None:
    """Compile and load the prelude for ``device`` now (raises :class:`PreludeError`)."""
    import torch
    from cuda.bindings import driver

    major, minor = torch.cuda.get_device_capability(device)
    _load(driver, f"sm_{major}{minor}")


def install(graph: DriverGraph, raw_graph: int, entries: Sequence[Entry], table: Any, device: Any) -> Prelude:
    """Mark the written nodes device-updatable, add the prelude before every root of
    ``raw_graph`` (not yet instantiated), reading ``table`` (a :class:`PointerTable`)."""
    import ctypes

    import torch
    from cuda.bindings import driver

    if not entries:
        raise PreludeError("nothing to rewrite")
    major, minor = torch.cuda.get_device_capability(device)
    function = _load(driver, f"sm_{major}{minor}")
    cu_graph = driver.CUgraph(raw_graph)
    attr = driver.CUkernelNodeAttrID.CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE
    device_nodes: dict[int, int] = {}
    for index in sorted({e.node for e in entries}):
        handle = graph.handles[index]
        value = driver.CUkernelNodeAttrValue()
        value.deviceUpdatableKernelNode.deviceUpdatable = 1
        _check(driver, driver.cuGraphKernelNodeSetAttribute(handle, attr, value), "mark a node device-updatable")
        (got,) = _check(driver, driver.cuGraphKernelNodeGetAttribute(handle, attr), "read a device node handle")
        device_nodes[index] = int(got.deviceUpdatableKernelNode.devNode)
    words = torch.tensor(entry_words(entries, device_nodes), dtype=torch.int64).view(-1).to(device)
    _, count = _check(driver, driver.cuGraphGetRootNodes(cu_graph), "count the roots")
    roots, _ = _check(driver, driver.cuGraphGetRootNodes(cu_graph, count), "read the roots")

    args = (ctypes.c_uint64(words.data_ptr()), ctypes.c_uint32(len(entries)), ctypes.c_uint64(table.table.data_ptr()))
    pointers = (ctypes.c_void_p * len(args))(*(ctypes.addressof(a) for a in args))
    params = driver.CUDA_KERNEL_NODE_PARAMS()
    params.func = function
    params.gridDimX, params.gridDimY, params.gridDimZ = (len(entries) + THREADS - 1) // THREADS, 1, 1
    params.blockDimX, params.blockDimY, params.blockDimZ = THREADS, 1, 1
    params.sharedMemBytes = 0
    params.kernelParams = ctypes.addressof(pointers)
    params.extra = 0
    (node,) = _check(driver, driver.cuGraphAddKernelNode(cu_graph, None, 0, params), "add the prelude node")
    if roots:
        _add_edges(driver, cu_graph, [node] * len(roots), list(roots))
    return Prelude(words, (args, pointers, params, function, table), len(device_nodes), len(entries))


def upload(raw_exec: int, device: Any) -> None:
    """Upload the instantiated graph ``raw_exec`` on the current stream and wait for it."""
    import torch
    from cuda.bindings import driver

    stream = driver.CUstream(torch.cuda.current_stream(device).cuda_stream)
    _check(driver, driver.cuGraphUpload(driver.CUgraphExec(raw_exec), stream), "upload the graph")
    torch.cuda.current_stream(device).synchronize()


def _add_edges(driver: Any, graph: Any, sources: list[Any], targets: list[Any]) -> None:
    """``cuGraphAddDependencies``, whose CUDA 13 form takes per-edge data (None: plain edges)."""
    try:
        result = driver.cuGraphAddDependencies(graph, sources, targets, None, len(targets))
    except TypeError:  # the CUDA 12 bindings: no edge data
        result = driver.cuGraphAddDependencies(graph, sources, targets, len(targets))
    _check(driver, result, "order the prelude before the graph's roots")


_MODULES: dict[tuple[int, str], Any] = {}  # (context, arch) -> CUfunction, for the process


def _load(driver: Any, arch: str) -> Any:
    (context,) = _check(driver, driver.cuCtxGetCurrent(), "read the current context")
    key = (int(context), arch)
    if key not in _MODULES:
        (module,) = _check(driver, driver.cuModuleLoadData(compile_prelude(arch)), "load the prelude")
        (function,) = _check(driver, driver.cuModuleGetFunction(module, KERNEL_NAME.encode()), "find the prelude")
        _MODULES[key] = function
    return _MODULES[key]


def _check(driver: Any, result: tuple, what: str) -> tuple:
    err, *values = result
    if err != driver.CUresult.CUDA_SUCCESS:
        raise PreludeError(f"{what}: {driver.CUresult(err).name}")
    return tuple(values)

"""Host cost per replay of each way to hand a graph its new input pointers: diagnostic for the
replay path of parameter indirection (grace/pi/table.py, grace/pi/exec_update.py).

Every way is stream-ordered (the values land after the previous replay's kernels and before the
next one's), which is what the pointer table needs. For three pointers, per call, back to back:

* memcpy+event: today's table fill, a host-to-device copy from a pinned ring buffer plus an
  event recorded after it and synchronized before the buffer is reused (cuda.bindings runtime);
* pageable memcpy: the copy from pageable memory, which the driver stages before returning, so
  the host buffer is free at once and no event is needed (ctypes, driver API);
* write-value: one ``cuStreamWriteValue64`` per pointer (ctypes);
* batch memop: one ``cuStreamBatchMemOp`` writing every pointer (ctypes);
* writer kernel: a one-block kernel launched with the pointers as its by-value arguments,
  storing them in the table (ctypes ``cuLaunchKernel``);
* exec set-params: ``cuGraphExecKernelNodeSetParams`` on one kernel node of an instantiated
  graph, through cuda.bindings and through ctypes (strategy (3)'s per-node cost).

Each prints microseconds of host time per call and whether the table (or the graph's output)
held the last values afterwards. Run on the GPU: ``python scripts/probes/pointer_update_cost.py``.
"""

from __future__ import annotations

import ctypes
import struct
import time
from typing import Any, Callable

N = 3  # pointers per replay (micro-eos's three inputs)
CALLS = 4000

WRITER_SOURCE = r"""
struct Values { unsigned long long v[32]; };
extern "C" __global__ void grace_table_writer(unsigned long long* table, unsigned int n, Values values) {
  const unsigned int i = threadIdx.x;
  if (i < n) table[i] = values.v[i];
}
"""


def timed(fn: Callable[[int], Any], sync: Callable[[], None]) -> float:
    fn(0)
    sync()
    start = time.perf_counter()
    for k in range(1, CALLS + 1):
        fn(k)
    elapsed = time.perf_counter() - start
    sync()
    return round(elapsed / CALLS * 1e6, 2)


def driver_fn(cu: Any, *names: str) -> Any:
    for name in names:
        fn = getattr(cu, name, None)
        if fn is not None:
            fn.restype = ctypes.c_int
            return fn
    raise AttributeError(f"none of {names} in libcuda")


def values_for(k: int) -> list[int]:
    return [0x7F0000000000 + 256 * (k * N + j) for j in range(N)]


def writer_function(source: str) -> Any:
    """``grace_table_writer`` of ``source``, compiled with NVRTC for this GPU and loaded."""
    import torch
    from cuda.bindings import driver, nvrtc

    _, prog = nvrtc.nvrtcCreateProgram(source.encode(), b"writer.cu", 0, [], [])
    cc = torch.cuda.get_device_capability()
    opts = [f"--gpu-architecture=sm_{cc[0]}{cc[1]}".encode()]
    (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
    assert err == nvrtc.nvrtcResult.NVRTC_SUCCESS, err
    _, size = nvrtc.nvrtcGetCUBINSize(prog)
    cubin = b" " * size
    nvrtc.nvrtcGetCUBIN(prog, cubin)
    err, module = driver.cuModuleLoadData(cubin)
    assert err == driver.CUresult.CUDA_SUCCESS, err
    _, function = driver.cuModuleGetFunction(module, b"grace_table_writer")
    return function


def main() -> None:
    import torch
    from cuda.bindings import driver
    from cuda.bindings import runtime as rt

    torch.cuda.init()
    table = torch.zeros(64, dtype=torch.int64, device="cuda")
    dst = table.data_ptr()
    stream = torch.cuda.current_stream().cuda_stream
    sync = torch.cuda.synchronize
    cu = ctypes.CDLL("libcuda.so.1")
    results: dict[str, tuple[float, bool]] = {}

    def check(label: str, fn: Callable[[int], Any]) -> None:
        table.zero_()
        us = timed(fn, sync)
        ok = table[:N].tolist() == [v - (1 << 64) if v >= 1 << 63 else v for v in values_for(CALLS)]
        results[label] = (us, ok)

    # memcpy+event (today's PointerTable on the GPU)
    depth = 4
    host = [torch.zeros(N, dtype=torch.int64, pin_memory=True) for _ in range(depth)]
    views = [h.numpy() for h in host]
    srcs = [h.data_ptr() for h in host]
    events = [rt.cudaEventCreateWithFlags(rt.cudaEventDisableTiming)[1] for _ in range(depth)]
    h2d = rt.cudaMemcpyKind.cudaMemcpyHostToDevice

    def memcpy_event(k: int) -> None:
        j = k % depth
        rt.cudaEventSynchronize(events[j])
        views[j][:] = values_for(k)
        rt.cudaMemcpyAsync(dst, srcs[j], 8 * N, h2d, stream)
        rt.cudaEventRecord(events[j], stream)

    check("memcpy+event (cuda.bindings, pinned ring)", memcpy_event)

    memcpy = driver_fn(cu, "cuMemcpyHtoDAsync_v2")
    memcpy.argtypes = [ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    pageable = (ctypes.c_uint64 * N)()

    def pageable_memcpy(k: int) -> None:
        pageable[:] = values_for(k)
        memcpy(dst, pageable, 8 * N, stream)

    check("pageable memcpy (ctypes)", pageable_memcpy)

    write64 = driver_fn(cu, "cuStreamWriteValue64_v2", "cuStreamWriteValue64")
    write64.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint]

    def write_value(k: int) -> None:
        for j, v in enumerate(values_for(k)):
            write64(stream, dst + 8 * j, v, 0)

    check("write-value x N (ctypes)", write_value)

    batch = driver_fn(cu, "cuStreamBatchMemOp_v2", "cuStreamBatchMemOp")
    batch.argtypes = [ctypes.c_void_p, ctypes.c_uint, ctypes.c_void_p, ctypes.c_uint]
    op_size = 48  # sizeof(CUstreamBatchMemOpParams)
    ops = ctypes.create_string_buffer(op_size * N)
    write_value_64 = 5  # CU_STREAM_MEM_OP_WRITE_VALUE_64
    for j in range(N):
        struct.pack_into("<IxxxxQQ", ops, op_size * j, write_value_64, dst + 8 * j, 0)
    pack_value = struct.Struct("<Q").pack_into

    def batch_memop(k: int) -> None:
        for j, v in enumerate(values_for(k)):
            pack_value(ops, op_size * j + 16, v)
        batch(stream, N, ops, 0)

    check("batch memop (ctypes)", batch_memop)

    # writer kernel
    function = writer_function(WRITER_SOURCE)
    launch = driver_fn(cu, "cuLaunchKernel")
    launch.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    arg_table = ctypes.c_uint64(dst)
    arg_n = ctypes.c_uint(N)
    arg_values = (ctypes.c_uint64 * 32)()
    argv = (ctypes.c_void_p * 3)(ctypes.addressof(arg_table), ctypes.addressof(arg_n), ctypes.addressof(arg_values))
    fptr = int(function)

    def writer_kernel(k: int) -> None:
        arg_values[:N] = values_for(k)
        launch(fptr, 1, 1, 1, 32, 1, 1, 0, stream, argv, None)

    check("writer kernel (ctypes cuLaunchKernel)", writer_kernel)

    # exec set-params on one node of a captured graph: y = x + 1 over 1M int64 (a few us of GPU
    # work, as micro-eos's graph), whose launches the loops below keep in flight
    x = torch.zeros(1 << 20, dtype=torch.int64, device="cuda")
    y = torch.empty_like(x)
    g = torch.cuda.CUDAGraph(keep_graph=True)
    with torch.cuda.graph(g):
        torch.add(x, 1, out=y)
    g.replay()  # instantiates the kept graph
    sync()
    err, nodes, count = driver.cuGraphGetNodes(driver.CUgraph(g.raw_cuda_graph()), 0)
    err, nodes, count = driver.cuGraphGetNodes(driver.CUgraph(g.raw_cuda_graph()), count)
    kernel_nodes = [n for n in nodes if driver.cuGraphNodeGetType(n)[1] == driver.CUgraphNodeType.CU_GRAPH_NODE_TYPE_KERNEL]
    node = kernel_nodes[0]
    err, params = driver.cuGraphKernelNodeGetParams(node)
    exec_ = driver.CUgraphExec(g.raw_cuda_graph_exec())
    set_params = driver.cuGraphExecKernelNodeSetParams

    def exec_bindings(k: int) -> None:
        set_params(exec_, node, params)

    results["exec set-params x1 (cuda.bindings)"] = (timed(exec_bindings, sync), True)

    set_params_c = driver_fn(cu, "cuGraphExecKernelNodeSetParams_v2", "cuGraphExecKernelNodeSetParams")
    set_params_c.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    params_ptr = params.getPtr()
    exec_ptr, node_ptr = int(exec_), int(node)

    def exec_ctypes(k: int) -> None:
        set_params_c(exec_ptr, node_ptr, params_ptr)

    results["exec set-params x1 (ctypes)"] = (timed(exec_ctypes, sync), True)
    # exec set-params with new values every call: the writer kernel captured in a graph, its
    # by-value pointers rewritten before each replay (what strategy (3) does per node)
    wg = torch.cuda.CUDAGraph(keep_graph=True)
    with torch.cuda.graph(wg):
        launch(fptr, 1, 1, 1, 32, 1, 1, 0, torch.cuda.current_stream().cuda_stream, argv, None)
    wg.replay()
    sync()
    raw = driver.CUgraph(wg.raw_cuda_graph())
    _, wnodes, wcount = driver.cuGraphGetNodes(raw, 0)
    _, wnodes, wcount = driver.cuGraphGetNodes(raw, wcount)
    wnode = [n for n in wnodes if driver.cuGraphNodeGetType(n)[1] == driver.CUgraphNodeType.CU_GRAPH_NODE_TYPE_KERNEL][0]
    _, wparams = driver.cuGraphKernelNodeGetParams(wnode)
    wparams.kernelParams = ctypes.addressof(argv)
    wparams.extra = 0
    wexec = driver.CUgraphExec(wg.raw_cuda_graph_exec())
    wreplay = wg.replay

    def exec_new_values(k: int) -> None:
        arg_values[:N] = values_for(k)
        set_params(wexec, wnode, wparams)
        wreplay()

    check("exec set-params, new values, + its replay (cuda.bindings)", exec_new_values)
    results["writer graph replay alone (torch)"] = (timed(lambda k: wreplay(), sync), True)

    replay = g.replay
    alone = timed(lambda k: replay(), sync)
    results["graph replay alone (torch)"] = (alone, True)
    # Each way again, each call followed by a replay of the graph, minus the replay alone: what
    # it costs while launches of a graph are queued (exec set-params rewrites that very graph).
    for label, fn in (("memcpy+event", memcpy_event), ("pageable memcpy", pageable_memcpy),
                      ("batch memop", batch_memop), ("writer kernel", writer_kernel),
                      ("exec set-params x1 (cuda.bindings)", exec_bindings),
                      ("exec set-params x1 (ctypes)", exec_ctypes)):
        with_replay = timed(lambda k, fn=fn: (fn(k), replay()), sync)
        results[f"{label}, between replays (minus the replay)"] = (round(with_replay - alone, 2), True)

    for label, (us, ok) in results.items():
        print(f"{label:45s} {us:7.2f} us/call   last values in place: {ok}")


if __name__ == "__main__":
    main()

"""Table 2's measure on a synthetic profile: kernels counted by the call they correlate with."""

from __future__ import annotations

from grace.cgct.coverage import Coverage, count


def _trace() -> dict:
    ev = [
        {"cat": "cuda_runtime", "name": "cudaGraphLaunch", "args": {"correlation": 1}},
        {"cat": "cuda_driver", "name": "cuLaunchKernelEx", "args": {"correlation": 2}},
        {"cat": "cuda_runtime", "name": "cudaLaunchKernel", "args": {"correlation": 3}},
        {"cat": "cuda_runtime", "name": "cudaMemcpyAsync", "args": {"correlation": 4}},
        {"cat": "cpu_op", "name": "aten::mm", "args": {}},
    ]
    ev += [{"cat": "kernel", "name": f"graph_kernel_{i}", "args": {"correlation": 1}} for i in range(6)]
    ev += [{"cat": "kernel", "name": "triton_poi_fused_0", "args": {"correlation": 2}},
           {"cat": "kernel", "name": "gemm", "args": {"correlation": 3}},
           {"cat": "kernel", "name": "orphan", "args": {}},
           {"cat": "gpu_memcpy", "name": "Memcpy HtoD", "args": {"correlation": 4}}]
    return {"traceEvents": ev}


def test_kernels_are_counted_by_their_launching_call() -> None:
    cov = count(_trace())
    assert cov == Coverage(kernels=9, in_graphs=6, unlinked=1)
    assert cov.share == 6 / 8, "copies are not kernels, and an unlinked kernel is left out of the share"


def test_an_empty_profile_has_no_share() -> None:
    assert count({"traceEvents": []}).share == 0.0

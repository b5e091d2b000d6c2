"""Strategy (2), the prelude kernel: where it writes, and that its code builds (CPU: NVRTC and
nvJitLink are host libraries). The device-side rewrite itself is tested on the GPU, in
tests/test_pi_tree_cuda.py."""

from __future__ import annotations

import importlib.util
import struct
from pathlib import Path

import pytest

from grace.pi import prelude
from grace.pi.exec_update import KernelNode, Site
from grace.pi.plan import Slot


def test_layout_gives_one_slot_per_input_and_offset_and_a_write_per_site() -> None:
    gemm = KernelNode(3, "sm90_gemm", (b"\0" * 8, b"\0" * 64, b"\0" * 4), offsets=(0, 8, 72))
    triton = KernelNode(5, "triton_poi_0", (b"\0" * 8,), offsets=(0,))
    sites = [Site(3, 1, 16, input_index=0, offset=0),  # a pointer inside the by-value struct
             Site(3, 1, 24, input_index=0, offset=512),
             Site(5, 0, 0, input_index=0, offset=0),  # the same pointer, another node: same slot
             Site(3, 0, 0, input_index=2, offset=0)]
    slots, entries = prelude.layout(sites, [gemm, triton])
    assert slots == [Slot(0, 0, "sm90_gemm"), Slot(0, 512, "sm90_gemm"), Slot(2, 0, "sm90_gemm")]
    assert [(e.node, e.offset, e.slot) for e in entries] == [(3, 24, 0), (3, 32, 1), (5, 0, 0), (3, 0, 2)]
    assert prelude.entry_words(entries[:2], {3: 0xAB}) == [0xAB, 24, 0, 0xAB, 32, 1]


def test_layout_refuses_a_node_whose_parameter_offsets_are_unknown() -> None:
    node = KernelNode(0, "k", (b"\0" * 8,))
    with pytest.raises(prelude.PreludeError, match="parameter offsets unknown"):
        prelude.layout([Site(0, 0, 0, 0, 0)], [node])


def test_missing_device_runtime_is_named_with_where_it_was_looked_for(monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(prelude, "cudadevrt_candidates", lambda: [tmp_path / "lib64" / "libcudadevrt.a"])
    with pytest.raises(prelude.PreludeError, match="libcudadevrt.a .* not found; looked in: .*lib64.*GRACE_CUDADEVRT"):
        prelude.find_cudadevrt()
    monkeypatch.setenv("GRACE_CUDADEVRT", "/somewhere/libcudadevrt.a")
    monkeypatch.undo()
    monkeypatch.setenv("GRACE_CUDADEVRT", "/somewhere/libcudadevrt.a")
    assert prelude.cudadevrt_candidates()[0] == Path("/somewhere/libcudadevrt.a")


def _toolchain_missing() -> str:
    if importlib.util.find_spec("cuda.bindings") is None:
        return "cuda-bindings is not installed"
    try:
        prelude.find_cudadevrt()
    except prelude.PreludeError as e:
        return str(e)
    return ""


@pytest.mark.skipif(bool(_toolchain_missing()), reason=_toolchain_missing() or "-")
def test_prelude_compiles_and_links_with_the_device_runtime_for_hopper() -> None:
    cubin = prelude.compile_prelude("sm_90")
    assert cubin[:4] == b"\x7fELF", "a linked cubin"
    assert prelude.KERNEL_NAME.encode() in cubin
    assert b"cudaGraphKernelNodeSetParam" in cubin or b"UpdatesApply" in cubin, "the device graph API is linked in"
    assert struct.unpack_from("<B", cubin, 4)[0] == 2, "64-bit"
    assert prelude.compile_prelude("sm_90") is cubin, "compiled once per process"

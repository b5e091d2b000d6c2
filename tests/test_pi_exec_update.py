"""Strategy (3)'s pure part: which argument words of which nodes point into placeholders, and
the per-replay rewrite of those words (the driver call stands in as a recorder)."""

from __future__ import annotations

import ctypes
import struct

from grace.pi.exec_update import CopyNode, ExecPatch, KernelNode, OpaqueNode, Site, scan
from grace.pi.plan import Placeholder

A = Placeholder(input_index=0, data_ptr=0x7F00_0000_0000, storage_bytes=4096, copy_bytes=4096)
B = Placeholder(input_index=2, data_ptr=0x7F00_0001_0000, storage_bytes=256, copy_bytes=256)


def ptr(address: int) -> bytes:
    return struct.pack("<Q", address)


def test_plain_and_struct_pointer_arguments_become_sites_with_their_offsets() -> None:
    gemm_params = struct.pack("<iiQQi", 16, 32, 0xABC, B.data_ptr + 8, 1) + b"\0" * 4  # a by-value struct
    nodes = [KernelNode(0, "triton_poi_fused_0", (ptr(A.data_ptr), ptr(0x5000), struct.pack("<i", 9))),
             KernelNode(3, "sm90_xmma_gemm", (ptr(A.data_ptr + 128), gemm_params))]
    result = scan(nodes, [A, B])
    assert result.sites == [Site(0, 0, 0, 0, 0), Site(3, 0, 0, 0, 128), Site(3, 1, 16, 2, 8)]
    assert result.blocked == {}


def test_a_word_just_past_a_placeholder_is_no_pointer_into_it() -> None:
    assert scan([KernelNode(0, "k", (ptr(A.data_ptr + A.storage_bytes),))], [A, B]).sites == []


def test_copies_sets_and_unreadable_nodes_block() -> None:
    copy = CopyNode(4, "memcpy", ((A.data_ptr - 64, 128), (0x9000, 128)))
    result = scan([copy, CopyNode(5, "memset", ((B.data_ptr + B.storage_bytes, 64),))], [A, B])
    assert result.blocked == {0: ["memcpy node 4"]}, "a range that starts where B ends does not reach it"
    opaque = scan([OpaqueNode(7, "CU_GRAPH_NODE_TYPE_GRAPH")], [A, B])
    assert opaque.blocked == {0: ["CU_GRAPH_NODE_TYPE_GRAPH node 7"], 2: ["CU_GRAPH_NODE_TYPE_GRAPH node 7"]}


def test_a_fill_rewrites_each_site_and_sets_each_affected_node_once() -> None:
    gemm_params = struct.pack("<iiQQi", 16, 32, 0xABC, B.data_ptr + 8, 1) + b"\0" * 4
    nodes = [KernelNode(0, "k0", (ptr(A.data_ptr), ptr(A.data_ptr + 64))), KernelNode(3, "gemm", (gemm_params,))]
    sites = scan(nodes, [A, B]).sites
    buffers = {n.index: [ctypes.create_string_buffer(p, len(p)) for p in n.params] for n in nodes}
    calls: list[int] = []
    patch = ExecPatch(sites, buffers, calls.append)
    new = [0x1000_0000, 0, 0x2000_0000]  # per input index: the new data pointers
    patch.fill(new)
    assert calls == [0, 3]
    assert [int.from_bytes(b.raw, "little") for b in buffers[0]] == [0x1000_0000, 0x1000_0000 + 64]
    words = struct.unpack("<iiQQi4x", buffers[3][0].raw)
    assert words == (16, 32, 0xABC, 0x2000_0000 + 8, 1), "only the pointer word of the struct changes"
    patch.fill([A.data_ptr, 0, B.data_ptr])
    assert buffers[3][0].raw == gemm_params, "filled with the placeholders, the arguments are the captured ones"
    calls.clear()
    patch.fill([A.data_ptr, 0, B.data_ptr])
    assert calls == [], "the same pointers again: no driver call"

"""The recorded-graph scan's pure part: which words of which nodes point into a placeholder."""

from __future__ import annotations

import struct

from grace.pi.plan import Placeholder, Slot, plan_graph
from grace.pi.scan import CopyNode, KernelNode, OpaqueNode, references, words

A = Placeholder(input_index=0, data_ptr=0x7F00_0000_0000, span=4096, copy_bytes=4096)
B = Placeholder(input_index=1, data_ptr=0x7F00_0001_0000, span=256, copy_bytes=256)
TABLE = 0x7F00_0100_0000  # a pointer-table slot address: outside every placeholder


def ptr(address: int) -> bytes:
    return struct.pack("<Q", address)


def test_words_are_the_aligned_8_byte_little_endian_values_of_a_parameter() -> None:
    assert words(ptr(5) + ptr(7)) == [5, 7]
    assert words(struct.pack("<i", 3)) == [], "a 4-byte int holds no pointer"
    assert words(ptr(1) + b"\0\0\0\0") == [1]


def test_a_vendor_kernel_with_a_placeholder_argument_blocks_that_input_only() -> None:
    gemm = KernelNode("sm90_xmma_gemm", (ptr(A.data_ptr + 128), ptr(0x1234), struct.pack("<i", 64)))
    (ref,) = references([gemm], [A, B])
    assert (ref.address, ref.kind, ref.node) == (A.data_ptr + 128, "vendor-kernel", "sm90_xmma_gemm")
    plan = plan_graph([A, B], [Slot(0, 0, "triton_k"), Slot(1, 0, "triton_k")], [ref])
    assert plan.indirected == (1,) and plan.copied == (0,)


def test_a_pointer_inside_a_by_value_struct_is_found() -> None:
    params_struct = struct.pack("<iiQQi", 16, 32, 0xABC, B.data_ptr + 8, 1) + b"\0" * 4
    (ref,) = references([KernelNode("cutlass_kernel", (params_struct,))], [A, B])
    assert ref.address == B.data_ptr + 8


def test_indirected_triton_kernels_hold_slot_addresses_not_placeholders() -> None:
    variant = KernelNode("triton_poi_fused_0__grace_pi_v1__0", (ptr(TABLE), ptr(0x5000), struct.pack("<i", 9)),
                         triton=True)
    assert references([variant], [A, B]) == []
    plain = KernelNode("triton_poi_fused_1", (ptr(A.data_ptr),), triton=True)
    assert [r.kind for r in references([plain], [A, B])] == ["triton-kernel"]


def test_copies_sets_and_unreadable_nodes() -> None:
    copy = CopyNode("memcpy", ((A.data_ptr - 64, 128), (0x9000, 128)), index=3)
    (ref,) = references([copy], [A, B])
    assert ref.node == "memcpy node 3" and ref.address == A.data_ptr
    assert references([CopyNode("memset", ((B.data_ptr + B.span, 64),), index=4)], [A, B]) == [], \
        "a range that starts where a placeholder ends does not reach it"
    blocked = references([OpaqueNode("CU_GRAPH_NODE_TYPE_GRAPH", 7)], [A, B])
    assert sorted(r.address for r in blocked) == [A.data_ptr, B.data_ptr], "a child graph blocks every input"

# triton_per_fused_add_div_eq_expand_masked_fill_mul_native_dropout_backward_neg_sum_view_16: its kernel from BERT's output code, as Inductor wrote it (the rest of the module cut)
import triton
import triton.language as tl

from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
from torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, DeviceProperties
triton_helpers.set_driver_to_gpu()

@triton_heuristics.persistent_reduction(
    size_hints={'x': 2048, 'r0_': 1024},
    reduction_hint=ReductionHint.INNER,
    filename=__file__,
    triton_meta={'signature': {'in_out_ptr0': '*fp32', 'in_ptr0': '*fp32', 'in_ptr1': '*fp32', 'in_ptr2': '*fp32', 'in_ptr3': '*fp32', 'in_ptr4': '*i1', 'out_ptr2': '*fp32', 'xnumel': 'i32', 'r0_numel': 'i32', 'XBLOCK': 'constexpr'}, 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32), 'constants': {}, 'native_matmul': False, 'enable_fp_fusion': True, 'launch_pdl': False, 'disable_ftz': False, 'configs': [{(0,): [['tt.divisibility', 16]], (1,): [['tt.divisibility', 16]], (2,): [['tt.divisibility', 16]], (3,): [['tt.divisibility', 16]], (4,): [['tt.divisibility', 16]], (5,): [['tt.divisibility', 16]], (6,): [['tt.divisibility', 16]], (7,): [['tt.divisibility', 16]], (8,): [['tt.divisibility', 16]]}]},
    inductor_meta={'grid_type': 'Grid1D', 'autotune_hints': set(), 'kernel_name': 'triton_per_fused_add_div_eq_expand_masked_fill_mul_native_dropout_backward_neg_sum_view_16', 'mutated_arg_names': ['in_out_ptr0'], 'optimize_mem': True, 'no_x_dim': None, 'atomic_add_found': False, 'num_load': 6, 'num_store': 2, 'num_reduction': 2, 'backend_hash': '91D1D1166449D9E2EB66EB9770C9E2C3B0FEB787341F27FEB4D3F0338DA50336', 'assert_indirect_indexing': True, 'autotune_local_cache': True, 'autotune_pointwise': True, 'autotune_remote_cache': None, 'force_disable_caches': False, 'dynamic_scale_rblock': True, 'max_autotune': False, 'max_autotune_pointwise': False, 'min_split_scan_rblock': 256, 'spill_threshold': 16, 'store_cubin': False, 'deterministic': False, 'force_filter_reduction_configs': False, 'mix_order_reduction_allow_multi_stages': False, 'are_deterministic_algorithms_enabled': False, 'tiling_scores': {'x': 8192, 'r0_': 45616128}}
)
@triton.jit
def triton_per_fused_add_div_eq_expand_masked_fill_mul_native_dropout_backward_neg_sum_view_16(in_out_ptr0, in_ptr0, in_ptr1, in_ptr2, in_ptr3, in_ptr4, out_ptr2, xnumel, r0_numel, XBLOCK : tl.constexpr):
    xnumel = 2048
    r0_numel = 768
    R0_BLOCK: tl.constexpr = 1024
    rnumel = r0_numel
    RBLOCK: tl.constexpr = R0_BLOCK
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
    xmask = xindex < xnumel
    r0_index = tl.arange(0, R0_BLOCK)[None, :]
    r0_offset = 0
    r0_mask = r0_index < r0_numel
    roffset = r0_offset
    rindex = r0_index
    r0_1 = r0_index
    x0 = xindex
    tmp0 = tl.load(in_ptr0 + (r0_1 + 768*x0), r0_mask & xmask, other=0.0)
    tmp2 = tl.load(in_ptr1 + (r0_1), r0_mask, eviction_policy='evict_last', other=0.0)
    tmp3 = tl.load(in_ptr2 + (r0_1 + 768*x0), r0_mask & xmask, other=0.0)
    tmp5 = tl.load(in_ptr3 + (x0), xmask, eviction_policy='evict_last')
    tmp22 = tl.load(in_out_ptr0 + (r0_1 + 768*x0), r0_mask & xmask, other=0.0)
    tmp37 = tl.load(in_ptr4 + (r0_1 + 768*x0), r0_mask & xmask, other=0.0).to(tl.int1)
    tmp1 = -tmp0
    tmp4 = tmp2 * tmp3
    tmp6 = tl.full([1, 1], 1e-06, tl.float32)
    tmp7 = tmp5 + tmp6
    tmp8 = (tmp4 / tmp7)
    tmp9 = (tmp8 / tmp7)
    tmp10 = tmp1 * tmp9
    tmp11 = tl.broadcast_to(tmp10, [XBLOCK, R0_BLOCK])
    tmp13 = tl.where(r0_mask & xmask, tmp11, 0)
    tmp14 = tl.sum(tmp13, 1)[:, None].to(tl.float32)
    tmp15 = (tmp0 / tmp7)
    tmp16 = tmp15 * tmp2
    tmp17 = -tmp16
    tmp18 = tl.broadcast_to(tmp17, [XBLOCK, R0_BLOCK])
    tmp20 = tl.where(r0_mask & xmask, tmp18, 0)
    tmp21 = tl.sum(tmp20, 1)[:, None].to(tl.float32)
    tmp23 = tmp22 + tmp16
    tmp24 = tl.full([1, 1], 0.0, tl.float32)
    tmp25 = tmp5 == tmp24
    tmp26 = tl.full([1, 1], 2.0, tl.float32)
    tmp27 = tmp5 * tmp26
    tmp28 = (tmp14 / tmp27)
    tmp29 = tl.where(tmp25, tmp24, tmp28)
    tmp30 = tl.full([1, 1], 0.002607561929595828, tl.float32)
    tmp31 = tmp29 * tmp30
    tmp32 = tmp31 * tmp3
    tmp33 = tmp23 + tmp32
    tmp34 = tl.full([1, 1], 0.0013020833333333333, tl.float32)
    tmp35 = tmp21 * tmp34
    tmp36 = tmp33 + tmp35
    tmp38 = tmp37.to(tl.float32)
    tmp39 = tl.full([1, 1], 1.1111111111111112, tl.float32)
    tmp40 = tmp38 * tmp39
    tmp41 = tmp36 * tmp40
    tl.store(in_out_ptr0 + (r0_1 + 768*x0), tmp36, r0_mask & xmask)
    tl.store(out_ptr2 + (r0_1 + 768*x0), tmp41, r0_mask & xmask)

# triton_per_fused_add_div_eq_expand_masked_fill_mul_native_dropout_backward_neg_sum_view_17: its kernel from BERT's output code, as Inductor wrote it (the rest of the module cut)
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
    triton_meta={'signature': {'in_out_ptr0': '*fp32', 'in_ptr0': '*fp32', 'in_ptr1': '*fp32', 'in_ptr2': '*fp32', 'in_ptr3': '*fp32', 'in_ptr4': '*fp32', 'in_ptr5': '*fp32', 'in_ptr6': '*i1', 'in_ptr7': '*i1', 'out_ptr3': '*fp32', 'xnumel': 'i32', 'r0_numel': 'i32', 'XBLOCK': 'constexpr'}, 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32), 'constants': {}, 'native_matmul': False, 'enable_fp_fusion': True, 'launch_pdl': False, 'disable_ftz': False, 'configs': [{(0,): [['tt.divisibility', 16]], (1,): [['tt.divisibility', 16]], (2,): [['tt.divisibility', 16]], (3,): [['tt.divisibility', 16]], (4,): [['tt.divisibility', 16]], (5,): [['tt.divisibility', 16]], (6,): [['tt.divisibility', 16]], (7,): [['tt.divisibility', 16]], (8,): [['tt.divisibility', 16]], (9,): [['tt.divisibility', 16]], (10,): [['tt.divisibility', 16]], (11,): [['tt.divisibility', 16]]}]},
    inductor_meta={'grid_type': 'Grid1D', 'autotune_hints': set(), 'kernel_name': 'triton_per_fused_add_div_eq_expand_masked_fill_mul_native_dropout_backward_neg_sum_view_17', 'mutated_arg_names': ['in_out_ptr0'], 'optimize_mem': True, 'no_x_dim': None, 'atomic_add_found': False, 'num_load': 9, 'num_store': 2, 'num_reduction': 2, 'backend_hash': '91D1D1166449D9E2EB66EB9770C9E2C3B0FEB787341F27FEB4D3F0338DA50336', 'assert_indirect_indexing': True, 'autotune_local_cache': True, 'autotune_pointwise': True, 'autotune_remote_cache': None, 'force_disable_caches': False, 'dynamic_scale_rblock': True, 'max_autotune': False, 'max_autotune_pointwise': False, 'min_split_scan_rblock': 256, 'spill_threshold': 16, 'store_cubin': False, 'deterministic': False, 'force_filter_reduction_configs': False, 'mix_order_reduction_allow_multi_stages': False, 'are_deterministic_algorithms_enabled': False, 'tiling_scores': {'x': 8192, 'r0_': 59771904}}
)
@triton.jit
def triton_per_fused_add_div_eq_expand_masked_fill_mul_native_dropout_backward_neg_sum_view_17(in_out_ptr0, in_ptr0, in_ptr1, in_ptr2, in_ptr3, in_ptr4, in_ptr5, in_ptr6, in_ptr7, out_ptr3, xnumel, r0_numel, XBLOCK : tl.constexpr):
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
    tmp1 = tl.load(in_ptr1 + (r0_1 + 768*x0), r0_mask & xmask, other=0.0)
    tmp3 = tl.load(in_ptr2 + (r0_1 + 768*x0), r0_mask & xmask, other=0.0)
    tmp6 = tl.load(in_ptr3 + (r0_1), r0_mask, eviction_policy='evict_last', other=0.0)
    tmp7 = tl.load(in_ptr4 + (r0_1 + 768*x0), r0_mask & xmask, other=0.0)
    tmp9 = tl.load(in_ptr5 + (x0), xmask, eviction_policy='evict_last')
    tmp26 = tl.load(in_out_ptr0 + (r0_1 + 768*x0), r0_mask & xmask, other=0.0)
    tmp41 = tl.load(in_ptr6 + (r0_1 + 768*x0), r0_mask & xmask, other=0.0).to(tl.int1)
    tmp46 = tl.load(in_ptr7 + (r0_1 + 768*x0), r0_mask & xmask, other=0.0).to(tl.int1)
    tmp2 = tmp0 + tmp1
    tmp4 = tmp2 + tmp3
    tmp5 = -tmp4
    tmp8 = tmp6 * tmp7
    tmp10 = tl.full([1, 1], 1e-06, tl.float32)
    tmp11 = tmp9 + tmp10
    tmp12 = (tmp8 / tmp11)
    tmp13 = (tmp12 / tmp11)
    tmp14 = tmp5 * tmp13
    tmp15 = tl.broadcast_to(tmp14, [XBLOCK, R0_BLOCK])
    tmp17 = tl.where(r0_mask & xmask, tmp15, 0)
    tmp18 = tl.sum(tmp17, 1)[:, None].to(tl.float32)
    tmp19 = (tmp4 / tmp11)
    tmp20 = tmp19 * tmp6
    tmp21 = -tmp20
    tmp22 = tl.broadcast_to(tmp21, [XBLOCK, R0_BLOCK])
    tmp24 = tl.where(r0_mask & xmask, tmp22, 0)
    tmp25 = tl.sum(tmp24, 1)[:, None].to(tl.float32)
    tmp27 = tmp26 + tmp20
    tmp28 = tl.full([1, 1], 0.0, tl.float32)
    tmp29 = tmp9 == tmp28
    tmp30 = tl.full([1, 1], 2.0, tl.float32)
    tmp31 = tmp9 * tmp30
    tmp32 = (tmp18 / tmp31)
    tmp33 = tl.where(tmp29, tmp28, tmp32)
    tmp34 = tl.full([1, 1], 0.002607561929595828, tl.float32)
    tmp35 = tmp33 * tmp34
    tmp36 = tmp35 * tmp7
    tmp37 = tmp27 + tmp36
    tmp38 = tl.full([1, 1], 0.0013020833333333333, tl.float32)
    tmp39 = tmp25 * tmp38
    tmp40 = tmp37 + tmp39
    tmp42 = tmp41.to(tl.float32)
    tmp43 = tl.full([1, 1], 1.1111111111111112, tl.float32)
    tmp44 = tmp42 * tmp43
    tmp45 = tmp40 * tmp44
    tmp47 = tmp46.to(tl.float32)
    tmp48 = tmp47 * tmp43
    tmp49 = tmp45 * tmp48
    tl.store(in_out_ptr0 + (r0_1 + 768*x0), tmp45, r0_mask & xmask)
    tl.store(out_ptr3 + (r0_1 + 768*x0), tmp49, r0_mask & xmask)

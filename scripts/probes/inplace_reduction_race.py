"""Whether Triton 3.6 compiles Inductor's in-place reduction of the MLP backward into a racy kernel.

The differential test's intermittent wrong ``fc2.bias.grad`` (a training step of
``fc2(tanh(fc1(x))).square().mean()`` at a new batch size; stock and GraCE alike) has an exact
form: the wrong elements equal eager's times 0.025 = 2 / (20 * 4), the scale the backward's first
kernel applies to each element of the saved fc2 output, or a sum where only some batch rows are
so scaled. That kernel (below, as Inductor 2.11 generates it with donated buffers) writes the
scaled values back over its input (``in_out_ptr0``, the donated ``addmm_1``) and sums them per
column into ``out_ptr0``. For some launch configurations Triton loads the input twice, once in the
store's layout and once in the reduction's, so that the thread that sums an element is not the
one that stores it, and no barrier orders that store against that load: the sum may read the
stored, already-scaled value. This probe launches the kernel many times per configuration on fresh copies
and counts launches whose column sums are wrong; a configuration with one load is the control.

    python scripts/probes/inplace_reduction_race.py [--launches 20000]
    python scripts/probes/inplace_reduction_race.py --ptx   # on the CPU: loads and stores per configuration
    python scripts/probes/inplace_reduction_race.py --ptx --configs "8,4,1 2,16,1"   # others
    python scripts/probes/inplace_reduction_race.py --order [--ptx]   # a barrier orders the loads first

With ``--order`` the kernel is compiled under a marked name with ``grace.ttgir_race``'s ordering
pass: a barrier before each store of a pointer it also loads in another layout
(``order_racy_loads``). Expected: no wrong launch in any configuration.

The real program without the in-place reuse (expected right if this is the cause):

    python -c "import runpy, sys, torch._functorch.config as c; c.donated_buffer = False; \
sys.argv = ['grace.difftest', 'run-one', '--seed', '11908004', '--device', 'cuda', '--max-steps', '19']; \
runpy.run_module('grace.difftest', run_name='__main__')"
"""

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


@triton.jit
def triton_red_fused_div_expand_mul_pow_sum_0(in_out_ptr0, in_ptr0, out_ptr0, ks0, xnumel, r0_numel,
                                               XBLOCK: tl.constexpr, R0_BLOCK: tl.constexpr):
    # Inductor's generated kernel, unchanged but for the heuristics decorator
    xnumel = 20
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
    xmask = xindex < xnumel
    r0_base = tl.arange(0, R0_BLOCK)[None, :]
    tmp0 = tl.load(in_ptr0 + (0))
    tmp1 = tl.broadcast_to(tmp0, [1, 1])
    x0 = xindex
    _tmp10 = tl.full([XBLOCK, R0_BLOCK], 0, tl.float32)
    for r0_offset in tl.range(0, r0_numel, R0_BLOCK):
        r0_index = r0_offset + r0_base
        r0_mask = r0_index < r0_numel
        r0_1 = r0_index
        tmp5 = tl.load(in_out_ptr0 + (x0 + 20 * r0_1), r0_mask & xmask, eviction_policy='evict_first', other=0.0)
        tmp2 = 20 * ks0
        tmp3 = tmp2.to(tl.float32)
        tmp4 = (tmp1 / tmp3)
        tmp6 = tl.full([1, 1], 2.0, tl.float32)
        tmp7 = tmp5 * tmp6
        tmp8 = tmp4 * tmp7
        tmp9 = tl.broadcast_to(tmp8, [XBLOCK, R0_BLOCK])
        tmp11 = _tmp10 + tmp9
        _tmp10 = tl.where(r0_mask & xmask, tmp11, _tmp10)
        tl.store(in_out_ptr0 + (x0 + 20 * r0_1), tmp8, r0_mask & xmask)
    tmp10 = tl.sum(_tmp10, 1)[:, None]
    tl.store(out_ptr0 + (x0), tmp10, xmask)


# (XBLOCK, R0_BLOCK, num_warps): the reduction configurations Inductor tries for this kernel;
# (32, 4, 2) compiles to one load per element (the control)
CONFIGS = [(8, 4, 2), (2, 4, 2), (32, 4, 8), (32, 4, 2)]


def ordered_kernel() -> Any:
    """The kernel under the name that asks for ``grace.ttgir_race``'s ordering pass, which is
    installed: a module of its own, since Triton reads a kernel's source from its file."""
    import importlib.util
    import inspect
    import tempfile

    from grace import ttgir_race

    base = triton_red_fused_div_expand_mul_pow_sum_0.fn.__name__
    name = base + ttgir_race.ORDER_MARK
    source = inspect.getsource(triton_red_fused_div_expand_mul_pow_sum_0.fn).replace(base, name)
    path = Path(tempfile.mkdtemp(prefix="grace-ordered-")) / "ordered_kernel.py"
    path.write_text("import triton\nimport triton.language as tl\n\n\n" + source)  # the source has its decorator
    spec = importlib.util.spec_from_file_location("ordered_kernel", path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    ttgir_race.install_ordering()
    return getattr(module, name)


def count_wrong(xblock: int, rblock: int, warps: int, launches: int, batch: int = 4, kernel: Any = None) -> dict:
    torch.manual_seed(0)
    out = torch.randn(batch, 20, device="cuda")
    tangent = torch.ones((), device="cuda")
    scaled = out * 2 / (20 * batch)
    expected = scaled.sum(0)
    grid = ((20 + xblock - 1) // xblock,)
    wrong, columns, ratios = 0, set(), set()
    for _ in range(launches):
        buf, sums = out.clone(), torch.empty(20, device="cuda")
        (kernel or triton_red_fused_div_expand_mul_pow_sum_0)[grid](
            buf, tangent, sums, batch, 20, batch, XBLOCK=xblock, R0_BLOCK=rblock, num_warps=warps)
        close = torch.isclose(sums, expected, rtol=1e-5, atol=1e-6)
        if not bool(close.all()):
            wrong += 1
            cols = (~close).nonzero().flatten().tolist()
            columns.update(cols)
            ratios.update(round(r, 4) for r in (sums[cols] / expected[cols]).tolist())
        if not torch.allclose(buf, scaled):
            raise AssertionError("the in-place output itself is wrong: not the race this probe looks for")
    return {"config": [xblock, rblock, warps], "ordered": kernel is not None, "launches": launches, "wrong": wrong,
            "columns": sorted(columns), "ratios": sorted(ratios)[:8]}


def compile_for_sm90(xblock: int, rblock: int, warps: int, kernel: Any = None) -> Any:
    """The kernel (or ``kernel``, its ordered copy) compiled for sm_90 in this process (no GPU needed)."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    signature = {"in_out_ptr0": "*fp32", "in_ptr0": "*fp32", "out_ptr0": "*fp32", "ks0": "i64",
                 "xnumel": "i32", "r0_numel": "i32", "XBLOCK": "constexpr", "R0_BLOCK": "constexpr"}
    aligned = {(0,): [["tt.divisibility", 16]], (1,): [["tt.divisibility", 16]], (2,): [["tt.divisibility", 16]]}
    source = ASTSource(kernel or triton_red_fused_div_expand_mul_pow_sum_0, signature,
                       {"XBLOCK": xblock, "R0_BLOCK": rblock}, aligned)
    return triton.compile(source, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps, "num_stages": 1})


def global_accesses(xblock: int, rblock: int, warps: int, kernel: Any = None) -> dict:
    """The compiled kernel's predicated global loads and stores, read from its PTX (two loads per
    stored element is the racy shape), and what :mod:`grace.ttgir_race` finds in its TTGIR."""
    from grace.ttgir_race import find_layout_races

    compiled = compile_for_sm90(xblock, rblock, warps, kernel)
    lines = compiled.asm["ptx"].splitlines()
    return {"config": [xblock, rblock, warps],
            "layout_races": [race.describe() for race in find_layout_races(compiled.asm["ttgir"])],
            "evict_first_loads": sum("ld.global.L1::evict_first" in line for line in lines),
            "predicated_stores": sum(line.strip().startswith("@") and "st.global" in line for line in lines),
            "barriers": sum("bar.sync" in line for line in lines)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, default=20000)
    parser.add_argument("--configs", default="",
                        help="XBLOCK,R0_BLOCK,warps triples separated by spaces (default: Inductor's four)")
    parser.add_argument("--ptx", action="store_true",
                        help="compile each configuration for sm_90 and count its global accesses (no GPU needed)")
    parser.add_argument("--order", action="store_true",
                        help="the kernel with grace.ttgir_race's barrier before its racy stores")
    args = parser.parse_args()
    configs = [tuple(int(v) for v in c.split(",")) for c in args.configs.split()] or CONFIGS
    kernel = ordered_kernel() if args.order else None
    if args.ptx:
        for config in configs:
            print(json.dumps(global_accesses(*config, kernel=kernel)), flush=True)
        return
    if not torch.cuda.is_available():
        raise SystemExit("inplace_reduction_race: needs a CUDA GPU")
    for config in configs:
        print(json.dumps(count_wrong(*config, launches=args.launches, kernel=kernel)), flush=True)


if __name__ == "__main__":
    main()

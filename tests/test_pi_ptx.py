"""The PTX pass of parameter indirection, on PTX that Triton 3.6 produced for Inductor-style kernels.

The fixtures are real compiler output (``tests/fixtures/ptx/make_fixtures.py``); the rewritten
PTX is also assembled with the ptxas that ships with Triton, on the CPU.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from grace.pi.ptx import MARKER, PtxPassError, entry_params, indirect_params, is_indirected
from grace.pi.triton_stage import marked_name, marked_source, parse_marked, ptx_param_indices

FIXTURES = Path(__file__).parent / "fixtures" / "ptx"
MANIFEST = json.loads((FIXTURES / "manifest.json").read_text())
KERNELS = sorted(MANIFEST["kernels"])


def _ptx(name: str) -> str:
    return (FIXTURES / f"{name}.ptx").read_text()


def _pointer_args(name: str) -> list[str]:
    return [a for a, t in MANIFEST["kernels"][name]["signature"].items() if t.startswith("*")]


def _ld_param(ptx: str, symbol: str) -> list[str]:
    return re.findall(rf"ld\.param\.b64\s+(%rd\d+), \[{symbol}\];", ptx)


def test_fixtures_come_from_the_pinned_triton() -> None:
    assert MANIFEST["triton"] == "3.6.0" and MANIFEST["target"] == "cuda sm_90"


@pytest.mark.parametrize("name", KERNELS)
def test_every_load_of_an_indirected_param_is_followed_by_its_dereference(name: str) -> None:
    ptx = _ptx(name)
    signature = MANIFEST["kernels"][name]["signature"]
    indices = ptx_param_indices(signature, _pointer_args(name))
    result = indirect_params(ptx, indices)
    entry, params = entry_params(ptx)
    assert result.entry == entry == name
    assert is_indirected(result.ptx, indices) and not is_indirected(ptx, indices)
    for i in indices:
        symbol = params[i].symbol
        regs = _ld_param(ptx, symbol)
        assert result.loads[i] == len(regs) >= 1
        for reg in regs:
            pair = rf"ld\.param\.b64\s+{re.escape(reg)}, \[{symbol}\];\n\s*ld\.global\.b64 \t{re.escape(reg)}, \[{re.escape(reg)}\];"
            assert re.search(pair, result.ptx), f"{symbol} -> {reg} not dereferenced"
        decl = re.search(rf"\.param[^\n]*{symbol}\b", result.ptx)[0]
        assert ".align 8" in decl
    # Nothing else changed: drop the inserted lines and the marker, restore the alignment.
    rewritten = [ln for ln in result.ptx.splitlines()[1:] if not ln.lstrip().startswith("ld.global.b64 \t%rd")
                 or ln in ptx.splitlines()]
    original = [ln.replace(".align 1", ".align 8") if any(params[i].symbol in ln and ".param ." in ln for i in indices)
                else ln for ln in ptx.splitlines()]
    assert rewritten == original


def test_only_the_chosen_params_are_indirected() -> None:
    name = "triton_tem_fused_mm_3"
    signature = MANIFEST["kernels"][name]["signature"]
    indices = ptx_param_indices(signature, ["arg_B"])
    assert indices == (1,)
    result = indirect_params(_ptx(name), indices)
    _, params = entry_params(result.ptx)
    assert result.loads == {1: 1}
    a_reg = _ld_param(result.ptx, params[0].symbol)[0]
    assert f"ld.global.b64 \t{a_reg}, [{a_reg}];" not in result.ptx, "A is passed as it is"


def _ptxas() -> Path | None:
    try:
        from triton.backends.nvidia.compiler import get_ptxas
        path = Path(get_ptxas(90).path)
    except Exception:
        return None
    return path if path.exists() else None


@pytest.mark.parametrize("name", KERNELS)
def test_ptxas_assembles_the_rewritten_ptx(name: str, tmp_path: Path) -> None:
    ptxas = _ptxas()
    if ptxas is None:
        pytest.skip("no ptxas from the installed Triton")
    indices = ptx_param_indices(MANIFEST["kernels"][name]["signature"], _pointer_args(name))
    src = tmp_path / "k.ptx"
    src.write_text(indirect_params(_ptx(name), indices).ptx)
    done = subprocess.run([str(ptxas), "--gpu-name=sm_90a", str(src), "-o", str(tmp_path / "k.cubin")],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "k.cubin").stat().st_size > 0


@pytest.mark.parametrize("index, why", [(3, "without .ptr"), (4, "without .ptr"), (9, "no parameter 9")])
def test_refuses_params_that_are_not_global_pointers(index: int, why: str) -> None:
    with pytest.raises(PtxPassError, match=why):
        indirect_params(_ptx("triton_poi_fused_exp_index_4"), [index])


def test_refuses_a_param_whose_address_is_taken() -> None:
    ptx = _ptx("triton_poi_fused_add_mul_0")
    symbol = entry_params(ptx)[1][1].symbol
    tampered = ptx.replace(f"ld.param.b64 \t%rd8, [{symbol}];", f"mov.b64 \t%rd8, {symbol};")
    assert tampered != ptx
    with pytest.raises(PtxPassError, match="something other than a whole 64-bit ld.param"):
        indirect_params(tampered, [1])
    assert indirect_params(tampered, [0]).loads == {0: 1}, "other params are still fine"


def test_refuses_a_partial_load() -> None:
    ptx = _ptx("triton_poi_fused_add_mul_0")
    symbol = entry_params(ptx)[1][0].symbol
    tampered = ptx.replace(f"ld.param.b64 \t%rd7, [{symbol}];", f"ld.param.b32 \t%r1, [{symbol}+4];")
    with pytest.raises(PtxPassError):
        indirect_params(tampered, [0])


def test_refuses_twice_and_ptx_with_two_entries() -> None:
    ptx = _ptx("triton_poi_fused_add_mul_0")
    once = indirect_params(ptx, [0]).ptx
    with pytest.raises(PtxPassError, match="already indirected"):
        indirect_params(once, [0])
    with pytest.raises(PtxPassError, match="expected one"):
        indirect_params(ptx + "\n" + ptx.split("//", 1)[1], [0])
    assert is_indirected(once, [0]) and not is_indirected(once, [0, 1])
    assert once.startswith(MARKER)


def test_a_kernel_whose_pointer_is_never_read_needs_no_rewrite() -> None:
    ptx = _ptx("triton_poi_fused_add_mul_0")
    _, params = entry_params(ptx)
    unused = indirect_params(ptx, [params[-1].index])  # Triton's profile scratch pointer: never loaded
    assert unused.loads == {params[-1].index: 0}


# --- kernel names and the argument -> PTX parameter mapping -------------------------------------

def test_marked_names_round_trip() -> None:
    name = marked_name("triton_poi_fused__to_copy_add_0", [2, 0, 2])
    assert name == "triton_poi_fused__to_copy_add_0__grace_pi_v1__0_2"
    assert parse_marked(name) == ("triton_poi_fused__to_copy_add_0", (0, 2))
    assert parse_marked("triton_poi_fused__to_copy_add_0") is None
    assert parse_marked("k__grace_pi_v0__1") is None, "another pass version is not ours to rewrite"
    with pytest.raises(ValueError):
        marked_name("k", [])


def test_marked_source_renames_the_def_and_the_metadata() -> None:
    source = ("@triton_heuristics.pointwise(inductor_meta={'kernel_name': 'triton_poi_fused_add_0'})\n"
              "@triton.jit\ndef triton_poi_fused_add_0(in_ptr0, out_ptr0, xnumel, XBLOCK: tl.constexpr):\n"
              "    pass\n# triton_poi_fused_add_01 is another kernel\n")
    out = marked_source(source, "triton_poi_fused_add_0", [0])
    assert out.count("triton_poi_fused_add_0__grace_pi_v1__0") == 2
    assert "triton_poi_fused_add_01 is another" in out
    with pytest.raises(ValueError, match="expected one"):
        marked_source(source, "triton_poi_fused_add_01", [0])


@pytest.mark.parametrize("name", KERNELS)
def test_signature_positions_are_the_ptx_param_positions(name: str) -> None:
    signature = MANIFEST["kernels"][name]["signature"]
    _, params = entry_params(_ptx(name))
    runtime = [a for a, t in signature.items() if t != "constexpr"]
    assert len(params) == len(runtime) + 2, "Triton 3.6 appends two scratch pointers"
    for arg, index in zip(_pointer_args(name), ptx_param_indices(signature, _pointer_args(name))):
        assert params[index].is_pointer, arg
    with pytest.raises(ValueError, match="not a pointer|compile-time constant"):
        ptx_param_indices(signature, [next(a for a, t in signature.items() if not t.startswith("*"))])

"""The stage hook inside Triton 3.6's real compiler, on the CPU (Triton needs no GPU to build a cubin)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

triton = pytest.importorskip("triton")

from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

from grace.pi import triton_stage  # noqa: E402
from grace.pi.ptx import is_indirected  # noqa: E402

TARGET = GPUTarget("cuda", 90, 32)
KERNEL = '''
import triton
import triton.language as tl


@triton.jit
def triton_poi_fused_mul_0(in_ptr0, in_ptr1, out_ptr0, xnumel, XBLOCK: tl.constexpr):
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:]
    xmask = xindex < xnumel
    tmp0 = tl.load(in_ptr0 + xindex, xmask)
    tmp1 = tl.load(in_ptr1 + xindex, xmask)
    tl.store(out_ptr0 + xindex, tmp0 * tmp1, xmask)
'''
SIGNATURE = {"in_ptr0": "*fp32", "in_ptr1": "*fp32", "out_ptr0": "*fp32", "xnumel": "i32", "XBLOCK": "constexpr"}


def _load(tmp_path: Path, source: str, name: str):
    """Import a kernel module from a file, as Inductor does (Triton reads the function's source)."""
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(f"_grace_test_{name}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return getattr(module, name)


def _compile(fn):
    return triton.compile(ASTSource(fn, SIGNATURE, {"XBLOCK": 256}, {(i,): [["tt.divisibility", 16]] for i in range(4)}),
                          target=TARGET)


@pytest.fixture
def hook(monkeypatch, tmp_path: Path):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton-cache"))
    from triton import knobs

    before = knobs.runtime.add_stages_inspection_hook
    triton_stage.install()
    yield
    triton_stage.uninstall()
    assert knobs.runtime.add_stages_inspection_hook is before


def test_a_marked_kernel_compiles_indirected_and_a_plain_one_does_not(hook, tmp_path: Path) -> None:
    indices = triton_stage.ptx_param_indices(SIGNATURE, ["in_ptr1"])
    marked = triton_stage.marked_name("triton_poi_fused_mul_0", indices)
    plain = _compile(_load(tmp_path, KERNEL, "triton_poi_fused_mul_0"))
    indirected = _compile(_load(tmp_path, triton_stage.marked_source(KERNEL, "triton_poi_fused_mul_0", indices), marked))
    assert plain.metadata.name == "triton_poi_fused_mul_0" and indirected.metadata.name == marked
    assert is_indirected(indirected.asm["ptx"], indices)
    assert not is_indirected(plain.asm["ptx"], indices) and "ld.global.b64" not in plain.asm["ptx"]
    assert len(indirected.asm["cubin"]) > 0
    assert plain.hash != indirected.hash, "the cache must keep the two binaries apart"
    again = _compile(_load(tmp_path, triton_stage.marked_source(KERNEL, "triton_poi_fused_mul_0", [0]),
                           triton_stage.marked_name("triton_poi_fused_mul_0", [0])))
    assert again.hash not in (plain.hash, indirected.hash), "another parameter list is another binary"


def test_install_is_idempotent_and_keeps_an_earlier_hook(monkeypatch, tmp_path: Path) -> None:
    from triton import knobs

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton-cache"))
    seen: list[str] = []
    monkeypatch.setattr(knobs.runtime, "add_stages_inspection_hook",
                        lambda backend, stages, options, language, capability: seen.append("earlier"))
    earlier = knobs.runtime.add_stages_inspection_hook
    triton_stage.install()
    installed = knobs.runtime.add_stages_inspection_hook
    triton_stage.install()
    assert knobs.runtime.add_stages_inspection_hook is installed
    try:
        indices = triton_stage.ptx_param_indices(SIGNATURE, ["in_ptr0"])
        name = triton_stage.marked_name("triton_poi_fused_mul_0", indices)
        compiled = _compile(_load(tmp_path, triton_stage.marked_source(KERNEL, "triton_poi_fused_mul_0", indices), name))
        assert seen == ["earlier"] and is_indirected(compiled.asm["ptx"], indices)
    finally:
        triton_stage.uninstall()
    assert knobs.runtime.add_stages_inspection_hook is earlier


def test_without_the_hook_a_marked_kernel_is_visibly_not_indirected(monkeypatch, tmp_path: Path) -> None:
    """The check a caller makes before trusting a binary: a process without the hook gives plain PTX."""
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton-cache"))
    indices = (0,)
    name = triton_stage.marked_name("triton_poi_fused_mul_0", indices)
    compiled = _compile(_load(tmp_path, triton_stage.marked_source(KERNEL, "triton_poi_fused_mul_0", indices), name))
    assert not is_indirected(compiled.asm["ptx"], indices)

"""The indirected variant of an Inductor kernel, compiled on the CPU through Inductor's own code cache."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("triton")

from grace.pi import triton_stage  # noqa: E402
from grace.pi.ptx import is_indirected  # noqa: E402
from grace.pi.variant import VariantError, indirected_variant, kernel_module_path  # noqa: E402

MODULE = Path(__file__).parent / "fixtures" / "inductor" / "triton_poi_fused_add_mul_0.py"


@pytest.fixture
def autotuner(monkeypatch, tmp_path: Path):
    """The fixture kernel's CachingAutotuner; Inductor's GPU driver switch is a no-op on a CPU machine."""
    from torch._inductor.codecache import PyCodeCache
    from torch._inductor.runtime import triton_helpers

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    monkeypatch.setattr(triton_helpers, "set_driver_to_gpu", lambda: None)
    source = MODULE.read_text() + f"\n# {tmp_path.name}\n"  # a module of its own: tests change it
    yield getattr(PyCodeCache.load(source), "triton_poi_fused_add_mul_0")
    triton_stage.uninstall()


def test_the_variant_is_the_same_kernel_indirected_for_the_chosen_config(autotuner) -> None:
    config = autotuner.configs[-1]
    assert len(autotuner.configs) > 1, "the original would autotune"
    variant = indirected_variant(autotuner, config, ["in_ptr1", "in_ptr0"], warm_cache_only=True)
    assert variant.fn.__name__ == "triton_poi_fused_add_mul_0__grace_pi_v1__0_1"
    assert variant.inductor_meta["kernel_name"] == variant.fn.__name__
    (result,) = variant.compile_results
    assert result.config.kwargs == config.kwargs and result.config.num_warps == config.num_warps
    assert type(result).__name__ == "TritonCompileResult", "Triton's launcher takes slot addresses as ints"
    assert is_indirected(result.kernel.asm["ptx"], (0, 1))


def test_a_non_pointer_argument_is_refused(autotuner) -> None:
    with pytest.raises(ValueError, match="not a pointer"):
        indirected_variant(autotuner, autotuner.configs[0], ["xnumel"], warm_cache_only=True)


def test_a_kernel_without_its_module_file_is_refused(autotuner, monkeypatch) -> None:
    monkeypatch.setattr(autotuner.fn.fn, "__code__", (lambda: None).__code__)
    with pytest.raises(VariantError, match="cannot read its module source"):
        indirected_variant(autotuner, autotuner.configs[0], ["in_ptr0"], warm_cache_only=True)


def test_a_kernel_compiled_in_a_worker_is_found_through_its_reload(autotuner) -> None:
    """Inductor's workers send kernels back without their function (``prepare_for_pickle``) and
    with a reload from source; the variant is built from the reloaded module, the autotuner left as is."""
    from torch._inductor.codecache import PyCodeCache

    source = MODULE.read_text() + "\n# reloaded in the parent\n"  # another module than the fixture's
    autotuner.prepare_for_pickle()
    assert autotuner.fn.fn is None
    autotuner._reload_kernel = lambda: getattr(PyCodeCache.load(source), "triton_poi_fused_add_mul_0")
    assert kernel_module_path(autotuner).read_text() == source
    variant = indirected_variant(autotuner, autotuner.configs[0], ["in_ptr0"], warm_cache_only=True)
    assert is_indirected(variant.compile_results[0].kernel.asm["ptx"], (0,))
    assert autotuner.fn.fn is None


def test_a_kernel_without_function_or_reload_is_refused(autotuner) -> None:
    autotuner.prepare_for_pickle()
    autotuner._reload_kernel = None  # as the FX graph cache's bundler leaves it
    with pytest.raises(VariantError, match="its module is unknown"):
        indirected_variant(autotuner, autotuner.configs[0], ["in_ptr0"], warm_cache_only=True)


def _precompile_adding_a_config(monkeypatch, extra):
    """Precompile as Inductor's ``_dynamic_scale_rblock`` may: an extra launcher beside the config's."""
    from types import SimpleNamespace

    from torch._inductor.runtime.triton_heuristics import CachingAutotuner

    original = CachingAutotuner.precompile

    def precompile(self, warm_cache_only=False, **kwargs):
        original(self, warm_cache_only=True)
        self.launchers = [SimpleNamespace(config=extra), SimpleNamespace(config=self.compile_results[0].config)]

    monkeypatch.setattr(CachingAutotuner, "precompile", precompile)


def test_only_the_settled_configs_launcher_is_kept(autotuner, monkeypatch) -> None:
    settled, extra = autotuner.configs[-1], autotuner.configs[0]
    _precompile_adding_a_config(monkeypatch, extra)
    variant = indirected_variant(autotuner, settled, ["in_ptr0"])
    (launcher,) = variant.launchers
    assert launcher.config is settled


def test_two_configs_of_one_kernel_get_two_variants(autotuner) -> None:
    first = indirected_variant(autotuner, autotuner.configs[0], ["in_ptr0"], warm_cache_only=True)
    second = indirected_variant(autotuner, autotuner.configs[-1], ["in_ptr0"], warm_cache_only=True)
    assert first is not second
    assert first.compile_results[0].config.kwargs == autotuner.configs[0].kwargs
    assert second.compile_results[0].config.kwargs == autotuner.configs[-1].kwargs


def test_a_real_kernels_launch_arguments_are_named_as_inductors_launcher_takes_them(autotuner) -> None:
    """Inductor's launcher takes the ``def``'s names less its ``tl.constexpr`` ones (here XBLOCK)."""
    import torch

    from grace.pi.observe import _slot_requests

    x, y, out = torch.zeros(8, dtype=torch.float64), torch.zeros(8, dtype=torch.float64), torch.zeros(8)
    owner = {x.untyped_storage()._cdata: (0, x.data_ptr())}
    requests = _slot_requests(autotuner, [x, y, out, 8],
                              lambda a: owner.get(a.untyped_storage()._cdata) if isinstance(a, torch.Tensor) else None)
    assert [(r.position, r.name, r.input_index) for r in requests] == [(0, "in_ptr0", 0)]

"""grace.layout_race: Inductor's autotuner among configurations whose kernels do not race (CPU).

The fixtures are Inductor's in-place reduction of an MLP backward compiled by the pinned Triton
for sm_90 (``scripts/probes/inplace_reduction_race.py``): with ``XBLOCK=8`` Triton loads the
in-place buffer again in the reduction's layout; with ``XBLOCK=32`` it does not.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from race_probe import probe_module

from grace.ttgir_race import find_layout_races

FIXTURES = Path(__file__).parent / "fixtures" / "ttgir"


class _Binary:
    def __init__(self, ttgir: str | None) -> None:
        self.asm = {} if ttgir is None else {"ttgir": ttgir}


class _Autotuner:
    def __init__(self) -> None:
        self.inductor_meta = {"kernel_name": "triton_red_fused_div_expand_mul_pow_sum_0"}
        self.size_hints = {"x": 64, "r0_": 16}


class _Result:
    def __init__(self, config: object) -> None:
        self.config = config


def _config(xblock: int, warps: int) -> object:
    import triton

    return triton.Config({"XBLOCK": xblock, "R0_BLOCK": 4}, num_warps=warps)


def test_autotuning_keeps_the_race_free_configurations_where_one_remains(caplog: pytest.LogCaptureFixture) -> None:
    pytest.importorskip("triton")
    from grace.layout_race import keep_race_free, log_choices, note_compiled

    racy, free = _config(8, 2), _config(32, 2)
    tuner = _Autotuner()
    note_compiled(tuner, racy, _Binary((FIXTURES / "inplace_reduction_xblock8_warps2.ttgir").read_text()))
    note_compiled(tuner, free, _Binary((FIXTURES / "inplace_reduction_xblock32_warps2.ttgir").read_text()))
    assert len(tuner.grace_layout_races) == 1  # type: ignore[attr-defined]
    results = [_Result(racy), _Result(free)]
    with caplog.at_level("INFO", logger="grace.layout_race"):
        kept = keep_race_free(tuner, results)
        assert caplog.text == "", "nothing is logged where the choice is made: a compile worker's log is lost"
        log_choices(tuner)
        log_choices(tuner)
    assert kept == [results[1]]
    assert caplog.text.count("1 of 2 configurations left out") == 1


def test_where_every_configuration_and_its_variant_race_all_stay_and_a_warning_says_so(
        caplog: pytest.LogCaptureFixture) -> None:
    pytest.importorskip("triton")
    from grace.layout_race import keep_race_free, log_choices, note_compiled

    racy_text = (FIXTURES / "inplace_reduction_xblock8_warps2.ttgir").read_text()

    class Tuner(_Autotuner):
        def _precompile_config(self, cfg: object) -> _Result:  # every variant compiles racy too
            note_compiled(self, cfg, _Binary(racy_text))
            return _Result(cfg)

    racy = _config(8, 2)
    tuner = Tuner()
    note_compiled(tuner, racy, _Binary(racy_text))
    results = [_Result(racy)]
    with caplog.at_level("WARNING", logger="grace.layout_race"):
        assert keep_race_free(tuner, results) == results
        log_choices(tuner)
    assert "every configuration" in caplog.text and "neither an ordered copy nor a variant without it compiled" in caplog.text


def test_nothing_noted_or_nothing_to_read_changes_nothing() -> None:
    pytest.importorskip("triton")
    from grace.layout_race import keep_race_free, note_compiled

    tuner = _Autotuner()
    note_compiled(tuner, _config(8, 2), _Binary(None))  # a binary without its TTGIR
    assert not hasattr(tuner, "grace_layout_races")
    results = [_Result(_config(8, 2)), _Result(_config(32, 2))]
    assert keep_race_free(tuner, results) == results


def test_the_notes_travel_with_a_pickled_autotuner_state() -> None:
    """A compile worker returns the autotuner pickled through Inductor's own ``__getstate__``."""
    import pickle

    pytest.importorskip("triton")
    from grace.layout_race import keep_race_free, note_compiled
    from torch._inductor.runtime.triton_heuristics import CachingAutotuner

    tuner = _Autotuner()
    tuner.launchers = []  # type: ignore[attr-defined]  # pickled only before launchers are made
    racy, free = _config(8, 2), _config(32, 2)
    note_compiled(tuner, racy, _Binary((FIXTURES / "inplace_reduction_xblock8_warps2.ttgir").read_text()))
    keep_race_free(tuner, [_Result(racy), _Result(free)])
    state = pickle.loads(pickle.dumps(CachingAutotuner.__getstate__(tuner)))  # type: ignore[arg-type]
    assert state["grace_layout_races"] == tuner.grace_layout_races  # type: ignore[attr-defined]
    assert state["grace_layout_choices"] == tuner.grace_layout_choices  # type: ignore[attr-defined]


def _overlay_has_the_hook() -> bool:
    import inspect

    from torch._inductor.runtime import triton_heuristics

    return "grace.layout_race" in inspect.getsource(triton_heuristics)


@pytest.mark.parametrize("switch", [False, True])
def test_the_patched_precompile_worker_leaves_racy_configurations_out(switch: bool) -> None:
    """Inductor's own ``_precompile_worker`` over a stand-in autotuner whose configurations
    compile to the fixtures: with the switch on, the racy one is not among the compile results."""
    pytest.importorskip("triton")
    if not _overlay_has_the_hook():
        pytest.skip("GraCE's overlay with patches/pi/0003 is not active here (run `make setup`)")
    import grace.config
    from grace.layout_race import note_compiled
    from torch._inductor.runtime.triton_heuristics import CachingAutotuner

    racy, free = _config(8, 2), _config(32, 2)
    texts = {id(racy): "inplace_reduction_xblock8_warps2.ttgir", id(free): "inplace_reduction_xblock32_warps2.ttgir"}

    class Tuner(_Autotuner):
        def __init__(self) -> None:
            super().__init__()
            self.compile_results: list[_Result] = []
            self.launchers: list[object] = []
            self.configs = [racy, free]

        def _precompile_config(self, cfg: object) -> _Result:
            # what the patched _precompile_config does after triton.compile, with the fixture
            if grace.config.race_free_kernels:
                note_compiled(self, cfg, _Binary((FIXTURES / texts[id(cfg)]).read_text()))
            return _Result(cfg)

    tuner = Tuner()
    with grace.config.patch(race_free_kernels=switch):
        CachingAutotuner._precompile_worker(tuner)  # type: ignore[arg-type]
    assert [r.config for r in tuner.compile_results] == ([free] if switch else [racy, free])


@pytest.mark.parametrize(("before", "after"), [
    (({"XBLOCK": 8, "R0_BLOCK": 4}, 2), ({"XBLOCK": 8, "R0_BLOCK": 4}, 1)),
    (({"XBLOCK": 32, "R0_BLOCK": 4}, 8), ({"XBLOCK": 32, "R0_BLOCK": 4}, 4)),
    (({"XBLOCK": 2, "R0_BLOCK": 4}, 2), ({"XBLOCK": 2, "R0_BLOCK": 16}, 1)),  # one warp, reduction block grown
    (({"XBLOCK": 4}, 4), ({"XBLOCK": 32}, 1)),
    (({"XBLOCK": 32, "R0_BLOCK": 4}, 2), None),  # its tile already covers its threads
    (({"num_elements": 4}, 4), None),  # no block sizes to change
])
def test_the_race_free_variant_covers_its_threads(before: tuple[dict[str, int], int],
                                                  after: tuple[dict[str, int], int] | None) -> None:
    triton = pytest.importorskip("triton")
    from grace.layout_race import race_free_variant

    config = triton.Config(before[0], num_warps=before[1], num_stages=1)
    variant = race_free_variant(config)
    if after is None:
        assert variant is None
        return
    assert (variant.kwargs, variant.num_warps, variant.num_stages) == (after[0], after[1], 1)
    assert (config.kwargs, config.num_warps) == before  # the original is left as it was


def test_the_parent_logs_once_what_a_compile_worker_chose(caplog: pytest.LogCaptureFixture) -> None:
    """A kernel pickled back from a compile worker (its configurations compiled, its choice
    noted): Inductor's patched ``precompile`` in the launching process logs the choice once."""
    pytest.importorskip("triton")
    if not _overlay_has_the_hook():
        pytest.skip("GraCE's overlay with patches/pi/0003 is not active here (run `make setup`)")
    import threading

    from torch._inductor.runtime.triton_heuristics import CachingAutotuner

    class Compiled(_Result):
        kernel = type("Kernel", (), {"hash": "0" * 64})()

    class FromWorker(_Autotuner):
        def __init__(self) -> None:
            super().__init__()
            self.lock = threading.Lock()
            self.triton_meta = {"device": 0}
            self.compile_results = [Compiled(_config(32, 2))]
            self.grace_layout_choices = [(logging.INFO, "kernel k: 1 of 2 configurations left out")]

        _precompile_worker = CachingAutotuner._precompile_worker

        def _make_launchers(self) -> None: ...
        def _dynamic_scale_rblock(self) -> None: ...

    tuner = FromWorker()
    with caplog.at_level("INFO", logger="grace.layout_race"):
        CachingAutotuner.precompile(tuner)  # type: ignore[arg-type]
        CachingAutotuner.precompile(tuner)  # type: ignore[arg-type]
    assert caplog.text.count("kernel k: 1 of 2 configurations left out") == 1


def test_where_every_configuration_races_the_worker_autotunes_among_compiled_race_free_variants(
        caplog: pytest.LogCaptureFixture) -> None:
    """Inductor's own patched ``_precompile_worker`` over configurations that all race, compiled by
    the pinned Triton for sm_90 (no GPU needed): the variants compiled in their place are read
    race-free from their own TTGIR."""
    pytest.importorskip("triton")
    if not _overlay_has_the_hook():
        pytest.skip("GraCE's overlay with patches/pi/0003 is not active here (run `make setup`)")
    import grace.config
    from grace.layout_race import log_choices, note_compiled
    from torch._inductor.runtime.triton_heuristics import CachingAutotuner

    probe = probe_module()
    compiled: dict[tuple[int, int, int], str] = {}

    class Tuner(_Autotuner):
        def __init__(self) -> None:
            super().__init__()
            self.compile_results: list[_Result] = []
            self.launchers: list[object] = []
            self.configs = [_config(8, 2), _config(32, 8)]

        def _precompile_config(self, cfg: object) -> _Result:
            key = (cfg.kwargs["XBLOCK"], cfg.kwargs["R0_BLOCK"], cfg.num_warps)  # type: ignore[attr-defined]
            binary = probe.compile_for_sm90(*key)  # type: ignore[attr-defined]
            compiled[key] = binary.asm["ttgir"]
            note_compiled(self, cfg, binary)
            return _Result(cfg)

    tuner = Tuner()
    with grace.config.patch(race_free_kernels=True), caplog.at_level("INFO", logger="grace.layout_race"):
        CachingAutotuner._precompile_worker(tuner)  # type: ignore[arg-type]
        log_choices(tuner)
    kept = [(r.config.kwargs["XBLOCK"], r.config.kwargs["R0_BLOCK"], r.config.num_warps)  # type: ignore[attr-defined]
            for r in tuner.compile_results]
    assert kept == [(8, 4, 1), (32, 4, 4)]
    assert all(find_layout_races(compiled[key]) == [] for key in kept)
    assert all(find_layout_races(compiled[key]) for key in [(8, 4, 2), (32, 4, 8)])
    assert "autotuning among variants that do not instead" in caplog.text


def test_a_variant_that_fails_to_compile_is_left_out_and_the_kernel_keeps_its_configurations(
        caplog: pytest.LogCaptureFixture) -> None:
    pytest.importorskip("triton")
    from grace.layout_race import keep_race_free, log_choices, note_compiled

    class Tuner(_Autotuner):
        def _precompile_config(self, cfg: object) -> _Result:
            raise RuntimeError("no such configuration")

    racy = _config(8, 2)
    tuner = Tuner()
    note_compiled(tuner, racy, _Binary((FIXTURES / "inplace_reduction_xblock8_warps2.ttgir").read_text()))
    results = [_Result(racy)]
    with caplog.at_level("INFO", logger="grace.layout_race"):
        assert keep_race_free(tuner, results) == results
        log_choices(tuner)
    assert "did not compile (RuntimeError: no such configuration)" in caplog.text


def test_a_persistent_reductions_variant_heavier_than_its_configurations_is_not_compiled(
        caplog: pytest.LogCaptureFixture) -> None:
    """A persistent reduction's source fixes R0_BLOCK (1024 here): covering 32 threads with
    ``XBLOCK`` would put 1024 elements on each, against 32 in the kernel's heaviest configuration,
    a compile of minutes. It is not compiled; the configurations stay, as in stock."""
    triton = pytest.importorskip("triton")
    from grace.layout_race import keep_race_free, log_choices, note_compiled

    racy_text = (FIXTURES / "inplace_reduction_xblock8_warps2.ttgir").read_text()
    compiled: list[object] = []

    class Tuner(_Autotuner):
        def _precompile_config(self, cfg: object) -> _Result:
            compiled.append(cfg)
            return _Result(cfg)

    tuner = Tuner()
    tuner.size_hints = {"x": 4096, "r0_": 1024}
    configs = [triton.Config({"XBLOCK": 1}, num_warps=8), triton.Config({"XBLOCK": 8}, num_warps=8)]
    for config in configs:
        note_compiled(tuner, config, _Binary(racy_text))
    results = [_Result(config) for config in configs]
    with caplog.at_level("INFO", logger="grace.layout_race"):
        assert keep_race_free(tuner, results) == results
        log_choices(tuner)
    assert compiled == []
    assert caplog.text.count("not compiled: 1024 elements a thread") == 1  # both configurations give one variant
    assert "(32)" in caplog.text and "all kept, as stock" in caplog.text


def test_without_size_hints_no_variant_is_compiled() -> None:
    pytest.importorskip("triton")
    from grace.layout_race import keep_race_free, note_compiled

    class Tuner(_Autotuner):
        def _precompile_config(self, cfg: object) -> _Result:
            raise AssertionError("compiled a variant of unknown cost")

    tuner = Tuner()
    tuner.size_hints = None  # type: ignore[assignment]
    racy = _config(8, 2)
    note_compiled(tuner, racy, _Binary((FIXTURES / "inplace_reduction_xblock8_warps2.ttgir").read_text()))
    assert keep_race_free(tuner, [_Result(racy)])[0].config is racy
    assert any("no size hints" in m for _, m in tuner.grace_layout_choices)  # type: ignore[attr-defined]


@pytest.mark.parametrize(("kwargs", "warps", "fixed", "expected"), [
    ({"XBLOCK": 8, "R0_BLOCK": 4}, 2, {}, 0.5),
    ({"XBLOCK": 32}, 1, {"R0_BLOCK": 1024}, 1024.0),
    ({"XBLOCK": 1, "num_elements": 7}, 8, {"R0_BLOCK": 2048}, 8.0),  # only block sizes count
])
def test_elements_per_thread_counts_the_blocks_the_source_fixes(kwargs: dict[str, int], warps: int,
                                                                fixed: dict[str, int], expected: float) -> None:
    triton = pytest.importorskip("triton")
    from grace.layout_race import elements_per_thread, fixed_blocks

    config = triton.Config(kwargs, num_warps=warps)
    assert elements_per_thread(config, fixed) == expected
    assert fixed_blocks({"x": 64, "r0_": 2048}, [config]) == ({} if "R0_BLOCK" in kwargs else {"R0_BLOCK": 2048})

def test_where_every_configuration_races_the_same_configurations_are_compiled_ordered(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """Inductor's patched ``_precompile_worker`` over the probe kernel's racy configurations, each
    compiled by the pinned Triton for sm_90 from the kernel's own module file: the autotuner gets
    the same configurations back, compiled under the ordering mark with a barrier, race-free."""
    pytest.importorskip("triton")
    if not _overlay_has_the_hook():
        pytest.skip("GraCE's overlay with patches/pi/0003 is not active here (run `make setup`)")
    import importlib.util
    import inspect

    import grace.config
    from grace import triton_hooks, ttgir_race
    from torch._inductor.runtime.triton_heuristics import CachingAutotuner

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    probe = probe_module()
    plain = probe.triton_red_fused_div_expand_mul_pow_sum_0  # type: ignore[attr-defined]
    module_file = tmp_path / "kernel.py"  # the kernel in a module of its own, as Inductor keeps it
    module_file.write_text("import triton\nimport triton.language as tl\n\n\n" + inspect.getsource(plain.fn))
    spec = importlib.util.spec_from_file_location("kernel", module_file)
    kernel_module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(kernel_module)  # type: ignore[union-attr]
    compiled: dict[tuple[str, int, int, int], str] = {}

    class Tuner(_Autotuner):
        def __init__(self) -> None:
            super().__init__()
            self.fn = getattr(kernel_module, plain.fn.__name__)
            self.compile_results: list[_Result] = []
            self.launchers: list[object] = []
            self.configs = [_config(8, 2), _config(32, 8)]

        def _precompile_config(self, cfg: object) -> _Result:
            key = (cfg.kwargs["XBLOCK"], cfg.kwargs["R0_BLOCK"], cfg.num_warps)  # type: ignore[attr-defined]
            binary = probe.compile_for_sm90(*key, kernel=self.fn)  # type: ignore[attr-defined]
            compiled[(binary.metadata.name, *key)] = binary.asm["ttgir"]
            note_compiled(self, cfg, binary)
            return _Result(cfg)

    from grace.layout_race import log_choices, note_compiled

    tuner = Tuner()
    try:
        with grace.config.patch(race_free_kernels=True), caplog.at_level("INFO", logger="grace.layout_race"):
            CachingAutotuner._precompile_worker(tuner)  # type: ignore[arg-type]
            log_choices(tuner)
    except Exception as e:  # noqa: BLE001 - no LLVM backend for NVIDIA in this triton build
        pytest.skip(f"triton cannot compile for sm_90 here: {type(e).__name__}: {e}")
    finally:
        triton_hooks.remove("race_order")
    kept = [(r.config.kwargs["XBLOCK"], r.config.kwargs["R0_BLOCK"], r.config.num_warps)  # type: ignore[attr-defined]
            for r in tuner.compile_results]
    assert kept == [(8, 4, 2), (32, 4, 8)], "the configurations themselves, not variants"
    ordered = {key[1:]: text for key, text in compiled.items() if key[0].endswith(ttgir_race.ORDER_MARK)}
    assert sorted(ordered) == kept and all(find_layout_races(t) == [] and "gpu.barrier" in t for t in ordered.values())
    assert "the same configurations ordered by a barrier" in caplog.text
    assert (tmp_path / f"kernel{ttgir_race.ORDER_MARK}.py").is_file(), "the ordered copy beside its module"

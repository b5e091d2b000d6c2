"""The in-place reduction probe (``scripts/probes/inplace_reduction_race.py``) loaded as a module,
for the tests of the race's finder, its ordering and the autotuner's choice."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Any


def probe_module() -> Any:
    """The probe: its kernel as Inductor generates it, and compiling it for sm_90 on the CPU."""
    path = Path(__file__).parents[1] / "scripts" / "probes" / "inplace_reduction_race.py"
    spec = importlib.util.spec_from_file_location("inplace_reduction_race", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def inductor_kernel(path: Path, name: str | None = None) -> tuple[Any, dict[str, Any]]:
    """The ``JITFunction`` of a kernel module as Inductor writes it (``path``), loaded on the CPU,
    with its heuristics decorator's arguments (``triton_meta``, ``size_hints``) instead of an
    autotuner; with ``name``, under that name (the kernel renamed in a copy of the module)."""
    import tempfile

    from grace.triton_hooks import renamed_source

    stem = path.stem
    source = path.read_text().replace("triton_helpers.set_driver_to_gpu()", "")
    source = re.sub(r"@triton_heuristics\.\w+\(", "@_heuristics_arguments(", source)
    if name is not None:
        source = renamed_source(source, stem, name)
    target = Path(tempfile.mkdtemp(prefix="grace-kernel-")) / f"{name or stem}.py"
    target.write_text(source + "\n")
    spec = importlib.util.spec_from_file_location(target.stem, target)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    arguments: dict[str, Any] = {}
    module._heuristics_arguments = lambda **kw: (arguments.update(kw), lambda fn: fn)[1]  # type: ignore[attr-defined]
    spec.loader.exec_module(module)
    return getattr(module, name or stem), arguments


def compile_inductor_kernel_for_sm90(kernel: Any, arguments: dict[str, Any], constants: dict[str, int],
                                     num_warps: int) -> Any:
    """``kernel`` (from :func:`inductor_kernel`) compiled for sm_90 in this process (no GPU needed),
    with its signature and alignment from Inductor's ``triton_meta``."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    meta = arguments["triton_meta"]
    aligned = meta["configs"][0] if meta.get("configs") else {}
    source = ASTSource(kernel, meta["signature"], {**meta.get("constants", {}), **constants}, aligned)
    return triton.compile(source, target=GPUTarget("cuda", 90, 32), options={"num_warps": num_warps, "num_stages": 1})

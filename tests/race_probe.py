"""The in-place reduction probe (``scripts/probes/inplace_reduction_race.py``) loaded as a module,
for the tests of the race's finder, its ordering and the autotuner's choice."""

from __future__ import annotations

import importlib.util
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

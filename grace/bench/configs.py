"""Workload lists in ``configs/``: ``short_name  model  suite  mode  batch_size  [options]`` per line.

``mode`` is ``I`` (inference) or ``T`` (training), as in the paper's Table 1. Lines starting
with ``#`` are comments. Every line must name a registered workload and agree with it on
model, suite and mode; the batch size is the config's to set. ``options``, comma-separated,
are what the runner does for that workload alone (:class:`grace.bench.targets.Target`):
``release-memory``, ``together=N`` (mode workers started at once), ``first``, ``repeat=N``,
``timeout=SECONDS``, ``inputs=K`` (timed samples cycle over K >= 2 inputs), ``modes=A+B+...`` (the
only modes of a run this workload runs in).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from grace.bench.modes import MODES
from grace.bench.options import WorkerOptions
from grace.bench.targets import Target
from grace.bench.workloads import get
from grace.paths import CONFIGS_DIR

KINDS = {"I": "inference", "T": "training"}
FLAG_OPTIONS = {"release-memory": "release_memory", "first": "first"}  # option -> Target field
VALUE_OPTIONS: dict[str, tuple[str, type]] = {"repeat": ("repeat", int), "timeout": ("timeout_s", float),
                                               "together": ("together", int), "inputs": ("inputs", int)}


class ConfigError(ValueError):
    pass


def parse_config(path: Path) -> list[Target]:
    targets = []
    for number, raw in enumerate(path.read_text().splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        where = f"{path}:{number}"
        fields = line.split()
        if len(fields) not in (5, 6):
            raise ConfigError(f"{where}: expected 'short_name model suite mode batch_size [options]', got {raw!r}")
        name, model, suite, kind, batch = fields[:5]
        try:
            workload = get(name)
        except KeyError as e:
            raise ConfigError(f"{where}: {e.args[0]}") from None
        if kind not in KINDS:
            raise ConfigError(f"{where}: mode must be I or T, got {kind!r}")
        expected = (workload.model, workload.suite, workload.kind)
        if (model, suite, KINDS[kind]) != expected:
            raise ConfigError(f"{where}: {name} is registered as {expected}, config says "
                              f"{(model, suite, KINDS[kind])}")
        if not batch.isdigit() or int(batch) < 1:
            raise ConfigError(f"{where}: batch size must be a positive integer, got {batch!r}")
        try:
            adjust = parse_options(fields[5]) if len(fields) == 6 else {}
        except ValueError as e:
            raise ConfigError(f"{where}: {e}") from None
        targets.append(Target(workload, int(batch), **adjust))
    if not targets:
        raise ConfigError(f"{path}: no workloads")
    return targets


def parse_options(spec: str) -> dict[str, Any]:
    """A config line's options column as :class:`Target` fields."""
    out: dict[str, Any] = {}
    for item in spec.split(","):
        key, _, value = item.partition("=")
        if key in FLAG_OPTIONS and not value:
            out[FLAG_OPTIONS[key]] = True
        elif key in VALUE_OPTIONS and value:
            field, kind = VALUE_OPTIONS[key]
            try:
                number = kind(value)
            except ValueError:
                number = 0
            if number <= 0:
                raise ValueError(f"option {key} takes a positive number, got {value!r}")
            if key == "inputs":
                WorkerOptions(distinct_inputs=number)  # its own rule, stated there: raises ValueError
            out[field] = number
        elif key == "modes" and value:
            names = tuple(value.split("+"))
            unknown = [n for n in names if n not in MODES]
            if unknown:
                raise ValueError(f"option modes: unknown mode {', '.join(unknown)} (modes are joined by '+')")
            out["modes"] = names
        else:
            known = ", ".join([*FLAG_OPTIONS, *(f"{k}=N" for k in VALUE_OPTIONS), "modes=A+B"])
            raise ValueError(f"unknown option {item!r} (known: {known})")
    return out


def resolve(spec: str) -> list[Target]:
    """A config file path, a config name in configs/ (``micro`` -> workloads_micro.txt), or
    a comma-separated list of registered workload names at their default batch sizes."""
    for candidate in (Path(spec), CONFIGS_DIR / spec, CONFIGS_DIR / f"workloads_{spec}.txt"):
        if candidate.is_file():
            return parse_config(candidate)
    targets = []
    for name in (s.strip() for s in spec.split(",") if s.strip()):
        try:
            workload = get(name)
        except KeyError as e:
            raise ConfigError(e.args[0]) from None
        targets.append(Target(workload, workload.batch_size))
    return targets

"""Workload lists in ``configs/``: ``short_name  model  suite  mode  batch_size`` per line.

``mode`` is ``I`` (inference) or ``T`` (training), as in the paper's Table 1. Lines starting
with ``#`` are comments. Every line must name a registered workload and agree with it on
model, suite and mode; the batch size is the config's to set.
"""

from __future__ import annotations

from pathlib import Path

from grace.bench.runner import Target
from grace.bench.workloads import get
from grace.paths import CONFIGS_DIR

KINDS = {"I": "inference", "T": "training"}


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
        if len(fields) != 5:
            raise ConfigError(f"{where}: expected 'short_name model suite mode batch_size', got {raw!r}")
        name, model, suite, kind, batch = fields
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
        targets.append(Target(workload, int(batch)))
    if not targets:
        raise ConfigError(f"{path}: no workloads")
    return targets


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

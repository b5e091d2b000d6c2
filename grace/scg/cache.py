"""SCG decisions on disk, so the second run of a program skips profiling.

One JSON file per decision under ``$GRACE_CACHE_DIR/scg/`` (``GRACE_SCG_CACHE_DIR`` moves it),
named by the digest of its key. The key is everything the measurement depends on: the graph's
generated code, its inputs' shapes, dtypes, strides and roles (a static input costs nothing per
replay, a copied one costs its bytes), the GPU model, the driver, and the torch, triton and
grace versions. A file is trusted only if it parses, has this format version, and stores exactly
the key asked for; anything else (corrupt, truncated, copied from another machine or version)
is ignored with a warning and profiling runs again. ``GRACE_SCG_CACHE=0`` turns the cache off.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

from grace.log import get_logger
from grace.paths import cache_dir, write_atomic
from grace.scg.choose import Choice, Decision

log = get_logger("grace.scg")

FORMAT = 4  # each file's format version; a file of another version is ignored

# (shape, dtype, stride, role) of one input; role is one of grace.scg.candidate.ROLES
InputSignature = tuple[tuple[int, ...], str, tuple[int, ...], str]


@dataclass(frozen=True)
class DecisionKey:
    code_sha256: str
    inputs: tuple[InputSignature, ...]
    gpu: str
    driver: str
    torch: str
    triton: str
    grace: str

    def as_json(self) -> dict:
        data = asdict(self)
        data["inputs"] = [[list(shape), dtype, list(stride), role] for shape, dtype, stride, role in self.inputs]
        return data

    def digest(self) -> str:
        return hashlib.sha256(json.dumps(self.as_json(), sort_keys=True).encode()).hexdigest()[:32]


def enabled() -> bool:
    return os.environ.get("GRACE_SCG_CACHE", "1") != "0"


def root() -> Path:
    env = os.environ.get("GRACE_SCG_CACHE_DIR")
    return Path(env) if env else cache_dir() / "scg"


def load(key: DecisionKey, directory: Path | None = None) -> Decision | None:
    """The stored decision for ``key``, or None (absent, disabled, or not trustworthy)."""
    if not enabled():
        return None
    path = (directory or root()) / f"{key.digest()}.json"
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        log.warning("ignoring unreadable SCG decision %s (%s); profiling again", path, e)
        return None
    try:
        if data["format"] != FORMAT or data["key"] != key.as_json():
            log.warning("ignoring SCG decision %s: it was made for another graph, machine or version", path)
            return None
        choice = Choice(data["choice"])
        medians = {Choice(k): float(v) for k, v in data["medians_us"].items()}
        return Decision(choice, medians, str(data["reason"]) + " [cached]")
    except (KeyError, TypeError, ValueError) as e:
        log.warning("ignoring malformed SCG decision %s (%s); profiling again", path, e)
        return None


def store(key: DecisionKey, decision: Decision, directory: Path | None = None) -> Path | None:
    """Persist a decision atomically (a concurrent reader sees the old file or the new one)."""
    if not enabled():
        return None
    directory = directory or root()
    directory.mkdir(parents=True, exist_ok=True)
    payload = {"format": FORMAT, "key": key.as_json(), "choice": decision.choice.value,
               "medians_us": {c.value: t for c, t in decision.medians_us.items()},
               "reason": decision.reason}
    path = directory / f"{key.digest()}.json"
    write_atomic(path, json.dumps(payload, indent=1, sort_keys=True))
    return path


def entries(directory: Path | None = None) -> list[Path]:
    directory = directory or root()
    return sorted(directory.glob("*.json")) if directory.is_dir() else []


def clear(directory: Path | None = None) -> int:
    """Remove every stored decision; returns how many there were."""
    directory = directory or root()
    count = len(entries(directory))
    shutil.rmtree(directory, ignore_errors=True)
    return count

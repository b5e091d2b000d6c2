"""Apply the patch series into an overlay, all or nothing.

The overlay is a directory holding the patched copy of each upstream file the series touches,
plus ``manifest.json`` naming the module each copy replaces and the sha256 of the upstream
bytes it was made from. :mod:`grace._autoload` imports those modules from the overlay instead
of site-packages. Nothing under site-packages is ever written, so "stock PyTorch" is always one
environment variable away (``GRACE_DISABLE=1``), and a failed apply leaves no trace: every
hunk is applied in memory first, the directory appears by one atomic rename, and the pointer
to the current overlay is replaced by another.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from grace.paths import cache_dir, current_overlay_file, write_atomic
from grace.patching.series import SeriesEntry
from grace.patching.unidiff import HunkFailure, apply_file

MANIFEST = "manifest.json"
CURRENT = current_overlay_file()


class PatchApplyError(RuntimeError):
    """The series does not apply; ``failures`` names each file and hunk. Nothing was changed."""

    def __init__(self, failures: list[str]):
        super().__init__("patch series does not apply:\n  " + "\n  ".join(failures))
        self.failures = failures


def overlay_root() -> Path:
    return cache_dir() / "overlay"


def site_root(top_level: str) -> Path:
    """The directory holding an installed top-level package (``torch`` -> site-packages)."""
    spec = importlib.util.find_spec(top_level)
    if spec is None or not spec.submodule_search_locations:
        raise PatchApplyError([f"{top_level} is not installed"])
    return Path(list(spec.submodule_search_locations)[0]).parent


def module_name(rel_path: str) -> str:
    """'torch/_inductor/cudagraph_trees.py' -> 'torch._inductor.cudagraph_trees'."""
    if not rel_path.endswith(".py") or rel_path.endswith("__init__.py"):
        raise PatchApplyError([f"{rel_path}: only plain modules can be patched"])
    return rel_path[: -len(".py")].replace("/", ".")


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class Overlay:
    path: Path
    manifest: dict

    @property
    def patches(self) -> list[str]:
        return list(self.manifest["patches"])


def plan(series: list[SeriesEntry], pinned_sha: dict[str, str]) -> dict[str, str]:
    """Patched text per upstream path, computed in memory; raise with every failure found."""
    upstream: dict[str, bytes] = {}
    patched: dict[str, str] = {}
    failures: list[str] = []
    for entry in series:
        for diff in entry.patch.files:
            rel = diff.path
            if rel not in patched:
                source_path = site_root(rel.split("/", 1)[0]) / rel
                if not source_path.is_file():
                    failures.append(f"{entry.name}: {rel}: no such upstream file at {source_path}")
                    continue
                data = source_path.read_bytes()
                want = pinned_sha.get(rel)
                if want is None:
                    failures.append(f"{entry.name}: {rel}: not pinned in third_party/pins.toml")
                    continue
                if sha256(data) != want:
                    failures.append(
                        f"{entry.name}: {rel}: upstream file differs from the pinned release "
                        f"(sha256 {sha256(data)[:12]}, pinned {want[:12]})")
                    continue
                upstream[rel] = data
                patched[rel] = data.decode()
            if rel not in upstream:
                continue
            try:
                patched[rel] = apply_file(patched[rel], diff, entry.name)
            except HunkFailure as e:
                failures.append(str(e))
    if failures:
        raise PatchApplyError(failures)
    return patched


def build(series: list[SeriesEntry], pinned_sha: dict[str, str], versions: dict[str, str],
          root: Path | None = None) -> Overlay:
    """Apply the series and publish it as the current overlay (idempotent)."""
    root = root or overlay_root()
    patched = plan(series, pinned_sha)
    manifest = {
        "versions": versions,
        "patches": [e.name for e in series],
        "modules": {
            module_name(rel): {"path": rel, "upstream_sha256": pinned_sha[rel]}
            for rel in sorted(patched)
        },
    }
    digest = hashlib.sha256(json.dumps(manifest, sort_keys=True).encode())
    for rel in sorted(patched):
        digest.update(patched[rel].encode())
    key = digest.hexdigest()[:16]
    manifest["key"] = key
    target = root / key
    root.mkdir(parents=True, exist_ok=True)
    if not (target / MANIFEST).is_file():
        staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=root))
        try:
            for rel, text in patched.items():
                out = staging / rel
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_text(text)
            (staging / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True))
            if target.exists():  # a half-made directory from an interrupted older build
                shutil.rmtree(target)
            os.replace(staging, target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    write_atomic(root / CURRENT, json.dumps({"key": key}))
    return Overlay(target, manifest)


def current(root: Path | None = None) -> Overlay | None:
    """The overlay setup last published, or None."""
    root = root or overlay_root()
    try:
        key = json.loads((root / CURRENT).read_text())["key"]
        path = root / key
        return Overlay(path, json.loads((path / MANIFEST).read_text()))
    except (OSError, ValueError, KeyError):
        return None

"""Interpreter-start hook: import GraCE's patched upstream modules from the overlay.

``make setup`` writes ``grace-autoload.pth`` into site-packages; Python runs it at start, before
any user code can import torch, and it calls :func:`install`. That puts :class:`OverlayFinder`
first on ``sys.meta_path``: when torch imports, say, ``torch._inductor.cudagraph_trees``, the
finder serves the overlay's patched copy instead, but only if the installed upstream file still
has the exact bytes the overlay was made from. Otherwise it logs why and lets the stock module
load: a torch upgrade degrades GraCE to stock PyTorch, never to a mix.

This runs in every process of the environment, so it imports no torch and does no work beyond
reading one small JSON file. ``GRACE_DISABLE=1`` turns it off entirely.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

from grace.paths import cache_dir, current_overlay_file

_installed: "OverlayFinder | None" = None


class OverlayFinder(importlib.abc.MetaPathFinder):
    """Serves the modules named in an overlay manifest from the overlay directory."""

    def __init__(self, overlay_dir: Path, manifest: dict):
        self.overlay_dir = overlay_dir
        self.manifest = manifest
        self.modules: dict[str, dict] = manifest["modules"]
        self.loaded: dict[str, str] = {}  # module -> overlay file actually served
        self.refused: dict[str, str] = {}  # module -> why the stock module was served instead

    def find_spec(self, fullname: str, path=None, target: ModuleType | None = None):
        entry = self.modules.get(fullname)
        if entry is None:
            return None
        package, _, leaf = fullname.rpartition(".")
        stock = None
        for directory in path or ():
            candidate = Path(directory) / f"{leaf}.py"
            if candidate.is_file():
                stock = candidate
                break
        if stock is None:
            return self._refuse(fullname, f"no stock {leaf}.py under {package}")
        digest = hashlib.sha256(stock.read_bytes()).hexdigest()
        if digest != entry["upstream_sha256"]:
            return self._refuse(
                fullname, f"{stock} is not the file the overlay was made from; rerun `make setup`")
        patched = self.overlay_dir / entry["path"]
        self.loaded[fullname] = str(patched)
        return importlib.util.spec_from_file_location(fullname, patched)

    def _refuse(self, fullname: str, why: str) -> None:
        self.refused[fullname] = why
        from grace.log import get_logger  # stdlib-only; imported late to keep start-up cheap

        get_logger("grace.autoload").warning("loading stock %s: %s", fullname, why)
        return None


def read_current_overlay() -> tuple[Path, dict] | None:
    root = cache_dir() / "overlay"
    try:
        key = json.loads((root / current_overlay_file()).read_text())["key"]
        overlay_dir = root / key
        return overlay_dir, json.loads((overlay_dir / "manifest.json").read_text())
    except (OSError, ValueError, KeyError):
        return None


def install() -> OverlayFinder | None:
    """Put the overlay finder first on sys.meta_path (idempotent); None if GraCE is off."""
    global _installed
    import os

    from grace.option_values import disabled

    if disabled(os.environ):
        return None
    if _installed is not None:
        return _installed
    found = read_current_overlay()
    if found is None:
        return None
    overlay_dir, manifest = found
    already = [m for m in manifest["modules"] if m in sys.modules]
    if already:
        from grace.log import get_logger

        get_logger("grace.autoload").warning(
            "GraCE activated after torch imported %s; those stay stock in this process. "
            "Install the autoload hook with `make setup`, or import grace before torch.",
            ", ".join(already))
    _installed = OverlayFinder(overlay_dir, manifest)
    sys.meta_path.insert(0, _installed)
    return _installed


def installed() -> OverlayFinder | None:
    return _installed


def _run_from_pth() -> None:
    """Entry point for grace-autoload.pth: never let GraCE break interpreter start."""
    try:
        install()
    except Exception as e:  # noqa: BLE001 - a .pth must not raise
        sys.stderr.write(f"[grace] WARNING autoload failed, running stock PyTorch: {e!r}\n")

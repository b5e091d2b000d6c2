"""Where GraCE's files live: the checkout (patches, pins, configs) and its caches.

GraCE is installed editable from its checkout (``make setup``), so the patch series and the
pins are read from the checkout itself: one source of truth, no copies in site-packages.
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
REPO_ROOT = PACKAGE_DIR.parent
PATCHES_DIR = REPO_ROOT / "patches"
PINS_FILE = REPO_ROOT / "third_party" / "pins.toml"
CONFIGS_DIR = REPO_ROOT / "configs"
RESULTS_DIR = REPO_ROOT / "results"
FIGURES_DIR = REPO_ROOT / "figures"
TABLES_DIR = REPO_ROOT / "tables"


def cache_dir() -> Path:
    """Root of GraCE's on-disk state (overlay, decision cache); ``GRACE_CACHE_DIR`` overrides."""
    env = os.environ.get("GRACE_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "grace"


def current_overlay_file() -> str:
    """The name of the pointer to this Python environment's current overlay.

    One per environment (``sys.prefix``), so that two checkouts or virtual environments sharing
    a cache directory, each with its own patch series, never switch each other's overlay.
    """
    return f"current-{hashlib.sha256(sys.prefix.encode()).hexdigest()[:12]}.json"


def write_atomic(path: Path, text: str) -> None:
    """Replace ``path``'s content in one step: a concurrent reader sees the old or the new file."""
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise

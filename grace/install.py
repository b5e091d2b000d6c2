"""``python -m grace setup``: bring the patch series in and install the autoload hook.

Idempotent and all-or-nothing: the versions are checked first, the whole series is applied
in memory, and only when every hunk applies is the overlay published and the ``.pth`` written.
Nothing under site-packages changes except that one-line ``.pth`` file.
"""

from __future__ import annotations

import sysconfig
from pathlib import Path

from grace.log import get_logger
from grace.paths import REPO_ROOT
from grace.patching import overlay
from grace.patching.series import load_series
from grace.versions import check_versions, installed_version, pins

log = get_logger("grace.install")

PTH_NAME = "grace-autoload.pth"


def pth_text() -> str:
    """The .pth: the checkout on sys.path (an editable install without pip), then the hook.

    The hook line swallows its own failure so that a moved or broken checkout can never stop
    the interpreter from starting; it says so on stderr instead.
    """
    hook = ("import sys; exec('try:\\n import grace._autoload\\n grace._autoload._run_from_pth()"
            "\\nexcept Exception as e:\\n sys.stderr.write(\"[grace] autoload skipped: %r\\\\n\" % (e,))')")
    return f"{REPO_ROOT}\n{hook}\n"


def pth_path() -> Path:
    return Path(sysconfig.get_paths()["purelib"]) / PTH_NAME


def install_pth() -> Path:
    path = pth_path()
    text = pth_text()
    if not path.is_file() or path.read_text() != text:
        path.write_text(text)
    return path


def setup() -> overlay.Overlay:
    """Check pins, apply the series into a new current overlay, install the autoload hook."""
    check_versions()
    series = load_series()
    versions = {"torch": installed_version("torch") or "", "triton": installed_version("triton") or ""}
    result = overlay.build(series, pins().upstream_sha256, versions)
    pth = install_pth()
    log.info("overlay %s with %d patches; autoload hook %s", result.path, len(series), pth)
    return result

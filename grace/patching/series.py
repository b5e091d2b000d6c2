"""The patch series: ``patches/<optimization>/NNNN-name.patch``, applied in the order of
``grace.SWITCHES`` (cgct, pi, scg, lean_replay).

Within a folder, patches apply in file-name order. Each patch adds hook points only; what a
hook does lives in ``grace/`` behind the optimization's switch. A hook point reads its switch
where the decision is made once (compiling, tracing, warming up, capturing, or making the tree:
``if grace_config.pi:``) and leaves the hook's object on the tree or the node, None when off; on
the replay path a patch only tests that object (``if self.grace_pi is not None``), so that a
replay reads no configuration.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from grace import SWITCHES
from grace.paths import PATCHES_DIR
from grace.patching.unidiff import Patch, parse


@dataclass(frozen=True)
class SeriesEntry:
    optimization: str
    path: Path
    patch: Patch

    @property
    def name(self) -> str:
        return f"{self.optimization}/{self.path.name}"


def load_series(root: Path = PATCHES_DIR) -> list[SeriesEntry]:
    """Every patch under ``root``, parsed, in application order."""
    entries = []
    for optimization in SWITCHES:
        for path in sorted((root / optimization).glob("*.patch")):
            name = f"{optimization}/{path.name}"
            entries.append(SeriesEntry(optimization, path, parse(path.read_text(), name)))
    return entries

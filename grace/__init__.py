"""GraCE: CUDA-Graph-aware extensions to torch.compile.

Users change no model code. Installed with ``make setup``, GraCE acts inside plain
``torch.compile(model, mode="reduce-overhead")`` through thin hook points patched into
Inductor's Python sources (see ``patches/``) and the logic in this package.

Importing this module is cheap, does not import torch, and activates GraCE (see
:func:`activate`); ``grace-autoload.pth`` does the same at interpreter start.
"""

from __future__ import annotations

__version__ = "0.1.0"

# The optimizations, in the order their patch folders apply; each is a switch in grace.config.
SWITCHES: tuple[str, ...] = ("cgct", "pi", "scg", "lean_replay")


def activate() -> bool:
    """Serve GraCE's patched modules in this process; True if the overlay is active.

    The autoload hook calls this at interpreter start. Calling it by hand (``import grace``
    does) works too, provided torch's patched modules were not imported before.
    """
    from grace._autoload import install

    return install() is not None


activate()

__all__ = ["SWITCHES", "__version__", "activate"]

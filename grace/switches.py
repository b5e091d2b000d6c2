"""GraCE's switches as a running process has them, in the terms of the variables that set them.

A benchmark row and a tensor-parallel launch record or check these rather than the mode's
environment: a mode leaves some switches to the checkout's defaults, and defaults change.
"""

from __future__ import annotations


def running_switches() -> dict[str, str]:
    """Each switch's variable with its value in this process (``GRACE_DISABLE``: whether the
    patched modules are served)."""
    from grace import _autoload, config

    flag = {True: "1", False: "0"}
    return {"GRACE_DISABLE": flag[_autoload.installed() is None], "GRACE_CGCT": flag[bool(config.cgct)],
            "GRACE_PI": flag[bool(config.pi)], "GRACE_SCG": flag[bool(config.scg)],
            "GRACE_PI_STRATEGY": str(config.pi_strategy), "GRACE_LEAN_REPLAY": flag[bool(config.lean_replay)],
            "GRACE_STALE_OUTPUTS_RAISE": flag[bool(config.stale_outputs_raise)],
            "GRACE_COPY_GRADS": flag[bool(config.copy_grads)]}

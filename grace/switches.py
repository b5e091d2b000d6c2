"""GraCE's switches as a running process has them, in the terms of the variables that set them.

A benchmark row and a tensor-parallel launch record or check these rather than the mode's
environment: a mode leaves some switches to the checkout's defaults, and defaults change.
"""

from __future__ import annotations


def running_switches() -> dict[str, str]:
    """Each option's variable (``grace.config.env_names``) with its value in this process, a
    switch as ``"1"`` or ``"0"``; and ``GRACE_DISABLE``: whether the patched modules are served."""
    from grace import _autoload, config

    def text(value: object) -> str:
        return ("1" if value else "0") if isinstance(value, bool) else str(value)

    return {"GRACE_DISABLE": text(_autoload.installed() is None),
            **{variable: text(getattr(config, name)) for name, variable in config.env_names().items()}}

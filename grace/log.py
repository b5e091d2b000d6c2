"""The ``grace`` logger.

Turn it up the way ``TORCH_LOGS`` turns up torch's: ``GRACE_LOGS=info`` (or ``debug``;
``+grace`` is ``debug`` as in ``TORCH_LOGS``), or ``grace.log.set_level("debug")``. Records go
to stderr with a ``[grace]`` prefix; everything GraCE decides (a rewrite refused, a graph
disabled, a patch that did not apply) is logged here with its reason.
"""

from __future__ import annotations

import logging
import os

LOGGER_NAME = "grace"
_LEVELS = {"+grace": logging.DEBUG, "debug": logging.DEBUG, "info": logging.INFO,
           "grace": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


def get_logger(name: str = LOGGER_NAME) -> logging.Logger:
    """The ``grace`` logger, or a child of it (``grace.bench`` etc.), configured once."""
    root = logging.getLogger(LOGGER_NAME)
    if not getattr(root, "_grace_configured", False):
        _configure(root)
    return logging.getLogger(name)


def set_level(level: str | int) -> None:
    logger = get_logger()
    logger.setLevel(_parse(level) if isinstance(level, str) else level)


def _parse(spec: str) -> int:
    key = spec.strip().lower()
    if key not in _LEVELS:
        raise ValueError(f"GRACE_LOGS={spec!r}: expected one of {', '.join(sorted(_LEVELS))}")
    return _LEVELS[key]


def _configure(root: logging.Logger) -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("[grace] %(levelname)s %(name)s: %(message)s"))
    root.addHandler(handler)
    root.propagate = False
    spec = os.environ.get("GRACE_LOGS", "warning")
    try:
        root.setLevel(_parse(spec))
    except ValueError as e:
        root.setLevel(logging.WARNING)
        root.warning("%s; using 'warning'", e)
    root._grace_configured = True  # type: ignore[attr-defined]

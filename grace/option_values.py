"""The values GraCE's options accept, and one check of them.

:mod:`grace.config` declares the options; the modules that act on one read it through
:func:`checked` at its first use (PI's strategy and table write before a capture, SCG's force
and profiled strategies before a profile), and ``grace doctor`` lists every :func:`problems`,
so a wrong value is refused with the same message wherever it is first read, before anything
is recorded. This module imports nothing heavier than the config itself.

A switch's variable (``GRACE_CGCT``, ``GRACE_DISABLE``...) is read by :func:`switch_text`:
torch's configuration reads only "1" and "0" as booleans and keeps any other text as a string,
which is true, so ``GRACE_CGCT=false`` would turn CGCT on.
"""

from __future__ import annotations

from typing import Any

# How PI redirects a graph's reads (grace.config.pi_strategy; grace.pi.tree_hook)
PTX = "ptx"  # Triton kernels recompiled to load their inputs' pointers from a table
PRELUDE = "prelude"  # a kernel at the graph's root rewrites its kernels' arguments on the device
EXEC_UPDATE = "exec-update"  # the instantiated graph's kernel arguments rewritten from the host
PI_STRATEGIES = (PTX, PRELUDE, EXEC_UPDATE)

# How a replay writes PI's pointer table (grace.config.pi_table_write; grace.pi.table)
PI_TABLE_WRITES = ("copy", "memop")

# What SCG deploys whatever it measured (grace.config.scg_force; grace.scg.choose)
SCG_FORCE = ("", "graph")

# How a switch's variable may be written (any case); an empty one is unset
SWITCH_SPELLINGS: dict[str, bool] = {"1": True, "true": True, "on": True, "yes": True,
                                     "0": False, "false": False, "off": False, "no": False}

ACCEPTED: dict[str, tuple[str, ...]] = {
    "pi_strategy": PI_STRATEGIES,
    "pi_table_write": PI_TABLE_WRITES,
    "scg_force": SCG_FORCE,
}


def _config() -> Any:
    from grace import config

    return config


def refusal(name: str, value: object) -> str | None:
    """Why ``value`` is no value of option ``name``, or None where it is one. ``scg_pi_strategies``
    is a comma-separated list of PI strategies, empty for the configured strategy alone;
    ``scg_quiet_wait_s`` a number of seconds (text: the environment's)."""
    where = f"grace.config.{name}={value!r} ({_config().env_names().get(name, 'no variable')})"
    if name == "scg_quiet_wait_s":
        try:
            seconds = float(value)
        except (TypeError, ValueError):
            seconds = -1.0
        return None if seconds >= 0 else f"{where}: expected a number of seconds, 0 or more"
    if name == "scg_pi_strategies":
        unknown = [s.strip() for s in str(value).split(",") if s.strip() and s.strip() not in PI_STRATEGIES]
        if unknown:
            return f"{where}: unknown strategy {', '.join(map(repr, unknown))}; choose among {', '.join(PI_STRATEGIES)}"
        return None
    accepted = ACCEPTED[name]
    if value in accepted:
        return None
    return f"{where}: choose one of {', '.join(repr(v) for v in accepted)}"


def checked(name: str) -> str:
    """The value of option ``name`` in :mod:`grace.config`, refused by name if it is none of its
    values."""
    value = getattr(_config(), name)
    problem = refusal(name, value)
    if problem is not None:
        raise ValueError(problem)
    return value


def problems() -> dict[str, str]:
    """Each enumerated option whose value is refused, with the refusal :func:`checked` gives."""
    config = _config()
    found = {name: refusal(name, getattr(config, name)) for name in (*ACCEPTED, "scg_pi_strategies", "scg_quiet_wait_s")}
    return {name: problem for name, problem in found.items() if problem is not None}


def switch_text(variable: str, text: str) -> bool | None:
    """The switch that ``variable``'s ``text`` sets, None for an empty one (unset); a ValueError
    naming the variable for any other text."""
    if not text.strip():
        return None
    value = SWITCH_SPELLINGS.get(text.strip().lower())
    if value is None:
        raise ValueError(f"{variable}={text!r} is not a switch's value: use 1 or 0 "
                         f"(or {', '.join(k for k in SWITCH_SPELLINGS if not k.isdigit())})")
    return value


def disabled(environ: Any) -> bool:
    """Whether ``GRACE_DISABLE`` in ``environ`` keeps GraCE's patched sources from loading. Read
    at every interpreter's start, where raising would break every Python program of the
    environment: a value that is no switch's is warned about once and disables GraCE, stock
    PyTorch being what a user who set the variable at all is likelier to want."""
    text = environ.get("GRACE_DISABLE")
    if text is None:
        return False
    try:
        return bool(switch_text("GRACE_DISABLE", text))
    except ValueError as e:
        global _disable_warned
        if not _disable_warned:
            _disable_warned = True
            import sys

            print(f"GraCE: {e}; GraCE is disabled in this process", file=sys.stderr)
        return True


_disable_warned = False

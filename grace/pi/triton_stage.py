"""Running the PTX pass inside Triton's compiler, keyed by the kernel's name.

Which parameters a kernel reads indirectly is written into the kernel's name:
``triton_poi_fused_add_0`` compiled with its PTX parameters 0 and 2 indirected is
``triton_poi_fused_add_0__grace_pi_v1__0_2``. The name is in the function's source, so:

* Triton's cache key (which hashes the source) differs between the plain and the indirected
  binary, and between indirections of different parameters or pass versions: the cache can
  never hand one to a caller that expects the other;
* the stage hook needs no side channel, so it works the same in Inductor's compile worker
  processes as in the main one.

:func:`install` adds a pass to Triton 3.6's stage hook (:mod:`grace.triton_hooks`) that wraps
the ``ptx`` stage: kernels whose name carries the marker go through
:func:`grace.pi.ptx.indirect_params`, all others are untouched. A hook installed before it
still runs. The hook must be installed in whichever process compiles a marked kernel;
a binary compiled without it keeps plain parameters, which is why users of a marked kernel check
its PTX with :func:`grace.pi.ptx.is_indirected` before trusting it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from grace.log import get_logger
from grace.pi.ptx import PASS_VERSION, indirect_params

log = get_logger("grace.pi")

_TAG = f"__grace_pi_v{PASS_VERSION}__"
_MARKED = re.compile(rf"^(?P<base>[A-Za-z_]\w*?){_TAG}(?P<indices>\d+(?:_\d+)*)$")


def marked_name(base: str, indices: Sequence[int]) -> str:
    """The kernel name that asks for PTX parameters ``indices`` to be indirected."""
    if not indices:
        raise ValueError("nothing to indirect")
    return f"{base}{_TAG}{'_'.join(map(str, sorted(set(indices))))}"


def parse_marked(name: str) -> tuple[str, tuple[int, ...]] | None:
    """(base name, PTX parameter indices) of a marked kernel name, or None for a plain one."""
    m = _MARKED.match(name)
    if m is None:
        return None
    return m["base"], tuple(int(i) for i in m["indices"].split("_"))


def marked_source(source: str, base: str, indices: Sequence[int]) -> str:
    """A kernel module's source with kernel ``base`` renamed to its marked name everywhere
    (:func:`grace.triton_hooks.renamed_source`)."""
    from grace.triton_hooks import renamed_source

    return renamed_source(source, base, marked_name(base, indices))


def ptx_param_indices(signature: Mapping[str, str], names: Sequence[str]) -> tuple[int, ...]:
    """PTX parameter positions of the arguments ``names`` of a kernel with Triton ``signature``.

    The signature is the one handed to ``triton.compile`` (argument name -> type, in order).
    Compile-time constants (``constexpr``) are not kernel parameters; every other argument is one,
    in order, and Triton appends its scratch pointers after them.
    """
    runtime = [arg for arg, kind in signature.items() if kind != "constexpr"]
    out = []
    for name in names:
        if name not in signature:
            raise KeyError(f"{name!r} is not an argument of the kernel")
        if signature[name] == "constexpr":
            raise ValueError(f"{name!r} is a compile-time constant, not a parameter")
        if not signature[name].startswith("*"):
            raise ValueError(f"{name!r} is {signature[name]}, not a pointer")
        out.append(runtime.index(name))
    return tuple(out)


def install() -> None:
    """Install the stage hook in this process (idempotent; keeps a hook installed before it)."""
    from grace import triton_hooks

    triton_hooks.wrap_stage("pi", "ptx", _with_indirection)
    log.debug("PTX indirection stage hook installed")


def uninstall() -> None:
    """Take the hook out again, leaving any other stage pass installed (the inverse of :func:`install`)."""
    from grace import triton_hooks

    triton_hooks.remove("pi")


def _with_indirection(make_ptx: Any) -> Any:
    def make_ptx_indirected(src: Any, metadata: dict) -> str:
        ptx = make_ptx(src, metadata)
        marked = parse_marked(metadata.get("name", ""))
        if marked is None:
            return ptx
        result = indirect_params(ptx, marked[1])
        log.debug("%s: PTX params %s indirected (%s ld.param rewritten)", result.entry,
                  ",".join(map(str, result.params)), sum(result.loads.values()))
        return result.ptx

    return make_ptx_indirected

"""The PTX pass of parameter indirection: chosen pointer parameters become pointer-to-pointer.

A Triton kernel compiled by Triton 3.6 for NVIDIA reads each of its parameters with
``ld.param`` into a virtual register and then computes with the register. To make parameter
``i`` indirect, every ``ld.param.b64 %rdN, [<kernel>_param_i];`` is followed by
``ld.global.b64 %rdN, [%rdN];``: the launch now passes the address of an 8-byte slot holding
the real pointer, and from that instruction on the kernel computes with the real pointer, so the
rest of its code is unchanged. The slot lives in a per-graph device table that a replay refills
with one small host-to-device copy, which is what lets a CUDA graph take new input addresses
without copying the inputs.

The pass refuses (``PtxPassError``) rather than guesses: a parameter not declared as a 64-bit
``.ptr`` (Triton declares every pointer argument so), a
parameter referenced by anything but a plain ``ld.param`` of the whole value (its address taken,
a predicated or partial load), or PTX with other than one ``.entry``. The caller then keeps the
copy for that input. The rewritten PTX carries a ``// grace-pi`` line naming the parameters, so a
binary can be checked to be the indirected one before it is trusted (:func:`is_indirected`).

Alignment: the ``.ptr .align`` attribute of an indirected parameter describes the slot, which is
8-byte aligned, so it is set to 8. What the kernel assumes about the real pointer (Triton
specializes on 16-byte divisibility and vectorizes on it) is unchanged, and is the replay
guard's to check.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

PASS_VERSION = 1
MARKER = "// grace-pi"

_ENTRY = re.compile(r"^\.visible\s+\.entry\s+(?P<name>[A-Za-z_$][\w$]*)\((?P<params>[^)]*)\)", re.M)
_PARAM = re.compile(r"^\.param\s+(?P<type>\.[a-z]\d+)(?P<attrs>(?:\s+\.[a-z]+(?:\s+\d+)?)*)\s+"
                    r"(?P<sym>[\w$]+)(?P<array>\s*\[\d+\])?$")
_ALIGN = re.compile(r"\.align\s+\d+")


class PtxPassError(ValueError):
    """The PTX is not what the pass can rewrite safely; the reason names the parameter and line."""


@dataclass(frozen=True)
class PtxParam:
    index: int
    symbol: str
    type: str  # ".u64", ".b64", ".u32", ...
    is_pointer: bool  # declared with the .ptr attribute


@dataclass(frozen=True)
class Indirected:
    """The rewritten PTX and what was done to it."""

    ptx: str
    entry: str
    params: tuple[int, ...]
    loads: dict[int, int]  # parameter index -> ld.param instructions rewritten (0: never read)


def entry_params(ptx: str) -> tuple[str, list[PtxParam]]:
    """The kernel's name and its parameters, in launch order."""
    entries = list(_ENTRY.finditer(ptx))
    if len(entries) != 1:
        raise PtxPassError(f"expected one .visible .entry, found {len(entries)}")
    entry = entries[0]
    params = []
    for index, raw in enumerate(p.strip() for p in entry["params"].split(",") if p.strip()):
        m = _PARAM.match(raw)
        if m is None:
            raise PtxPassError(f"{entry['name']}: cannot parse parameter declaration {raw!r}")
        is_array = m["array"] is not None
        params.append(PtxParam(index, m["sym"], m["type"] + ("[]" if is_array else ""),
                               ".ptr" in m["attrs"].split()))
    return entry["name"], params


def indirect_params(ptx: str, indices: Sequence[int]) -> Indirected:
    """Make parameters ``indices`` (PTX parameter positions) pointer-to-pointer."""
    wanted = tuple(sorted(set(indices)))
    name, params = entry_params(ptx)
    if MARKER in ptx:
        raise PtxPassError(f"{name}: already indirected")
    for i in wanted:
        if not 0 <= i < len(params):
            raise PtxPassError(f"{name}: no parameter {i} (the kernel has {len(params)})")
        if params[i].type not in (".u64", ".b64") or not params[i].is_pointer:
            raise PtxPassError(f"{name}: parameter {i} is {params[i].type} without .ptr, not a global pointer")

    entry_end = _ENTRY.search(ptx).end()
    head, body = ptx[:entry_end], ptx[entry_end:]
    head = _realign(head, [params[i].symbol for i in wanted])
    patterns = {
        i: (re.compile(rf"(?<![\w$]){re.escape(params[i].symbol)}(?![\w$])"),
            re.compile(rf"(?P<indent>\s*)ld\.param\.[bu]64\s+(?P<reg>%[\w$]+),\s*"
                       rf"\[{re.escape(params[i].symbol)}(?:\+0)?\];\s*(?://.*)?"))
        for i in wanted}
    loads = {i: 0 for i in wanted}
    out: list[str] = []
    for number, line in enumerate(body.split("\n")):
        out.append(line)
        for i, (mentions, whole_load) in patterns.items():
            if not mentions.search(line):
                continue
            m = whole_load.fullmatch(line)
            if m is None:
                raise PtxPassError(f"{name}: parameter {i} is used by something other than a whole "
                                   f"64-bit ld.param (line {number + 1} after the entry: {line.strip()!r})")
            out.append(f"{m['indent']}ld.global.b64 \t{m['reg']}, [{m['reg']}];")
            loads[i] += 1
    marker = f"{MARKER} v{PASS_VERSION}: indirect params {','.join(map(str, wanted))}"
    return Indirected(f"{marker}\n{head}{chr(10).join(out)}", name, wanted, loads)


def is_indirected(ptx: str, indices: Sequence[int]) -> bool:
    """Whether ``ptx`` came out of :func:`indirect_params` for exactly ``indices``, this version."""
    wanted = ",".join(map(str, sorted(set(indices))))
    return ptx.startswith(f"{MARKER} v{PASS_VERSION}: indirect params {wanted}\n")


def _realign(head: str, symbols: list[str]) -> str:
    """Set ``.align 8`` (the slot's alignment) on the declarations of ``symbols``."""
    def fix(m: re.Match) -> str:
        return _ALIGN.sub(".align 8", m[0])

    for symbol in symbols:
        head = re.sub(rf"\.param[^,)\n]*?(?<![\w$]){re.escape(symbol)}(?![\w$])", fix, head)
    return head

"""One stale read, read back from a child's log written with ``--probe trace,guard``.

A stale read (a held output read wrong without raising, :meth:`ProgramRun.recheck`) has come
only under a run's load, so its explanation has to come from the log of the run that had it.
Two questions decide it, and the probes' lines answer both:

- Was the held output's memory on a path the tree ended, and did the stale-output guard count
  it as held there? The ``guard`` probe lists, at every path end, each cached output of the
  path's replayed nodes with its address and its Python and ``TensorImpl`` counts.
- Which later call wrote its memory? The ``trace`` probe gives the addresses and object ids of
  the outputs every tree call handed back: the same address is new memory handed out there, the
  same object is the held tensor itself handed out again by a node that still caches it.

:func:`explain` takes the window from the held step to the read, the held step's output
addresses and objects from its call line, and marks every line that names one of them. It
reads text only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

PREFIX = "[probe] "
_STEP = re.compile(r"^step (\d+):")
_OUTPUTS = re.compile(r"outputs at \[([^\]]*)\]")
_OBJECTS = re.compile(r"objects \[([^\]]*)\]")
_ADDRESS = re.compile(r"0x[0-9a-f]+")
_CALL = "call function "
_ENDS = ("tree ends path", "a replayed path ends:", "a warm-up may end the path:",
         "allocator restored below the path:")


@dataclass
class StaleRead:
    """What the probes' lines say about output ``held`` read stale at step ``at``."""

    held: int
    at: int
    addresses: list[str] = field(default_factory=list)  # the held step's outputs, as traced
    objects: list[str] = field(default_factory=list)  # their tensors' ids
    window: list[str] = field(default_factory=list)  # probe lines from the held step to the read
    path_ends: list[str] = field(default_factory=list)  # path ends in the window naming an address
    writers: list[str] = field(default_factory=list)  # later calls that handed back an address
    handed_again: list[str] = field(default_factory=list)  # later calls that handed back a held object

    def names(self, line: str) -> bool:
        """Whether ``line`` names one of the held outputs' addresses or objects."""
        return (any(a in line for a in self.addresses)
                or any(re.search(rf"\b{o}\b", line) for o in self.objects))

    def report(self) -> str:
        if not self.window:
            return (f"no probe lines for steps {self.held} to {self.at}: was the run made with "
                    "--probe trace,guard?")
        lines = [f"held output of step {self.held}, read stale at step {self.at}",
                 f"its outputs, as the call handed them back: {', '.join(self.addresses) or 'none traced'}"
                 f" (objects {', '.join(self.objects) or 'not traced'})",
                 f"path ends that list one of them ({len(self.path_ends)}):",
                 *(f"  {line}" for line in self.path_ends),
                 f"later calls that handed back memory at one of them ({len(self.writers)}):",
                 *(f"  {line}" for line in self.writers),
                 f"later calls that handed back the held tensor itself ({len(self.handed_again)}):",
                 *(f"  {line}" for line in self.handed_again),
                 "window (* names a held address or object):",
                 *(f"{'*' if self.names(line) else ' '} {line}" for line in self.window)]
        return "\n".join(lines)


def probe_lines(text: Iterable[str]) -> list[str]:
    """The probes' own lines of a log, without their prefix."""
    return [line[len(PREFIX):].rstrip("\n") for line in text if line.startswith(PREFIX)]


def explain(lines: list[str], held: int, at: int) -> StaleRead:
    """The stale read of step ``held``'s output at step ``at`` (``held < at``) from the probe
    lines of one child's log (:func:`probe_lines`)."""
    if not 0 <= held < at:
        raise ValueError(f"the held step must come before the read: held {held}, read at {at}")
    read = StaleRead(held, at)
    step = None
    for line in lines:
        marker = _STEP.match(line)
        if marker:
            step = int(marker.group(1))
        if step is None or step < held or step > at:
            continue
        read.window.append(line)
        # what the harness holds (its hold line), else what the held step's call handed back
        holds = line.startswith(f"step {held} holds ")
        if step == held and (holds or (line.startswith(_CALL) and not read.addresses)):
            listed, objects = _OUTPUTS.search(line), _OBJECTS.search(line)
            read.addresses = _ADDRESS.findall(listed.group(1)) if listed else []
            read.objects = re.findall(r"\d+", objects.group(1)) if objects else []
            continue
        if not read.names(line):
            continue
        if line.startswith(_ENDS):
            read.path_ends.append(f"step {step}: {line}")
        elif line.startswith(_CALL) and step > held:
            again = _OBJECTS.search(line)
            if again and set(re.findall(r"\d+", again.group(1))) & set(read.objects):
                read.handed_again.append(f"step {step}: {line}")
            else:
                read.writers.append(f"step {step}: {line}")
    return read


def stale_pairs(text: Iterable[str]) -> list[tuple[int, int]]:
    """(held step, step read at) of each stale read the child's result line records (the last
    line of its log that is a JSON object with ``stale``)."""
    pairs: list[tuple[int, int]] = []
    for line in text:
        if line.startswith("{"):
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and "stale" in record:
                pairs = [(int(h), int(a)) for a, h in record["stale"] or []]
    return pairs


def explain_log(path: str, held: int | None = None, at: int | None = None) -> str:
    """The report of each stale read in the child's log at ``path``, or of the one named."""
    with open(path, errors="replace") as f:
        text = f.readlines()
    if (held is None) != (at is None):
        raise ValueError("name both the held step and the step it was read at, or neither")
    pairs = [(held, at)] if held is not None and at is not None else stale_pairs(text)
    if not pairs:
        return f"{path}: its result records no stale read (name one with --held and --at)"
    lines = probe_lines(text)
    return "\n\n".join(explain(lines, h, a).report() for h, a in pairs)

"""A strict unified-diff parser and applier.

Strict on purpose: context must match exactly (no fuzz), so a hook point lands where it was
written or not at all. Only the position may move (an earlier patch in the series shifts
lines); the nearest exact match to the stated position wins.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_HUNK_HEADER = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


class PatchFormatError(ValueError):
    """The patch file itself is malformed."""


@dataclass(eq=False)  # not frozen: Python sets __traceback__ etc. on exceptions it re-raises
class HunkFailure(Exception):
    """A hunk whose context is not in the target file."""

    patch: str
    path: str
    hunk: int  # 1-based, as `patch` reports it
    header: str
    reason: str

    def __str__(self) -> str:
        return f"{self.patch}: {self.path}: hunk #{self.hunk} ({self.header}) {self.reason}"


@dataclass
class Hunk:
    header: str
    old_start: int
    old: list[str] = field(default_factory=list)  # context and removed lines, without newline
    new: list[str] = field(default_factory=list)  # context and added lines, without newline
    old_no_newline: bool = False  # "\ No newline at end of file" after an old-side last line
    new_no_newline: bool = False  # ... after a new-side last line


@dataclass
class FileDiff:
    path: str  # relative to the site root, e.g. torch/_inductor/cudagraph_trees.py
    hunks: list[Hunk] = field(default_factory=list)


@dataclass
class Patch:
    name: str
    description: str
    files: list[FileDiff]


def _strip_prefix(raw: str) -> str:
    path = raw.split("\t", 1)[0].strip()
    return path[2:] if path[:2] in ("a/", "b/") else path


def parse(text: str, name: str = "<patch>") -> Patch:
    """Parse a (possibly multi-file) unified diff; text before the first file is its description."""
    lines = text.split("\n")  # not splitlines(): \x0c, \x1c, \u2028 ... are not line ends here
    if lines[-1] == "":
        lines.pop()
    files: list[FileDiff] = []
    description: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            files.append(FileDiff(path=_strip_prefix(lines[i + 1][4:])))
            i += 2
            continue
        if line.startswith("@@"):
            if not files:
                raise PatchFormatError(f"{name}: hunk before any file header at line {i + 1}")
            i = _parse_hunk(lines, i, files[-1], name)
            continue
        if not files:
            description.append(line)
        i += 1
    if not files:
        raise PatchFormatError(f"{name}: no file diffs found")
    for f in files:
        if not f.hunks:
            raise PatchFormatError(f"{name}: {f.path} has no hunks")
    return Patch(name=name, description="\n".join(description).strip(), files=files)


def _parse_hunk(lines: list[str], i: int, target: FileDiff, name: str) -> int:
    m = _HUNK_HEADER.match(lines[i])
    if not m:
        raise PatchFormatError(f"{name}: bad hunk header at line {i + 1}: {lines[i]!r}")
    old_count = int(m.group(2) or "1")
    new_count = int(m.group(4) or "1")
    hunk = Hunk(header=lines[i], old_start=int(m.group(1)))
    i += 1
    last = ""
    while len(hunk.old) < old_count or len(hunk.new) < new_count:
        if i >= len(lines):
            raise PatchFormatError(f"{name}: {target.path}: truncated hunk {hunk.header}")
        line = lines[i]
        tag, body = (line[:1], line[1:]) if line else (" ", "")
        if tag == " ":
            hunk.old.append(body)
            hunk.new.append(body)
        elif tag == "-":
            hunk.old.append(body)
        elif tag == "+":
            hunk.new.append(body)
        elif tag == "\\":
            _no_newline(hunk, last)
        else:
            raise PatchFormatError(f"{name}: {target.path}: unexpected line {i + 1}: {line!r}")
        last = tag
        i += 1
    if len(hunk.old) != old_count or len(hunk.new) != new_count:
        raise PatchFormatError(f"{name}: {target.path}: line counts disagree with {hunk.header}")
    while i < len(lines) and lines[i].startswith("\\"):
        _no_newline(hunk, last)
        i += 1
    target.hunks.append(hunk)
    return i


def _no_newline(hunk: Hunk, after_tag: str) -> None:
    """A "\\ No newline at end of file" line: the side(s) of the line before it end the file."""
    if after_tag in (" ", "-"):
        hunk.old_no_newline = True
    if after_tag in (" ", "+"):
        hunk.new_no_newline = True


def apply_file(source: str, diff: FileDiff, patch_name: str) -> str:
    """Apply one file's hunks to its text; raise :class:`HunkFailure` on the first that misses."""
    lines = source.split("\n")
    trailing_newline = source.endswith("\n")
    if trailing_newline:
        lines.pop()
    offset = 0
    floor = 0  # hunks apply in order: none lands above the end of the one before
    for number, hunk in enumerate(diff.hunks, start=1):
        expected = max(hunk.old_start - 1 + offset, 0)
        # A pure insertion's old_start names the line it follows.
        if not hunk.old and hunk.old_start > 0:
            expected = hunk.old_start + offset
        at = _find(lines, hunk.old, expected, floor)
        if at is None:
            raise HunkFailure(patch_name, diff.path, number, hunk.header,
                              "does not match: its context is not in the file")
        lines[at:at + len(hunk.old)] = hunk.new
        offset += (at - expected) + len(hunk.new) - len(hunk.old)
        floor = at + len(hunk.new)
        if hunk.new_no_newline:
            trailing_newline = False
        elif hunk.old_no_newline:
            trailing_newline = True
    return "\n".join(lines) + ("\n" if trailing_newline else "")


def _find(lines: list[str], block: list[str], expected: int, floor: int = 0) -> int | None:
    if not block:
        return max(min(expected, len(lines)), floor)
    n = len(block)
    for distance in range(len(lines) + 1):
        for at in (expected - distance, expected + distance) if distance else (expected,):
            if floor <= at <= len(lines) - n and lines[at:at + n] == block:
                return at
    return None

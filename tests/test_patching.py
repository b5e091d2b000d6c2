"""The patching machinery: unified diffs, the series, the overlay, the import finder, the CLI.

Everything but the end-to-end section runs against a fake "site root" (a tmp directory holding
a top-level package ``fakepkg``), so no test writes anywhere near site-packages. The end-to-end
section patches the real installed ``torch/_inductor/cudagraph_trees.py`` into a private
overlay (``GRACE_CACHE_DIR``) and checks a fresh interpreter imports the patched copy.
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import importlib
import importlib.util
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from grace import versions
from grace.paths import REPO_ROOT
from grace._autoload import OverlayFinder
from grace.patching import overlay
from grace.patching.overlay import PatchApplyError
from grace.patching.series import load_series
from grace.patching.unidiff import HunkFailure, PatchFormatError, apply_file, parse

# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------


def udiff(old: str, new: str, path: str = "x.py", n: int = 3) -> str:
    """A unified diff of two texts (ending in newline) as ``git diff``/``diff -u`` writes it."""
    lines = difflib.unified_diff(_lines(old), _lines(new), fromfile=f"a/{path}",
                                 tofile=f"b/{path}", n=n, lineterm="")
    return "\n".join(lines) + "\n"


def _lines(text: str) -> list[str]:
    """Lines split at \\n only (str.splitlines also splits at \\x0c, \\u2028, ...)."""
    return text.split("\n")[:-1] if text.endswith("\n") else text.split("\n")


def gnu_diff(tmp_path: Path, old: str, new: str, path: str = "x.py", context: int = 3) -> str:
    """``diff -U<context>`` of two texts: the only producer here of "\\ No newline" markers."""
    a, b = tmp_path / "old.txt", tmp_path / "new.txt"
    a.write_bytes(old.encode())
    b.write_bytes(new.encode())
    proc = subprocess.run(["diff", f"-U{context}", "--label", f"a/{path}", "--label", f"b/{path}",
                           str(a), str(b)], capture_output=True, text=True)
    assert proc.returncode == 1, proc.stderr  # 1: the files differ
    return proc.stdout


def apply_text(diff_text: str, source: str, name: str = "<test>") -> str:
    """Apply a single-file diff to ``source``."""
    patch = parse(diff_text, name)
    assert len(patch.files) == 1
    return apply_file(source, patch.files[0], name)


def numbered(n: int, prefix: str = "line") -> list[str]:
    return [f"{prefix} {i}" for i in range(1, n + 1)]


def text(lines: list[str], newline: bool = True) -> str:
    return "\n".join(lines) + ("\n" if newline else "")


def sha(data: str | bytes) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


# --------------------------------------------------------------------------------------------
# unidiff: parsing
# --------------------------------------------------------------------------------------------

A_OLD = text(numbered(40, "a"))
A_NEW = text(["a 1", "a 2 changed"] + numbered(40, "a")[2:30] + ["a 30.5 added"] + numbered(40, "a")[30:])
B_OLD = text(numbered(10, "b"))
B_NEW = text(numbered(10, "b")[:-1])  # removes the last line


def multi_file_patch() -> str:
    return ("Add two hook points.\n\nLonger explanation of the hooks.\n\n"
            + udiff(A_OLD, A_NEW, "pkg/a.py") + udiff(B_OLD, B_NEW, "pkg/b.py"))


def test_parse_multi_file_multi_hunk_with_description() -> None:
    patch = parse(multi_file_patch(), "cgct/0001-hooks.patch")
    assert patch.name == "cgct/0001-hooks.patch"
    assert patch.description == "Add two hook points.\n\nLonger explanation of the hooks."
    assert [f.path for f in patch.files] == ["pkg/a.py", "pkg/b.py"]
    assert [len(f.hunks) for f in patch.files] == [2, 1]
    a, b = patch.files
    assert apply_file(A_OLD, a, patch.name) == A_NEW
    assert apply_file(B_OLD, b, patch.name) == B_NEW


def test_parse_accepts_git_extended_headers_and_timestamps() -> None:
    diff = ("diff --git a/pkg/a.py b/pkg/a.py\nindex 0123456..89abcde 100644\n"
            + udiff(A_OLD, A_NEW, "pkg/a.py").replace("--- a/pkg/a.py", "--- a/pkg/a.py\t2024-01-01 00:00:00"))
    patch = parse(diff)
    assert [f.path for f in patch.files] == ["pkg/a.py"]
    assert apply_file(A_OLD, patch.files[0], "p") == A_NEW


@pytest.mark.parametrize("bad, message", [
    ("just some prose, no diff at all\n", "no file diffs"),
    ("@@ -1,2 +1,2 @@\n a\n-b\n+c\n", "hunk before any file header"),
    ("--- a/x.py\n+++ b/x.py\n@@ -one +1 @@\n-a\n+b\n", "bad hunk header"),
    ("--- a/x.py\n+++ b/x.py\n@@ -1,2 +1,2\n a\n-b\n+c\n", "bad hunk header"),
    ("--- a/x.py\n+++ b/x.py\n", "no hunks"),
    ("--- a/x.py\n+++ b/x.py\n@@ -1,3 +1,3 @@\n a\n-b\n+c\n", "truncated"),
    ("--- a/x.py\n+++ b/x.py\n@@ -1,2 +1,2 @@\n a\n?b\n+c\n", "unexpected line"),
    ("--- a/x.py\n+++ b/x.py\n@@ -1,1 +1,1 @@\n-a\n-b\n+c\n", "line counts disagree"),
])
def test_malformed_patches_raise_patch_format_error(bad: str, message: str) -> None:
    with pytest.raises(PatchFormatError, match=message) as info:
        parse(bad, "pi/0002-broken.patch")
    assert "pi/0002-broken.patch" in str(info.value)


# --------------------------------------------------------------------------------------------
# unidiff: applying
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("shift", [+7, -5])
def test_hunk_applies_where_its_lines_moved(shift: int) -> None:
    old = numbered(60)
    new = old[:40] + ["inserted hook"] + old[40:]
    diff = udiff(text(old), text(new))
    if shift > 0:  # lines added above the hunk
        extra = [f"extra {i}" for i in range(shift)]
        moved_old, moved_new = extra + old, extra + new
    else:  # lines removed above the hunk
        moved_old, moved_new = old[-shift:], new[-shift:]
    assert apply_text(diff, text(moved_old)) == text(moved_new)


def test_changed_context_raises_hunk_failure_naming_patch_path_and_hunk() -> None:
    diff = udiff(A_OLD, A_NEW, "pkg/a.py")
    target = A_OLD.replace("a 31\n", "a 31 (upstream changed this)\n")  # context of hunk 2
    with pytest.raises(HunkFailure) as info:
        apply_text(diff, target, "cgct/0003-move.patch")
    message = str(info.value)
    assert "cgct/0003-move.patch" in message
    assert "pkg/a.py" in message
    assert "hunk #2" in message
    assert info.value.hunk == 2


def test_hunk_failure_propagates_through_context_managers() -> None:
    """A HunkFailure raised inside ``with`` (contextlib sets its __traceback__) stays itself."""

    @contextlib.contextmanager
    def scope():
        yield

    diff = udiff(A_OLD, A_NEW, "pkg/a.py")
    with pytest.raises(HunkFailure, match="hunk #1"):
        with scope():
            apply_text(diff, A_OLD.replace("a 2\n", "a 2 (upstream)\n"))


def test_removed_line_must_match_exactly() -> None:
    old = numbered(20)
    diff = udiff(text(old), text(old[:10] + old[11:]))
    with pytest.raises(HunkFailure, match="hunk #1"):
        apply_text(diff, text(old[:10] + ["line 11 # edited upstream"] + old[11:]))


def test_later_hunk_never_lands_above_an_earlier_one() -> None:
    """When a hunk's own place is gone, an identical block *above* the previous hunk is no match."""
    block = [f"    b{i} = {i}" for i in range(7)]
    old = numbered(10, "head") + block + numbered(40, "mid") + block + numbered(10, "tail")
    new = list(old)
    new[37] = "mid 21 changed"  # hunk 1, between the two copies of the block
    new[60] = "    b3 = 3000"  # hunk 2, in the middle of the second copy: all its context is the block
    diff = udiff(text(old), text(new))
    assert len(parse(diff).files[0].hunks) == 2
    target = list(old)
    target[63] = "    b6 = 6  # upstream changed the second copy"
    with pytest.raises(HunkFailure, match="hunk #2"):
        apply_text(diff, text(target))


def test_pure_insertion_hunks_zero_context() -> None:
    old = numbered(30)
    new = ["# top"] + old[:15] + ["# middle 1", "# middle 2"] + old[15:] + ["# bottom"]
    for diff in (udiff(text(old), text(new), n=0),):
        assert all(not h.old for h in parse(diff).files[0].hunks), "expected pure insertions"
        assert apply_text(diff, text(old)) == text(new)


def test_pure_insertion_hunks_from_gnu_diff(tmp_path: Path) -> None:
    old = numbered(30)
    new = ["# top"] + old[:15] + ["# middle"] + old[15:] + ["# bottom"]
    diff = gnu_diff(tmp_path, text(old), text(new), context=0)
    assert apply_text(diff, text(old)) == text(new)


@pytest.mark.parametrize("n", [0, 3])
def test_removal_including_first_and_last_lines(n: int) -> None:
    old = numbered(30)
    new = old[1:12] + old[15:-1]
    assert apply_text(udiff(text(old), text(new), n=n), text(old)) == text(new)


def test_file_without_trailing_newline_keeps_it() -> None:
    old = numbered(20)
    new = old[:5] + ["inserted"] + old[5:]
    assert apply_text(udiff(text(old), text(new)), text(old, newline=False)) == text(new, newline=False)


@pytest.mark.parametrize("old_eol, new_eol", [(False, False), (False, True), (True, False)])
def test_no_newline_at_end_of_file_marker(tmp_path: Path, old_eol: bool, new_eol: bool) -> None:
    old = numbered(12)
    new = old[:-1] + ["line 12 edited"] if old_eol == new_eol else list(old)
    old_text, new_text = text(old, old_eol), text(new, new_eol)
    diff = gnu_diff(tmp_path, old_text, new_text)
    assert "\\ No newline at end of file" in diff
    assert apply_text(diff, old_text) == new_text


def test_no_newline_marker_on_last_context_line(tmp_path: Path) -> None:
    old = numbered(8)
    new = old[:6] + ["inserted"] + old[6:]
    old_text, new_text = text(old, False), text(new, False)
    diff = gnu_diff(tmp_path, old_text, new_text)
    assert "\\ No newline at end of file" in diff
    assert apply_text(diff, old_text) == new_text


def test_form_feed_and_other_unicode_line_breaks_are_ordinary_characters() -> None:
    """Only \\n ends a line: Python source may hold form feeds and U+2028 inside lines."""
    old = numbered(20)
    old[5] = "\x0c"
    old[9] = "s = 'a\u2028b'  # line separator inside a string"
    new = old[:8] + ["hook()"] + old[8:]
    assert apply_text(udiff(text(old), text(new)), text(old)) == text(new)


VOCAB = ["", "    pass", "    return x", "def f(x):", "class C:", "# comment", ")", "]"]


def random_edit(rng: random.Random, lines: list[str], serial: int) -> list[str]:
    lines = list(lines)
    kind = rng.choice(["insert", "delete", "replace"])
    at = rng.randrange(len(lines) + (kind == "insert"))
    count = rng.randint(1, 4)
    fresh = [f"new {serial}.{k}" if rng.random() < 0.7 else rng.choice(VOCAB) for k in range(count)]
    if kind == "insert":
        lines[at:at] = fresh
    elif kind == "delete":
        del lines[at:at + count]
    else:
        lines[at:at + count] = fresh
    return lines


def synthetic_file(rng: random.Random, n: int = 200) -> list[str]:
    # Many repeated lines, as in real source, so a wrong "nearest match" would show.
    return [rng.choice(VOCAB) if rng.random() < 0.4 else f"stmt_{i} = {i}" for i in range(n)]


@pytest.mark.parametrize("context", [0, 1, 3])
def test_round_trip_random_edits(context: int) -> None:
    rng = random.Random(1234 + context)
    for trial in range(40):
        old = synthetic_file(rng)
        new = old
        for serial in range(rng.randint(1, 8)):
            new = random_edit(rng, new, serial)
        if new == old:
            continue
        diff = udiff(text(old), text(new), n=context)
        assert apply_text(diff, text(old)) == text(new), f"trial {trial}:\n{diff}"


def test_round_trip_random_edits_gnu_diff(tmp_path: Path) -> None:
    rng = random.Random(99)
    for trial in range(15):
        old = synthetic_file(rng)
        new = old
        for serial in range(rng.randint(1, 6)):
            new = random_edit(rng, new, serial)
        old_text = text(old, rng.random() < 0.7)
        new_text = text(new, rng.random() < 0.7)
        if new_text == old_text:
            continue
        diff = gnu_diff(tmp_path, old_text, new_text)
        assert apply_text(diff, old_text) == new_text, f"trial {trial}:\n{diff}"


# --------------------------------------------------------------------------------------------
# a fake site root, a patch series, an overlay
# --------------------------------------------------------------------------------------------

MOD = "fakepkg/mod.py"
MOD_STOCK = text([
    '"""A stand-in for an upstream module."""',
    "",
    "import os",
    "",
    "",
    "def value():",
    '    return "stock"',
    "",
    "",
    "def other():",
    "    return 1",
    "",
    "",
    "def third():",
    "    return [1, 2, 3]",
])
MOD_PATCHED = MOD_STOCK.replace('return "stock"', 'return "patched"')


def _purge_fakepkg() -> None:
    for name in [m for m in sys.modules if m == "fakepkg" or m.startswith("fakepkg.")]:
        del sys.modules[name]
    importlib.invalidate_caches()


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A directory on sys.path holding the top-level package ``fakepkg``; returns it."""
    root = tmp_path / "site"
    (root / "fakepkg").mkdir(parents=True)
    (root / "fakepkg" / "__init__.py").write_text("")
    (root / MOD).write_text(MOD_STOCK)
    monkeypatch.setattr(sys, "dont_write_bytecode", True)  # a rewritten stock file is re-read
    _purge_fakepkg()
    monkeypatch.syspath_prepend(str(root))
    assert importlib.util.find_spec("fakepkg") is not None
    yield root
    _purge_fakepkg()


@pytest.fixture
def patches_dir(tmp_path: Path) -> Path:
    root = tmp_path / "patches"
    for optimization in ("cgct", "pi", "scg"):
        (root / optimization).mkdir(parents=True)
    return root


def write_patch(patches_dir: Path, name: str, old: str, new: str, path: str = MOD,
                description: str = "A test patch.") -> None:
    """Write ``patches_dir/name`` (e.g. 'pi/0001-x.patch'): the diff of old -> new for path."""
    (patches_dir / name).write_text(f"{description}\n\n{udiff(old, new, path)}")


def pins_for(site: Path, *rels: str) -> dict[str, str]:
    return {rel: sha((site / rel).read_bytes()) for rel in rels or (MOD,)}


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under root (relative path -> bytes); {} if root does not exist."""
    if not root.exists():
        return {}
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


VERSIONS = {"torch": "2.11.0", "triton": "3.6.0"}


# --------------------------------------------------------------------------------------------
# series
# --------------------------------------------------------------------------------------------


def test_series_order_is_cgct_pi_scg_then_file_name(site: Path, patches_dir: Path) -> None:
    write_patch(patches_dir, "scg/0001-c.patch", MOD_STOCK, MOD_PATCHED)
    write_patch(patches_dir, "pi/0002-b.patch", MOD_STOCK, MOD_PATCHED)
    write_patch(patches_dir, "pi/0001-a.patch", MOD_STOCK, MOD_PATCHED)
    write_patch(patches_dir, "cgct/0009-z.patch", MOD_STOCK, MOD_PATCHED)
    (patches_dir / "pi" / "README.md").write_text("not a patch")
    series = load_series(root=patches_dir)
    assert [e.name for e in series] == ["cgct/0009-z.patch", "pi/0001-a.patch", "pi/0002-b.patch",
                                        "scg/0001-c.patch"]
    assert series[1].optimization == "pi"
    assert series[1].patch.description == "A test patch."


def test_series_with_a_malformed_patch_names_it(patches_dir: Path) -> None:
    (patches_dir / "scg" / "0001-bad.patch").write_text("--- a/x.py\n+++ b/x.py\n@@ nonsense @@\n")
    with pytest.raises(PatchFormatError, match="scg/0001-bad.patch"):
        load_series(root=patches_dir)


def test_empty_series_loads_empty(patches_dir: Path) -> None:
    assert load_series(root=patches_dir) == []


# --------------------------------------------------------------------------------------------
# overlay: plan and build
# --------------------------------------------------------------------------------------------


def test_build_publishes_overlay_and_current(site: Path, patches_dir: Path, tmp_path: Path) -> None:
    write_patch(patches_dir, "cgct/0001-value.patch", MOD_STOCK, MOD_PATCHED)
    pins = pins_for(site)
    root = tmp_path / "overlay"
    built = overlay.build(load_series(root=patches_dir), pins, VERSIONS, root=root)

    assert built.manifest["modules"] == {"fakepkg.mod": {"path": MOD, "upstream_sha256": pins[MOD]}}
    assert built.patches == ["cgct/0001-value.patch"]
    assert built.manifest["versions"] == VERSIONS
    assert built.path == root / built.manifest["key"]
    assert (built.path / MOD).read_text() == MOD_PATCHED
    assert json.loads((built.path / overlay.MANIFEST).read_text()) == built.manifest
    assert json.loads((root / overlay.CURRENT).read_text()) == {"key": built.manifest["key"]}
    assert overlay.current(root) == built
    assert (site / MOD).read_text() == MOD_STOCK, "the upstream file must never be written"


def test_build_twice_is_idempotent(site: Path, patches_dir: Path, tmp_path: Path) -> None:
    write_patch(patches_dir, "cgct/0001-value.patch", MOD_STOCK, MOD_PATCHED)
    series, pins, root = load_series(root=patches_dir), pins_for(site), tmp_path / "overlay"
    first = overlay.build(series, pins, VERSIONS, root=root)
    before = snapshot(root)
    second = overlay.build(series, pins, VERSIONS, root=root)
    assert second.manifest["key"] == first.manifest["key"]
    assert second.path == first.path
    assert sorted(p.name for p in root.iterdir()) == sorted([first.manifest["key"], overlay.CURRENT])
    assert snapshot(root) == before


def test_different_series_gets_a_new_key_and_becomes_current(site: Path, patches_dir: Path,
                                                             tmp_path: Path) -> None:
    root, pins = tmp_path / "overlay", pins_for(site)
    write_patch(patches_dir, "cgct/0001-value.patch", MOD_STOCK, MOD_PATCHED)
    first = overlay.build(load_series(root=patches_dir), pins, VERSIONS, root=root)
    write_patch(patches_dir, "cgct/0001-value.patch", MOD_STOCK, MOD_STOCK.replace('"stock"', '"v2"'))
    second = overlay.build(load_series(root=patches_dir), pins, VERSIONS, root=root)
    assert second.manifest["key"] != first.manifest["key"]
    assert overlay.current(root) == second
    assert '"v2"' in (second.path / MOD).read_text()


def test_failing_series_raises_and_changes_nothing(site: Path, patches_dir: Path, tmp_path: Path) -> None:
    root, pins = tmp_path / "overlay", pins_for(site)
    write_patch(patches_dir, "cgct/0001-value.patch", MOD_STOCK, MOD_PATCHED)
    good = overlay.build(load_series(root=patches_dir), pins, VERSIONS, root=root)
    before = snapshot(root)

    # A second patch written against a different upstream: its context is not in the file.
    other_upstream = MOD_STOCK.replace("return 1", "return 100")
    write_patch(patches_dir, "pi/0001-other.patch", other_upstream,
                other_upstream.replace("return 100", "return 101"))
    with pytest.raises(PatchApplyError) as info:
        overlay.build(load_series(root=patches_dir), pins, VERSIONS, root=root)

    assert len(info.value.failures) == 1
    failure = info.value.failures[0]
    assert "pi/0001-other.patch" in failure and MOD in failure and "hunk #1" in failure
    assert "pi/0001-other.patch" in str(info.value)
    assert snapshot(root) == before, "a failed build must write nothing"
    assert overlay.current(root) == good


def test_failing_series_on_a_fresh_cache_creates_nothing(site: Path, patches_dir: Path,
                                                         tmp_path: Path) -> None:
    write_patch(patches_dir, "cgct/0001-bad.patch", MOD_STOCK.replace("os", "sys"), MOD_PATCHED)
    root = tmp_path / "overlay"
    with pytest.raises(PatchApplyError):
        overlay.build(load_series(root=patches_dir), pins_for(site), VERSIONS, root=root)
    assert not root.exists()
    assert overlay.current(root) is None


def test_every_failure_is_listed(site: Path, patches_dir: Path, tmp_path: Path) -> None:
    (site / "fakepkg" / "util.py").write_text(text(numbered(20)))
    write_patch(patches_dir, "cgct/0001-ok.patch", MOD_STOCK, MOD_PATCHED)
    write_patch(patches_dir, "pi/0001-bad-mod.patch", MOD_STOCK.replace("[1, 2, 3]", "[9]"),
                MOD_STOCK.replace("[1, 2, 3]", "[10]"))
    write_patch(patches_dir, "scg/0001-bad-util.patch", text(numbered(20, "x")),
                text(numbered(20, "x")[:-1]), path="fakepkg/util.py")
    with pytest.raises(PatchApplyError) as info:
        overlay.plan(load_series(root=patches_dir), pins_for(site, MOD, "fakepkg/util.py"))
    failures = info.value.failures
    assert len(failures) == 2, failures
    assert "pi/0001-bad-mod.patch" in failures[0] and MOD in failures[0] and "hunk #1" in failures[0]
    assert "scg/0001-bad-util.patch" in failures[1] and "fakepkg/util.py" in failures[1]


def test_upstream_file_differing_from_pin_fails_naming_it(site: Path, patches_dir: Path,
                                                          tmp_path: Path) -> None:
    write_patch(patches_dir, "cgct/0001-value.patch", MOD_STOCK, MOD_PATCHED)
    pins = {MOD: sha(MOD_STOCK + "# the release we pinned had this line\n")}
    with pytest.raises(PatchApplyError) as info:
        overlay.build(load_series(root=patches_dir), pins, VERSIONS, root=tmp_path / "overlay")
    (failure,) = info.value.failures
    assert MOD in failure and "differs from the pinned" in failure
    assert not (tmp_path / "overlay").exists()


def test_unpinned_file_fails_naming_it(site: Path, patches_dir: Path, tmp_path: Path) -> None:
    write_patch(patches_dir, "cgct/0001-value.patch", MOD_STOCK, MOD_PATCHED)
    with pytest.raises(PatchApplyError) as info:
        overlay.plan(load_series(root=patches_dir), {"fakepkg/other.py": "0" * 64})
    (failure,) = info.value.failures
    assert "cgct/0001-value.patch" in failure and MOD in failure and "not pinned" in failure


def test_missing_upstream_file_fails_naming_it(site: Path, patches_dir: Path) -> None:
    write_patch(patches_dir, "cgct/0001-gone.patch", MOD_STOCK, MOD_PATCHED, path="fakepkg/gone.py")
    with pytest.raises(PatchApplyError, match="fakepkg/gone.py"):
        overlay.plan(load_series(root=patches_dir), {"fakepkg/gone.py": "0" * 64})


def test_stacked_patches_on_one_file_apply_in_series_order(site: Path, patches_dir: Path,
                                                            tmp_path: Path) -> None:
    step1 = MOD_PATCHED
    step2 = step1.replace('    return "patched"', '    hook()\n    return "patched"')
    write_patch(patches_dir, "cgct/0001-value.patch", MOD_STOCK, step1)
    write_patch(patches_dir, "scg/0001-hook.patch", step1, step2)  # context only exists after cgct
    series = load_series(root=patches_dir)

    built = overlay.build(series, pins_for(site), VERSIONS, root=tmp_path / "overlay")
    assert (built.path / MOD).read_text() == step2
    assert list(built.manifest["modules"]) == ["fakepkg.mod"]
    # ... and the second really depends on the first: alone, it does not apply.
    with pytest.raises(PatchApplyError, match="scg/0001-hook.patch"):
        overlay.plan(series[1:], pins_for(site))


# --------------------------------------------------------------------------------------------
# OverlayFinder
# --------------------------------------------------------------------------------------------


class installed_finder:
    """``with installed_finder(overlay) as finder``: first on sys.meta_path, removed after."""

    def __init__(self, built: overlay.Overlay):
        self.finder = OverlayFinder(built.path, built.manifest)

    def __enter__(self) -> OverlayFinder:
        _purge_fakepkg()
        sys.meta_path.insert(0, self.finder)
        return self.finder

    def __exit__(self, *exc) -> None:
        sys.meta_path.remove(self.finder)
        _purge_fakepkg()


@pytest.fixture
def built(site: Path, patches_dir: Path, tmp_path: Path) -> overlay.Overlay:
    write_patch(patches_dir, "cgct/0001-value.patch", MOD_STOCK, MOD_PATCHED)
    return overlay.build(load_series(root=patches_dir), pins_for(site), VERSIONS, root=tmp_path / "overlay")


def test_finder_serves_the_patched_module(built: overlay.Overlay, site: Path) -> None:
    with installed_finder(built) as finder:
        mod = importlib.import_module("fakepkg.mod")
        assert mod.value() == "patched"
        assert Path(mod.__file__) == built.path / MOD
        assert finder.loaded == {"fakepkg.mod": str(built.path / MOD)}
        assert finder.refused == {}
        pkg = importlib.import_module("fakepkg")
        assert Path(pkg.__file__) == site / "fakepkg" / "__init__.py", "only manifest modules are served"


def test_finder_serves_stock_when_upstream_changed(built: overlay.Overlay, site: Path) -> None:
    with installed_finder(built):
        assert importlib.import_module("fakepkg.mod").value() == "patched"

    (site / MOD).write_text(MOD_STOCK.replace('"stock"', '"upgraded"'))  # e.g. a torch upgrade
    with installed_finder(built) as finder:
        mod = importlib.import_module("fakepkg.mod")
        assert mod.value() == "upgraded"
        assert Path(mod.__file__) == site / MOD
        assert finder.loaded == {}
        assert "fakepkg.mod" in finder.refused
        assert str(site / MOD) in finder.refused["fakepkg.mod"]
        assert "not the file the overlay was made from" in finder.refused["fakepkg.mod"]


def test_finder_ignores_modules_outside_the_manifest(built: overlay.Overlay) -> None:
    finder = OverlayFinder(built.path, built.manifest)
    assert finder.find_spec("json", None) is None
    assert finder.find_spec("fakepkg.other", None) is None
    assert finder.loaded == {} and finder.refused == {}


# --------------------------------------------------------------------------------------------
# end to end, against the real installed torch
# --------------------------------------------------------------------------------------------

TORCH_TARGET = "torch/_inductor/cudagraph_trees.py"

PROBE = r"""
import json
import grace  # activates the overlay unless GRACE_DISABLE=1
import torch._inductor.cudagraph_trees as m
from grace._autoload import installed
finder = installed()
print(json.dumps({"marker": getattr(m, "GRACE_TEST_MARKER", None), "file": m.__file__,
                  "loaded": sorted(finder.loaded) if finder else None}))
"""


def _probe(cache: Path, **env_extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRACE_")}
    env.update(GRACE_CACHE_DIR=str(cache), PYTHONPATH=str(REPO_ROOT), **env_extra)
    proc = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env,
                          cwd=REPO_ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_end_to_end_real_torch_module_is_served_patched(tmp_path: Path, patches_dir: Path) -> None:
    pins = versions.pins().upstream_sha256
    assert TORCH_TARGET in pins
    stock_path = overlay.site_root("torch") / TORCH_TARGET
    stock = stock_path.read_text()
    if sha(stock_path.read_bytes()) != pins[TORCH_TARGET]:
        pytest.skip(f"installed {TORCH_TARGET} is not the pinned release")
    anchor = "from __future__ import annotations\n"
    assert anchor in stock
    write_patch(patches_dir, "cgct/0001-marker.patch", stock,
                stock.replace(anchor, anchor + "\nGRACE_TEST_MARKER = 1\n", 1), path=TORCH_TARGET)

    cache = tmp_path / "cache"
    built = overlay.build(load_series(root=patches_dir), pins,
                          {"torch": versions.installed_version("torch") or ""}, root=cache / "overlay")
    assert built.manifest["modules"] == {
        "torch._inductor.cudagraph_trees": {"path": TORCH_TARGET, "upstream_sha256": pins[TORCH_TARGET]}}

    patched = _probe(cache)
    assert patched["marker"] == 1
    assert Path(patched["file"]) == built.path / TORCH_TARGET
    assert patched["loaded"] == ["torch._inductor.cudagraph_trees"]

    stock_run = _probe(cache, GRACE_DISABLE="1")
    assert stock_run["marker"] is None
    assert Path(stock_run["file"]) == stock_path
    assert stock_run["loaded"] is None


# --------------------------------------------------------------------------------------------
# CLI: python -m grace patches
# --------------------------------------------------------------------------------------------


def test_cli_patches_check_on_the_real_series(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRACE_")}
    env.update(GRACE_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=str(REPO_ROOT))
    proc = subprocess.run([sys.executable, "-m", "grace", "patches", "--check"], capture_output=True,
                          text=True, env=env, cwd=REPO_ROOT, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    n = len(load_series())
    assert f"all {n} patch(es) apply to the installed sources" in proc.stdout
    assert not (tmp_path / "cache").exists(), "--check is a dry run"


def _use_series(monkeypatch: pytest.MonkeyPatch, patches_dir: Path, pins: dict[str, str]) -> None:
    import grace.patching.series as series_module

    real_load = series_module.load_series
    monkeypatch.setattr(series_module, "load_series", lambda root=patches_dir: real_load(root))
    monkeypatch.setattr(versions, "pins", lambda: versions.Pins("2.11.0", "3.6.0", pins))


def test_cli_patches_lists_and_checks(site: Path, patches_dir: Path, monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    from grace.cli import main

    write_patch(patches_dir, "cgct/0001-value.patch", MOD_STOCK, MOD_PATCHED,
                description="Make value() say so.\n\nDetails.")
    _use_series(monkeypatch, patches_dir, pins_for(site))
    assert main(["patches", "--check"]) == 0
    out = capsys.readouterr().out
    assert "cgct/0001-value.patch: Make value() say so. [fakepkg/mod.py]" in out
    assert "all 1 patch(es) apply" in out


def test_cli_patches_check_fails_naming_the_hunk(site: Path, patches_dir: Path,
                                                 monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from grace.cli import main

    write_patch(patches_dir, "pi/0001-stale.patch", MOD_STOCK.replace("os", "sys"), MOD_PATCHED)
    _use_series(monkeypatch, patches_dir, pins_for(site))
    assert main(["patches"]) == 0, "without --check, listing never fails"
    assert main(["patches", "--check"]) == 3
    err = capsys.readouterr().err
    assert "pi/0001-stale.patch" in err and MOD in err and "hunk #1" in err


# --------------------------------------------------------------------------------------------
# versions
# --------------------------------------------------------------------------------------------


def _installed_as(monkeypatch: pytest.MonkeyPatch, **fake: str | None) -> None:
    real = versions.installed_version
    monkeypatch.setattr(versions, "installed_version",
                        lambda dist: fake[dist] if dist in fake else real(dist))


def test_installed_versions_are_supported() -> None:
    assert versions.version_problems() == []
    versions.check_versions()


def test_unsupported_torch_names_both_pins(monkeypatch: pytest.MonkeyPatch) -> None:
    _installed_as(monkeypatch, torch="2.10.0", triton="3.6.0")
    (problem,) = versions.version_problems()
    assert "torch 2.10.0" in problem
    assert "torch==2.11.0" in problem and "triton==3.6.0" in problem
    with pytest.raises(versions.UnsupportedVersionError, match="torch==2.11.0"):
        versions.check_versions()


def test_local_build_tag_is_the_same_release(monkeypatch: pytest.MonkeyPatch) -> None:
    _installed_as(monkeypatch, torch="2.11.0+cu130", triton="3.6.0")
    assert versions.version_problems() == []


def test_missing_package_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    _installed_as(monkeypatch, torch="2.11.0", triton=None)
    (problem,) = versions.version_problems()
    assert "triton is not installed" in problem and "triton==3.6.0" in problem

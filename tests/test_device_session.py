"""The lab's device script (``scripts/probes/device_session.sh``): every stage its header
documents is an arm of its top-level ``case``, and bash parses it.

A device call costs minutes of a budget of thirty, and a stage that landed inside another
stage's inner ``case`` still parses: only its structure says so.
"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from grace.paths import REPO_ROOT

SCRIPT = REPO_ROOT / "scripts" / "probes" / "device_session.sh"


def _top_level_arms(text: str) -> list[str]:
    """The labels of the arms of ``case "$STAGE" in``, at that case's own depth."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == 'case "$STAGE" in')
    depth, arms = 1, []
    for line in lines[start + 1:]:
        code = line.split("#", 1)[0]
        arm = re.match(r"^\s*([0-9]+)\)", code)
        if arm and depth == 1:
            arms.append(arm.group(1))
        depth += len(re.findall(r"\bcase\s+\S+\s+in\b", code)) - len(re.findall(r"\besac\b", code))
        if depth == 0:
            return arms
    raise AssertionError("the stage case is never closed")


def test_every_documented_stage_is_an_arm_of_the_top_level_case() -> None:
    text = SCRIPT.read_text()
    documented = re.findall(r"^#\s+STAGE=([0-9]+)\b", text, re.M)
    assert documented, "the header documents the stages"
    assert sorted(set(documented), key=int) == sorted(_top_level_arms(text), key=int)


def test_a_stage_nested_in_another_is_caught() -> None:
    nested = ('case "$STAGE" in\n  1)  # one\n    case $v in a) E=1;;\n  2)  # two\n    ;; esac\n    ;;\nesac\n')
    assert _top_level_arms(nested) == ["1"]


def test_bash_parses_the_script() -> None:
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("no bash here")
    proc = subprocess.run([bash, "-n", str(SCRIPT)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr

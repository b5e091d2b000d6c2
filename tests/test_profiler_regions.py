"""grace.lean.profiler_regions and ``patches/lean_replay/0004``: a frame compiled with lean replay
on leaves Dynamo's pre-graph profiler region out of its bytecode unless the user asked for it,
and computes what stock computes."""

from __future__ import annotations

import unittest.mock
from collections.abc import Callable, Iterator

import pytest
import torch
import torch._dynamo.config as dynamo_config
import torch._dynamo.utils as dynamo_utils
from torch.utils._config_module import _UNSET_SENTINEL

import grace.config
from grace.lean.profiler_regions import SETTING, pregraph_region


@pytest.fixture(autouse=True)
def setting_left_at_its_default() -> Iterator[None]:
    """Each test starts and ends with the setting as the user never touched it (ConfigModule
    keeps a patch's restored value as the user's)."""
    entry = dynamo_config._config[SETTING]
    entry.user_override = _UNSET_SENTINEL
    yield
    entry.user_override = _UNSET_SENTINEL


def test_stocks_setting_decides_with_lean_replay_off() -> None:
    with grace.config.patch(lean_replay=False):
        assert pregraph_region(dynamo_config) is True
        with dynamo_config.patch({SETTING: False}):
            assert pregraph_region(dynamo_config) is False


def test_with_lean_replay_on_the_region_is_kept_only_where_the_user_chose_it() -> None:
    with grace.config.patch(lean_replay=True):
        assert pregraph_region(dynamo_config) is False  # the default
        with dynamo_config.patch({SETTING: True}):
            assert pregraph_region(dynamo_config) is True
        with dynamo_config.patch({SETTING: False}):
            assert pregraph_region(dynamo_config) is False
        dynamo_config.record_runtime_overhead = True
        assert pregraph_region(dynamo_config) is True


def entries_counted() -> unittest.mock._patch:
    """Counts the region's entries: the bytecode loads the function from its module on each call."""
    return unittest.mock.patch.object(dynamo_utils, "record_pregraph_bytecode_enter",
                                      wraps=dynamo_utils.record_pregraph_bytecode_enter)


def _fresh_function() -> Callable[[torch.Tensor], torch.Tensor]:
    namespace: dict = {}
    exec("def f(x):\n    return x.sin() * 2 + x\n", namespace)  # noqa: S102 - a new code object per test
    return namespace["f"]


def _compiled_and_region_entries(lean: bool, user_setting: bool | None = None) -> tuple[Callable, int]:
    """A fresh function compiled on the CPU with lean replay ``lean`` (and the setting as the
    user set it, if ``user_setting``), and how often two steady calls enter the region."""
    x = torch.randn(16)
    with grace.config.patch(lean_replay=lean):
        if user_setting is not None:
            dynamo_config.record_runtime_overhead = user_setting
        compiled = torch.compile(_fresh_function(), backend="aot_eager")
        compiled(x)
    with entries_counted() as enter:
        for _ in range(2):
            torch.testing.assert_close(compiled(x), x.sin() * 2 + x)
    return compiled, enter.call_count


@pytest.mark.parametrize("lean,user_setting,entries", [
    (False, None, 2),
    (True, None, 0),
    (True, True, 2),
    (False, False, 0),
], ids=["stock", "lean", "lean-user-kept-it", "user-turned-it-off"])
def test_a_compiled_frames_bytecode_enters_the_region_as_decided(lean: bool, user_setting: bool | None,
                                                                 entries: int) -> None:
    torch._dynamo.reset()
    _, entered = _compiled_and_region_entries(lean, user_setting)
    assert entered == entries


def test_a_frame_keeps_the_bytecode_it_was_compiled_with() -> None:
    """The switch is read when the frame is compiled: turning lean replay on afterwards does not
    change a frame compiled without it."""
    torch._dynamo.reset()
    compiled, entered = _compiled_and_region_entries(lean=False)
    assert entered == 2
    x = torch.randn(16)
    with grace.config.patch(lean_replay=True), entries_counted() as enter:
        compiled(x)
    assert enter.call_count == 1

"""grace.lean.config_reads: a config entry read on the replay path gives what stock's read gives,
however the entry was set, patched or deleted."""

from __future__ import annotations

import importlib.util
import sys
import types
import unittest.mock

import pytest
import torch._dynamo.config as dynamo_config
import torch._inductor.config as inductor_config

from grace.lean.config_reads import ConfigRead

READS = [
    (inductor_config, "triton.force_cudagraphs_warmup"),
    (inductor_config, "triton.skip_cudagraph_warmup"),
    (inductor_config, "triton.fast_path_cudagraph_asserts"),
    (inductor_config, "triton.force_cudagraph_sync"),
    (dynamo_config, "inline_inbuilt_nn_modules"),
]


def stock(module, name):
    value = module
    for part in name.split("."):
        value = getattr(value, part)
    return value


@pytest.mark.parametrize("module,name", READS, ids=[n for _, n in READS])
def test_the_replay_paths_entries_are_read_directly_and_as_stock_reads_them(module, name) -> None:
    read = ConfigRead(module, name)
    assert read.direct
    before = stock(module, name)
    assert read() == before
    with module.patch(name, not before):
        assert read() == (not before) == stock(module, name)
    assert read() == before
    *prefix, last = name.split(".")
    owner = stock(module, ".".join(prefix)) if prefix else module
    setattr(owner, last, not before)
    try:
        assert read() == (not before) == stock(module, name)
    finally:
        setattr(owner, last, before)
    assert read() == before == stock(module, name)


def _module(source: str, env: dict[str, str], folder) -> types.ModuleType:
    """A config module of its own, in a file as PyTorch's are, installed as PyTorch installs
    its configs (the environment read at install)."""
    name = "grace_test_config_module"
    path = folder / f"{name}.py"
    path.write_text(source + "\nfrom torch.utils._config_module import install_config_module\n"
                    "import sys\ninstall_config_module(sys.modules[__name__])\n")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    with unittest.mock.patch.dict("os.environ", env):
        spec.loader.exec_module(module)
    return module


SOURCE = """
from torch.utils._config_module import Config
plain: bool = False
forced = Config(default=False, env_name_force="GRACE_TEST_FORCED")
env_default = Config(default=False, env_name_default="GRACE_TEST_ENV_DEFAULT")
listed: list = [1, 2]
aliased = Config(alias="grace_test_alias_target.value")
knobbed = Config(default=True, justknob="grace/test_knob")
"""


@pytest.fixture
def config_module(tmp_path):
    target = types.ModuleType("grace_test_alias_target")
    target.value = 7
    sys.modules["grace_test_alias_target"] = target
    module = _module(SOURCE, {"GRACE_TEST_FORCED": "1", "GRACE_TEST_ENV_DEFAULT": "1"}, tmp_path)
    yield module
    sys.modules.pop(module.__name__, None)
    sys.modules.pop("grace_test_alias_target", None)


def test_entries_with_an_environment_value_an_alias_or_a_mutable_default_are_read_through_the_module(config_module) -> None:
    assert ConfigRead(config_module, "plain").direct
    for name in ("forced", "env_default", "listed", "aliased"):
        read = ConfigRead(config_module, name)
        assert not read.direct, name
        assert read() == getattr(config_module, name), name
    assert ConfigRead(config_module, "forced")() is True
    config_module.forced = False  # a forced environment value wins over the user
    assert ConfigRead(config_module, "forced")() is True is config_module.forced
    sys.modules["grace_test_alias_target"].value = 9
    assert ConfigRead(config_module, "aliased")() == 9 == config_module.aliased


def test_an_entry_deleted_by_mock_patch_raises_as_stock_and_reads_again_once_restored(config_module) -> None:
    read = ConfigRead(config_module, "plain")
    with unittest.mock.patch.object(config_module, "plain", True):
        assert read() is True
    assert read() is False
    delattr(config_module, "plain")  # what mock.patch does between its delete and its restore
    with pytest.raises(AttributeError):
        read()
    with pytest.raises(AttributeError):
        config_module.plain
    config_module.plain = True
    assert read() is True is config_module.plain


def test_an_unknown_entry_is_refused_by_name(config_module) -> None:
    with pytest.raises(AttributeError, match="no_such_entry"):
        ConfigRead(config_module, "no_such_entry")


def test_a_module_that_is_not_a_config_module_is_read_through_getattr() -> None:
    plain = types.SimpleNamespace(triton=types.SimpleNamespace(flag=3))
    read = ConfigRead(plain, "triton.flag")
    assert not read.direct
    assert read() == 3
    plain.triton.flag = 4
    assert read() == 4


def test_an_entry_behind_a_justknob_asks_the_knob_as_stock_does(config_module) -> None:
    from torch.utils import _config_module

    read = ConfigRead(config_module, "knobbed")
    assert read.direct
    asked = []

    def knob(name, default):
        asked.append(name)
        return not default

    with unittest.mock.patch.object(_config_module, "justknobs_check", knob):
        assert read() is False is config_module.knobbed
    assert asked == ["grace/test_knob"] * 2
    assert read() is True is config_module.knobbed  # the open-source knob: its default
    config_module.knobbed = False  # a user's setting wins over the knob
    with unittest.mock.patch.object(_config_module, "justknobs_check", knob):
        assert read() is False is config_module.knobbed
    assert len(asked) == 2


def test_the_pinned_torchs_entries_have_the_fields_the_reads_assume() -> None:
    """A changed torch fails here, not on the replay path."""
    entry = inductor_config._config["triton.force_cudagraphs_warmup"]
    for field in ("alias", "env_value_force", "env_value_default", "justknob", "default", "user_override", "hide"):
        assert hasattr(entry, field), field


def _node_that_only_reads_its_settings(settings):
    """A patched ``CUDAGraphNode`` whose ``run`` does nothing but what follows the replay: the
    copies, the replay and the outputs are stubbed on the instance."""
    import torch._inductor.cudagraph_trees as ct

    node = object.__new__(ct.CUDAGraphNode)
    node.grace_copy_back = None
    node.grace_pi = None
    node.reconstructed_inputs = []
    node.check_static_inputs_are_stable = lambda inputs: None
    node._copy_inputs_and_remove_from_src = lambda dsts, srcs: None
    node.run_graph = lambda: None
    node.reconstruct_outputs = lambda: ["out"]
    node.checked = 0

    def check() -> None:
        node.checked += 1

    node.debug_check_invariants_after_invocation = check
    node.grace_settings = settings
    return node


@pytest.mark.parametrize("lean", [True, False], ids=["lean", "stock"])
def test_a_nodes_run_follows_its_settings_as_they_change(lean: bool) -> None:
    """``patches/lean_replay/0002``: ``CUDAGraphNode.run`` reads the two settings after each
    replay through the node's ``grace_settings`` with lean replay on, and as stock without;
    either way a change made between two calls is followed on the next."""
    from grace.lean.config_reads import NodeRunSettings

    node = _node_that_only_reads_its_settings(NodeRunSettings() if lean else None)
    synced = []
    with unittest.mock.patch("torch.cuda.synchronize", lambda: synced.append(1)):
        with inductor_config.patch({"triton.fast_path_cudagraph_asserts": False, "triton.force_cudagraph_sync": False}):
            assert node.run([]) == ["out"]
            assert (node.checked, len(synced)) == (0, 0)
            inductor_config.triton.fast_path_cudagraph_asserts = True
            node.run([])
            assert (node.checked, len(synced)) == (1, 0)
            inductor_config.triton.force_cudagraph_sync = True
            node.run([])
            assert (node.checked, len(synced)) == (2, 1)
        node.run([])
        assert (node.checked, len(synced)) == (2 + int(inductor_config.triton.fast_path_cudagraph_asserts),
                                               1 + int(inductor_config.triton.force_cudagraph_sync))


def test_a_node_made_with_lean_replay_off_reads_as_stock() -> None:
    import grace.config
    from grace.lean.config_reads import NodeRunSettings, node_run_settings

    with grace.config.patch(lean_replay=False):
        assert node_run_settings() is None
    with grace.config.patch(lean_replay=True):
        assert isinstance(node_run_settings(), NodeRunSettings)


def test_a_lean_nodes_run_reads_through_its_settings_object() -> None:
    """The patch's call site: with ``grace_settings`` set, what it answers decides, not the
    module's value."""

    class Answers:
        fast_path_asserts = staticmethod(lambda: True)
        force_sync = staticmethod(lambda: False)

    node = _node_that_only_reads_its_settings(Answers())
    with inductor_config.patch({"triton.fast_path_cudagraph_asserts": False, "triton.force_cudagraph_sync": True}):
        with unittest.mock.patch("torch.cuda.synchronize", lambda: pytest.fail("synchronized")):
            node.run([])
    assert node.checked == 1


@pytest.mark.parametrize("sizes", [None, (), (3,), ((2, 5), 7)], ids=["all", "none", "one", "tuples"])
def test_the_capture_size_test_answers_as_stocks(sizes) -> None:
    import torch._inductor.cudagraph_trees as ct

    from grace.lean.config_reads import CaptureSizes

    test = CaptureSizes()
    with inductor_config.patch({"triton.cudagraph_capture_sizes": sizes}):
        for key in (None, 3, 7, (2, 5), (5, 2), 4):
            assert test.includes(key) == ct.is_cudagraph_capture_sizes(key), key


def test_a_wrapper_made_with_lean_replay_asks_its_capture_size_test() -> None:
    """``patches/lean_replay/0003``: with the switch on, ``deferred_cudagraphify`` asks the
    wrapper's ``CaptureSizes``; a call whose sizes are not captured runs the model itself."""
    import torch._inductor.cudagraph_trees as ct

    import grace.config

    ran = []

    def model(inputs):
        ran.append(list(inputs))
        return ["eager"]

    for lean in (True, False):
        with grace.config.patch(lean_replay=lean):
            wrapper = ct.cudagraphify_impl(model, [3], static_input_idxs=[])
        cells = dict(zip(wrapper.__code__.co_freevars, (c.cell_contents for c in wrapper.__closure__)))
        assert (cells["grace_capture_sizes"] is not None) is lean
        with inductor_config.patch({"triton.cudagraph_capture_sizes": (4,)}):
            assert wrapper([3]) == ["eager"]  # int key 3 is not a captured size: no graph, no tree
    assert ran == [[3], [3]]

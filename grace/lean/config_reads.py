"""A PyTorch config entry read on the replay path, with ``ConfigModule.__getattr__``'s answer and
without its cost.

Design note
-----------
Reading ``torch._inductor.config.triton.force_cudagraphs_warmup`` goes through
``SubConfigProxy.__getattr__`` and ``ConfigModule.__getattr__``, which look the entry up and walk
its precedence (alias, forced environment value, user override, environment default,
justknob, default): about 1 to 2 us a read on a host CPU, several times a steady call. Of that
precedence only the user override can change once the module is installed: ``__setattr__``
(and so ``config.patch``) sets it, ``__delattr__`` (``mock.patch``) clears it and hides the
entry, and the entry's alias, environment values, justknob and default are fixed when the
module installs it.

:class:`ConfigRead` reads one entry as ``__getattr__`` does:

1. For an entry with no alias, no environment value and an immutable default, the value is
   its user override where set, else its default, or for an entry behind a justknob what
   ``justknobs_check`` answers for it, called as ``__getattr__`` calls it: attribute reads of
   the entry itself, which ``__setattr__`` and ``__delattr__`` change in place.
2. Any other entry, and a hidden one (deleted by ``mock.patch`` until it is set again), is read
   through ``getattr`` on the module, as stock reads it, raising what stock raises.
3. Where the module is not a ``ConfigModule`` of the shape described (another torch), every
   read goes through ``getattr``.
"""

from __future__ import annotations

from typing import Any

from torch.utils import _config_module

# ConfigModule's marker of an entry's unset value (None on a torch without one: invariant 3)
_UNSET = getattr(_config_module, "_UNSET_SENTINEL", None)


class ConfigRead:
    """One config entry, read exactly as ``getattr(module, name)`` reads it (dotted ``name`` for
    a sub-config: ``"triton.force_cudagraphs_warmup"``)."""

    __slots__ = ("_module", "_path", "_entry")

    def __init__(self, module: Any, name: str) -> None:
        self._module = module
        self._path = tuple(name.split("."))
        self._entry = _simple_entry(module, name)

    def __call__(self) -> Any:
        entry = self._entry
        if entry is None or entry.hide:
            return self.read_through_module()
        value = entry.user_override
        if value is not _UNSET:
            return value
        if entry.justknob is not None:  # looked up per call, as __getattr__ looks it up
            return _config_module.justknobs_check(name=entry.justknob, default=entry.default)
        return entry.default

    def read_through_module(self) -> Any:
        """The value as stock code reads it, attribute by attribute (invariant 2)."""
        value = self._module
        for part in self._path:
            value = getattr(value, part)
        return value

    @property
    def direct(self) -> bool:
        """Whether reads skip ``__getattr__`` (invariant 1)."""
        return self._entry is not None


def _simple_entry(module: Any, name: str) -> Any:
    """The entry ``name`` of ``module`` where invariant 1 holds, else None."""
    entries = getattr(module, "_config", None)
    if _UNSET is None or not isinstance(module, _config_module.ConfigModule) or not isinstance(entries, dict):
        return None
    entry = entries.get(name)
    if entry is None:
        raise AttributeError(f"{module.__name__}.{name} does not exist")
    try:
        simple = (entry.alias is None and entry.env_value_force is _UNSET and entry.env_value_default is _UNSET
                  and not isinstance(entry.default, (list, set, dict))
                  and hasattr(entry, "justknob") and hasattr(entry, "user_override") and hasattr(entry, "hide")
                  and callable(getattr(_config_module, "justknobs_check", None)))
    except AttributeError:  # an entry of another shape
        return None
    return entry if simple else None


class NodeRunSettings:
    """The two settings ``CUDAGraphNode.run`` reads after every replay
    (``CUDAGraphNode.grace_settings``, made with the node where lean replay is on)."""

    __slots__ = ("fast_path_asserts", "force_sync")

    def __init__(self) -> None:
        from torch._inductor import config

        self.fast_path_asserts = ConfigRead(config, "triton.fast_path_cudagraph_asserts")
        self.force_sync = ConfigRead(config, "triton.force_cudagraph_sync")


def node_run_settings() -> NodeRunSettings | None:
    """A node's settings as the node is made: with ``grace.config.lean_replay``, else None and
    the node reads stock's way."""
    from grace import config

    return NodeRunSettings() if config.lean_replay else None


class CaptureSizes:
    """``is_cudagraph_capture_sizes`` of ``torch._inductor.cudagraph_trees``, its setting read
    through a :class:`ConfigRead` (``cudagraphify_impl``'s ``grace_capture_sizes``, made with
    the compiled function where lean replay is on)."""

    __slots__ = ("_sizes",)

    def __init__(self) -> None:
        from torch._inductor import config

        self._sizes = ConfigRead(config, "triton.cudagraph_capture_sizes")

    def includes(self, int_key: Any) -> bool:
        """Whether the graph for this key of dynamic sizes is captured: every key where the
        setting is None, else the keys it lists."""
        sizes = self._sizes()
        return sizes is None or int_key in sizes


def capture_sizes_read() -> CaptureSizes | None:
    """A compiled function's capture-size test as its wrapper is made: with
    ``grace.config.lean_replay``, else None and stock's test."""
    from grace import config

    return CaptureSizes() if config.lean_replay else None

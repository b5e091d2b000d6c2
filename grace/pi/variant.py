"""Building the indirected variant of one of Inductor's Triton kernels, at capture time.

Inductor keeps each kernel in a module file of its code cache, decorated with the heuristics
that make it a ``CachingAutotuner``. The variant is that module with the kernel renamed to its
marked name (:func:`grace.pi.triton_stage.marked_source`), loaded through the same code cache,
restricted to the config the original autotuner settled on (no second autotuning, which would
launch a kernel whose pointer arguments are slot addresses on buffers it would clone, and would
synchronise inside a capture), and compiled with the stage hook installed. Precompiling a
reduction may add configs of its own (Inductor's ``_dynamic_scale_rblock``, for configs that
would spill registers); only the launcher of the settled config is kept. The config is part of
the module's source, so that two configs of one kernel never share a cached module. Triton's
own launcher is used rather than Inductor's static launcher, because it takes a plain integer
for a pointer argument, which is how a slot address is passed. The binary is checked to be
indirected before the variant is returned.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from grace.log import get_logger
from grace.pi import triton_stage
from grace.pi.ptx import is_indirected

log = get_logger("grace.pi")


def config_key(config: Any) -> tuple:
    """What makes two Triton configs launch the same binary with the same grid."""
    return (tuple(sorted(config.kwargs.items())), config.num_warps, config.num_stages)


class VariantError(RuntimeError):
    """The indirected variant could not be built; the caller keeps the copy for those inputs."""


def kernel_module_path(autotuner: Any) -> Path:
    """The code-cache module file that defines ``autotuner``'s kernel.

    A kernel compiled in one of Inductor's worker processes comes back without its Python
    function (``CachingAutotuner.prepare_for_pickle``); Inductor reloads it from source when it
    needs it, and so do we, without replacing the autotuner's own ``fn``.
    """
    fn = getattr(getattr(autotuner, "fn", None), "fn", None)
    if fn is None:
        reload = getattr(autotuner, "_reload_kernel", None)
        if not callable(reload):
            raise VariantError(f"{autotuner.fn.__name__}: its module is unknown (compiled elsewhere, "
                               "no reload available)")
        fn = reload().fn.fn
    return Path(fn.__code__.co_filename)


def indirected_variant(autotuner: Any, config: Any, arg_names: Sequence[str], *,
                       warm_cache_only: bool = False) -> Any:
    """A ``CachingAutotuner`` for ``autotuner``'s kernel with ``arg_names`` read through slots."""
    from torch._inductor import config as inductor_config
    from torch._inductor.codecache import PyCodeCache

    base = autotuner.fn.__name__
    signature = autotuner.triton_meta["signature"]
    indices = triton_stage.ptx_param_indices(signature, arg_names)
    source_file = kernel_module_path(autotuner)
    try:
        source = triton_stage.marked_source(source_file.read_text(), base, indices)
    except (OSError, ValueError) as e:
        raise VariantError(f"{base}: cannot read its module source ({e})") from e
    name = triton_stage.marked_name(base, indices)
    source += f"\n# grace-pi variant for config {config_key(config)}\n"
    variant = getattr(PyCodeCache.load(source), name)
    variant.configs = [config]
    triton_stage.install()
    with inductor_config.patch(use_static_triton_launcher=False):
        variant.precompile(warm_cache_only=warm_cache_only)
    if not warm_cache_only:
        settled = [launcher for launcher in variant.launchers if config_key(launcher.config) == config_key(config)]
        if not settled:
            raise VariantError(f"{name}: no launcher for the settled config {config_key(config)}")
        variant.launchers = settled[:1]
    binary = variant.compile_results[0].kernel if variant.compile_results else None
    ptx = getattr(binary, "asm", {}).get("ptx", "")
    if not is_indirected(ptx, indices):
        raise VariantError(f"{name}: the compiled binary is not indirected (was the stage hook bypassed?)")
    log.debug("%s: indirected variant of %s for %s", name, base, ", ".join(arg_names))
    return variant

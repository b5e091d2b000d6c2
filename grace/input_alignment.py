"""Which inputs of a CUDA-graphed function are checked for alignment, and copied when off it.

Inductor compiles a Triton kernel for 16-byte-aligned pointer arguments wherever the example
input it compiled with was aligned (``should_assume_input_aligned``), and vectorizes on it. At
run time each caller of the compiled code copies an input that breaks this into an aligned
clone first (``copy_misaligned_inputs``), for the indices ``get_input_idxs_to_check`` lists.

CUDA graph trees make that list at the first call for each value of the symbolic sizes
(``cudagraphify_impl``'s ``deferred_cudagraphify``), from that call's inputs rather than from the
example the kernels were compiled for: an input off alignment at that call is left out, so it
reaches kernels that assume alignment, in the warm-up run, and every later call takes it
unchecked. The device faults ("misaligned address") and the process's CUDA context is lost.
A function with a dynamic batch size meets it at the first call of each new size.

:func:`with_misaligned_inputs` adds those inputs back: a non-static, non-mutated GPU tensor
input off alignment at the first call is copied into an aligned clone, that call and every
later one where it is off alignment again. A kernel compiled without the assumption reads the
clone as it would have read the input (the clone keeps its strides), and the tree copies such an
input into its placeholder anyway. Static inputs are left as stock leaves them: their address is
fixed, so the example the kernels were compiled for had the same alignment. Inputs the caller
names as mutated are left too: where it copies no mutation back (the tree's wrapper), their clone
would take the mutation instead of the caller's tensor.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from torch._inductor.utils import ALIGNMENT, is_gpu


def with_misaligned_inputs(inputs: Sequence[Any], checked: Sequence[int], static_input_idxs: Sequence[int],
                           mutated_input_idxs: Sequence[int],
                           on_gpu: Callable[[Any], bool] | None = None) -> list[int]:
    """``checked`` (stock's indices), then the GPU tensor inputs, neither static nor in
    ``mutated_input_idxs``, whose data pointer is off :data:`ALIGNMENT` now, in input order.
    Runs once per recorded size, never per replay."""
    import torch

    gpu = on_gpu or _on_gpu
    skip = set(checked) | set(static_input_idxs) | set(mutated_input_idxs)
    added = [i for i, t in enumerate(inputs)
             if i not in skip and isinstance(t, torch.Tensor) and gpu(t) and t.data_ptr() % ALIGNMENT]
    return [*checked, *added]


def _on_gpu(t: Any) -> bool:
    return is_gpu(t.device.type)

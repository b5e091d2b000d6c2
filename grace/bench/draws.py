"""Random numbers drawn in float32 inside a float64 run, so that it draws eager's.

The float64 run that arbitrates a float32 mismatch (:mod:`grace.bench.check`) is only an
arbiter if it computes the same function as eager. For a workload that draws random numbers
(dropout, drop-path in training) it does not: a generator seeded alike hands out the same
stream, but a float64 ``bernoulli_`` or dropout kernel consumes and maps it differently from a
float32 one, so the masks differ and eager's own output lands far from the float64 one.

:class:`Float32Draws` is a dispatch mode for that run: each random operator that would produce
float64 values runs in float32, with the arguments eager gave it, and its result is widened.
The draws then come from the same kernels in the same order as in the float32 eager step, and
the masks are eager's. Operators that draw integers (``randint``, ``randperm``) do not depend on
the dtype and pass through.
"""

from __future__ import annotations

from typing import Any

from torch.utils._python_dispatch import TorchDispatchMode


def _float64(x: Any) -> bool:
    import torch

    return isinstance(x, torch.Tensor) and x.dtype == torch.float64


class Float32Draws(TorchDispatchMode):
    """Within this mode, float64 random draws are made in float32 and widened."""

    def __init__(self) -> None:
        super().__init__()
        import torch

        aten = torch.ops.aten
        # In place on a float64 tensor: draw into a float32 one, then copy.
        self._in_place = {aten.bernoulli_.float, aten.bernoulli_.Tensor, aten.uniform_.default,
                          aten.normal_.default, aten.exponential_.default}
        # A float64 tensor argument gives the result its dtype: pass it narrowed.
        self._from_input = {aten.bernoulli.default, aten.bernoulli.p, aten.rand_like.default,
                            aten.randn_like.default}
        # A dtype keyword: ask for float32.
        self._factories = {aten.rand.default, aten.randn.default}
        self._dropout = aten.native_dropout.default

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        import torch

        kwargs = kwargs or {}
        if func in self._in_place and _float64(args[0]):
            narrow = torch.empty_like(args[0], dtype=torch.float32)
            func(narrow, *(a.float() if _float64(a) else a for a in args[1:]), **kwargs)
            return args[0].copy_(narrow)
        if func in self._from_input and _float64(args[0]):
            rest = tuple(a.float() if _float64(a) else a for a in args[1:])
            narrowed = {k: (torch.float32 if k == "dtype" and v == torch.float64 else v) for k, v in kwargs.items()}
            return func(args[0].float(), *rest, **narrowed).double()
        if func in self._factories and kwargs.get("dtype") == torch.float64:
            return func(*args, **{**kwargs, "dtype": torch.float32}).double()
        if func is self._dropout and _float64(args[0]):
            x, p, train = args[0], args[1], args[2]
            if not train:
                return func(*args, **kwargs)
            _, mask = func(x.float(), p, train)
            scale = 0.0 if p >= 1 else 1.0 / (1.0 - p)
            return x * mask * scale, mask
        return func(*args, **kwargs)

"""Numpy float64 scalars traced like the Python floats they are (CGCT, paper Fig. 7).

Dynamo wraps a ``np.float64`` (``np.power(d_k, 0.5)``, the speech transformer's temperature) as
a 0-d CPU tensor input: every call then pays ``torch.as_tensor`` in the frame's prelude and a
tensor-match guard plus a NaN lambda guard on it, and the
graph gets a CPU input (which :mod:`grace.cgct.staging` would stage). A Python float in the same
place costs a C++ equality guard and is a constant in the graph. ``np.float64`` subclasses
``float`` and torch's operators treat it as one, so the same specialization is exact for it.

So a ``np.float64`` is handled as Dynamo handles a float when it assumes static by default:
specialized to its value with an equality guard (type included), until the value is seen to
change (Dynamo's automatic-dynamic bookkeeping for the same source); from then on it takes the
stock numpy path, a tensor input that CGCT's staging makes GPU-resident. NaN and infinities,
and every other numpy type (float32, float16, integers: their arithmetic differs from a Python
number's), stay on the stock path.
"""

from __future__ import annotations

import math
from typing import Any

from grace.log import get_logger

log = get_logger("grace.cgct")


def specialize_like_float(builder: Any, value: Any) -> Any:
    """A constant for ``value`` with its guard, or None for the stock numpy path."""
    import numpy as np
    from torch._dynamo.guards import GuardBuilder
    from torch._dynamo.pgo import FrameStateSizeEntry, auto_dynamic, process_automatic_dynamic
    from torch._dynamo.variables.constant import ConstantVariable

    if type(value) is not np.float64:
        return None
    number = float(value)
    if math.isnan(number) or math.isinf(number):
        return None
    source = builder.get_source()
    entry = process_automatic_dynamic(
        builder.tx, source.name, FrameStateSizeEntry.make_scalar(number),
        is_unspecialized_nn_module=source.guard_source.is_unspecialized_nn_module())
    if entry.scalar is auto_dynamic:
        log.info("CGCT: numpy scalar %s changed between calls: traced as a tensor input", source.name)
        return None
    builder.install_guards(GuardBuilder.CONSTANT_MATCH)
    log.info("CGCT: numpy scalar %s = %r specialized like a Python float", source.name, number)
    return ConstantVariable.create(value=number, source=source)

"""How often the differential test's programs take AOTAutograd's lean wrapper
(``grace.lean.aot_runtime``): one program run in this process, as ``python -m grace.difftest
run-one`` runs it, counting the lean wrappers built, their calls, and why the other inference
graphs kept stock's wrapper.

    python scripts/probes/aot_wrapper_use.py --seed N [run-one's other options]
"""

from __future__ import annotations

import collections
import sys
from typing import Any

import torch
import torch._dynamo  # noqa: F401 - AOTAutograd's modules import in this order
import torch._functorch.aot_autograd  # noqa: F401


def main() -> None:
    import grace.lean.aot_runtime as aot_runtime
    from grace.difftest.__main__ import main as difftest

    reasons: collections.Counter = collections.Counter()
    calls = [0]
    decide, call = aot_runtime.plain_inference, aot_runtime.LeanInferenceWrapper.__call__

    def deciding(*args: Any, **kwargs: Any) -> Any:
        why = decide(*args, **kwargs)
        reasons[why or "lean"] += 1
        return why

    def calling(self: Any, args: list) -> Any:
        calls[0] += 1
        return call(self, args)

    aot_runtime.plain_inference = deciding
    aot_runtime.LeanInferenceWrapper.__call__ = calling
    sys.argv = ["difftest", "run-one", *sys.argv[1:]]
    try:
        difftest()
    except SystemExit:
        pass
    print(f"graphs: {dict(reasons)}; lean wrapper calls: {calls[0]}; torch {torch.__version__}")


if __name__ == "__main__":
    main()

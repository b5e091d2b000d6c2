"""What a plan made at capture could save of a CUDA graph node's per-replay Python, on the CPU.

``CUDAGraphNode.run`` rebuilds its input copy lists on every replay
(``_copy_inputs_and_remove_from_src``: a loop over the non-static inputs with an ``isinstance``
and two ``index_expanded_dims`` calls each) and walks its outputs' metadata in
``reconstruct_outputs``. The probe calls stock's two methods, unbound, on a stand-in that holds
only the fields they read (CPU tensors; no graph), against the least a plan fixed at capture
would leave: one ``_foreach_copy_`` over kept lists, and one pass over the cached outputs
resetting their backward hooks. Medians of ``--rounds`` rounds of ``--calls`` calls each.

    python scripts/probes/node_replay_cost.py [--rounds 9] [--calls 20000]
"""

from __future__ import annotations

import statistics
import types
from collections.abc import Callable
from typing import Any

import torch
from _timing import mean_call_us, rounds_parser


def median_us(call: Callable[[], Any], rounds: int, calls: int) -> float:
    return statistics.median(mean_call_us(call, calls) for _ in range(rounds))


def main() -> None:
    parser = rounds_parser(__doc__, rounds=9, calls=20000)
    args = parser.parse_args()
    import torch._dynamo  # noqa: F401  (before the tree's module: stock's import order)
    from torch._inductor.cudagraph_trees import CUDAGraphNode, UnaliasedStorage

    torch.set_num_threads(1)
    for inputs in (1, 4):
        node = types.SimpleNamespace(non_static_input_idx=list(range(inputs)), expanded_dims=[[] for _ in range(inputs)])
        dsts = [torch.empty(4) for _ in range(inputs)]
        srcs = [torch.randn(4) for _ in range(inputs)]
        stock = median_us(lambda: CUDAGraphNode._copy_inputs_and_remove_from_src(node, dsts, list(srcs)),
                          args.rounds, args.calls)
        planned = median_us(lambda: torch._foreach_copy_(dsts, list(srcs)), args.rounds, args.calls)
        print(f"{inputs} non-static input(s): stock's copy {stock:.2f} us, a kept plan's {planned:.2f}")
    for outputs in (1, 4):
        cached = [torch.empty(4) for _ in range(outputs)]
        node = types.SimpleNamespace(cached_tensor_outputs=cached, output_storage_alias=[UnaliasedStorage] * outputs,
                                     outputs_metadata=[{}] * outputs)

        def kept_plan() -> list[torch.Tensor]:
            out = []
            for t in cached:
                if t._backward_hooks is not None:
                    t._backward_hooks = None
                out.append(t)
            return out

        stock = median_us(lambda: CUDAGraphNode.reconstruct_outputs(node), args.rounds, args.calls)
        planned = median_us(kept_plan, args.rounds, args.calls)
        print(f"{outputs} cached output(s): stock's reconstruction {stock:.2f} us, a kept plan's {planned:.2f}")
    print(f"torch {torch.__version__}, {args.rounds} rounds of {args.calls} calls")


if __name__ == "__main__":
    main()

"""What listing a model's trainable parameters costs, as the benchmark's training step did on
every timed iteration (``[p for p in module.parameters() if p.requires_grad]``) before it kept
the list (``grace.bench.worker.Case.trainable``), against reading the kept list.

    python scripts/probes/param_walk_cost.py

Prints, per model, its parameter tensors and modules and the median microseconds of each over
interleaved rounds (one thread, the CPU it runs on).
"""

from __future__ import annotations

import statistics

import torch
from _timing import mean_call_us


def models() -> dict[str, torch.nn.Module]:
    from grace.bench.workloads import get

    out = {"micro-mlp16-T": get("micro-mlp16-T").build("cpu", 1, "tiny")}
    try:
        import torchvision

        out["resnet50"] = torchvision.models.resnet50()
    except ImportError:
        pass
    return out


def main() -> None:
    torch.set_num_threads(1)
    for name, model in models().items():
        kept = [p for p in model.parameters() if p.requires_grad]
        walk, read = [], []
        for _ in range(21):  # interleaved rounds
            walk.append(mean_call_us(lambda: [p for p in model.parameters() if p.requires_grad], 200))
            read.append(mean_call_us(lambda: kept, 200))
        print(f"{name}: {len(kept)} parameter tensors, {sum(1 for _ in model.modules())} modules; "
              f"walk {statistics.median(walk):.1f} us (p10 {sorted(walk)[2]:.1f}, p90 {sorted(walk)[18]:.1f}), "
              f"kept list {statistics.median(read):.2f} us")


if __name__ == "__main__":
    main()

"""timm models as PyTorch's ``benchmarks/dynamo/timm_models.py`` runs them: ``lcnet_050``.

The runner builds the model with ``timm.create_model(name, in_chans=3, scriptable=False,
num_classes=None, drop_rate=0.0, drop_path_rate=None, drop_block_rate=None, pretrained=True)``
and, for inference, calls it in ``eval()`` on one batch of its default input size (from
``resolve_data_config``, i.e. the model's ``pretrained_cfg``, test size first; 3x224x224 for
``lcnet_050``) made as ``randint(256)`` pixels converted to float and standardised by the
batch's own mean and standard deviation. LCNET does the same with ``pretrained=False`` (timm's
random initialisation) at the GraCE paper's batch size 256: ``lcnet_050`` (PP-LCNet at width
0.5: 13 depthwise-separable blocks with hard-swish, squeeze-and-excitation in the last two, a
1280-wide 1x1 conv head and 1000 logits) has 1.88M parameters. For "tiny" the architecture is
the real one at 3x64x64 images.

Nothing in it keeps kernels out of CUDA graphs: it is many small launch-bound kernels, and the
input batch (154 MB of fp32 at batch 256) is copied into the graph on every replay.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from grace.bench.workloads import Size, Workload, generator, register, require

TIMM = "timm==1.0.29"
TINY_INPUT_SIZE = (3, 64, 64)


@dataclass(frozen=True)
class TimmClassifier(Workload):
    """A timm classification model, named by ``model``, at its default input size."""

    def build(self, device: str, batch_size: int, size: Size = "full") -> Any:
        timm = require("timm", TIMM)
        model = timm.create_model(self.model, in_chans=3, scriptable=False, num_classes=None, drop_rate=0.0,
                                  drop_path_rate=None, drop_block_rate=None, pretrained=False)
        return model.to(device).eval()

    def inputs(self, model: Any, sample: int, device: str, batch_size: int, size: Size = "full") -> tuple:
        import torch

        if size == "full":
            cfg = model.pretrained_cfg
            input_size = tuple(cfg.get("test_input_size", cfg["input_size"]))
        else:
            input_size = TINY_INPUT_SIZE
        gen = generator(device, sample)
        pixels = torch.randint(256, (batch_size, *input_size), device=device, generator=gen).float()
        return ((pixels - pixels.mean()) / pixels.std(),)


register(TimmClassifier("LCNET", "lcnet_050", "timm", "inference", 256,
                        idiom="none: small launch-bound kernels; 256x3x224x224 input copied into the graph"))

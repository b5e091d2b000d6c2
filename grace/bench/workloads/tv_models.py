"""torchvision models as TorchBench runs them: ``alexnet``, ``densenet121`` and ``vision_maskrcnn``.

ALNET and DNET are TorchBench's torchvision classifiers (``torchbenchmark/models/alexnet`` and
``densenet121``, built by ``util/framework/vision/model_factory.py``): the torchvision model
itself, in ``eval()``, fed ``randn`` images of 3x224x224. TorchBench loads the ImageNet weights;
here the weights are torchvision's default random initialisation (``weights=None``), which costs
the same. AlexNet has 61.1M parameters, DenseNet-121 8.0M; both end in 1000 logits. For "tiny"
the architectures are the real ones at 3x64x64 images (their adaptive pooling takes any size;
AlexNet's stem needs at least 63 px).

VM is TorchBench's ``vision_maskrcnn``: torchvision's ``maskrcnn_resnet50_fpn`` (44.4M
parameters, 91 COCO classes) in ``eval()``, called on a list of images from COCO 2017 val, and
returning one dict per image (``boxes``, ``labels``, ``scores``, ``masks``). TorchBench loads the
COCO weights, so the network is the one the pretrained builder makes: the ResNet-50 backbone
uses ``FrozenBatchNorm2d`` with eps 0 (torchvision sets it for those weights), the stem and
``layer1`` are frozen (3 trainable layers), and every other argument is the default (the
transform resizes to ``min_size`` 800 / ``max_size`` 1333; RPN keeps 1000 proposals per level
before NMS and 1000 after; boxes with score above 0.05 are kept, at most 100 per image). The
weights here are random; with them the detector still fills its 100 detections per image
(deterministically), as the pretrained one often does at that low score threshold. The images
are uniform random values in [0, 1) (what ``to_tensor`` of a JPEG gives) at 3x427x640, a typical
COCO val size; the module's forward takes them batched and hands the detector a list of
per-image tensors, as the original's loader does. For "tiny" the architecture is the real one,
with 3x48x72 images, the transform's sizes cut to 64/96, and fewer boxes (100 RPN proposals per
level before NMS, 20 after, at most 5 detections per image): the box and mask heads' cost is
per box, not per pixel, and at full counts they alone take seconds on a CPU.

VM's idioms are torchvision's own, kept as they are: data-dependent shapes (``torch.where`` score
filters, ``remove_small_boxes``, NMS in the RPN and in the box head, ``MultiScaleRoIAlign``
grouping boxes by FPN level with ``torch.where``, per-image splits by detection counts), tensors
made from Python values inside forward (the transform's ``torch.as_tensor(image_mean/std)``,
``resize_boxes``' ``torch.tensor(size, device=...)``, the box coder's ``torch.tensor(0.5,
device=...)``, the anchor generator's per-level stride scalars), 0-d CPU tensors fed to GPU ops
(``LevelMapper``'s ``torch.tensor(eps)``, ``batched_nms``' ``torch.tensor(1).to(boxes)``; past
25,000 boxes on CUDA, 1,000 on a CPU, ``batched_nms`` loops over ``torch.unique`` of the classes
instead), the anchor generator's cell anchors kept as a plain CPU list attribute and moved to
the device in forward, ``MultiScaleRoIAlign`` inferring its level scales on the first call
(``torch.tensor(...).log2().item()``), and, in postprocessing, ``paste_masks_in_image``: a
Python loop over the detections that reads each box back to the host (``int(box[2] - box[0] +
1)``) and resizes and pastes one mask at a time into an image-sized tensor.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from grace.bench.workloads import Size, Workload, generator, register, require

TORCHVISION = "torchvision==0.26.0"
NUM_CLASSES = 1000
COCO_CLASSES = 91


def _classifier_image(size: Size) -> int:
    return 224 if size == "full" else 64


def _coco_image(size: Size) -> tuple[int, int]:
    """(height, width) of the input images."""
    return (427, 640) if size == "full" else (48, 72)


def _detector_args(size: Size) -> dict[str, int]:
    """MaskRCNN's arguments: TorchBench's defaults in full, fewer boxes in tiny."""
    if size == "full":
        return {"min_size": 800, "max_size": 1333}
    return {"min_size": 64, "max_size": 96, "rpn_pre_nms_top_n_test": 100, "rpn_post_nms_top_n_test": 20,
            "box_detections_per_img": 5}


@dataclass(frozen=True)
class TorchVisionClassifier(Workload):
    """A torchvision classification model, named by ``model``, fed a batch of ``randn`` images."""

    def build(self, device: str, batch_size: int, size: Size = "full") -> Any:
        models = require("torchvision.models", TORCHVISION)
        return getattr(models, self.model)(weights=None, num_classes=NUM_CLASSES).to(device).eval()

    def inputs(self, model: Any, sample: int, device: str, batch_size: int, size: Size = "full") -> tuple:
        import torch

        side = _classifier_image(size)
        gen = generator(device, sample)
        return (torch.randn(batch_size, 3, side, side, device=device, generator=gen),)


def _build_maskrcnn(size: Size) -> Any:
    from torch import nn

    detection = require("torchvision.models.detection", TORCHVISION)
    backbone_utils = require("torchvision.models.detection.backbone_utils", TORCHVISION)
    ops_misc = require("torchvision.ops.misc", TORCHVISION)

    backbone = backbone_utils.resnet_fpn_backbone(
        backbone_name="resnet50", weights=None, norm_layer=ops_misc.FrozenBatchNorm2d, trainable_layers=3)
    detector = detection.MaskRCNN(backbone, num_classes=COCO_CLASSES, **_detector_args(size))
    for module in detector.modules():
        if isinstance(module, ops_misc.FrozenBatchNorm2d):
            module.eps = 0.0

    class MaskRcnnOnImageList(nn.Module):
        """Hands the detector its list of images, as TorchBench's loader gives them."""

        def __init__(self, detector: nn.Module) -> None:
            super().__init__()
            self.detector = detector

        def forward(self, images):
            return self.detector(list(images.unbind(0)))

    return MaskRcnnOnImageList(detector)


@dataclass(frozen=True)
class VisionMaskRcnn(Workload):
    def build(self, device: str, batch_size: int, size: Size = "full") -> Any:
        return _build_maskrcnn(size).to(device).eval()

    def inputs(self, model: Any, sample: int, device: str, batch_size: int, size: Size = "full") -> tuple:
        import torch

        height, width = _coco_image(size)
        gen = generator(device, sample)
        return (torch.rand(batch_size, 3, height, width, device=device, generator=gen),)


register(TorchVisionClassifier("ALNET", "alexnet", "torchbench", "inference", 2,
                               idiom="none: static CNN; only the 2x3x224x224 input is copied into the graph"))
register(TorchVisionClassifier("DNET", "densenet121", "torchbench", "inference", 64,
                               idiom="none: static CNN (torch.cat of growing feature lists); input copy"))
register(VisionMaskRcnn(
    "VM", "vision_maskrcnn", "torchbench", "inference", 1,
    idiom="data-dependent shapes (score filters, NMS, RoI level grouping, list-of-dict outputs); CPU "
          "0-d tensors (LevelMapper eps, batched_nms offset) and torch.tensor/as_tensor of Python values "
          "in forward; CPU cell anchors moved in forward; paste_masks_in_image loop syncing per detection"))

"""The torchvision and timm workloads keep what their originals have.

VM must stay torchvision's own Mask R-CNN (its transform, RPN, RoI heads and mask pasting are
the idioms GraCE works on), built as the pretrained builder builds it, and must return one dict
of detections per image, pasted at the input's size. The classifiers must stay the named
architectures at the benchmarks' image sizes.
"""

from __future__ import annotations

import pytest
import torch

from grace.bench.workloads import MissingPackage, get


def _build(name: str, size: str = "tiny", batch: int = 2):
    torch.manual_seed(0)
    try:
        return get(name).build("cpu", batch, size)
    except MissingPackage as e:
        pytest.skip(str(e))


def test_vision_maskrcnn_is_torchvisions_detector_with_its_idioms() -> None:
    from torchvision.models.detection import MaskRCNN
    from torchvision.ops import FrozenBatchNorm2d
    from torchvision.ops.poolers import MultiScaleRoIAlign

    workload = get("VM")
    model = _build("VM")
    detector = model.detector
    assert isinstance(detector, MaskRCNN)
    assert isinstance(detector.roi_heads.box_roi_pool, MultiScaleRoIAlign)
    frozen = [m for m in detector.backbone.modules() if isinstance(m, FrozenBatchNorm2d)]
    assert frozen and all(m.eps == 0.0 for m in frozen)
    assert not any(isinstance(m, torch.nn.BatchNorm2d) for m in detector.modules())
    assert not detector.backbone.body.conv1.weight.requires_grad
    assert detector.backbone.body.layer2[0].conv1.weight.requires_grad
    assert sum(p.numel() for p in detector.parameters()) == 44_401_393

    (images,) = workload.inputs(model, 0, "cpu", 2, "tiny")
    with torch.no_grad():
        out = model(images)
        again = model(images)
    assert isinstance(out, list) and len(out) == 2
    for image, dets, dets_again in zip(images, out, again):
        assert set(dets) == {"boxes", "labels", "scores", "masks"}
        count = dets["boxes"].shape[0]
        assert 0 < count <= detector.roi_heads.detections_per_img
        assert dets["masks"].shape == (count, 1, *image.shape[-2:])
        assert all(torch.equal(dets[k], dets_again[k]) for k in dets)


def test_vision_maskrcnn_full_size_is_torchbenchs() -> None:
    workload = get("VM")
    model = _build("VM", "full", 1)
    transform = model.detector.transform
    assert transform.min_size == (800,) and transform.max_size == 1333
    heads = model.detector.roi_heads
    assert heads.detections_per_img == 100 and heads.score_thresh == 0.05
    assert model.detector.rpn._pre_nms_top_n["testing"] == 1000
    assert model.detector.rpn._post_nms_top_n["testing"] == 1000
    (images,) = workload.inputs(model, 0, "cpu", 1, "full")
    assert images.shape == (1, 3, 427, 640)
    assert 0.0 <= images.min() and images.max() < 1.0


@pytest.mark.parametrize(("name", "arch", "params"), [
    ("ALNET", "AlexNet", 61_100_840),
    ("DNET", "DenseNet", 7_978_856),
    ("LCNET", "MobileNetV3", 1_880_856),
])
def test_classifiers_are_the_named_architectures(name: str, arch: str, params: int) -> None:
    workload = get(name)
    model = _build(name, "full", 1)
    assert type(model).__name__ == arch
    assert not model.training
    assert sum(p.numel() for p in model.parameters()) == params
    (images,) = workload.inputs(model, 0, "cpu", 1, "full")
    assert images.shape == (1, 3, 224, 224)

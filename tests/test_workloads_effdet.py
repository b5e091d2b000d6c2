"""TEFD (TorchBench ``timm_efficientdet``): sizes, the anchor labeler, and both labeling layouts."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from grace.bench.workloads import MissingPackage, get
from grace.bench.workloads import timm_efficientdet as tefd


def _build(workload, size: str = "tiny", batch: int = 2):
    torch.manual_seed(0)
    try:
        return workload.build("cpu", batch, size)
    except MissingPackage as e:
        pytest.skip(str(e))


def test_full_size_is_tf_efficientdet_d1() -> None:
    model = _build(get("TEFD"), "full", 1)
    params = sum(p.numel() for p in model.parameters())
    assert 6.60e6 < params < 6.65e6  # effdet lists tf_efficientdet_d1 at 6.6M
    assert tuple(model.anchors.boxes.shape) == (9 * (80**2 + 40**2 + 20**2 + 10**2 + 5**2), 4)
    assert len(model.model.fpn.cell) == 4 and all(len(c.fnode) == 8 for c in model.model.fpn.cell)
    assert model.model.class_net.predict.conv_pw.out_channels == 9 * 90
    assert model.anchor_labeler is None  # TorchBench's default: the loader labels the anchors


def test_inputs_are_the_loaders_label_maps() -> None:
    workload = get("TEFD")
    model = _build(workload)
    inputs = workload.inputs(model, 3, "cpu", 2, "tiny")
    assert len(inputs) == 1 + 2 * tefd.NUM_LEVELS + 1
    with torch.no_grad():
        class_out, box_out = model.model(inputs[0])
    cls_maps, box_maps = inputs[1:1 + tefd.NUM_LEVELS], inputs[1 + tefd.NUM_LEVELS:-1]
    for c, b, co, bo in zip(cls_maps, box_maps, class_out, box_out):
        assert c.dtype == torch.int64 and b.dtype == torch.float32
        assert c.shape[1:3] == co.shape[2:] and c.shape[-1] * 90 == co.shape[1]
        assert b.shape[1:3] == bo.shape[2:] and b.shape[-1] == bo.shape[1]
        assert int(c.min()) >= -1 and int(c.max()) < tefd.DATASET_CLASSES
    positives = sum((c >= 0).sum(dim=(1, 2, 3)) for c in cls_maps).float()
    assert torch.equal(positives, inputs[-1])
    assert bool((inputs[-1] >= 4).all())  # every box forces at least one match


def test_labeler_matches_a_box_equal_to_an_anchor() -> None:
    model = _build(get("TEFD"))
    labeler = tefd._classes().AnchorLabeler(model.anchors, 90)
    anchor = 1234
    gt = model.anchors.boxes[anchor:anchor + 1].clone()
    cls_levels, box_levels, num_positives = labeler.label_anchors(gt, torch.tensor([7.0]), filter_valid=False)
    cls_flat = torch.cat([c.reshape(-1) for c in cls_levels])
    box_flat = torch.cat([b.reshape(-1, 4) for b in box_levels])
    assert int(cls_flat[anchor]) == 6  # class 7, made 0-based
    assert torch.allclose(box_flat[anchor], torch.zeros(4), atol=1e-5)
    assert set(cls_flat.unique().tolist()) == {-1, 6}
    assert float(num_positives) == float((cls_flat == 6).sum()) >= 1


def test_in_model_labeler_gives_the_same_loss() -> None:
    """effdet's ``create_labeler=True`` layout labels the same boxes to the same loss."""
    loader = get("TEFD")
    bench = dataclasses.replace(loader, bench_labeler=True)
    m_loader, m_bench = _build(loader), _build(bench)
    x_loader = loader.inputs(m_loader, 5, "cpu", 2, "tiny")
    x_bench = bench.inputs(m_bench, 5, "cpu", 2, "tiny")
    assert len(x_bench) == 3 and x_bench[1].shape == (2, tefd.MAX_INSTANCES, 4)
    assert bool((x_bench[2][:, 4:] == -1).all())  # padding the in-model labeler filters out
    assert torch.equal(x_loader[0], x_bench[0])
    torch.manual_seed(11)
    a = loader.loss(m_loader(*x_loader))
    torch.manual_seed(11)
    b = bench.loss(m_bench(*x_bench))
    assert torch.allclose(a, b, rtol=1e-5)


def test_in_model_labeler_keeps_its_data_dependent_filter() -> None:
    """The ``gt_classes > -1`` mask indexing of effdet's labeler stays: Dynamo must break on it."""
    bench = dataclasses.replace(get("TEFD"), bench_labeler=True)
    model = _build(bench)
    _, boxes, classes = bench.inputs(model, 0, "cpu", 2, "tiny")
    torch._dynamo.reset()
    try:
        explained = torch._dynamo.explain(model.anchor_labeler.batch_label_anchors)(boxes, classes)
    finally:
        torch._dynamo.reset()
    assert explained.graph_break_count > 0

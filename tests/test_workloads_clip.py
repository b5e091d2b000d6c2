"""MMC (TorchBench ``torch_multimodal_clip``): sizes, inputs, and the idioms the original has."""

from __future__ import annotations

import math

import pytest
import torch

from grace.bench.workloads import get
from grace.bench.workloads.tb_multimodal_clip import TINY, MultimodalClip


def _tiny_model():
    torch.manual_seed(0)
    return get("MMC").build("cpu", 1, "tiny")


def test_registered_as_in_the_paper() -> None:
    w = get("MMC")
    assert (w.model, w.suite, w.kind, w.batch_size, w.stochastic) == (
        "torch_multimodal_clip", "torchbench", "inference", 1, False)


def test_inputs_are_tokeniser_shaped() -> None:
    w = get("MMC")
    model = _tiny_model()
    images, ids = w.inputs(model, 3, "cpu", 2, "tiny")
    assert images.shape == (2, 3, TINY.image_size, TINY.image_size)
    assert ids.shape == (TINY.captions, TINY.context_length) and ids.dtype == torch.int64
    sot, eot = TINY.vocab_size - 2, TINY.vocab_size - 1
    assert (ids[:, 0] == sot).all()
    assert ((ids == eot).sum(dim=1) == 1).all()
    end = ids.argmax(dim=1)
    assert (ids[torch.arange(len(ids)), end] == eot).all()
    after = torch.arange(TINY.context_length) > end[:, None]
    assert (ids[after] == 0).all() and (ids[~after] > 0).all()


def test_outputs_are_normalised_embeddings() -> None:
    w = get("MMC")
    model = _tiny_model()
    with torch.no_grad():
        image_emb, text_emb = model(*w.inputs(model, 0, "cpu", 2, "tiny"))
    assert image_emb.shape == (2, TINY.embedding_dim) and text_emb.shape == (TINY.captions, TINY.embedding_dim)
    torch.testing.assert_close(image_emb.norm(dim=1), torch.ones(2))
    torch.testing.assert_close(text_emb.norm(dim=1), torch.ones(TINY.captions))


def test_keeps_the_cpu_tensor_idioms() -> None:
    """The causal mask stays a plain CPU attribute and the EOT gather uses a device-less arange."""
    import inspect

    model = _tiny_model()
    text = model.encoder_b
    assert text.mask.device.type == "cpu" and "mask" not in dict(text.named_buffers())
    assert torch.equal(text.mask, torch.full_like(text.mask, float("-inf")).triu(1))
    assert "torch.arange(x.shape[0])" in inspect.getsource(type(text).forward)
    assert type(model.encoder_a.ln_pre).__name__ == "Fp32LayerNorm"


@pytest.mark.parametrize("size,params", [("full", 151_277_312)])
def test_full_size_parameter_count(size: str, params: int) -> None:
    """ViT-B/32 CLIP: 87.8M vision + 63.4M text (OpenAI's 151,277,313 less the loss's logit scale)."""
    torch.manual_seed(0)
    model = get("MMC").build("meta", 1, size)
    assert sum(p.numel() for p in model.parameters()) == params


def test_training_variant_keeps_the_cpu_logit_scale() -> None:
    w = MultimodalClip("MMC-T", "torch_multimodal_clip", "torchbench", "training", 4)
    torch.manual_seed(0)
    step = w.build("cpu", 4, "tiny")
    scale = step.loss_fn.logit_scale
    assert scale.device.type == "cpu" and scale.dim() == 0
    assert math.isclose(scale.item(), math.log(1 / 0.07), rel_tol=1e-6)
    assert all(p is not scale for p in step.parameters())
    images, ids = w.inputs(step, 0, "cpu", 4, "tiny")
    assert ids.shape[0] == 4
    with torch.no_grad():
        scale.fill_(10.0)
    loss = w.loss(step(images, ids))
    loss.backward()
    assert torch.isfinite(loss) and scale.item() == pytest.approx(4.6052) and scale.grad is not None

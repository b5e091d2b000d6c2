"""DALLE2 keeps the CPU-tensor idioms of OpenAI CLIP's text encoder and TorchBench's output shape.

The CPU run of ``tests/test_workloads.py`` cannot tell a CPU tensor from a device one, so the
text encoder runs here on the ``meta`` device: every tensor it makes on the CPU is then visible.
"""

from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from grace.bench.workloads import get
from grace.bench.workloads.tb_dalle2 import _build, _dims


class _DevicesMade(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.made: list[tuple[str, str]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if isinstance(out, torch.Tensor):
            self.made.append((str(func), out.device.type))
        return out


def _tiny(batch_size: int = 1) -> torch.nn.Module:
    torch.manual_seed(0)
    return get("DALLE2").build("cpu", batch_size, "tiny")


def test_clip_text_encoder_makes_a_cpu_index_and_moves_its_cpu_mask_in_forward() -> None:
    clip = _tiny().prior.clip.clip
    blocks = list(clip.transformer.resblocks)
    assert all(b.attn_mask.device.type == "cpu" for b in blocks)
    assert not any("attn_mask" in name for name, _ in clip.named_buffers())
    clip.to("meta")
    assert all(b.attn_mask.device.type == "cpu" for b in blocks), ".to(device) must leave the mask behind"
    d = _dims("tiny")
    text = torch.randint(0, d.vocab, (2, d.context), device="meta")
    with _DevicesMade() as rec, torch.no_grad():
        out = clip.encode_text(text)
    assert out.device.type == "meta"
    assert [f for f, dev in rec.made if dev == "cpu"] == ["aten.arange.default"]
    assert all(b.attn_mask.device.type == "meta" for b in blocks), "forward moves the mask itself"


def test_one_prompt_returns_its_image_and_noise_comes_from_the_inputs() -> None:
    w = get("DALLE2")
    d = _dims("tiny")
    for batch_size, shape in ((1, (3, d.image_sizes[-1], d.image_sizes[-1])),
                              (2, (2, 3, d.image_sizes[-1], d.image_sizes[-1]))):
        model = _tiny(batch_size)
        with torch.no_grad():
            a = model(*w.inputs(model, 0, "cpu", batch_size, "tiny"))
            b = model(*w.inputs(model, 0, "cpu", batch_size, "tiny"))
            c = model(*w.inputs(model, 1, "cpu", batch_size, "tiny"))
        assert a.shape == shape
        assert torch.equal(a, b) and not torch.equal(a, c)


def test_clip_weights_are_converted_to_fp16_as_clip_load_does_on_cuda() -> None:
    clip = _build("tiny", half_clip=True).prior.clip.clip
    block = clip.transformer.resblocks[0]
    assert block.attn.in_proj_weight.dtype == torch.float16
    assert block.attn.out_proj.weight.dtype == torch.float16
    assert block.mlp.c_fc.weight.dtype == torch.float16
    assert clip.text_projection.dtype == torch.float16
    assert clip.token_embedding.weight.dtype == torch.float32
    assert clip.positional_embedding.dtype == torch.float32
    assert clip.ln_final.weight.dtype == torch.float32

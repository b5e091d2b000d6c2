"""STCLM (Speech2Text2ForCausalLM, written out in plain torch): sizes, loss and idioms as the original."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from grace.bench.workloads import get
from grace.bench.workloads.hf_speech2text2 import FULL, TINY, expected_parameters


def _tiny(training: bool = True):
    torch.manual_seed(0)
    workload = get("STCLM")
    model = workload.build("cpu", 2, "tiny")
    return workload, (model.train() if training else model.eval())


def test_full_size_parameter_count_matches_the_original() -> None:
    # Speech2Text2Config() defaults: 10000 x 256 tied embedding/lm_head, a (1024 + 2) x 256 sinusoidal
    # table, 6 layers each with self- and (unused) cross-attention, 3 LayerNorms and a 256-2048-256 FFN.
    assert expected_parameters(FULL) == 12_295_168
    torch.manual_seed(0)
    model = get("STCLM").build("cpu", 1, "full")
    params = list(model.parameters())
    assert sum(p.numel() for p in params) == expected_parameters(FULL)
    assert sum(p.numel() for p in params if p.requires_grad) == 12_295_168 - 1026 * 256
    assert model.lm_head.weight is model.model.decoder.embed_tokens.weight
    assert model.lm_head.bias is None
    assert len(model.model.decoder.layers) == 6
    assert model.model.decoder.embed_scale == 16.0 and isinstance(model.model.decoder.embed_scale, float)


def test_loss_is_unshifted_cross_entropy_by_hand() -> None:
    workload, model = _tiny(training=False)
    input_ids, labels = workload.inputs(model, 3, "cpu", 2, "tiny")
    loss, logits, _ = model(input_ids, labels)
    assert logits.shape == (2, TINY.seq_len, TINY.vocab_size)
    log_probs = logits.double().log_softmax(dim=-1)
    by_hand = -log_probs.gather(-1, labels[..., None]).mean()
    torch.testing.assert_close(loss.double(), by_hand, rtol=1e-6, atol=1e-6)
    shifted = F.cross_entropy(logits[:, :-1].reshape(-1, TINY.vocab_size), labels[:, 1:].reshape(-1))
    assert not torch.allclose(loss, shifted)
    assert torch.equal(workload.loss((loss, logits, ())), loss)


def test_training_output_keeps_the_kv_cache_and_dropout() -> None:
    workload, model = _tiny()
    inputs = workload.inputs(model, 0, "cpu", 2, "tiny")
    torch.manual_seed(1)
    _, logits, cache = model(*inputs)
    assert len(cache) == TINY.decoder_layers
    head_dim = TINY.d_model // TINY.decoder_attention_heads
    for key, value in cache:
        assert key.shape == value.shape == (2, TINY.decoder_attention_heads, TINY.seq_len, head_dim)
    torch.manual_seed(2)
    assert not torch.equal(model(*inputs)[1], logits), "dropout is active in training"


def test_layerdrop_draws_a_cpu_scalar_before_every_layer(monkeypatch) -> None:
    workload, model = _tiny()
    inputs = workload.inputs(model, 0, "cpu", 2, "tiny")
    draws = []
    real_rand = torch.rand

    def counting_rand(*args, **kwargs):
        out = real_rand(*args, **kwargs)
        draws.append(out)
        return out

    monkeypatch.setattr(torch, "rand", counting_rand)
    model(*inputs)
    assert len(draws) == TINY.decoder_layers
    assert all(d.dim() == 0 and d.device.type == "cpu" for d in draws)
    draws.clear()
    model.eval()(*inputs)
    assert draws == []


def test_positions_count_non_padding_tokens() -> None:
    _, model = _tiny()
    positions = model.model.decoder.embed_positions
    pad = TINY.pad_token_id
    input_ids = torch.tensor([[5, pad, 7, 9], [pad, pad, 3, 4]])
    out = positions(input_ids)
    table = positions.weights
    assert not table.requires_grad and table.shape == (TINY.max_target_positions + 2, TINY.d_model)
    expected_ids = torch.tensor([[2, 1, 3, 4], [1, 1, 2, 3]])
    torch.testing.assert_close(out, table[expected_ids])
    assert torch.count_nonzero(out[0, 1]) == 0


def test_dynamo_breaks_the_graph_at_the_layerdrop_branch() -> None:
    import torch._dynamo

    workload, model = _tiny()
    inputs = workload.inputs(model, 0, "cpu", 2, "tiny")
    torch._dynamo.reset()
    try:
        explanation = torch._dynamo.explain(model)(*inputs)
    finally:
        torch._dynamo.reset()
    assert explanation.graph_break_count >= 1

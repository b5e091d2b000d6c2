"""``Speech2Text2ForCausalLM`` (STCLM), as PyTorch's HuggingFace benchmark trained it.

The original is transformers 4.x's ``models/speech_to_text_2/modeling_speech_to_text_2.py``
(deprecated in 4.40, removed later: transformers 5.17 no longer has it, so the model is written
out here in plain torch, with the same module tree and parameter names). PyTorch's
``benchmarks/dynamo/huggingface.py`` builds ``Speech2Text2ForCausalLM(Speech2Text2Config())``,
the config class's defaults with random weights: vocabulary 10000, ``d_model`` 256, 6 decoder
layers of 4 heads, FFN 2048 with ReLU, ``max_target_positions`` 1024, ``pad_token_id`` 1,
``scale_embedding`` (inputs times the Python float ``sqrt(256) = 16.0``), dropout 0.1,
attention and activation dropout 0.0, ``decoder_layerdrop`` 0.0, ``init_std`` 0.02. Sequence
length 128 (``get_sequence_length``'s fallback for this name); ``input_ids`` and ``labels``
uniform in ``[0, vocab)`` (``generate_inputs_for_model`` for a CausalLM), no attention mask and
no encoder states; training in ``train()``; the loss is the output's first element, which the
class computes as ``CrossEntropyLoss`` of ``logits.view(-1, vocab)`` against ``labels.view(-1)``,
with no shift. The paper runs it at batch 256.

Architecture, as the class builds it: the causal LM sets ``config.is_decoder = True``, so every
decoder layer also owns a cross-attention block and its LayerNorm, which stay unused without
encoder states (they count in the parameters, receive no gradient); post-norm residual blocks
(self-attention, then FFN, each followed by dropout, the residual add and a LayerNorm); no
final LayerNorm; attention is the eager BART one (query scaled by ``head_dim ** -0.5``,
``bmm``, additive mask, softmax, ``bmm``); ``lm_head`` has no bias and is tied to
``embed_tokens`` (``tie_word_embeddings`` defaults to true), so the model has 12,295,168
parameters: 12,032,512 trained and the 1026 x 256 sinusoidal table, a ``requires_grad=False``
``nn.Parameter``. Initialisation as ``_init_weights``: linear and embedding weights N(0, 0.02),
biases zero, the padding row of the embedding zero, LayerNorms at their defaults.

Kept as the transformers version the paper's PyTorch nightly (2024-04-23) pinned has it
(``243e186``, 4.38 development): per decoder layer, in training, LayerDrop draws
``dropout_probability = torch.rand([])``, a 0-d tensor from the CPU generator, and compares it
with ``layerdrop`` in a Python ``if``; Dynamo cannot trace that branch and breaks the graph
before every layer (7 forward and 7 backward graphs: the 14 CUDA graphs of the paper's Table 3),
and each forward graph but the last ends in that CPU op. Also as there: position ids are
computed from ``input_ids`` (``ne(pad)``, ``cumsum``, times the mask, plus ``padding_idx``) and
gathered from the sinusoidal table with ``index_select`` under ``no_grad``, after a Python
check that the table is long enough; the causal mask is rebuilt on the device in every forward
(``torch.full`` with ``finfo.min``, ``arange``, ``masked_fill_``, expanded to the batch); the
embedding scale is a Python float. The config's ``use_cache`` (true) is kept too: the
benchmark only switched it off in 2025, so the output is ``(loss, logits, past_key_values)``
with each layer's self-attention keys and values, as ``CausalLMOutputWithCrossAttentions``
flattens. The benchmark's ``*drop*`` = 1e-30 loop edits a fresh config object, not the model's,
so dropout stays 0.1 here as there.

Left out: the code paths the benchmark never takes (``past_key_values`` input, attention masks,
encoder states, head masks, gradient checkpointing, attention outputs). "tiny" keeps every code
path with vocabulary 100, ``d_model`` 32, 2 layers of 2 heads, FFN 64, 16 target positions and
sequence length 8.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

from grace.bench.workloads import Size, Workload, generator, register


@dataclass(frozen=True)
class S2T2Config:
    """The fields of ``Speech2Text2Config`` the causal LM reads, at the class defaults."""

    vocab_size: int = 10000
    d_model: int = 256
    decoder_layers: int = 6
    decoder_attention_heads: int = 4
    decoder_ffn_dim: int = 2048
    max_target_positions: int = 1024
    pad_token_id: int = 1
    scale_embedding: bool = True
    dropout: float = 0.1
    attention_dropout: float = 0.0
    activation_dropout: float = 0.0
    decoder_layerdrop: float = 0.0
    init_std: float = 0.02
    use_cache: bool = True
    seq_len: int = 128  # the benchmark's get_sequence_length, not a config field


FULL = S2T2Config()
TINY = S2T2Config(vocab_size=100, d_model=32, decoder_layers=2, decoder_attention_heads=2,
                  decoder_ffn_dim=64, max_target_positions=16, seq_len=8)


def config(size: Size) -> S2T2Config:
    return FULL if size == "full" else TINY


def expected_parameters(cfg: S2T2Config) -> int:
    """Parameters of the original (tied ``lm_head`` counted once), from the config alone."""
    d, ffn = cfg.d_model, cfg.decoder_ffn_dim
    attention = 4 * (d * d + d)
    layer = 2 * attention + 3 * 2 * d + (d * ffn + ffn) + (ffn * d + d)
    positions = (cfg.max_target_positions + 2) * d
    return cfg.vocab_size * d + positions + cfg.decoder_layers * layer


@functools.cache
def _classes() -> Any:
    """The ``Speech2Text2ForCausalLM`` class, made with torch imported."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    class SinusoidalPositions(nn.Module):
        """fairseq-style sinusoidal table, indexed by positions counted over non-padding tokens."""

        offset = 2

        def __init__(self, num_positions: int, embedding_dim: int, padding_idx: int) -> None:
            super().__init__()
            self.embedding_dim = embedding_dim
            self.padding_idx = padding_idx
            self.make_weights(num_positions + self.offset, embedding_dim, padding_idx)

        def make_weights(self, num_embeddings: int, embedding_dim: int, padding_idx: int) -> None:
            table = self.get_embedding(num_embeddings, embedding_dim, padding_idx)
            if hasattr(self, "weights"):
                table = table.to(dtype=self.weights.dtype, device=self.weights.device)
            self.weights = nn.Parameter(table, requires_grad=False)

        @staticmethod
        def get_embedding(num_embeddings: int, embedding_dim: int, padding_idx: int):
            half = embedding_dim // 2
            step = math.log(10000) / (half - 1)
            freqs = torch.exp(torch.arange(half, dtype=torch.int64).float() * -step)
            angles = torch.arange(num_embeddings, dtype=torch.int64).float()[:, None] * freqs[None, :]
            table = torch.cat([angles.sin(), angles.cos()], dim=1).view(num_embeddings, -1)
            if embedding_dim % 2 == 1:
                table = torch.cat([table, torch.zeros(num_embeddings, 1)], dim=1)
            table[padding_idx, :] = 0
            return table.to(torch.get_default_dtype())

        @torch.no_grad()
        def forward(self, input_ids, past_key_values_length: int = 0):
            bsz, seq_len = input_ids.size()
            not_pad = input_ids.ne(self.padding_idx).int()
            counted = (torch.cumsum(not_pad, dim=1).type_as(not_pad) + past_key_values_length) * not_pad
            position_ids = (counted.long() + self.padding_idx).to(input_ids.device)
            needed = self.padding_idx + 1 + seq_len
            if needed > self.weights.size(0):
                self.make_weights(needed + self.offset, self.embedding_dim, self.padding_idx)
            return self.weights.index_select(0, position_ids.view(-1)).view(bsz, seq_len, -1).detach()

    class Attention(nn.Module):
        """BART's eager multi-head attention (self-attention path only)."""

        def __init__(self, embed_dim: int, num_heads: int, dropout: float) -> None:
            super().__init__()
            self.embed_dim = embed_dim
            self.num_heads = num_heads
            self.head_dim = embed_dim // num_heads
            if self.head_dim * num_heads != embed_dim:
                raise ValueError(f"embed_dim {embed_dim} is not a multiple of num_heads {num_heads}")
            self.dropout = dropout
            self.scaling = self.head_dim ** -0.5
            self.k_proj = nn.Linear(embed_dim, embed_dim)
            self.v_proj = nn.Linear(embed_dim, embed_dim)
            self.q_proj = nn.Linear(embed_dim, embed_dim)
            self.out_proj = nn.Linear(embed_dim, embed_dim)

        def _heads(self, x, seq_len: int, bsz: int):
            return x.view(bsz, seq_len, self.num_heads, self.head_dim).transpose(1, 2).contiguous()

        def forward(self, hidden_states, attention_mask):
            bsz, tgt_len, _ = hidden_states.size()
            query = self.q_proj(hidden_states) * self.scaling
            key = self._heads(self.k_proj(hidden_states), -1, bsz)
            value = self._heads(self.v_proj(hidden_states), -1, bsz)
            present = (key, value)

            flat = (bsz * self.num_heads, -1, self.head_dim)
            query = self._heads(query, tgt_len, bsz).view(*flat)
            key = key.reshape(*flat)
            value = value.reshape(*flat)
            src_len = key.size(1)

            scores = torch.bmm(query, key.transpose(1, 2))
            if attention_mask is not None:
                scores = scores.view(bsz, self.num_heads, tgt_len, src_len) + attention_mask
                scores = scores.view(bsz * self.num_heads, tgt_len, src_len)
            probs = F.softmax(scores, dim=-1)
            probs = F.dropout(probs, p=self.dropout, training=self.training)
            out = torch.bmm(probs, value)
            out = out.view(bsz, self.num_heads, tgt_len, self.head_dim).transpose(1, 2)
            out = out.reshape(bsz, tgt_len, self.embed_dim)
            return self.out_proj(out), present

    class DecoderLayer(nn.Module):
        def __init__(self, cfg: S2T2Config) -> None:
            super().__init__()
            d = cfg.d_model
            self.self_attn = Attention(d, cfg.decoder_attention_heads, cfg.attention_dropout)
            self.dropout = cfg.dropout
            self.activation_dropout = cfg.activation_dropout
            self.self_attn_layer_norm = nn.LayerNorm(d)
            # is_decoder: the cross-attention block exists, unused without encoder states
            self.encoder_attn = Attention(d, cfg.decoder_attention_heads, cfg.attention_dropout)
            self.encoder_attn_layer_norm = nn.LayerNorm(d)
            self.fc1 = nn.Linear(d, cfg.decoder_ffn_dim)
            self.fc2 = nn.Linear(cfg.decoder_ffn_dim, d)
            self.final_layer_norm = nn.LayerNorm(d)

        def forward(self, hidden_states, attention_mask):
            residual = hidden_states
            hidden_states, present = self.self_attn(hidden_states, attention_mask)
            hidden_states = F.dropout(hidden_states, p=self.dropout, training=self.training)
            hidden_states = self.self_attn_layer_norm(residual + hidden_states)

            residual = hidden_states
            hidden_states = F.relu(self.fc1(hidden_states))
            hidden_states = F.dropout(hidden_states, p=self.activation_dropout, training=self.training)
            hidden_states = self.fc2(hidden_states)
            hidden_states = F.dropout(hidden_states, p=self.dropout, training=self.training)
            hidden_states = self.final_layer_norm(residual + hidden_states)
            return hidden_states, present

    def causal_mask(bsz: int, tgt_len: int, dtype, device):
        mask = torch.full((tgt_len, tgt_len), torch.finfo(dtype).min, device=device)
        cond = torch.arange(mask.size(-1), device=device)
        mask.masked_fill_(cond < (cond + 1).view(mask.size(-1), 1), 0)
        mask = mask.to(dtype)
        return mask[None, None, :, :].expand(bsz, 1, tgt_len, tgt_len)

    class Decoder(nn.Module):
        def __init__(self, cfg: S2T2Config) -> None:
            super().__init__()
            self.dropout = cfg.dropout
            self.layerdrop = cfg.decoder_layerdrop
            self.padding_idx = cfg.pad_token_id
            self.use_cache = cfg.use_cache
            self.embed_scale = math.sqrt(cfg.d_model) if cfg.scale_embedding else 1.0
            self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.d_model, self.padding_idx)
            self.embed_positions = SinusoidalPositions(cfg.max_target_positions, cfg.d_model, self.padding_idx)
            self.layers = nn.ModuleList([DecoderLayer(cfg) for _ in range(cfg.decoder_layers)])

        def forward(self, input_ids):
            input_shape = input_ids.size()
            input_ids = input_ids.view(-1, input_shape[-1])
            inputs_embeds = self.embed_tokens(input_ids) * self.embed_scale
            attention_mask = None
            if input_shape[-1] > 1:
                attention_mask = causal_mask(input_shape[0], input_shape[-1], inputs_embeds.dtype,
                                             inputs_embeds.device)
            positions = self.embed_positions(input_ids)
            hidden_states = F.dropout(inputs_embeds + positions, p=self.dropout, training=self.training)

            cache = []
            for layer in self.layers:
                if self.training:
                    dropout_probability = torch.rand([])
                    if dropout_probability < self.layerdrop:
                        continue
                hidden_states, present = layer(hidden_states, attention_mask)
                if self.use_cache:
                    cache.append(present)
            return hidden_states, tuple(cache)

    class DecoderWrapper(nn.Module):
        def __init__(self, cfg: S2T2Config) -> None:
            super().__init__()
            self.decoder = Decoder(cfg)

        def forward(self, input_ids):
            return self.decoder(input_ids)

    class Speech2Text2ForCausalLM(nn.Module):
        """The causal LM: decoder, tied ``lm_head``, unshifted cross-entropy against ``labels``."""

        def __init__(self, cfg: S2T2Config) -> None:
            super().__init__()
            self.config = cfg
            self.model = DecoderWrapper(cfg)
            self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
            for module in self.modules():
                if isinstance(module, nn.Linear):
                    module.weight.data.normal_(mean=0.0, std=cfg.init_std)
                    if module.bias is not None:
                        module.bias.data.zero_()
                elif isinstance(module, nn.Embedding):
                    module.weight.data.normal_(mean=0.0, std=cfg.init_std)
                    module.weight.data[module.padding_idx].zero_()
            self.lm_head.weight = self.model.decoder.embed_tokens.weight

        def forward(self, input_ids, labels):
            hidden_states, cache = self.model(input_ids)
            logits = self.lm_head(hidden_states)
            loss = nn.CrossEntropyLoss()(logits.view(-1, self.config.vocab_size), labels.view(-1))
            if self.config.use_cache:
                return loss, logits, cache
            return loss, logits

    return Speech2Text2ForCausalLM


@dataclass(frozen=True)
class Speech2Text2CausalLM(Workload):
    def build(self, device: str, batch_size: int, size: Size = "full") -> Any:
        model = _classes()(config(size)).to(device)
        return model.train() if self.kind == "training" else model.eval()

    def inputs(self, model: Any, sample: int, device: str, batch_size: int, size: Size = "full") -> tuple:
        import torch

        cfg = config(size)
        gen = generator(device, sample)
        shape = (batch_size, cfg.seq_len)
        input_ids = torch.randint(0, cfg.vocab_size, shape, device=device, dtype=torch.int64, generator=gen)
        labels = torch.randint(0, cfg.vocab_size, shape, device=device, dtype=torch.int64, generator=gen)
        return (input_ids, labels)

    def loss(self, output: Any) -> Any:
        return output[0]


register(Speech2Text2CausalLM(
    "STCLM", "Speech2Text2ForCausalLM", "huggingface", "training", 256,
    idiom="CPU RNG + data-dependent branch: LayerDrop's torch.rand([]) (0-d CPU tensor) compared in a "
          "Python if before every decoder layer -> a graph break per layer (7 fwd + 7 bwd graphs)",
    stochastic=True))

"""TorchBench ``BERT_pytorch``: codertimo's BERT-pytorch pre-training step, as TorchBench sets it up.

The original (torchbenchmark/models/BERT_pytorch) builds ``BERT(len(vocab), hidden=768,
n_layers=12, attn_heads=12)`` from its argparse defaults, wraps it in ``BERTLM`` (next-sentence
prediction + masked language model heads, both ending in ``LogSoftmax``) and trains it with
``nn.NLLLoss(ignore_index=0)`` on ``next_loss + mask_loss``, batch 16, ``seq_len`` 128. Its
vocabulary is built by ``WordVocab`` from a random corpus (``CorpusGenerator(20000, 50000)``
under ``random.seed(1337)``): 19,999 distinct number-words, the literal ``\\t`` separator token
and five specials, so ``len(vocab)`` is 20,005.

Kept from the original: the hand-written ``MultiHeadedAttention`` (three projections in a
``ModuleList``, ``view``/``transpose`` head split, scores divided by ``math.sqrt(d_k)``,
``masked_fill(mask == 0, -1e9)``, dropout passed in as a module); the ``LambdaModule`` that
stores the attention mask on itself (``set_mask``) each block, a module attribute written in
forward; the pre-norm ``SublayerConnection`` with its own ``LayerNorm`` (``std`` with eps
outside the square root); ``nn.GELU`` in the feed-forward; ``PositionalEmbedding``'s sinusoid
buffer sliced to the sequence length; ``SegmentEmbedding`` (3 rows, ``padding_idx=0``); the
``repeat``-built ``(B, 1, L, L)`` padding mask; every dropout with its original probability
(0.1). Dropout draws from the RNG, so the workload is ``stochastic``: the benchmark compiles
it with eager's random ops and seeds both copies alike, which makes their outputs comparable.

Inputs are drawn the way ``BERTDataset`` builds a batch from that corpus: ``[sos] t1 [eos] t2
[eos]`` with 1-3 words per sentence, padded to ``seq_len``, segment labels 1/2/0, 15% of the
words masked (80% ``<mask>``, 10% random token, 10% kept) with the original id as the label
and 0 elsewhere, ``is_next`` a coin flip. The model's forward takes the labels too and hands
them back untouched, so that :meth:`BertPytorch.loss` can apply the trainer's criterion; the
forward it runs is ``BERTLM.forward(bert_input, segment_label)``. ``ignore_index=0`` also
ignores ``is_next == 0`` rows and unmasked tokens, so a batch with no ``is_next == 1`` row or
no masked token has a NaN loss; the inputs force one of each (row 0) when a draw has none,
which at batch 16 changes about one batch in 30,000.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from grace.bench.workloads import Size, Workload, generator, register

PAD, UNK, EOS, SOS, MASK = 0, 1, 2, 3, 4
N_SPECIALS = 5


@dataclass(frozen=True)
class BertDims:
    vocab_size: int
    hidden: int
    layers: int
    heads: int
    seq_len: int
    dropout: float = 0.1


def _dims(size: Size) -> BertDims:
    if size == "full":
        return BertDims(vocab_size=20_005, hidden=768, layers=12, heads=12, seq_len=128)
    return BertDims(vocab_size=64, hidden=32, layers=2, heads=2, seq_len=16)


@functools.cache
def _classes() -> SimpleNamespace:
    import math

    import torch
    import torch.nn.functional as F
    from torch import nn

    class TokenEmbedding(nn.Embedding):
        def __init__(self, vocab_size: int, embed_size: int = 512):
            super().__init__(vocab_size, embed_size, padding_idx=0)

    class SegmentEmbedding(nn.Embedding):
        def __init__(self, embed_size: int = 512):
            super().__init__(3, embed_size, padding_idx=0)

    class PositionalEmbedding(nn.Module):
        def __init__(self, d_model: int, max_len: int = 512):
            super().__init__()
            pe = torch.zeros(max_len, d_model).float()
            pe.requires_grad = False
            position = torch.arange(0, max_len).float().unsqueeze(1)
            div_term = (torch.arange(0, d_model, 2).float() * -(math.log(10000.0) / d_model)).exp()
            pe[:, 0::2] = torch.sin(position * div_term)
            pe[:, 1::2] = torch.cos(position * div_term)
            self.register_buffer("pe", pe.unsqueeze(0))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.pe[:, : x.size(1)]

    class BERTEmbedding(nn.Module):
        def __init__(self, vocab_size: int, embed_size: int, dropout: float = 0.1):
            super().__init__()
            self.token = TokenEmbedding(vocab_size=vocab_size, embed_size=embed_size)
            self.position = PositionalEmbedding(d_model=self.token.embedding_dim)
            self.segment = SegmentEmbedding(embed_size=self.token.embedding_dim)
            self.dropout = nn.Dropout(p=dropout)
            self.embed_size = embed_size

        def forward(self, sequence: torch.Tensor, segment_label: torch.Tensor) -> torch.Tensor:
            x = self.token(sequence) + self.position(sequence) + self.segment(segment_label)
            return self.dropout(x)

    class Attention(nn.Module):
        """Scaled dot-product attention; ``dropout`` arrives as a module argument."""

        def forward(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                    dropout: nn.Module, mask: torch.Tensor | None = None
                    ) -> tuple[torch.Tensor, torch.Tensor]:
            scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(query.size(-1))
            if mask is not None:
                min_mask = torch.finfo(torch.float16).min if scores.dtype == torch.float16 else -1e9
                scores = scores.masked_fill(mask == 0, min_mask)
            p_attn = F.softmax(scores, dim=-1)
            p_attn = dropout.forward(p_attn)
            return torch.matmul(p_attn, value), p_attn

    class DropoutWrapper(nn.Module):
        def __init__(self, p: float):
            super().__init__()
            self.dropout = nn.Dropout(p=p)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.dropout(x)

    class MultiHeadedAttention(nn.Module):
        def __init__(self, h: int, d_model: int, dropout: float = 0.1):
            super().__init__()
            assert d_model % h == 0
            self.d_k = d_model // h
            self.h = h
            self.linear_layers = nn.ModuleList([nn.Linear(d_model, d_model) for _ in range(3)])
            self.output_linear = nn.Linear(d_model, d_model)
            self.attention = Attention()
            self.dropout = DropoutWrapper(p=dropout)

        def forward(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                    mask: torch.Tensor | None = None) -> torch.Tensor:
            batch_size = query.size(0)
            query, key, value = [
                layer(x).view(batch_size, -1, self.h, self.d_k).transpose(1, 2)
                for layer, x in zip(self.linear_layers, (query, key, value))
            ]
            x, _ = self.attention(query, key, value, self.dropout, mask=mask)
            x = x.transpose(1, 2).contiguous().view(batch_size, -1, self.h * self.d_k)
            return self.output_linear(x)

    class LayerNorm(nn.Module):
        def __init__(self, features: int, eps: float = 1e-6):
            super().__init__()
            self.a_2 = nn.Parameter(torch.ones(features))
            self.b_2 = nn.Parameter(torch.zeros(features))
            self.eps = eps

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            mean = x.mean(-1, keepdim=True)
            std = x.std(-1, keepdim=True)
            return self.a_2 * (x - mean) / (std + self.eps) + self.b_2

    class SublayerConnection(nn.Module):
        """Residual around a pre-norm sublayer."""

        def __init__(self, size: int, dropout: float):
            super().__init__()
            self.norm = LayerNorm(size)
            self.dropout = nn.Dropout(dropout)

        def forward(self, x: torch.Tensor, sublayer: nn.Module) -> torch.Tensor:
            return x + self.dropout(sublayer.forward(self.norm(x)))

    class PositionwiseFeedForward(nn.Module):
        def __init__(self, d_model: int, d_ff: int, dropout: float = 0.1):
            super().__init__()
            self.w_1 = nn.Linear(d_model, d_ff)
            self.w_2 = nn.Linear(d_ff, d_model)
            self.dropout = nn.Dropout(dropout)
            self.activation = nn.GELU()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.w_2(self.dropout(self.activation(self.w_1(x))))

    class LambdaModule(nn.Module):
        """Self-attention as a one-argument sublayer; the mask is stored on the module first."""

        def __init__(self, att: nn.Module):
            super().__init__()
            self.attention = att
            self.mask = torch.zeros(4)

        def set_mask(self, mask: torch.Tensor) -> None:
            self.mask = mask

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.attention.forward(x, x, x, mask=self.mask)

    class TransformerBlock(nn.Module):
        def __init__(self, hidden: int, attn_heads: int, feed_forward_hidden: int, dropout: float):
            super().__init__()
            self.attention = MultiHeadedAttention(h=attn_heads, d_model=hidden)
            self.lambda_module = LambdaModule(self.attention)
            self.feed_forward = PositionwiseFeedForward(d_model=hidden, d_ff=feed_forward_hidden,
                                                        dropout=dropout)
            self.input_sublayer = SublayerConnection(size=hidden, dropout=dropout)
            self.output_sublayer = SublayerConnection(size=hidden, dropout=dropout)
            self.dropout = nn.Dropout(p=dropout)

        def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            self.lambda_module.set_mask(mask)
            x = self.input_sublayer(x, self.lambda_module)
            x = self.output_sublayer(x, self.feed_forward)
            return self.dropout(x)

    class BERT(nn.Module):
        def __init__(self, vocab_size: int, hidden: int = 768, n_layers: int = 12,
                     attn_heads: int = 12, dropout: float = 0.1):
            super().__init__()
            self.hidden = hidden
            self.n_layers = n_layers
            self.attn_heads = attn_heads
            self.feed_forward_hidden = hidden * 4
            self.embedding = BERTEmbedding(vocab_size=vocab_size, embed_size=hidden)
            self.transformer_blocks = nn.ModuleList(
                [TransformerBlock(hidden, attn_heads, hidden * 4, dropout) for _ in range(n_layers)])

        def forward(self, x: torch.Tensor, segment_info: torch.Tensor) -> torch.Tensor:
            mask = (x > 0).unsqueeze(1).repeat(1, x.size(1), 1).unsqueeze(1)
            x = self.embedding(x, segment_info)
            for transformer in self.transformer_blocks:
                x = transformer.forward(x, mask)
            return x

    class NextSentencePrediction(nn.Module):
        def __init__(self, hidden: int):
            super().__init__()
            self.linear = nn.Linear(hidden, 2)
            self.softmax = nn.LogSoftmax(dim=-1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.softmax(self.linear(x[:, 0]).tanh())

    class MaskedLanguageModel(nn.Module):
        def __init__(self, hidden: int, vocab_size: int):
            super().__init__()
            self.linear = nn.Linear(hidden, vocab_size)
            self.softmax = nn.LogSoftmax(dim=-1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.softmax(self.linear(x))

    class BERTLM(nn.Module):
        def __init__(self, bert: BERT, vocab_size: int):
            super().__init__()
            self.bert = bert
            self.next_sentence = NextSentencePrediction(self.bert.hidden)
            self.mask_lm = MaskedLanguageModel(self.bert.hidden, vocab_size)

        def forward(self, x: torch.Tensor, segment_label: torch.Tensor
                    ) -> tuple[torch.Tensor, torch.Tensor]:
            x = self.bert(x, segment_label)
            return self.next_sentence(x), self.mask_lm(x)

    class PretrainStep(nn.Module):
        """``BERTLM`` plus the batch's labels, passed through for the trainer's criterion."""

        def __init__(self, lm: BERTLM):
            super().__init__()
            self.model = lm

        def forward(self, bert_input: torch.Tensor, segment_label: torch.Tensor,
                    is_next: torch.Tensor, bert_label: torch.Tensor
                    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
            next_sent_output, mask_lm_output = self.model.forward(bert_input, segment_label)
            return next_sent_output, mask_lm_output, is_next, bert_label

    return SimpleNamespace(BERT=BERT, BERTLM=BERTLM, PretrainStep=PretrainStep)


@dataclass(frozen=True)
class BertPytorch(Workload):
    def build(self, device: str, batch_size: int, size: Size = "full") -> Any:
        c = _classes()
        d = _dims(size)
        bert = c.BERT(d.vocab_size, hidden=d.hidden, n_layers=d.layers, attn_heads=d.heads,
                      dropout=d.dropout)
        return c.PretrainStep(c.BERTLM(bert, d.vocab_size)).to(device).train()

    def inputs(self, model: Any, sample: int, device: str, batch_size: int,
               size: Size = "full") -> tuple:
        import torch

        d = _dims(size)
        g = generator(device, sample)
        n, seq = batch_size, d.seq_len

        def draw(*shape: int, high: int, low: int = 0) -> torch.Tensor:
            return torch.randint(low, high, shape, device=device, generator=g)

        len1 = draw(n, 1, low=1, high=4)
        len2 = draw(n, 1, low=1, high=4)
        words = draw(n, seq, low=N_SPECIALS, high=d.vocab_size)
        pos = torch.arange(seq, device=device).expand(n, seq)
        eos1 = len1 + 1
        eos2 = len1 + len2 + 2
        is_word = ((pos >= 1) & (pos < eos1)) | ((pos > eos1) & (pos < eos2))
        tokens = torch.where(is_word, words, PAD)
        tokens = torch.where((pos == eos1) | (pos == eos2), EOS, tokens)
        tokens = torch.where(pos == 0, SOS, tokens)
        segment_label = torch.where(pos <= eos1, 1, torch.where(pos <= eos2, 2, PAD))

        prob = torch.rand(n, seq, device=device, generator=g)
        masked = is_word & (prob < 0.15)
        masked[0, 1] |= ~masked.any()
        choice = prob / 0.15
        random_token = draw(n, seq, high=d.vocab_size)
        replaced = torch.where(choice < 0.8, MASK, torch.where(choice < 0.9, random_token, tokens))
        bert_input = torch.where(masked, replaced, tokens)
        bert_label = torch.where(masked, tokens, PAD)

        is_next = draw(n, high=2)
        is_next[0] |= (is_next == 0).all().long()
        return bert_input, segment_label, is_next, bert_label

    def loss(self, output: Any) -> Any:
        import torch.nn.functional as F

        next_sent_output, mask_lm_output, is_next, bert_label = output
        next_loss = F.nll_loss(next_sent_output, is_next, ignore_index=0)
        mask_loss = F.nll_loss(mask_lm_output.transpose(1, 2), bert_label, ignore_index=0)
        return next_loss + mask_loss


register(BertPytorch("BERT", "BERT_pytorch", "torchbench", "training", 16,
                     idiom="none known: mask stored on a module in forward (LambdaModule.set_mask)",
                     stochastic=True))

"""The HuggingFace workloads of the GraCE paper, as PyTorch's HuggingFace benchmark builds them.

The original is ``benchmarks/dynamo/huggingface.py`` in pytorch/pytorch. For a class name from
``huggingface_models_list.txt`` it builds ``model_cls(model_cls.config_class())``, the class's
default config with random weights (no checkpoint is read); the names in its ``EXTRA_MODELS``
come from a hub config instead, and of those only ``DistillGPT2`` is used here:
``AutoModelForCausalLM`` on ``distilgpt2``'s config, which is ``GPT2Config`` with 6 layers
(n_embd 768, 12 heads, 1024 positions, vocabulary 50257), i.e. a ``GPT2LMHeadModel``. After
building it sets ``config.use_cache = False`` where the config has one, and runs
training models in ``train()`` (dropout active) and inference models in ``eval()``. transformers
5.17's MT5 decoder reads ``use_cache`` from its own copy of the config, so that setting no longer
reaches it (eval would return an ``EncoderDecoderCache``); the wrapper below therefore passes
``use_cache=False`` to the models that have it, as 4.x's forward did from the top config.

Full sizes (transformers 5.17 defaults; parameters counted with tied weights once):

=========  ========================================  ======  ===================================
workload   class                                     seq     default config, parameters
=========  ========================================  ======  ===================================
XLNET-I/T  XLNetLMHeadModel                          512     24 x 1024, 16 heads, 360M
MTCG-I/T   MT5ForConditionalGeneration               128     8+8 x 512, 6 heads, vocab 250112, 172M
MBERT      MobileBertForQuestionAnswering            128     24 x 512 (128 bottleneck), 25M
DBV2       DebertaV2ForQuestionAnswering             512     24 x 1536, 24 heads, 878M
BSCG       BlenderbotSmallForConditionalGeneration   128     8+8 x 512, 16 heads, 85M
DGPT2      DistillGPT2 (GPT2LMHeadModel)             512     6 x 768, 12 heads, 82M
DMLM       DebertaForMaskedLM                        512     12 x 768, 12 heads, 125M
=========  ========================================  ======  ===================================

The sequence lengths are those of ``get_sequence_length`` (MT5 matches none of its prefixes
and gets the fallback 128). Inputs follow ``generate_inputs_for_model``, which the benchmark
calls with ``include_loss_args=True`` for inference too, so every workload, inference ones
included, gets its targets and computes its loss: ``input_ids`` uniform in the vocabulary; for
MT5 ``decoder_input_ids`` is the ``input_ids`` tensor itself (BlenderbotSmall's
ConditionalGeneration class is not in the benchmark's list of classes that get one, so its
decoder input is shifted from the labels by the model); ``labels`` uniform in ``[0, vocab)`` for
the MaskedLM / LM-head / DistillGPT2 models and in ``[0, vocab - 1)`` for ConditionalGeneration;
``start_positions``/``end_positions`` uniform in ``[0, seq)`` for QuestionAnswering. No attention
mask is passed. The model is wrapped in a module whose forward takes those tensors positionally
and passes them by keyword; its output is the model's ``ModelOutput`` (loss first), and the
training loss is ``output.loss``, the benchmark's ``pred[0]``. XLNet in ``eval()`` also returns
its 24 ``mems`` (``use_mems_eval`` is on by default), as it did in the benchmark.

Attention implementations as transformers 5.17 picks them by default (as the benchmark would get
them): ``sdpa`` for MT5, MobileBERT, BlenderbotSmall and GPT-2; XLNet and both DeBERTas have
their own attention code (``config._attn_implementation`` reads ``eager``).

What keeps kernels out of CUDA graphs:

* XLNet: in the transformers versions the paper and the benchmark used (4.x), ``XLNetModel``
  builds its relative positional encoding on the CPU (``torch.arange`` without a device, then
  ``pow``/``einsum``/``sin``/``cos``/``cat``/``expand``) and moves it to the GPU with
  ``pos_emb.to(output_h.device)``: the one CPU tensor in XLNET-I's graph that the paper reports.
  transformers 5.x passes ``device=`` to those ``arange`` calls, so here
  ``relative_positional_encoding`` is overridden to call 5.17's own method on the CPU and move
  the result, which restores the 4.x code path; the rest of the model is 5.17's.
* DeBERTa and DeBERTa-v2: every attention layer builds ``torch.tensor(head_dim)`` (a 0-d CPU
  float tensor, ``scaled_size_sqrt``), takes its ``sqrt`` and divides the GPU query or key by it.
* BlenderbotSmall (training): LayerDrop draws ``torch.rand([])`` on the CPU for every encoder and
  decoder layer and branches on it in Python (``if dropout_probability < self.layerdrop``, even
  though layerdrop is 0.0), so Dynamo breaks the graph at every layer: many small graphs.
* The others: none in the model code (positions come from ``torch.arange(..., device=...)`` and
  from buffers). DistillGPT2's forward has one graph break, at ``self.loss_function`` (5.17 finds
  no ``loss_type`` for ``GPT2LMHeadModel`` and logs a warning there), which splits the loss off.

Differences: after building the model, the benchmark sets every ``*drop*`` float of its config to
1e-30; for the list models that is a fresh config object, not the model's, and DistillGPT2's
dropout lives in ``nn.Dropout`` modules made at construction, so dropout stays at the defaults,
as here. transformers 5.17 forces MT5's
``tie_word_embeddings`` on (4.x left ``lm_head`` untied: 300M parameters); the computation is the
same. "tiny" keeps each class and code path with 2 layers, hidden 32, 2 heads, vocabulary 100 and
sequence length 8.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Literal

from grace.bench.workloads import Size, Workload, generator, register, require

Targets = Literal["lm", "seq2seq", "qa"]
TINY_SEQ_LEN = 8
TINY_VOCAB = 100


@dataclass(frozen=True)
class HfSpec:
    """How the benchmark builds one model and what it feeds it."""

    model_cls: str  # the transformers class
    config_cls: str
    seq_len: int  # get_sequence_length
    targets: Targets  # labels in [0, vocab), labels in [0, vocab - 1), or QA start/end positions
    tiny: dict[str, Any]  # config arguments for "tiny"
    full: dict[str, Any] = field(default_factory=dict)  # config arguments for "full" (class defaults)
    decoder_from_input: bool = False  # decoder_input_ids = input_ids
    cpu_positions: bool = False  # XLNet: relative positional encoding built on the CPU (4.x)


_TINY_BERT = {"vocab_size": TINY_VOCAB, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
              "intermediate_size": 64}
_TINY_BART = {"vocab_size": TINY_VOCAB, "d_model": 32, "encoder_layers": 2, "decoder_layers": 2,
              "encoder_attention_heads": 2, "decoder_attention_heads": 2, "encoder_ffn_dim": 64,
              "decoder_ffn_dim": 64}

SPECS: dict[str, HfSpec] = {
    "XLNetLMHeadModel": HfSpec(
        "XLNetLMHeadModel", "XLNetConfig", 512, "lm", cpu_positions=True,
        tiny={"vocab_size": TINY_VOCAB, "d_model": 32, "n_layer": 2, "n_head": 2, "d_inner": 64}),
    "MT5ForConditionalGeneration": HfSpec(
        "MT5ForConditionalGeneration", "MT5Config", 128, "seq2seq", decoder_from_input=True,
        tiny={"vocab_size": TINY_VOCAB, "d_model": 32, "d_kv": 16, "d_ff": 64, "num_layers": 2,
              "num_heads": 2}),
    "MobileBertForQuestionAnswering": HfSpec(
        "MobileBertForQuestionAnswering", "MobileBertConfig", 128, "qa",
        tiny={**_TINY_BERT, "intermediate_size": 16, "embedding_size": 16, "intra_bottleneck_size": 16,
              "true_hidden_size": 16}),
    "DebertaV2ForQuestionAnswering": HfSpec(
        "DebertaV2ForQuestionAnswering", "DebertaV2Config", 512, "qa", tiny=_TINY_BERT),
    "BlenderbotSmallForConditionalGeneration": HfSpec(
        "BlenderbotSmallForConditionalGeneration", "BlenderbotSmallConfig", 128, "seq2seq", tiny=_TINY_BART),
    "DistillGPT2": HfSpec(
        "GPT2LMHeadModel", "GPT2Config", 512, "lm", full={"n_layer": 6, "n_embd": 768, "n_head": 12},
        tiny={"vocab_size": TINY_VOCAB, "n_layer": 2, "n_embd": 32, "n_head": 2, "n_positions": 64,
              "bos_token_id": TINY_VOCAB - 1, "eos_token_id": TINY_VOCAB - 1}),
    "DebertaForMaskedLM": HfSpec(
        "DebertaForMaskedLM", "DebertaConfig", 512, "lm", tiny=_TINY_BERT),
}


@functools.cache
def _classes() -> tuple[type, type]:
    """(PositionalHf, XLNetModelCpuPositions), made with torch and transformers imported."""
    from torch import nn

    transformers = require("transformers", "transformers==5.17.0")

    class PositionalHf(nn.Module):
        """Takes the benchmark's input dict as positional tensors and calls the model by keyword."""

        def __init__(self, model: nn.Module, target_names: tuple[str, ...], decoder_from_input: bool) -> None:
            super().__init__()
            self.model = model
            self.target_names = target_names
            self.decoder_from_input = decoder_from_input
            self.no_cache = hasattr(model.config, "use_cache")

        def forward(self, input_ids, *targets):
            kwargs = dict(zip(self.target_names, targets))
            if self.decoder_from_input:
                kwargs["decoder_input_ids"] = input_ids
            if self.no_cache:
                kwargs["use_cache"] = False
            return self.model(input_ids=input_ids, **kwargs)

    class XLNetModelCpuPositions(transformers.XLNetModel):
        """transformers 4.x's XLNet positions: computed on the CPU, then copied to the model's device."""

        def relative_positional_encoding(self, qlen, klen, bsz=None, device=None):
            pos_emb = super().relative_positional_encoding(qlen, klen, bsz=bsz)
            return pos_emb.to(device)

    return PositionalHf, XLNetModelCpuPositions


def _target_names(targets: Targets) -> tuple[str, ...]:
    return ("start_positions", "end_positions") if targets == "qa" else ("labels",)


@dataclass(frozen=True)
class HfModel(Workload):
    def spec(self) -> HfSpec:
        return SPECS[self.model]

    def seq_len(self, size: Size) -> int:
        return self.spec().seq_len if size == "full" else TINY_SEQ_LEN

    def build(self, device: str, batch_size: int, size: Size = "full") -> Any:
        transformers = require("transformers", "transformers==5.17.0")
        positional_hf, xlnet_cpu_positions = _classes()
        spec = self.spec()
        config = getattr(transformers, spec.config_cls)(**(spec.full if size == "full" else spec.tiny))
        model = getattr(transformers, spec.model_cls)(config)
        if hasattr(model.config, "use_cache"):
            model.config.use_cache = False
        if spec.cpu_positions:
            model.transformer.__class__ = xlnet_cpu_positions
        wrapped = positional_hf(model, _target_names(spec.targets), spec.decoder_from_input).to(device)
        return wrapped.train() if self.kind == "training" else wrapped.eval()

    def inputs(self, model: Any, sample: int, device: str, batch_size: int, size: Size = "full") -> tuple:
        import torch

        spec = self.spec()
        seq_len = self.seq_len(size)
        vocab = model.model.config.vocab_size
        gen = generator(device, sample)

        def randint(high: int, shape: tuple[int, ...]) -> Any:
            return torch.randint(0, high, shape, device=device, dtype=torch.int64, generator=gen)

        input_ids = randint(vocab, (batch_size, seq_len))
        if spec.targets == "qa":
            return (input_ids, randint(seq_len, (batch_size,)), randint(seq_len, (batch_size,)))
        high = vocab - 1 if spec.targets == "seq2seq" else vocab
        return (input_ids, randint(high, (batch_size, seq_len)))

    def loss(self, output: Any) -> Any:
        return output.loss


def _register(name: str, model: str, kind: Literal["inference", "training"], batch_size: int,
              idiom: str) -> None:
    register(HfModel(name, model, "huggingface", kind, batch_size, idiom=idiom,
                     stochastic=kind == "training"))


_XLNET_IDIOM = ("CPU tensor: relative positional encoding built on the CPU (torch.arange without a "
                "device, as in transformers 4.x) and copied with .to(device) each forward")
_DEBERTA_IDIOM = ("CPU scalar tensor: torch.tensor(head_dim) made on the CPU in every attention layer "
                  "(scaled_size_sqrt) and used to divide GPU tensors")

_register("XLNET-I", "XLNetLMHeadModel", "inference", 1, _XLNET_IDIOM)
_register("XLNET-T", "XLNetLMHeadModel", "training", 8, _XLNET_IDIOM)
_register("MTCG-I", "MT5ForConditionalGeneration", "inference", 16,
          "none: relative position buckets from torch.arange on the device")
_register("MTCG-T", "MT5ForConditionalGeneration", "training", 16,
          "none: relative position buckets from torch.arange on the device; dropout")
_register("MBERT", "MobileBertForQuestionAnswering", "inference", 128, "none: position ids from a buffer")
_register("DBV2", "DebertaV2ForQuestionAnswering", "inference", 1, _DEBERTA_IDIOM)
_register("BSCG", "BlenderbotSmallForConditionalGeneration", "training", 64,
          "CPU tensor + data-dependent branch: LayerDrop's torch.rand([]) on the CPU compared in "
          "Python at every layer (graph break per layer); dropout")
_register("DGPT2", "DistillGPT2", "training", 16,
          "none: positions from torch.arange on the device; one graph break at loss_function; dropout")
_register("DMLM", "DebertaForMaskedLM", "training", 8, _DEBERTA_IDIOM)

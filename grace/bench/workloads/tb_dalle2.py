"""TorchBench ``DALLE2_pytorch``: lucidrains' DALL-E 2 sampling one image per prompt (eval).

The original (torchbenchmark/models/DALLE2_pytorch) builds, from lucidrains/DALLE2-pytorch's
``dalle2_pytorch.py`` (the 2023 version TorchBench pins, patched by its ``dalle2_pytorch.patch``
to drop ``tqdm`` and to keep all unets on the GPU, ``one_unet_in_gpu_at_time=False``):

- ``OpenAIClipAdapter()``: OpenAI CLIP ViT-B/32 from ``clip.load`` (pretrained, and in fp16 on
  CUDA, as ``clip.load`` converts its weights there): a 12-layer, width-512, 8-head text
  transformer over 77 tokens of a 49408-token vocabulary, projected to a 512-d embedding. The
  adapter truncates the 256 token ids to 77, masks the text after the first EOS (49407) and
  the 0 ids, and takes the per-token encodings from a forward hook on ``ln_final``.
- ``DiffusionPriorNetwork(dim=512, depth=6, dim_head=64, heads=8)`` (continuous time embedding
  by sinusoids and an MLP, 256 learned null text-encoding slots, a causal transformer with T5
  relative position bias, rotary embedding on 32 of 64 head dims, one shared key/value head
  with a learned null key/value, cosine-sim attention, SwiGLU feed-forward) in
  ``DiffusionPrior(timesteps=1, cond_drop_prob=0.2)`` (cosine schedule, predicts x0,
  ``image_embed_scale = 512 ** 0.5``).
- ``Unet(dim=128, cond_dim=128, dim_mults=(1, 2, 4, 8), text_embed_dim=512,
  cond_on_text_encodings=True)`` and ``Unet(dim=16, cond_dim=128, dim_mults=(1, 2, 4, 8, 16))``
  in ``Decoder(image_sizes=(128, 256), timesteps=1, sample_timesteps=(1, 1),
  image_cond_drop_prob=0.1, text_cond_drop_prob=0.5)``, which recasts them: the first is
  conditioned on the image embedding (4 image tokens plus hiddens added to time) and learns its
  variance (6 output channels), the second is the 128 -> 256 upsampler (low-res image
  concatenated to its input, linear schedule). Both: cross-embed 3/7/15 input convolutions,
  2 time tokens, two resnet blocks per stage with cross-attention on all but the outermost
  stage, pixel-unshuffle downsampling, pixel-shuffle upsampling, a 16-head attention at the
  middle, a zero-initialised output convolution.
- ``DALLE2(prior, decoder)``; the eval iteration is ``model(text)`` on ``randint(0, 49408,
  (batch, 256))`` ids, which samples: CLIP embeds the text repeated twice
  (``prior_num_samples=2``), the prior denoises two image embeddings and keeps the one closer
  to the text embedding, CLIP embeds the text again for the decoder, the first unet samples a
  128x128 image, it is resized (nearest) to 256 and clamped to [0, 1], and the upsampler
  samples the 256x256 image. With one timestep everywhere that is one pass of each network;
  one prompt returns ``images[0]``, of shape (3, 256, 256).

Kept, as in the original: OpenAI CLIP's ``encode_text`` picks each prompt's EOT state with
``x[torch.arange(x.shape[0]), text.argmax(dim=-1)]``, an index tensor made on the CPU in
forward and copied to the GPU by the indexing, twice per iteration (the CPU-to-GPU copy that
keeps CLIP's kernels out of CUDA graphs, paper Sec. 2.3 and Table 2); its causal ``attn_mask``
is a plain CPU tensor attribute (not a buffer, so ``.to(device)`` leaves it behind) that every
block reassigns with ``.to(dtype=x.dtype, device=x.device)`` in forward; fp16 CLIP on CUDA
(its ``LayerNorm`` upcasts to fp32, the adapter returns ``.float()``); the ``ln_final`` hook that
stores the encodings on the adapter, which deletes them after use; ``eval_decorator`` toggling
``train``/``eval`` inside forward; Python-float constants in tensor math (``image_embed_scale``,
the static threshold ``s = 1.`` of ``dynamic_threshold``, the clamp range, guidance scales
compared with ``== 1``); ``torch.full`` timesteps per step; schedule values gathered from
device buffers per timestep; ``prob_mask_like`` keep masks made in forward; the zero
initialisation of the unets' output convolutions (so with random weights their outputs are 0).

Differs, and why: random weights, and only CLIP's text tower (the ViT-B/32 image tower, 88M
parameters, is loaded by the original but never run by this iteration); CLIP's fp16 weights are
made by the same conversion ``clip.load`` applies. The sampling noise is passed in instead of
drawn with ``torch.randn``/``randn_like`` in forward (the prior's and each unet's initial noise,
and one noise tensor per step), so that a compiled and an eager copy given the same sample give
the same images; the RNG kernels are therefore not in the graph. The rotary embedding recomputes
its frequencies per call (the original caches them in a Python dict keyed by length; same
values). Left out, being off this path: the DDIM samplers (``sample_timesteps`` equals
``timesteps``), inpainting, the VQGAN-VAE hooks (``NullVQGanVAE`` is the identity), the
training-only low-res conditioner (blur), gradient checkpointing, the disabled upsample combiner,
``one_unet_in_gpu`` (switched off by TorchBench's patch), and string tokenisation. TorchBench's
patch also iterates timesteps ascending (it drops ``reversed``); with one step that is the same,
and here the loops run descending as upstream does. TorchBench runs the step under
``torch.inference_mode()``, the benchmark under ``no_grad``. Built TorchBench's way from
dalle2-pytorch 1.15.6 (whose code the patch's hunks match, 3 lines off) with a random CLIP, the
original has the same parameters as this module plus the image tower's, name for name (its
unets' down stages hold a ``None`` first), and given this module's weights and noise it returns
the same images (to 1e-6 on the CPU).

For CUDA graphs (seen with torch 2.11 on an H100, full size, batch 1): Dynamo traces an
iteration as one graph, and Inductor moves the CPU ``arange`` to the GPU by itself. The mask is
the trap: its first-call ``.to`` is traced as a side effect that stores a graph output on every
block, so under CUDA graph trees (``mode="reduce-overhead"``) on a model whose first call is the
compiled one, the next call reads a CUDA-graph output that a replay has overwritten and fails
(the stale-state crash of paper Sec. 1); once one eager call has moved the mask, the whole graph
is captured.

"tiny" keeps every code path with a 2-layer width-16 CLIP over 8 of 12 token ids, a 2-layer
prior, unets of dim 8 on 8x8 and 16x16 images, and 2 timesteps in both samplers; its upsampler
uses the cosine schedule, because upstream's linear schedule gives betas above 1 (NaN) for
fewer than 20 timesteps.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections import OrderedDict
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from grace.bench.workloads import Size, Workload, generator, register


@dataclass(frozen=True)
class Dalle2Dims:
    vocab: int  # CLIP vocabulary; the last id is EOT
    context: int  # CLIP context length (ids beyond it are cut off)
    clip_width: int
    clip_heads: int
    clip_layers: int
    embed: int  # CLIP embedding, the prior's dim and the unets' image_embed_dim and text_embed_dim
    text_len: int  # token ids per prompt TorchBench feeds
    prior_depth: int
    prior_dim_head: int
    prior_heads: int
    max_text_len: int  # prior and unet padding length for text encodings
    prior_timesteps: int
    unet_dims: tuple[int, int]
    unet_mults: tuple[tuple[int, ...], tuple[int, ...]]
    cond_dim: int
    image_sizes: tuple[int, int]
    decoder_timesteps: int
    beta_schedules: tuple[str, str]
    attn_heads: int  # unet middle self-attention
    attn_dim_head: int
    cross_heads: int  # unet resnet-block cross-attention
    cross_dim_head: int


def _dims(size: Size) -> Dalle2Dims:
    if size == "full":
        return Dalle2Dims(vocab=49408, context=77, clip_width=512, clip_heads=8, clip_layers=12, embed=512,
                          text_len=256, prior_depth=6, prior_dim_head=64, prior_heads=8, max_text_len=256,
                          prior_timesteps=1, unet_dims=(128, 16), unet_mults=((1, 2, 4, 8), (1, 2, 4, 8, 16)),
                          cond_dim=128, image_sizes=(128, 256), decoder_timesteps=1,
                          beta_schedules=("cosine", "linear"), attn_heads=16, attn_dim_head=32,
                          cross_heads=8, cross_dim_head=64)
    return Dalle2Dims(vocab=64, context=8, clip_width=16, clip_heads=2, clip_layers=2, embed=16, text_len=12,
                      prior_depth=2, prior_dim_head=8, prior_heads=2, max_text_len=12, prior_timesteps=2,
                      unet_dims=(8, 8), unet_mults=((1, 2), (1, 2)), cond_dim=8, image_sizes=(8, 16),
                      decoder_timesteps=2, beta_schedules=("cosine", "cosine"), attn_heads=2, attn_dim_head=4,
                      cross_heads=2, cross_dim_head=4)


PRIOR_NUM_SAMPLES = 2
CHANNELS = 3


@functools.cache
def _classes() -> SimpleNamespace:
    import torch
    import torch.nn.functional as F
    from torch import nn

    def exists(val: Any) -> bool:
        return val is not None

    def l2norm(t: torch.Tensor) -> torch.Tensor:
        return F.normalize(t, dim=-1)

    def cast_tuple(val: Any, length: int) -> tuple:
        return tuple(val) if isinstance(val, (tuple, list)) else (val,) * length

    def eval_decorator(fn: Any) -> Any:
        @functools.wraps(fn)
        def inner(model: nn.Module, *args: Any, **kwargs: Any) -> Any:
            was_training = model.training
            model.eval()
            out = fn(model, *args, **kwargs)
            model.train(was_training)
            return out
        return inner

    def prob_mask_like(shape: tuple[int, ...], prob: float, device: torch.device) -> torch.Tensor:
        if prob == 1:
            return torch.ones(shape, device=device, dtype=torch.bool)
        if prob == 0:
            return torch.zeros(shape, device=device, dtype=torch.bool)
        return torch.zeros(shape, device=device).float().uniform_(0, 1) < prob

    def extract(a: torch.Tensor, t: torch.Tensor, x_shape: torch.Size) -> torch.Tensor:
        return a.gather(-1, t).reshape(t.shape[0], *((1,) * (len(x_shape) - 1)))

    def resize_image_to(image: torch.Tensor, target_image_size: int,
                        clamp_range: tuple[float, float] | None = None) -> torch.Tensor:
        if image.shape[-1] == target_image_size:
            return image
        out = F.interpolate(image, target_image_size, mode="nearest")
        if exists(clamp_range):
            out = out.clamp(*clamp_range)
        return out

    def normalize_neg_one_to_one(img: torch.Tensor) -> torch.Tensor:
        return img * 2 - 1

    def unnormalize_zero_to_one(normed_img: torch.Tensor) -> torch.Tensor:
        return (normed_img + 1) * 0.5

    # OpenAI CLIP's text tower, as clip/model.py has it

    class ClipLayerNorm(nn.LayerNorm):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            orig_type = x.dtype
            return super().forward(x.type(torch.float32)).type(orig_type)

    class QuickGELU(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * torch.sigmoid(1.702 * x)

    class ResidualAttentionBlock(nn.Module):
        def __init__(self, d_model: int, n_head: int, attn_mask: torch.Tensor | None) -> None:
            super().__init__()
            self.attn = nn.MultiheadAttention(d_model, n_head)
            self.ln_1 = ClipLayerNorm(d_model)
            self.mlp = nn.Sequential(OrderedDict([
                ("c_fc", nn.Linear(d_model, d_model * 4)),
                ("gelu", QuickGELU()),
                ("c_proj", nn.Linear(d_model * 4, d_model)),
            ]))
            self.ln_2 = ClipLayerNorm(d_model)
            self.attn_mask = attn_mask  # a plain attribute: .to(device) leaves it on the CPU

        def attention(self, x: torch.Tensor) -> torch.Tensor:
            if self.attn_mask is not None:
                self.attn_mask = self.attn_mask.to(dtype=x.dtype, device=x.device)
            return self.attn(x, x, x, need_weights=False, attn_mask=self.attn_mask)[0]

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = x + self.attention(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class ClipTransformer(nn.Module):
        def __init__(self, width: int, layers: int, heads: int, attn_mask: torch.Tensor) -> None:
            super().__init__()
            self.width = width
            self.layers = layers
            self.resblocks = nn.Sequential(*[ResidualAttentionBlock(width, heads, attn_mask)
                                             for _ in range(layers)])

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.resblocks(x)

    class ClipText(nn.Module):
        """CLIP without its image tower: what ``encode_text`` runs."""

        def __init__(self, d: Dalle2Dims) -> None:
            super().__init__()
            self.context_length = d.context
            self.transformer = ClipTransformer(d.clip_width, d.clip_layers, d.clip_heads,
                                               self.build_attention_mask())
            self.vocab_size = d.vocab
            self.token_embedding = nn.Embedding(d.vocab, d.clip_width)
            self.positional_embedding = nn.Parameter(torch.empty(d.context, d.clip_width))
            self.ln_final = ClipLayerNorm(d.clip_width)
            self.text_projection = nn.Parameter(torch.empty(d.clip_width, d.embed))
            self.logit_scale = nn.Parameter(torch.ones([]) * math.log(1 / 0.07))
            self.initialize_parameters()

        def initialize_parameters(self) -> None:
            nn.init.normal_(self.token_embedding.weight, std=0.02)
            nn.init.normal_(self.positional_embedding, std=0.01)
            width, layers = self.transformer.width, self.transformer.layers
            proj_std = (width ** -0.5) * ((2 * layers) ** -0.5)
            for block in self.transformer.resblocks:
                nn.init.normal_(block.attn.in_proj_weight, std=width ** -0.5)
                nn.init.normal_(block.attn.out_proj.weight, std=proj_std)
                nn.init.normal_(block.mlp.c_fc.weight, std=(2 * width) ** -0.5)
                nn.init.normal_(block.mlp.c_proj.weight, std=proj_std)
            nn.init.normal_(self.text_projection, std=width ** -0.5)

        def build_attention_mask(self) -> torch.Tensor:
            mask = torch.empty(self.context_length, self.context_length)
            mask.fill_(float("-inf"))
            return mask.triu_(1)

        @property
        def dtype(self) -> torch.dtype:
            return self.text_projection.dtype  # the original asks its image tower's conv1

        def encode_text(self, text: torch.Tensor) -> torch.Tensor:
            x = self.token_embedding(text).type(self.dtype)
            x = x + self.positional_embedding.type(self.dtype)
            x = x.permute(1, 0, 2)
            x = self.transformer(x)
            x = x.permute(1, 0, 2)
            x = self.ln_final(x).type(self.dtype)
            return x[torch.arange(x.shape[0]), text.argmax(dim=-1)] @ self.text_projection

    def convert_weights_to_fp16(model: nn.Module) -> None:
        """What ``clip.load`` does to the model on CUDA."""
        def to_half(layer: nn.Module) -> None:
            if isinstance(layer, (nn.Conv1d, nn.Conv2d, nn.Linear)):
                layer.weight.data = layer.weight.data.half()
                if layer.bias is not None:
                    layer.bias.data = layer.bias.data.half()
            if isinstance(layer, nn.MultiheadAttention):
                for attr in ("in_proj_weight", "q_proj_weight", "k_proj_weight", "v_proj_weight",
                             "in_proj_bias", "bias_k", "bias_v"):
                    tensor = getattr(layer, attr)
                    if tensor is not None:
                        tensor.data = tensor.data.half()
            for name in ("text_projection", "proj"):
                attr = getattr(layer, name, None)
                if attr is not None:
                    attr.data = attr.data.half()

        model.apply(to_half)

    class OpenAIClipAdapter(nn.Module):
        def __init__(self, clip: ClipText, eos_id: int) -> None:
            super().__init__()
            self.clip = clip
            self.eos_id = eos_id
            text_attention_final = dict(self.clip.named_modules())["ln_final"]
            self.dim_latent_ = text_attention_final.weight.shape[0]
            self.handle = text_attention_final.register_forward_hook(self._hook)
            self.cleared = False

        def _hook(self, _: nn.Module, inputs: Any, outputs: torch.Tensor) -> None:
            self.text_encodings = outputs

        @property
        def dim_latent(self) -> int:
            return self.dim_latent_

        @property
        def max_text_len(self) -> int:
            return self.clip.context_length

        @torch.no_grad()
        def embed_text(self, text: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            text = text[..., :self.max_text_len]
            is_eos_id = text == self.eos_id
            text_mask_excluding_eos = is_eos_id.cumsum(dim=-1) == 0
            text_mask = F.pad(text_mask_excluding_eos, (1, -1), value=True)
            text_mask = text_mask & (text != 0)
            assert not self.cleared
            text_embed = self.clip.encode_text(text)
            text_encodings = self.text_encodings
            text_encodings = text_encodings.masked_fill(~text_mask[..., None], 0.)
            del self.text_encodings
            return l2norm(text_embed.float()), text_encodings.float()

    # gaussian diffusion

    def beta_schedule(kind: str, timesteps: int) -> torch.Tensor:
        if kind == "cosine":
            s = 0.008
            x = torch.linspace(0, timesteps, timesteps + 1, dtype=torch.float64)
            alphas_cumprod = torch.cos(((x / timesteps) + s) / (1 + s) * torch.pi * 0.5) ** 2
            alphas_cumprod = alphas_cumprod / alphas_cumprod[0]
            return torch.clip(1 - (alphas_cumprod[1:] / alphas_cumprod[:-1]), 0, 0.999)
        if kind == "linear":
            scale = 1000 / timesteps
            return torch.linspace(scale * 0.0001, scale * 0.02, timesteps, dtype=torch.float64)
        raise NotImplementedError(kind)

    class NoiseScheduler(nn.Module):
        def __init__(self, *, beta_schedule_name: str, timesteps: int, p2_loss_weight_gamma: float = 0.,
                     p2_loss_weight_k: float = 1) -> None:
            super().__init__()
            betas = beta_schedule(beta_schedule_name, timesteps)
            alphas = 1. - betas
            alphas_cumprod = torch.cumprod(alphas, dim=0)
            alphas_cumprod_prev = F.pad(alphas_cumprod[:-1], (1, 0), value=1.)
            self.num_timesteps = int(betas.shape[0])

            def buffer(name: str, val: torch.Tensor) -> None:
                self.register_buffer(name, val.to(torch.float32))

            buffer("betas", betas)
            buffer("alphas_cumprod", alphas_cumprod)
            buffer("alphas_cumprod_prev", alphas_cumprod_prev)
            buffer("sqrt_alphas_cumprod", torch.sqrt(alphas_cumprod))
            buffer("sqrt_one_minus_alphas_cumprod", torch.sqrt(1. - alphas_cumprod))
            buffer("log_one_minus_alphas_cumprod", torch.log(1. - alphas_cumprod))
            buffer("sqrt_recip_alphas_cumprod", torch.sqrt(1. / alphas_cumprod))
            buffer("sqrt_recipm1_alphas_cumprod", torch.sqrt(1. / alphas_cumprod - 1))
            posterior_variance = betas * (1. - alphas_cumprod_prev) / (1. - alphas_cumprod)
            buffer("posterior_variance", posterior_variance)
            buffer("posterior_log_variance_clipped", torch.log(posterior_variance.clamp(min=1e-20)))
            buffer("posterior_mean_coef1", betas * torch.sqrt(alphas_cumprod_prev) / (1. - alphas_cumprod))
            buffer("posterior_mean_coef2",
                   (1. - alphas_cumprod_prev) * torch.sqrt(alphas) / (1. - alphas_cumprod))
            buffer("p2_loss_weight",
                   (p2_loss_weight_k + alphas_cumprod / (1 - alphas_cumprod)) ** -p2_loss_weight_gamma)

        def q_posterior(self, x_start: torch.Tensor, x_t: torch.Tensor,
                        t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
            posterior_mean = (extract(self.posterior_mean_coef1, t, x_t.shape) * x_start
                              + extract(self.posterior_mean_coef2, t, x_t.shape) * x_t)
            posterior_variance = extract(self.posterior_variance, t, x_t.shape)
            posterior_log_variance_clipped = extract(self.posterior_log_variance_clipped, t, x_t.shape)
            return posterior_mean, posterior_variance, posterior_log_variance_clipped

        def predict_start_from_noise(self, x_t: torch.Tensor, t: torch.Tensor,
                                     noise: torch.Tensor) -> torch.Tensor:
            return (extract(self.sqrt_recip_alphas_cumprod, t, x_t.shape) * x_t
                    - extract(self.sqrt_recipm1_alphas_cumprod, t, x_t.shape) * noise)

    # diffusion prior

    class LayerNorm(nn.Module):
        def __init__(self, dim: int, eps: float = 1e-5, fp16_eps: float = 1e-3, stable: bool = False) -> None:
            super().__init__()
            self.eps = eps
            self.fp16_eps = fp16_eps
            self.stable = stable
            self.g = nn.Parameter(torch.ones(dim))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            eps = self.eps if x.dtype == torch.float32 else self.fp16_eps
            if self.stable:
                x = x / x.amax(dim=-1, keepdim=True).detach()
            var = torch.var(x, dim=-1, unbiased=False, keepdim=True)
            mean = torch.mean(x, dim=-1, keepdim=True)
            return (x - mean) * (var + eps).rsqrt() * self.g

    class Residual(nn.Module):
        def __init__(self, fn: nn.Module) -> None:
            super().__init__()
            self.fn = fn

        def forward(self, x: torch.Tensor, **kwargs: Any) -> torch.Tensor:
            return self.fn(x, **kwargs) + x

    class MLP(nn.Module):
        def __init__(self, dim_in: int, dim_out: int, *, expansion_factor: float = 2.,
                     depth: int = 2) -> None:
            super().__init__()
            hidden_dim = int(expansion_factor * dim_out)
            layers = [nn.Sequential(nn.Linear(dim_in, hidden_dim), nn.SiLU(), nn.Identity())]
            for _ in range(depth - 1):
                layers.append(nn.Sequential(nn.Linear(hidden_dim, hidden_dim), nn.SiLU(), nn.Identity()))
            layers.append(nn.Linear(hidden_dim, dim_out))
            self.net = nn.Sequential(*layers)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.net(x.float())

    class RelPosBias(nn.Module):
        def __init__(self, heads: int = 8, num_buckets: int = 32, max_distance: int = 128) -> None:
            super().__init__()
            self.num_buckets = num_buckets
            self.max_distance = max_distance
            self.relative_attention_bias = nn.Embedding(num_buckets, heads)

        @staticmethod
        def _relative_position_bucket(relative_position: torch.Tensor, num_buckets: int,
                                      max_distance: int) -> torch.Tensor:
            n = -relative_position
            n = torch.max(n, torch.zeros_like(n))
            max_exact = num_buckets // 2
            is_small = n < max_exact
            val_if_large = max_exact + (torch.log(n.float() / max_exact) / math.log(max_distance / max_exact)
                                        * (num_buckets - max_exact)).long()
            val_if_large = torch.min(val_if_large, torch.full_like(val_if_large, num_buckets - 1))
            return torch.where(is_small, n, val_if_large)

        def forward(self, i: int, j: int, *, device: torch.device) -> torch.Tensor:
            q_pos = torch.arange(i, dtype=torch.long, device=device)
            k_pos = torch.arange(j, dtype=torch.long, device=device)
            rel_pos = k_pos[None, :] - q_pos[:, None]
            rp_bucket = self._relative_position_bucket(rel_pos, self.num_buckets, self.max_distance)
            return self.relative_attention_bias(rp_bucket).permute(2, 0, 1)

    def rotate_half(x: torch.Tensor) -> torch.Tensor:
        x1, x2 = x.unflatten(-1, (-1, 2)).unbind(dim=-1)
        return torch.stack((-x2, x1), dim=-1).flatten(-2)

    class RotaryEmbedding(nn.Module):
        """rotary-embedding-torch's ``RotaryEmbedding(dim)`` for language (theta 10000)."""

        def __init__(self, dim: int, theta: float = 10000) -> None:
            super().__init__()
            freqs = 1. / (theta ** (torch.arange(0, dim, 2)[:dim // 2].float() / dim))
            self.freqs = nn.Parameter(freqs, requires_grad=False)

        def rotate_queries_or_keys(self, t: torch.Tensor, seq_dim: int = -2) -> torch.Tensor:
            seq_len = t.shape[seq_dim]
            positions = torch.arange(seq_len, device=t.device, dtype=t.dtype)
            freqs = positions.type(self.freqs.dtype)[:, None] * self.freqs
            freqs = freqs.repeat_interleave(2, dim=-1)
            rot_dim = freqs.shape[-1]
            t_rot, t_pass = t[..., :rot_dim], t[..., rot_dim:]
            t_rot = (t_rot * freqs.cos()) + (rotate_half(t_rot) * freqs.sin())
            return torch.cat((t_rot, t_pass), dim=-1)

    class SwiGLU(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x, gate = x.chunk(2, dim=-1)
            return x * F.silu(gate)

    def FeedForward(dim: int, mult: int = 4, dropout: float = 0.) -> nn.Sequential:
        inner_dim = int(mult * dim)
        return nn.Sequential(LayerNorm(dim), nn.Linear(dim, inner_dim * 2, bias=False), SwiGLU(),
                             nn.Identity(), nn.Dropout(dropout), nn.Linear(inner_dim, dim, bias=False))

    class Attention(nn.Module):
        """One query head per head, one shared key/value head with a learned null key/value."""

        def __init__(self, dim: int, *, dim_head: int = 64, heads: int = 8, dropout: float = 0.,
                     causal: bool = False, rotary_emb: RotaryEmbedding | None = None, cosine_sim: bool = True,
                     cosine_sim_scale: float = 16) -> None:
            super().__init__()
            self.scale = cosine_sim_scale if cosine_sim else (dim_head ** -0.5)
            self.cosine_sim = cosine_sim
            self.heads = heads
            inner_dim = dim_head * heads
            self.causal = causal
            self.norm = LayerNorm(dim)
            self.dropout = nn.Dropout(dropout)
            self.null_kv = nn.Parameter(torch.randn(2, dim_head))
            self.to_q = nn.Linear(dim, inner_dim, bias=False)
            self.to_kv = nn.Linear(dim, dim_head * 2, bias=False)
            self.rotary_emb = rotary_emb
            self.to_out = nn.Sequential(nn.Linear(inner_dim, dim, bias=False), LayerNorm(dim))

        def forward(self, x: torch.Tensor, attn_bias: torch.Tensor | None = None) -> torch.Tensor:
            b, device = x.shape[0], x.device
            x = self.norm(x)
            q = self.to_q(x)
            k, v = self.to_kv(x).chunk(2, dim=-1)
            q = q.unflatten(-1, (self.heads, -1)).transpose(1, 2)
            q = q * self.scale
            if exists(self.rotary_emb):
                q = self.rotary_emb.rotate_queries_or_keys(q)
                k = self.rotary_emb.rotate_queries_or_keys(k)
            nk, nv = (t.expand(b, 1, -1) for t in self.null_kv.unbind(dim=-2))
            k = torch.cat((nk, k), dim=-2)
            v = torch.cat((nv, v), dim=-2)
            if self.cosine_sim:
                q, k = l2norm(q), l2norm(k)
            q, k = q * math.sqrt(self.scale), k * math.sqrt(self.scale)
            sim = torch.einsum("bhid,bjd->bhij", q, k)
            if exists(attn_bias):
                sim = sim + attn_bias
            max_neg_value = -torch.finfo(sim.dtype).max
            if self.causal:
                i, j = sim.shape[-2:]
                causal_mask = torch.ones((i, j), dtype=torch.bool, device=device).triu(j - i + 1)
                sim = sim.masked_fill(causal_mask, max_neg_value)
            attn = sim.softmax(dim=-1, dtype=torch.float32).type(sim.dtype)
            attn = self.dropout(attn)
            out = torch.einsum("bhij,bjd->bhid", attn, v)
            return self.to_out(out.transpose(1, 2).flatten(2))

    class CausalTransformer(nn.Module):
        def __init__(self, *, dim: int, depth: int, dim_head: int = 64, heads: int = 8,
                     ff_mult: int = 4) -> None:
            super().__init__()
            self.init_norm = nn.Identity()
            self.rel_pos_bias = RelPosBias(heads=heads)
            rotary_emb = RotaryEmbedding(dim=min(32, dim_head))
            self.layers = nn.ModuleList([
                nn.ModuleList([Attention(dim=dim, causal=True, dim_head=dim_head, heads=heads,
                                         rotary_emb=rotary_emb),
                               FeedForward(dim=dim, mult=ff_mult)])
                for _ in range(depth)])
            self.norm = LayerNorm(dim, stable=True)
            self.project_out = nn.Linear(dim, dim, bias=False)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            n, device = x.shape[1], x.device
            x = self.init_norm(x)
            attn_bias = self.rel_pos_bias(n, n + 1, device=device)
            for attn, ff in self.layers:
                x = attn(x, attn_bias=attn_bias) + x
                x = ff(x) + x
            return self.project_out(self.norm(x))

    class SinusoidalPosEmb(nn.Module):
        def __init__(self, dim: int) -> None:
            super().__init__()
            self.dim = dim

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            dtype, device = x.dtype, x.device
            assert dtype.is_floating_point, "input to sinusoidal pos emb must be a float type"
            half_dim = self.dim // 2
            emb = math.log(10000) / (half_dim - 1)
            emb = torch.exp(torch.arange(half_dim, device=device, dtype=dtype) * -emb)
            emb = x[:, None] * emb[None, :]
            return torch.cat((emb.sin(), emb.cos()), dim=-1).type(dtype)

    class DiffusionPriorNetwork(nn.Module):
        def __init__(self, dim: int, *, num_time_embeds: int = 1, num_image_embeds: int = 1,
                     num_text_embeds: int = 1, max_text_len: int = 256, **kwargs: Any) -> None:
            super().__init__()
            self.dim = dim
            self.num_time_embeds = num_time_embeds
            self.num_image_embeds = num_image_embeds
            self.num_text_embeds = num_text_embeds
            self.to_text_embeds = nn.Sequential(
                nn.Linear(dim, dim * num_text_embeds) if num_text_embeds > 1 else nn.Identity(),
                nn.Unflatten(-1, (num_text_embeds, dim)))
            self.to_time_embeds = nn.Sequential(
                nn.Sequential(SinusoidalPosEmb(dim), MLP(dim, dim * num_time_embeds)),
                nn.Unflatten(-1, (num_time_embeds, dim)))
            self.to_image_embeds = nn.Sequential(
                nn.Linear(dim, dim * num_image_embeds) if num_image_embeds > 1 else nn.Identity(),
                nn.Unflatten(-1, (num_image_embeds, dim)))
            self.learned_query = nn.Parameter(torch.randn(dim))
            self.causal_transformer = CausalTransformer(dim=dim, **kwargs)
            self.max_text_len = max_text_len
            self.null_text_encodings = nn.Parameter(torch.randn(1, max_text_len, dim))
            self.null_text_embeds = nn.Parameter(torch.randn(1, num_text_embeds, dim))
            self.null_image_embed = nn.Parameter(torch.randn(1, dim))
            self.self_cond = False

        def forward_with_cond_scale(self, *args: Any, cond_scale: float = 1., **kwargs: Any) -> torch.Tensor:
            logits = self.forward(*args, **kwargs)
            if cond_scale == 1:
                return logits
            null_logits = self.forward(*args, text_cond_drop_prob=1., image_cond_drop_prob=1, **kwargs)
            return null_logits + (logits - null_logits) * cond_scale

        def forward(self, image_embed: torch.Tensor, diffusion_timesteps: torch.Tensor, *,
                    text_embed: torch.Tensor, text_encodings: torch.Tensor | None = None,
                    self_cond: torch.Tensor | None = None, text_cond_drop_prob: float = 0.,
                    image_cond_drop_prob: float = 0.) -> torch.Tensor:
            batch, dim = image_embed.shape
            device, dtype = image_embed.device, image_embed.dtype
            text_embed = self.to_text_embeds(text_embed)
            image_embed = self.to_image_embeds(image_embed)
            text_keep_mask = prob_mask_like((batch,), 1 - text_cond_drop_prob, device=device)[:, None, None]
            image_keep_mask = prob_mask_like((batch,), 1 - image_cond_drop_prob, device=device)[:, None, None]
            if not exists(text_encodings):
                text_encodings = torch.empty((batch, 0, dim), device=device, dtype=dtype)
            mask = torch.any(text_encodings != 0., dim=-1)
            text_encodings = text_encodings[:, :self.max_text_len]
            mask = mask[:, :self.max_text_len]
            remainder = self.max_text_len - text_encodings.shape[-2]
            if remainder > 0:
                text_encodings = F.pad(text_encodings, (0, 0, 0, remainder), value=0.)
                mask = F.pad(mask, (0, remainder), value=False)
            text_encodings = torch.where(mask[:, :, None].clone() & text_keep_mask, text_encodings,
                                         self.null_text_encodings.to(text_encodings.dtype))
            text_embed = torch.where(text_keep_mask, text_embed, self.null_text_embeds.to(text_embed.dtype))
            image_embed = torch.where(image_keep_mask, image_embed,
                                      self.null_image_embed.to(image_embed.dtype))
            time_embed = self.to_time_embeds(diffusion_timesteps.type(dtype))
            learned_queries = self.learned_query.expand(batch, 1, -1)
            tokens = torch.cat((text_encodings, text_embed, time_embed, image_embed, learned_queries), dim=-2)
            tokens = self.causal_transformer(tokens)
            return tokens[..., -1, :]

    class DiffusionPrior(nn.Module):
        def __init__(self, net: DiffusionPriorNetwork, *, clip: OpenAIClipAdapter, timesteps: int = 1000,
                     cond_drop_prob: float = 0., beta_schedule_name: str = "cosine") -> None:
            super().__init__()
            self.sample_timesteps = None
            self.noise_scheduler = NoiseScheduler(beta_schedule_name=beta_schedule_name, timesteps=timesteps)
            clip.eval()
            clip.requires_grad_(False)
            self.clip = clip
            self.net = net
            self.image_embed_dim = clip.dim_latent
            assert net.dim == self.image_embed_dim
            self.text_cond_drop_prob = cond_drop_prob
            self.image_cond_drop_prob = cond_drop_prob
            self.can_classifier_guidance = self.text_cond_drop_prob > 0. and self.image_cond_drop_prob > 0.
            self.condition_on_text_encodings = True
            self.predict_x_start = True
            self.image_embed_scale = self.image_embed_dim ** 0.5
            self.sampling_clamp_l2norm = False
            self.sampling_final_clamp_l2norm = False
            self.init_image_embed_l2norm = False
            self.register_buffer("_dummy", torch.tensor([True]), persistent=False)

        @property
        def device(self) -> torch.device:
            return self._dummy.device

        def p_mean_variance(self, x: torch.Tensor, t: torch.Tensor, text_cond: dict, self_cond: Any = None,
                            clip_denoised: bool = False, cond_scale: float = 1.) -> tuple:
            assert not (cond_scale != 1. and not self.can_classifier_guidance)
            pred = self.net.forward_with_cond_scale(x, t, cond_scale=cond_scale, self_cond=self_cond,
                                                    **text_cond)
            if self.predict_x_start:
                x_start = pred
            else:
                x_start = self.noise_scheduler.predict_start_from_noise(x, t=t, noise=pred)
            if clip_denoised and not self.predict_x_start:
                x_start.clamp_(-1., 1.)
            if self.predict_x_start and self.sampling_clamp_l2norm:
                x_start = l2norm(x_start) * self.image_embed_scale
            model_mean, posterior_variance, posterior_log_variance = self.noise_scheduler.q_posterior(
                x_start=x_start, x_t=x, t=t)
            return model_mean, posterior_variance, posterior_log_variance, x_start

        @torch.no_grad()
        def p_sample(self, x: torch.Tensor, t: torch.Tensor, noise: torch.Tensor, text_cond: dict,
                     self_cond: Any = None, clip_denoised: bool = True,
                     cond_scale: float = 1.) -> tuple[torch.Tensor, torch.Tensor]:
            b = x.shape[0]
            model_mean, _, model_log_variance, x_start = self.p_mean_variance(
                x=x, t=t, text_cond=text_cond, self_cond=self_cond, clip_denoised=clip_denoised,
                cond_scale=cond_scale)
            nonzero_mask = (1 - (t == 0).float()).reshape(b, *((1,) * (len(x.shape) - 1)))
            return model_mean + nonzero_mask * (0.5 * model_log_variance).exp() * noise, x_start

        @torch.no_grad()
        def p_sample_loop(self, shape: tuple[int, int], text_cond: dict, init: torch.Tensor,
                          noise: torch.Tensor, cond_scale: float = 1.) -> torch.Tensor:
            batch, device = shape[0], self.device
            num_timesteps = self.noise_scheduler.num_timesteps
            assert init.shape == shape and noise.shape == (num_timesteps, *shape)
            image_embed = init
            x_start = None
            if self.init_image_embed_l2norm:
                image_embed = l2norm(image_embed) * self.image_embed_scale
            for step, i in enumerate(reversed(range(num_timesteps))):
                times = torch.full((batch,), i, device=device, dtype=torch.long)
                self_cond = x_start if self.net.self_cond else None
                image_embed, x_start = self.p_sample(image_embed, times, noise[step], text_cond=text_cond,
                                                     self_cond=self_cond, cond_scale=cond_scale)
            if self.sampling_final_clamp_l2norm and self.predict_x_start:
                image_embed = l2norm(image_embed) * self.image_embed_scale
            return image_embed / self.image_embed_scale

        @torch.no_grad()
        @eval_decorator
        def sample(self, text: torch.Tensor, init: torch.Tensor, noise: torch.Tensor,
                   num_samples_per_batch: int = 2, cond_scale: float = 1.) -> torch.Tensor:
            text = text.repeat_interleave(num_samples_per_batch, dim=0)
            batch_size = text.shape[0]
            image_embed_dim = self.image_embed_dim
            text_embed, text_encodings = self.clip.embed_text(text)
            text_cond = {"text_embed": text_embed}
            if self.condition_on_text_encodings:
                text_cond = {**text_cond, "text_encodings": text_encodings}
            image_embeds = self.p_sample_loop((batch_size, image_embed_dim), text_cond, init, noise,
                                              cond_scale=cond_scale)
            text_embeds = text_cond["text_embed"].unflatten(0, (-1, num_samples_per_batch))
            image_embeds = image_embeds.unflatten(0, (-1, num_samples_per_batch))
            text_image_sims = torch.einsum("brd,brd->br", l2norm(text_embeds), l2norm(image_embeds))
            top_sim_indices = text_image_sims.topk(k=1).indices
            top_sim_indices = top_sim_indices[:, :, None].expand(-1, -1, image_embed_dim)
            return image_embeds.gather(1, top_sim_indices)[:, 0]

    # decoder

    class PixelShuffleUpsample(nn.Module):
        def __init__(self, dim: int, dim_out: int | None = None) -> None:
            super().__init__()
            dim_out = dim if dim_out is None else dim_out
            conv = nn.Conv2d(dim, dim_out * 4, 1)
            self.net = nn.Sequential(conv, nn.SiLU(), nn.PixelShuffle(2))
            self.init_conv_(conv)

        def init_conv_(self, conv: nn.Conv2d) -> None:
            o, i, h, w = conv.weight.shape
            conv_weight = torch.empty(o // 4, i, h, w)
            nn.init.kaiming_uniform_(conv_weight)
            conv.weight.data.copy_(conv_weight.repeat_interleave(4, dim=0))
            nn.init.zeros_(conv.bias.data)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.net(x)

    def Downsample(dim: int, dim_out: int) -> nn.Sequential:
        return nn.Sequential(nn.PixelUnshuffle(2), nn.Conv2d(dim * 4, dim_out, 1))

    class Block(nn.Module):
        def __init__(self, dim: int, dim_out: int, groups: int = 8) -> None:
            super().__init__()
            self.project = nn.Conv2d(dim, dim_out, 3, padding=1)
            self.norm = nn.GroupNorm(groups, dim_out)
            self.act = nn.SiLU()

        def forward(self, x: torch.Tensor, scale_shift: tuple[torch.Tensor, torch.Tensor] | None = None
                    ) -> torch.Tensor:
            x = self.norm(self.project(x))
            if exists(scale_shift):
                scale, shift = scale_shift
                x = x * (scale + 1) + shift
            return self.act(x)

    class CrossAttention(nn.Module):
        def __init__(self, dim: int, *, context_dim: int, dim_head: int = 64, heads: int = 8,
                     dropout: float = 0., cosine_sim: bool = False, cosine_sim_scale: float = 16) -> None:
            super().__init__()
            self.cosine_sim = cosine_sim
            self.scale = cosine_sim_scale if cosine_sim else (dim_head ** -0.5)
            self.heads = heads
            inner_dim = dim_head * heads
            self.norm = LayerNorm(dim)
            self.norm_context = nn.Identity()
            self.dropout = nn.Dropout(dropout)
            self.null_kv = nn.Parameter(torch.randn(2, dim_head))
            self.to_q = nn.Linear(dim, inner_dim, bias=False)
            self.to_kv = nn.Linear(context_dim, inner_dim * 2, bias=False)
            self.to_out = nn.Sequential(nn.Linear(inner_dim, dim, bias=False), LayerNorm(dim))

        def forward(self, x: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
            b = x.shape[0]
            x = self.norm(x)
            context = self.norm_context(context)
            q = self.to_q(x)
            k, v = self.to_kv(context).chunk(2, dim=-1)
            q, k, v = (t.unflatten(-1, (self.heads, -1)).transpose(1, 2) for t in (q, k, v))
            nk, nv = (t.expand(b, self.heads, 1, -1) for t in self.null_kv.unbind(dim=-2))
            k = torch.cat((nk, k), dim=-2)
            v = torch.cat((nv, v), dim=-2)
            if self.cosine_sim:
                q, k = l2norm(q), l2norm(k)
            q, k = q * math.sqrt(self.scale), k * math.sqrt(self.scale)
            sim = torch.einsum("bhid,bhjd->bhij", q, k)
            attn = sim.softmax(dim=-1, dtype=torch.float32).type(sim.dtype)
            out = torch.einsum("bhij,bhjd->bhid", attn, v)
            return self.to_out(out.transpose(1, 2).flatten(2))

    def to_sequence(x: torch.Tensor) -> torch.Tensor:
        return x.flatten(2).transpose(1, 2)

    def from_sequence(x: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
        return x.transpose(1, 2).reshape(like.shape)

    class ResnetBlock(nn.Module):
        def __init__(self, dim: int, dim_out: int, *, cond_dim: int | None = None,
                     time_cond_dim: int | None = None, groups: int = 8, cross_heads: int = 8,
                     cross_dim_head: int = 64) -> None:
            super().__init__()
            self.time_mlp = None
            if exists(time_cond_dim):
                self.time_mlp = nn.Sequential(nn.SiLU(), nn.Linear(time_cond_dim, dim_out * 2))
            self.cross_attn = None
            if exists(cond_dim):
                self.cross_attn = CrossAttention(dim=dim_out, context_dim=cond_dim, heads=cross_heads,
                                                 dim_head=cross_dim_head)
            self.block1 = Block(dim, dim_out, groups=groups)
            self.block2 = Block(dim_out, dim_out, groups=groups)
            self.res_conv = nn.Conv2d(dim, dim_out, 1) if dim != dim_out else nn.Identity()

        def forward(self, x: torch.Tensor, time_emb: torch.Tensor | None = None,
                    cond: torch.Tensor | None = None) -> torch.Tensor:
            scale_shift = None
            if exists(self.time_mlp) and exists(time_emb):
                time_emb = self.time_mlp(time_emb)[:, :, None, None]
                scale_shift = time_emb.chunk(2, dim=1)
            h = self.block1(x, scale_shift=scale_shift)
            if exists(self.cross_attn):
                assert exists(cond)
                seq = to_sequence(h)
                h = from_sequence(self.cross_attn(seq, context=cond) + seq, h)
            h = self.block2(h)
            return h + self.res_conv(x)

    class RearrangeToSequence(nn.Module):
        def __init__(self, fn: nn.Module) -> None:
            super().__init__()
            self.fn = fn

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return from_sequence(self.fn(to_sequence(x)), x)

    class CrossEmbedLayer(nn.Module):
        def __init__(self, dim_in: int, kernel_sizes: tuple[int, ...], dim_out: int, stride: int = 2) -> None:
            super().__init__()
            assert all((k % 2) == (stride % 2) for k in kernel_sizes)
            kernel_sizes = tuple(sorted(kernel_sizes))
            dim_scales = [int(dim_out / (2 ** i)) for i in range(1, len(kernel_sizes))]
            dim_scales = [*dim_scales, dim_out - sum(dim_scales)]
            self.convs = nn.ModuleList([
                nn.Conv2d(dim_in, dim_scale, kernel, stride=stride, padding=(kernel - stride) // 2)
                for kernel, dim_scale in zip(kernel_sizes, dim_scales)])

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.cat([conv(x) for conv in self.convs], dim=1)

    class Unet(nn.Module):
        """The Unet as ``Decoder`` recasts it (``cast_model_parameters``) for its place in the cascade."""

        def __init__(self, dim: int, *, image_embed_dim: int, text_embed_dim: int | None = None,
                     cond_dim: int, num_image_tokens: int = 4, num_time_tokens: int = 2,
                     dim_mults: tuple[int, ...] = (1, 2, 4, 8),
                     channels: int = 3, channels_out: int = 3, attn_dim_head: int = 32, attn_heads: int = 16,
                     lowres_cond: bool = False, cond_on_text_encodings: bool = False, max_text_len: int = 256,
                     cond_on_image_embeds: bool = False, add_image_embeds_to_time: bool = True,
                     resnet_groups: int = 8, num_resnet_blocks: int = 2,
                     init_cross_embed_kernel_sizes: tuple[int, ...] = (3, 7, 15), cross_heads: int = 8,
                     cross_dim_head: int = 64) -> None:
            super().__init__()
            self.lowres_cond = lowres_cond
            self.self_cond = False
            self.channels = channels
            self.channels_out = channels_out
            init_channels = channels * (1 + int(lowres_cond))
            init_dim = dim
            self.init_conv = CrossEmbedLayer(init_channels, dim_out=init_dim,
                                             kernel_sizes=init_cross_embed_kernel_sizes, stride=1)
            dims = [init_dim, *(dim * m for m in dim_mults)]
            in_out = list(itertools.pairwise(dims))
            time_cond_dim = dim * 4
            self.to_time_hiddens = nn.Sequential(SinusoidalPosEmb(dim), nn.Linear(dim, time_cond_dim),
                                                 nn.GELU())
            self.to_time_tokens = nn.Sequential(nn.Linear(time_cond_dim, cond_dim * num_time_tokens),
                                                nn.Unflatten(-1, (num_time_tokens, cond_dim)))
            self.to_time_cond = nn.Sequential(nn.Linear(time_cond_dim, time_cond_dim))
            self.image_to_tokens = (
                nn.Sequential(nn.Linear(image_embed_dim, cond_dim * num_image_tokens),
                              nn.Unflatten(-1, (num_image_tokens, cond_dim)))
                if cond_on_image_embeds and image_embed_dim != cond_dim else nn.Identity())
            self.to_image_hiddens = (nn.Sequential(nn.Linear(image_embed_dim, time_cond_dim), nn.GELU())
                                     if cond_on_image_embeds and add_image_embeds_to_time else None)
            self.norm_cond = nn.LayerNorm(cond_dim)
            self.norm_mid_cond = nn.LayerNorm(cond_dim)
            self.text_to_cond = None
            self.text_embed_dim = None
            if cond_on_text_encodings:
                assert exists(text_embed_dim)
                self.text_to_cond = nn.Linear(text_embed_dim, cond_dim)
                self.text_embed_dim = text_embed_dim
            self.cond_on_text_encodings = cond_on_text_encodings
            self.cond_on_image_embeds = cond_on_image_embeds
            self.null_image_embed = nn.Parameter(torch.randn(1, num_image_tokens, cond_dim))
            self.null_image_hiddens = nn.Parameter(torch.randn(1, time_cond_dim))
            self.max_text_len = max_text_len
            self.null_text_embed = nn.Parameter(torch.randn(1, max_text_len, cond_dim))
            self.skip_connect_scale = 1.
            num_stages = len(in_out)
            resnet_block = functools.partial(ResnetBlock, time_cond_dim=time_cond_dim, groups=resnet_groups,
                                             cross_heads=cross_heads, cross_dim_head=cross_dim_head)

            def self_attention(d: int) -> nn.Module:
                return RearrangeToSequence(Residual(Attention(d, heads=attn_heads, dim_head=attn_dim_head,
                                                              cosine_sim=False)))

            self.downs = nn.ModuleList([])
            self.ups = nn.ModuleList([])
            skip_connect_dims = []
            for ind, (dim_in, dim_out) in enumerate(in_out):
                is_first, is_last = ind == 0, ind >= num_stages - 1
                layer_cond_dim = cond_dim if not is_first else None
                skip_connect_dims.append(dim_in)
                self.downs.append(nn.ModuleList([
                    resnet_block(dim_in, dim_in),
                    nn.ModuleList([resnet_block(dim_in, dim_in, cond_dim=layer_cond_dim)
                                   for _ in range(num_resnet_blocks)]),
                    nn.Identity(),
                    Downsample(dim_in, dim_out) if not is_last else nn.Conv2d(dim_in, dim_out, 1),
                ]))
            mid_dim = dims[-1]
            self.mid_block1 = resnet_block(mid_dim, mid_dim, cond_dim=cond_dim)
            self.mid_attn = self_attention(mid_dim)
            self.mid_block2 = resnet_block(mid_dim, mid_dim, cond_dim=cond_dim)
            for ind, (dim_in, dim_out) in enumerate(reversed(in_out)):
                is_last = ind >= num_stages - 1
                layer_cond_dim = cond_dim if not is_last else None
                skip_connect_dim = skip_connect_dims.pop()
                self.ups.append(nn.ModuleList([
                    resnet_block(dim_out + skip_connect_dim, dim_out, cond_dim=layer_cond_dim),
                    nn.ModuleList([resnet_block(dim_out + skip_connect_dim, dim_out, cond_dim=layer_cond_dim)
                                   for _ in range(num_resnet_blocks)]),
                    nn.Identity(),
                    PixelShuffleUpsample(dim_out, dim_in) if not is_last else nn.Identity(),
                ]))
            self.final_resnet_block = resnet_block(dim + dim, dim)
            self.to_out = nn.Conv2d(dim + (channels if lowres_cond else 0), channels_out, kernel_size=1)
            nn.init.zeros_(self.to_out.weight)
            nn.init.zeros_(self.to_out.bias)

        def forward_with_cond_scale(self, *args: Any, cond_scale: float = 1., **kwargs: Any) -> torch.Tensor:
            logits = self.forward(*args, **kwargs)
            if cond_scale == 1:
                return logits
            null_logits = self.forward(*args, text_cond_drop_prob=1., image_cond_drop_prob=1., **kwargs)
            return null_logits + (logits - null_logits) * cond_scale

        def forward(self, x: torch.Tensor, time: torch.Tensor, *, image_embed: torch.Tensor,
                    lowres_cond_img: torch.Tensor | None = None, text_encodings: torch.Tensor | None = None,
                    image_cond_drop_prob: float = 0., text_cond_drop_prob: float = 0.,
                    self_cond: torch.Tensor | None = None) -> torch.Tensor:
            batch_size, device = x.shape[0], x.device
            assert not (self.lowres_cond and not exists(lowres_cond_img))
            if exists(lowres_cond_img):
                x = torch.cat((x, lowres_cond_img), dim=1)
            x = self.init_conv(x)
            r = x.clone()
            time = time.type_as(x)
            time_hiddens = self.to_time_hiddens(time)
            time_tokens = self.to_time_tokens(time_hiddens)
            t = self.to_time_cond(time_hiddens)
            image_keep_mask = prob_mask_like((batch_size,), 1 - image_cond_drop_prob, device=device)
            text_keep_mask = prob_mask_like((batch_size,), 1 - text_cond_drop_prob,
                                            device=device)[:, None, None]
            if exists(image_embed) and exists(self.to_image_hiddens):
                image_hiddens = self.to_image_hiddens(image_embed)
                image_hiddens = torch.where(image_keep_mask[:, None], image_hiddens,
                                            self.null_image_hiddens.to(image_hiddens.dtype))
                t = t + image_hiddens
            image_tokens = None
            if self.cond_on_image_embeds:
                image_tokens = self.image_to_tokens(image_embed)
                image_tokens = torch.where(image_keep_mask[:, None, None], image_tokens,
                                           self.null_image_embed.to(image_tokens.dtype))
            text_tokens = None
            if exists(text_encodings) and self.cond_on_text_encodings:
                assert text_encodings.shape[0] == batch_size
                assert self.text_embed_dim == text_encodings.shape[-1]
                text_mask = torch.any(text_encodings != 0., dim=-1)
                text_tokens = self.text_to_cond(text_encodings)
                text_tokens = text_tokens[:, :self.max_text_len]
                text_mask = text_mask[:, :self.max_text_len]
                remainder = self.max_text_len - text_tokens.shape[1]
                if remainder > 0:
                    text_tokens = F.pad(text_tokens, (0, 0, 0, remainder))
                    text_mask = F.pad(text_mask, (0, remainder), value=False)
                text_keep_mask = text_mask[:, :, None] & text_keep_mask
                text_tokens = torch.where(text_keep_mask, text_tokens,
                                          self.null_text_embed.to(text_tokens.dtype))
            c = time_tokens
            if exists(image_tokens):
                c = torch.cat((c, image_tokens), dim=-2)
            mid_c = c if not exists(text_tokens) else torch.cat((c, text_tokens), dim=-2)
            c = self.norm_cond(c)
            mid_c = self.norm_mid_cond(mid_c)
            down_hiddens = []
            for init_block, resnet_blocks, attn, post_downsample in self.downs:
                x = init_block(x, t, c)
                for block in resnet_blocks:
                    x = block(x, t, c)
                    down_hiddens.append(x.contiguous())
                x = attn(x)
                down_hiddens.append(x.contiguous())
                x = post_downsample(x)
            x = self.mid_block1(x, t, mid_c)
            x = self.mid_attn(x)
            x = self.mid_block2(x, t, mid_c)

            def connect_skip(fmap: torch.Tensor) -> torch.Tensor:
                return torch.cat((fmap, down_hiddens.pop() * self.skip_connect_scale), dim=1)

            for init_block, resnet_blocks, attn, upsample in self.ups:
                x = connect_skip(x)
                x = init_block(x, t, c)
                for block in resnet_blocks:
                    x = connect_skip(x)
                    x = block(x, t, c)
                x = attn(x)
                x = upsample(x)
            x = torch.cat((x, r), dim=1)
            x = self.final_resnet_block(x, t)
            if exists(lowres_cond_img):
                x = torch.cat((x, lowres_cond_img), dim=1)
            return self.to_out(x)

    class Decoder(nn.Module):
        def __init__(self, unets: tuple[Unet, ...], *, clip: OpenAIClipAdapter, image_sizes: tuple[int, ...],
                     timesteps: int, sample_timesteps: tuple[int, ...], beta_schedules: tuple[str, ...],
                     image_cond_drop_prob: float = 0.1, text_cond_drop_prob: float = 0.5,
                     learned_variance: tuple[bool, ...] = (True, False)) -> None:
            super().__init__()
            clip.eval()
            clip.requires_grad_(False)
            self.clip = clip
            self.channels = CHANNELS
            self.normalize_img = normalize_neg_one_to_one
            self.unnormalize_img = unnormalize_zero_to_one
            self.num_unets = len(unets)
            self.unconditional = False
            self.learned_variance = learned_variance
            self.learned_variance_constrain_frac = False
            self.unets = nn.ModuleList(unets)
            self.sample_timesteps = sample_timesteps
            self.noise_schedulers = nn.ModuleList([NoiseScheduler(beta_schedule_name=s, timesteps=timesteps)
                                                   for s in beta_schedules])
            self.image_sizes = tuple(sorted(set(image_sizes)))
            self.sample_channels = (self.channels,) * self.num_unets
            self.predict_x_start = (False,) * self.num_unets
            self.input_image_range = (0., 1.)
            self.lowres_use_noise = (False,) * self.num_unets
            self.image_cond_drop_prob = image_cond_drop_prob
            self.text_cond_drop_prob = text_cond_drop_prob
            self.can_classifier_guidance = image_cond_drop_prob > 0. or text_cond_drop_prob > 0.
            self.use_dynamic_thres = False
            self.dynamic_thres_percentile = 0.95
            self.register_buffer("_dummy", torch.Tensor([True]), persistent=False)

        @property
        def device(self) -> torch.device:
            return self._dummy.device

        @property
        def condition_on_text_encodings(self) -> bool:
            return any(unet.cond_on_text_encodings for unet in self.unets)

        def dynamic_threshold(self, x: torch.Tensor) -> torch.Tensor:
            s: Any = 1.
            if self.use_dynamic_thres:
                s = torch.quantile(x.flatten(1).abs(), self.dynamic_thres_percentile, dim=-1)
                s.clamp_(min=1.)
                s = s.view(-1, *((1,) * (x.ndim - 1)))
            return x.clamp(-s, s) / s

        def p_mean_variance(self, unet: Unet, x: torch.Tensor, t: torch.Tensor, image_embed: torch.Tensor,
                            noise_scheduler: NoiseScheduler, text_encodings: torch.Tensor | None = None,
                            lowres_cond_img: torch.Tensor | None = None, self_cond: Any = None,
                            clip_denoised: bool = True, predict_x_start: bool = False,
                            learned_variance: bool = False, cond_scale: float = 1.) -> tuple:
            assert not (cond_scale != 1. and not self.can_classifier_guidance)
            model_output = unet.forward_with_cond_scale(x, t, image_embed=image_embed,
                                                        text_encodings=text_encodings, cond_scale=cond_scale,
                                                        lowres_cond_img=lowres_cond_img, self_cond=self_cond)
            var_interp_frac_unnormalized = None
            pred = model_output
            if learned_variance:
                pred, var_interp_frac_unnormalized = model_output.chunk(2, dim=1)
            if predict_x_start:
                x_start = pred
            else:
                x_start = noise_scheduler.predict_start_from_noise(x, t=t, noise=pred)
            if clip_denoised:
                x_start = self.dynamic_threshold(x_start)
            model_mean, posterior_variance, posterior_log_variance = noise_scheduler.q_posterior(
                x_start=x_start, x_t=x, t=t)
            if learned_variance:
                min_log = extract(noise_scheduler.posterior_log_variance_clipped, t, x.shape)
                max_log = extract(torch.log(noise_scheduler.betas), t, x.shape)
                var_interp_frac = unnormalize_zero_to_one(var_interp_frac_unnormalized)
                if self.learned_variance_constrain_frac:
                    var_interp_frac = var_interp_frac.sigmoid()
                posterior_log_variance = var_interp_frac * max_log + (1 - var_interp_frac) * min_log
                posterior_variance = posterior_log_variance.exp()
            return model_mean, posterior_variance, posterior_log_variance, x_start

        @torch.no_grad()
        def p_sample(self, unet: Unet, x: torch.Tensor, t: torch.Tensor, noise: torch.Tensor, **kwargs: Any
                     ) -> tuple[torch.Tensor, torch.Tensor]:
            b = x.shape[0]
            model_mean, _, model_log_variance, x_start = self.p_mean_variance(unet, x=x, t=t, **kwargs)
            nonzero_mask = (1 - (t == 0).float()).reshape(b, *((1,) * (len(x.shape) - 1)))
            return model_mean + nonzero_mask * (0.5 * model_log_variance).exp() * noise, x_start

        @torch.no_grad()
        def p_sample_loop(self, unet: Unet, shape: tuple[int, ...], init: torch.Tensor,
                          noise: torch.Tensor, *, noise_scheduler: NoiseScheduler, timesteps: int,
                          image_embed: torch.Tensor, lowres_cond_img: torch.Tensor | None = None,
                          **kwargs: Any) -> torch.Tensor:
            num_timesteps = noise_scheduler.num_timesteps
            assert timesteps == num_timesteps, "only the DDPM sampler is kept (sample_timesteps == timesteps)"
            assert init.shape == shape and noise.shape == (num_timesteps, *shape)
            device = self.device
            b = shape[0]
            img = init
            x_start = None
            if exists(lowres_cond_img):
                lowres_cond_img = self.normalize_img(lowres_cond_img)
            for step, time in enumerate(reversed(range(num_timesteps))):
                times = torch.full((b,), time, device=device, dtype=torch.long)
                self_cond = x_start if unet.self_cond else None
                img, x_start = self.p_sample(unet, img, times, noise[step], image_embed=image_embed,
                                             self_cond=self_cond, lowres_cond_img=lowres_cond_img,
                                             noise_scheduler=noise_scheduler, **kwargs)
            return self.unnormalize_img(img)

        @torch.no_grad()
        @eval_decorator
        def sample(self, image_embed: torch.Tensor, text: torch.Tensor, inits: list[torch.Tensor],
                   noises: list[torch.Tensor], cond_scale: float = 1.) -> torch.Tensor:
            batch_size = image_embed.shape[0]
            _, text_encodings = self.clip.embed_text(text)
            assert not (self.condition_on_text_encodings and not exists(text_encodings))
            img = None
            per_unet = zip(self.unets, self.sample_channels, self.image_sizes, self.predict_x_start,
                           self.learned_variance, self.noise_schedulers, self.lowres_use_noise,
                           self.sample_timesteps, cast_tuple(cond_scale, self.num_unets), inits, noises)
            for (unet, channel, image_size, predict_x_start, learned_variance, noise_scheduler,
                 lowres_use_noise, sample_timesteps, unet_cond_scale, init, noise) in per_unet:
                lowres_cond_img = None
                shape = (batch_size, channel, image_size, image_size)
                if unet.lowres_cond:
                    lowres_cond_img = resize_image_to(img, image_size, clamp_range=self.input_image_range)
                    assert not lowres_use_noise
                img = self.p_sample_loop(unet, shape, init, noise, image_embed=image_embed,
                                         text_encodings=text_encodings, cond_scale=unet_cond_scale,
                                         predict_x_start=predict_x_start, learned_variance=learned_variance,
                                         clip_denoised=True, lowres_cond_img=lowres_cond_img,
                                         noise_scheduler=noise_scheduler, timesteps=sample_timesteps)
            return img

    class DALLE2(nn.Module):
        def __init__(self, *, prior: DiffusionPrior, decoder: Decoder, prior_num_samples: int = 2) -> None:
            super().__init__()
            self.prior = prior
            self.decoder = decoder
            self.prior_num_samples = prior_num_samples
            self.decoder_need_text_cond = self.decoder.condition_on_text_encodings

        @torch.no_grad()
        @eval_decorator
        def forward(self, text: torch.Tensor, prior_init: torch.Tensor, prior_noise: torch.Tensor,
                    *decoder_noise: torch.Tensor, cond_scale: float = 1., prior_cond_scale: float = 1.
                    ) -> torch.Tensor:
            """``decoder_noise``: each unet's initial noise and its per-step noise, in turn."""
            one_text = text.shape[0] == 1
            image_embed = self.prior.sample(text, prior_init, prior_noise,
                                            num_samples_per_batch=self.prior_num_samples,
                                            cond_scale=prior_cond_scale)
            text_cond = text if self.decoder_need_text_cond else None
            images = self.decoder.sample(image_embed, text_cond, list(decoder_noise[0::2]),
                                         list(decoder_noise[1::2]), cond_scale=cond_scale)
            if one_text:
                return images[0]
            return images

    return SimpleNamespace(ClipText=ClipText, OpenAIClipAdapter=OpenAIClipAdapter,
                           convert_weights_to_fp16=convert_weights_to_fp16,
                           DiffusionPriorNetwork=DiffusionPriorNetwork, DiffusionPrior=DiffusionPrior,
                           Unet=Unet, Decoder=Decoder, DALLE2=DALLE2)


def _build(size: Size, half_clip: bool) -> Any:
    c = _classes()
    d = _dims(size)
    clip_model = c.ClipText(d).eval()
    if half_clip:
        c.convert_weights_to_fp16(clip_model)
    clip = c.OpenAIClipAdapter(clip_model, eos_id=d.vocab - 1)
    prior_network = c.DiffusionPriorNetwork(d.embed, depth=d.prior_depth, dim_head=d.prior_dim_head,
                                            heads=d.prior_heads, max_text_len=d.max_text_len)
    diffusion_prior = c.DiffusionPrior(prior_network, clip=clip, timesteps=d.prior_timesteps,
                                       cond_drop_prob=0.2)
    common: dict[str, Any] = {
        "image_embed_dim": d.embed, "cond_dim": d.cond_dim, "channels": CHANNELS,
        "max_text_len": d.max_text_len, "attn_heads": d.attn_heads, "attn_dim_head": d.attn_dim_head,
        "cross_heads": d.cross_heads, "cross_dim_head": d.cross_dim_head}
    unet1 = c.Unet(d.unet_dims[0], dim_mults=d.unet_mults[0], text_embed_dim=d.embed,
                   cond_on_text_encodings=True, cond_on_image_embeds=True, channels_out=CHANNELS * 2,
                   **common)
    unet2 = c.Unet(d.unet_dims[1], dim_mults=d.unet_mults[1], lowres_cond=True, channels_out=CHANNELS,
                   **common)
    decoder = c.Decoder((unet1, unet2), clip=clip, image_sizes=d.image_sizes, timesteps=d.decoder_timesteps,
                        sample_timesteps=(d.decoder_timesteps,) * 2, beta_schedules=d.beta_schedules,
                        image_cond_drop_prob=0.1, text_cond_drop_prob=0.5)
    return c.DALLE2(prior=diffusion_prior, decoder=decoder, prior_num_samples=PRIOR_NUM_SAMPLES)


@dataclass(frozen=True)
class Dalle2(Workload):
    def build(self, device: str, batch_size: int, size: Size = "full") -> Any:
        import torch

        half_clip = torch.device(device).type == "cuda"  # clip.load keeps fp16 weights on CUDA only
        return _build(size, half_clip).to(device).eval()

    def inputs(self, model: Any, sample: int, device: str, batch_size: int, size: Size = "full") -> tuple:
        import torch

        d = _dims(size)
        g = generator(device, sample)
        text = torch.randint(0, d.vocab, (batch_size, d.text_len), device=device, generator=g)
        n_prior = batch_size * PRIOR_NUM_SAMPLES
        prior_init = torch.randn(n_prior, d.embed, device=device, generator=g)
        prior_noise = torch.randn(d.prior_timesteps, n_prior, d.embed, device=device, generator=g)
        decoder_noise = []
        for image_size in d.image_sizes:
            shape = (batch_size, CHANNELS, image_size, image_size)
            decoder_noise.append(torch.randn(*shape, device=device, generator=g))
            decoder_noise.append(torch.randn(d.decoder_timesteps, *shape, device=device, generator=g))
        return (text, prior_init, prior_noise, *decoder_noise)


register(Dalle2("DALLE2", "DALLE2_pytorch", "torchbench", "inference", 1,
                idiom="CPU tensors in forward: CLIP's encode_text indexes its GPU states with "
                      "torch.arange(batch) made on the CPU (twice per iteration), and its causal attn_mask "
                      "is a plain CPU attribute moved with .to(device) in forward; python-float constants"))

"""TorchBench ``timm_efficientdet``: training EfficientDet-D1 (rwightman/efficientdet-pytorch).

The original (torchbenchmark/models/timm_efficientdet, effdet pinned at 46a146f) builds
``effdet.create_model("tf_efficientdet_d1", bench_task="train")`` from the defaults of its
``args.py``: a ``DetBenchTrain`` around ``EfficientDet`` with a ``tf_efficientnet_b1`` backbone
(timm, ``features_only``, ``out_indices=(2, 3, 4)``, TF "same" padding, BatchNorm eps 1e-3,
``drop_path_rate=0.2``), 640x640 images, a BiFPN of 4 cells x 88 channels over levels P3-P7
(``bifpn_fa``: fast-attention weighted fusion of 8 nodes, max-pool down / nearest up, 1x1
resample convs with BatchNorm, pre-activation SiLU + separable 3x3 conv + BatchNorm per node,
``redundant_bias``: conv biases in front of BatchNorm), class and box heads of 3 shared
separable convs with one BatchNorm per level and repeat, 9 anchors per location (3 octave
scales x aspect ratios (1, 1), (1.4, 0.7), (0.7, 1.4), anchor scale 4), 90 classes, and
effdet's TF-style initialisation (Glorot-uniform in the FPN, variance scaling in the heads,
class-prediction bias -log(99)). About 6.6M parameters. The loss is ``DetectionLoss``: the
"new" focal loss (alpha 0.25, gamma 1.5, no label smoothing) on one-hot class targets (with
TorchBench's patch to effdet's ``one_hot``: the scatter index cast to int64), Huber box loss
(delta 0.1) on anchors with non-zero targets, both divided by ``num_positives.sum() + 1.0``,
total ``class_loss + 50.0 * box_loss``; the config's constants are Python floats. The train
step returns ``{"loss", "class_loss", "box_loss"}`` and TorchBench's ``train_epoch`` runs
backward from ``output["loss"]``, as :meth:`TimmEfficientDet.loss` does (the PT2 harness's
``reduce_to_scalar_loss`` would average the three instead). TEFD runs at batch 1, the PT2
harness's training batch for this model.

Where the anchors are labelled: TorchBench leaves ``--bench-labeler`` at its default, False,
so ``DetBenchTrain`` is built with ``create_labeler=False`` and the *data loader* labels the
anchors (``DetectionFastCollate`` with an ``AnchorLabeler``: IoU of every ground-truth box with
the 76,725 anchors, ``ArgMaxMatcher`` at 0.5 with a forced match per box, Faster R-CNN box
encoding, per-level split). The model gets the image and the ready label maps: int64 class
targets and float box targets for each of the 5 levels and ``label_num_positives``. TEFD does
the same, with :meth:`TimmEfficientDet.inputs` in the loader's place: it draws the image and
the boxes and runs the labeler written here on the device, so the step's inputs are
``(images, cls_P3..cls_P7, box_P3..box_P7, num_positives)`` (12 tensors, 6.4 MiB at full
size). Nothing in that step leaves the GPU or depends on data: what it costs CUDA graphs is
the copy of those inputs into the graph's static buffers at every replay, plus drop-path's
random numbers (``stochastic``). This is the layout the paper measured: its Table 3 gives TEFD
two CUDA graphs and 6.2 MB of copies cut to 120 B (15 pointers), and on an H100 with
``mode="reduce-overhead"`` this step records 2 graphs (forward, backward) with 15 non-static
inputs; labelling in the model would feed ~4.7 MiB and break the graph (see below).

The other layout of the original, effdet's ``DetBenchTrain(create_labeler=True)`` (TorchBench's
``--bench-labeler``), is here too: a ``TimmEfficientDet(..., bench_labeler=True)`` takes
``(images, boxes, classes)`` with the boxes and classes padded to 100 instances with -1, as
the collate passes them without a labeler, and labels inside the forward. That brings the
labeler's idioms into the compiled step: the boolean-mask filter ``gt_classes[i] > -1``
(a data-dependent shape, so a graph break), the ``shape[0] == 0`` branch on it, the Python
loop over the batch, and ``torch.tensor([ignored, unmatched])`` built from Python floats on
the host and copied to the device for every image. TEFD does not use it because TorchBench
does not.

Kept: the module structure above (``Fnode``/``FpnCombine``/``ResampleFeatureMap``, heads that
reuse one conv stack across levels with per-level BatchNorm, the labeler's
TargetAssigner/ArgMaxMatcher/Match/box-coder chain, the loss as written, python-float
constants, in-place activations), BatchNorm in training mode. Differences: random weights
(TorchBench loads an ImageNet backbone); the data are synthetic: normal-distributed images
(the prefetcher's normalised pixels) and 8 boxes per image (COCO averages 7.3) with random
centres, log-uniform sizes clipped to the image and classes 1-80 (effdet's COCO parser maps the
80 categories to 1-80 while the model has 90 outputs), so no augmentation pipeline. The eval
branch of ``DetBenchTrain`` (top-k, NMS, detections) is not built: the step is training only.

For "tiny" the code paths are the same with a 128x128 image, timm's ``test_efficientnet``
backbone created with TF "same" padding and eps 1e-3 (the ``tf_`` variants' settings), a BiFPN
of 2 cells x 16 channels, 2 head repeats, 4 boxes per image.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from grace.bench.workloads import Size, Workload, generator, register, require

MIN_LEVEL, MAX_LEVEL = 3, 7
NUM_LEVELS = MAX_LEVEL - MIN_LEVEL + 1
NUM_SCALES = 3
ASPECT_RATIOS = ((1.0, 1.0), (1.4, 0.7), (0.7, 1.4))
ANCHOR_SCALE = 4.0
MATCH_THRESHOLD = 0.5
MAX_INSTANCES = 100  # effdet's collate pads the per-image boxes/classes to this many with -1
DATASET_CLASSES = 80  # COCO categories, labelled 1..80 by effdet's parser


@dataclass(frozen=True)
class DetConfig:
    backbone: str
    backbone_args: dict
    image_size: int
    fpn_channels: int
    fpn_cell_repeats: int
    box_class_repeats: int
    boxes_per_image: int
    num_classes: int = 90
    alpha: float = 0.25
    gamma: float = 1.5
    delta: float = 0.1
    box_loss_weight: float = 50.0
    label_smoothing: float = 0.0
    legacy_focal: bool = False
    redundant_bias: bool = True
    apply_resample_bn: bool = True
    separable_conv: bool = True
    pad_type: str = "same"
    act_type: str = "swish"
    bn_eps: float = 1e-3
    bn_momentum: float = 0.01


def _config(size: Size) -> DetConfig:
    if size == "full":
        return DetConfig(backbone="tf_efficientnet_b1", backbone_args={"drop_path_rate": 0.2}, image_size=640,
                         fpn_channels=88, fpn_cell_repeats=4, box_class_repeats=3, boxes_per_image=8)
    return DetConfig(backbone="test_efficientnet",
                     backbone_args={"drop_path_rate": 0.2, "pad_type": "same", "bn_eps": 1e-3}, image_size=128,
                     fpn_channels=16, fpn_cell_repeats=2, box_class_repeats=2, boxes_per_image=4)


def feat_sizes(image_size: tuple[int, int], max_level: int) -> list[tuple[int, int]]:
    """(height, width) of the feature map at every level 0..max_level (TF "same" halving)."""
    sizes = [image_size]
    for _ in range(max_level):
        h, w = sizes[-1]
        sizes.append(((h - 1) // 2 + 1, (w - 1) // 2 + 1))
    return sizes


def bifpn_nodes(min_level: int, max_level: int) -> list[dict]:
    """The ``bifpn_fa`` graph: a top-down then a bottom-up pass; offsets index the node list."""
    ids = {level: [level - min_level] for level in range(min_level, max_level + 1)}
    next_id = max_level - min_level + 1
    nodes = []
    for level in range(max_level - 1, min_level - 1, -1):
        nodes.append({"feat_level": level, "inputs_offsets": (ids[level][-1], ids[level + 1][-1])})
        ids[level].append(next_id)
        next_id += 1
    for level in range(min_level + 1, max_level + 1):
        nodes.append({"feat_level": level, "inputs_offsets": (*ids[level], ids[level - 1][-1])})
        ids[level].append(next_id)
        next_id += 1
    return nodes


@functools.cache
def _classes() -> SimpleNamespace:
    import torch
    import torch.nn.functional as F
    from torch import nn

    timm_layers = require("timm.layers", "timm==1.0.29")
    create_conv2d, create_pool2d, get_act_layer = (
        timm_layers.create_conv2d, timm_layers.create_pool2d, timm_layers.get_act_layer)

    # ----- model -----

    class ConvBnAct2d(nn.Module):
        def __init__(self, in_chs: int, out_chs: int, kernel_size: int, padding: str = "", bias: bool = False,
                     norm_layer: Any = None, act_layer: Any = None) -> None:
            super().__init__()
            self.conv = create_conv2d(in_chs, out_chs, kernel_size, padding=padding, bias=bias)
            self.bn = norm_layer(out_chs) if norm_layer is not None else None
            self.act = act_layer(inplace=True) if act_layer is not None else None

        def forward(self, x):
            x = self.conv(x)
            if self.bn is not None:
                x = self.bn(x)
            if self.act is not None:
                x = self.act(x)
            return x

    class SeparableConv2d(nn.Module):
        """Depthwise kxk then pointwise 1x1, optionally BatchNorm and activation."""

        def __init__(self, in_chs: int, out_chs: int, kernel_size: int = 3, padding: str = "",
                     bias: bool = False, norm_layer: Any = None, act_layer: Any = None) -> None:
            super().__init__()
            self.conv_dw = create_conv2d(in_chs, in_chs, kernel_size, padding=padding, depthwise=True)
            self.conv_pw = create_conv2d(in_chs, out_chs, 1, padding=padding, bias=bias)
            self.bn = norm_layer(out_chs) if norm_layer is not None else None
            self.act = act_layer(inplace=True) if act_layer is not None else None

        def forward(self, x):
            x = self.conv_pw(self.conv_dw(x))
            if self.bn is not None:
                x = self.bn(x)
            if self.act is not None:
                x = self.act(x)
            return x

    class Interpolate2d(nn.Module):
        def __init__(self, size: tuple[int, int], mode: str = "nearest") -> None:
            super().__init__()
            self.size = size
            self.mode = mode

        def forward(self, x):
            return F.interpolate(x, size=self.size, mode=self.mode)

    class ResampleFeatureMap(nn.Sequential):
        """1x1 channel projection when the widths differ, then max-pool down or nearest up."""

        def __init__(self, in_chs: int, out_chs: int, input_size: tuple[int, int], output_size: tuple[int, int],
                     cfg: DetConfig, norm_layer: Any) -> None:
            super().__init__()
            if in_chs != out_chs:
                self.add_module("conv", ConvBnAct2d(
                    in_chs, out_chs, 1, padding=cfg.pad_type,
                    bias=not cfg.apply_resample_bn or cfg.redundant_bias,
                    norm_layer=norm_layer if cfg.apply_resample_bn else None))
            if input_size[0] > output_size[0] and input_size[1] > output_size[1]:
                stride = (input_size[0] - 1) // output_size[0] + 1
                self.add_module("downsample", create_pool2d(
                    "max", kernel_size=stride + 1, stride=stride, padding=cfg.pad_type))
            elif input_size[0] < output_size[0] or input_size[1] < output_size[1]:
                self.add_module("upsample", Interpolate2d(size=output_size, mode="nearest"))

    class FpnCombine(nn.Module):
        """Resample the node's inputs to its size and fuse them with fast normalised attention."""

        def __init__(self, feature_info: list[dict], inputs_offsets: tuple[int, ...],
                     output_size: tuple[int, int], cfg: DetConfig, norm_layer: Any) -> None:
            super().__init__()
            self.inputs_offsets = inputs_offsets
            self.resample = nn.ModuleDict({
                str(offset): ResampleFeatureMap(
                    feature_info[offset]["num_chs"], cfg.fpn_channels, feature_info[offset]["size"], output_size,
                    cfg, norm_layer)
                for offset in inputs_offsets})
            self.edge_weights = nn.Parameter(torch.ones(len(inputs_offsets)), requires_grad=True)

        def forward(self, x: list):
            dtype = x[0].dtype
            nodes = [resample(x[offset]) for offset, resample in zip(self.inputs_offsets, self.resample.values())]
            weights = F.relu(self.edge_weights.to(dtype=dtype))
            total = torch.sum(weights)
            out = torch.stack([(nodes[i] * weights[i]) / (total + 0.0001) for i in range(len(nodes))], dim=-1)
            return torch.sum(out, dim=-1)

    class Fnode(nn.Module):
        def __init__(self, combine: nn.Module, after_combine: nn.Module) -> None:
            super().__init__()
            self.combine = combine
            self.after_combine = after_combine

        def forward(self, x: list):
            return self.after_combine(self.combine(x))

    class BiFpnLayer(nn.Module):
        def __init__(self, feature_info: list[dict], sizes: list[tuple[int, int]], cfg: DetConfig,
                     norm_layer: Any, act_layer: Any) -> None:
            super().__init__()
            nodes = bifpn_nodes(MIN_LEVEL, MAX_LEVEL)
            node_info = feature_info + [{"num_chs": cfg.fpn_channels, "size": sizes[n["feat_level"]]} for n in nodes]
            self.fnode = nn.ModuleList()
            for n in nodes:
                combine = FpnCombine(node_info, n["inputs_offsets"], sizes[n["feat_level"]], cfg, norm_layer)
                after = nn.Sequential()
                after.add_module("act", act_layer(inplace=True))
                conv_fn = SeparableConv2d if cfg.separable_conv else ConvBnAct2d
                after.add_module("conv", conv_fn(cfg.fpn_channels, cfg.fpn_channels, 3, padding=cfg.pad_type,
                                                 bias=cfg.redundant_bias, norm_layer=norm_layer, act_layer=None))
                self.fnode.append(Fnode(combine, after))
            self.feature_info = node_info[-NUM_LEVELS:]

        def forward(self, x: list):
            for fn in self.fnode:
                x.append(fn(x))
            return x[-NUM_LEVELS:]

    class BiFpn(nn.Module):
        def __init__(self, cfg: DetConfig, feature_info: list[dict], norm_layer: Any, act_layer: Any) -> None:
            super().__init__()
            sizes = feat_sizes((cfg.image_size, cfg.image_size), MAX_LEVEL)
            feature_info = [dict(f) for f in feature_info]
            self.resample = nn.ModuleDict()
            prev_size = sizes[MIN_LEVEL]
            in_chs = 0
            for level in range(NUM_LEVELS):
                size = sizes[level + MIN_LEVEL]
                if level < len(feature_info):
                    in_chs = feature_info[level]["num_chs"]
                    feature_info[level]["size"] = size
                else:
                    self.resample[str(level)] = ResampleFeatureMap(in_chs, cfg.fpn_channels, prev_size, size, cfg,
                                                                   norm_layer)
                    in_chs = cfg.fpn_channels
                    feature_info.append({"num_chs": in_chs, "size": size})
                prev_size = size
            self.cell = nn.ModuleList()
            for _ in range(cfg.fpn_cell_repeats):
                layer = BiFpnLayer(feature_info, sizes, cfg, norm_layer, act_layer)
                self.cell.append(layer)
                feature_info = layer.feature_info

        def forward(self, x: list):
            for resample in self.resample.values():
                x.append(resample(x[-1]))
            for layer in self.cell:
                x = layer(x)
            return x

    class HeadNet(nn.Module):
        """Class or box head: one stack of separable convs for all levels, BatchNorm per level."""

        def __init__(self, cfg: DetConfig, num_outputs: int, norm_layer: Any, act_layer: Any) -> None:
            super().__init__()
            conv_fn = SeparableConv2d if cfg.separable_conv else ConvBnAct2d
            self.conv_rep = nn.ModuleList([
                conv_fn(cfg.fpn_channels, cfg.fpn_channels, 3, padding=cfg.pad_type, bias=cfg.redundant_bias)
                for _ in range(cfg.box_class_repeats)])
            self.bn_rep = nn.ModuleList([
                nn.ModuleList([nn.Sequential() for _ in range(NUM_LEVELS)]) for _ in range(cfg.box_class_repeats)])
            for rep in self.bn_rep:
                for seq in rep:
                    seq.add_module("bn", norm_layer(cfg.fpn_channels))
            self.act = act_layer(inplace=True)
            num_anchors = NUM_SCALES * len(ASPECT_RATIOS)
            self.predict = conv_fn(cfg.fpn_channels, num_outputs * num_anchors, 3, padding=cfg.pad_type, bias=True)

        def forward(self, x: list):
            outputs = []
            for level in range(NUM_LEVELS):
                x_level = x[level]
                for conv, bn in zip(self.conv_rep, self.bn_rep):
                    x_level = conv(x_level)
                    x_level = bn[level](x_level)
                    x_level = self.act(x_level)
                outputs.append(self.predict(x_level))
            return outputs

    def fans(w, groups: int = 1) -> tuple[int, int]:
        receptive = w[0][0].numel() if w.dim() > 2 else 1
        return w.size(1) * receptive, w.size(0) * receptive // groups

    def glorot_uniform_(w, groups: int = 1) -> None:
        fan_in, fan_out = fans(w, groups)
        limit = math.sqrt(3.0 / max(1.0, (fan_in + fan_out) / 2.0))
        w.data.uniform_(-limit, limit)

    def variance_scaling_(w, groups: int = 1) -> None:
        fan_in, _ = fans(w, groups)
        w.data.normal_(std=math.sqrt(1.0 / max(1.0, fan_in)))

    def tf_init_(m: nn.Module, name: str) -> None:
        """effdet's TF-style init for everything outside the backbone."""
        in_head = "box_net" in name or "class_net" in name
        class_bias = -math.log((1 - 0.01) / 0.01) if "class_net.predict" in name else 0.0
        if isinstance(m, SeparableConv2d):
            init = variance_scaling_ if in_head else glorot_uniform_
            init(m.conv_dw.weight, groups=m.conv_dw.groups)
            init(m.conv_pw.weight)
            if m.conv_pw.bias is not None:
                m.conv_pw.bias.data.fill_(class_bias if in_head else 0.0)
        elif isinstance(m, ConvBnAct2d):
            if in_head:
                m.conv.weight.data.normal_(std=0.01)
            else:
                glorot_uniform_(m.conv.weight)
            if m.conv.bias is not None:
                m.conv.bias.data.fill_(class_bias if in_head else 0.0)
        elif isinstance(m, nn.BatchNorm2d):
            m.weight.data.fill_(1.0)
            m.bias.data.zero_()

    class EfficientDet(nn.Module):
        def __init__(self, cfg: DetConfig) -> None:
            super().__init__()
            timm = require("timm", "timm==1.0.29")
            self.backbone = timm.create_model(cfg.backbone, features_only=True, out_indices=(2, 3, 4),
                                              pretrained=False, **cfg.backbone_args)
            feature_info = self.backbone.feature_info.get_dicts(keys=["num_chs", "reduction"])
            norm_layer = functools.partial(nn.BatchNorm2d, eps=cfg.bn_eps, momentum=cfg.bn_momentum)
            act_layer = get_act_layer(cfg.act_type)
            self.fpn = BiFpn(cfg, feature_info, norm_layer, act_layer)
            self.class_net = HeadNet(cfg, cfg.num_classes, norm_layer, act_layer)
            self.box_net = HeadNet(cfg, 4, norm_layer, act_layer)
            for name, m in self.named_modules():
                if "backbone" not in name:
                    tf_init_(m, name)

        def forward(self, x):
            x = self.fpn(self.backbone(x))
            return self.class_net(x), self.box_net(x)

    # ----- anchors and labeler -----

    class Anchors(nn.Module):
        """All anchor boxes (y0, x0, y1, x1), level by level, location-major, 9 per location."""

        def __init__(self, image_size: tuple[int, int]) -> None:
            super().__init__()
            self.image_size = image_size
            self.feat_sizes = feat_sizes(image_size, MAX_LEVEL)
            self.register_buffer("boxes", self._generate())

        def _generate(self):
            img_h, img_w = self.image_size
            levels = []
            for level in range(MIN_LEVEL, MAX_LEVEL + 1):
                fh, fw = self.feat_sizes[level]
                stride_y, stride_x = img_h / fh, img_w / fw
                ys = torch.arange(stride_y / 2, img_h, stride_y, dtype=torch.float64)
                xs = torch.arange(stride_x / 2, img_w, stride_x, dtype=torch.float64)
                yv, xv = (t.reshape(-1) for t in torch.meshgrid(ys, xs, indexing="ij"))
                shapes = []
                for octave in range(NUM_SCALES):
                    for aspect_x, aspect_y in ASPECT_RATIOS:
                        half_x = ANCHOR_SCALE * stride_x * 2 ** (octave / NUM_SCALES) * aspect_x / 2.0
                        half_y = ANCHOR_SCALE * stride_y * 2 ** (octave / NUM_SCALES) * aspect_y / 2.0
                        shapes.append(torch.stack([yv - half_y, xv - half_x, yv + half_y, xv + half_x], dim=1))
                levels.append(torch.stack(shapes, dim=1).reshape(-1, 4))
            return torch.cat(levels).float()

        def anchors_per_location(self) -> int:
            return NUM_SCALES * len(ASPECT_RATIOS)

    def box_area(boxes):
        y0, x0, y1, x1 = boxes.chunk(4, dim=1)
        return (y1 - y0).squeeze(1) * (x1 - x0).squeeze(1)

    def pairwise_iou(boxes1, boxes2):
        ya0, xa0, ya1, xa1 = boxes1.chunk(4, dim=1)
        yb0, xb0, yb1, xb1 = boxes2.chunk(4, dim=1)
        heights = torch.clamp(torch.min(ya1, yb1.t()) - torch.max(ya0, yb0.t()), min=0)
        widths = torch.clamp(torch.min(xa1, xb1.t()) - torch.max(xa0, xb0.t()), min=0)
        inter = heights * widths
        union = box_area(boxes1).unsqueeze(1) + box_area(boxes2).unsqueeze(0) - inter
        return torch.where(inter == 0.0, torch.zeros_like(inter), inter / union)

    class Match:
        """Per anchor: the matched box's row, -1 unmatched, -2 ignored."""

        def __init__(self, match_results) -> None:
            self.match_results = match_results

        def matched_column_indicator(self):
            return self.match_results >= 0

        def gather_based_on_match(self, input_tensor, unmatched_value: Any, ignored_value: Any):
            if isinstance(ignored_value, torch.Tensor):
                table = torch.cat([ignored_value, unmatched_value, input_tensor], dim=0)
            else:
                fill = torch.tensor([ignored_value, unmatched_value], dtype=input_tensor.dtype,
                                    device=input_tensor.device)
                table = torch.cat([fill, input_tensor], dim=0)
            return torch.index_select(table, 0, torch.clamp(self.match_results + 2, min=0))

    class ArgMaxMatcher:
        def __init__(self, matched_threshold: float, unmatched_threshold: float,
                     negatives_lower_than_unmatched: bool = True, force_match_for_each_row: bool = False) -> None:
            self.matched_threshold = matched_threshold
            self.unmatched_threshold = unmatched_threshold
            self.negatives_lower_than_unmatched = negatives_lower_than_unmatched
            self.force_match_for_each_row = force_match_for_each_row

        @staticmethod
        def _set_where(x, indicator, value: int):
            indicator = indicator.to(dtype=x.dtype)
            return x * (1 - indicator) + value * indicator

        def match(self, similarity) -> Match:
            if similarity.shape[0] == 0:
                return Match(-1 * torch.ones(similarity.shape[1], dtype=torch.long, device=similarity.device))
            matched_vals, matches = torch.max(similarity, 0)
            below = self.unmatched_threshold > matched_vals
            between = (matched_vals >= self.unmatched_threshold) & (self.matched_threshold > matched_vals)
            if self.negatives_lower_than_unmatched:
                matches = self._set_where(matches, below, -1)
                matches = self._set_where(matches, between, -2)
            else:
                matches = self._set_where(matches, below, -2)
                matches = self._set_where(matches, between, -1)
            if self.force_match_for_each_row:
                best_column = torch.argmax(similarity, 1)
                onehot = torch.zeros(best_column.size(0), similarity.shape[1], dtype=torch.bool,
                                     device=similarity.device).scatter_(1, best_column.unsqueeze(1), 1)
                forced, forced_row = torch.max(onehot, 0)
                matches = torch.where(forced, forced_row, matches)
            return Match(matches)

    class FasterRcnnBoxCoder:
        eps = 1e-8

        @staticmethod
        def _center_size(boxes):
            y0, x0, y1, x1 = boxes.t().unbind()
            h, w = y1 - y0, x1 - x0
            return y0 + h / 2.0, x0 + w / 2.0, h, w

        def encode(self, boxes, anchors):
            yca, xca, ha, wa = self._center_size(anchors)
            yc, xc, h, w = self._center_size(boxes)
            ha, wa, h, w = ha + self.eps, wa + self.eps, h + self.eps, w + self.eps
            return torch.stack([(yc - yca) / ha, (xc - xca) / wa, torch.log(h / ha), torch.log(w / wa)]).t()

    class TargetAssigner:
        def __init__(self, matcher: ArgMaxMatcher, box_coder: FasterRcnnBoxCoder,
                     unmatched_cls_target: float = 0.0) -> None:
            self.matcher = matcher
            self.box_coder = box_coder
            self.unmatched_cls_target = unmatched_cls_target

        def assign(self, anchors, gt_boxes, gt_labels):
            match = self.matcher.match(pairwise_iou(gt_boxes, anchors))
            zero_box = torch.zeros((1, 4), device=anchors.device)
            matched_boxes = match.gather_based_on_match(gt_boxes, unmatched_value=zero_box, ignored_value=zero_box)
            encoded = self.box_coder.encode(matched_boxes, anchors)
            background = torch.zeros(1, 4, device=anchors.device).repeat(match.match_results.shape[0], 1)
            reg_targets = torch.where(match.matched_column_indicator().unsqueeze(1), encoded, background)
            cls_targets = match.gather_based_on_match(
                gt_labels, unmatched_value=self.unmatched_cls_target, ignored_value=self.unmatched_cls_target)
            return cls_targets, reg_targets, match

    class AnchorLabeler:
        """Class and box targets for every anchor, split per level (effdet's AnchorLabeler)."""

        def __init__(self, anchors: Anchors, num_classes: int, match_threshold: float = MATCH_THRESHOLD) -> None:
            matcher = ArgMaxMatcher(match_threshold, unmatched_threshold=match_threshold,
                                    negatives_lower_than_unmatched=True, force_match_for_each_row=True)
            self.target_assigner = TargetAssigner(matcher, FasterRcnnBoxCoder())
            self.anchors = anchors
            self.num_classes = num_classes

        def _split_levels(self, targets) -> list:
            out, start = [], 0
            for level in range(MIN_LEVEL, MAX_LEVEL + 1):
                fh, fw = self.anchors.feat_sizes[level]
                steps = fh * fw * self.anchors.anchors_per_location()
                out.append(targets[start:start + steps].reshape([fh, fw, -1]))
                start += steps
            return out

        def label_anchors(self, gt_boxes, gt_classes, filter_valid: bool = True):
            if filter_valid:
                valid = gt_classes > -1
                gt_boxes = gt_boxes[valid]
                gt_classes = gt_classes[valid]
            cls_targets, box_targets, matches = self.target_assigner.assign(self.anchors.boxes, gt_boxes, gt_classes)
            cls_targets = (cls_targets - 1).long()
            num_positives = (matches.match_results > -1).float().sum()
            return self._split_levels(cls_targets), self._split_levels(box_targets), num_positives

        def batch_label_anchors(self, gt_boxes, gt_classes, filter_valid: bool = True):
            cls_out: list = [[] for _ in range(NUM_LEVELS)]
            box_out: list = [[] for _ in range(NUM_LEVELS)]
            positives = []
            for i in range(len(gt_boxes)):
                cls_levels, box_levels, num_positives = self.label_anchors(gt_boxes[i], gt_classes[i], filter_valid)
                for level in range(NUM_LEVELS):
                    cls_out[level].append(cls_levels[level])
                    box_out[level].append(box_levels[level])
                positives.append(num_positives)
            return ([torch.stack(c) for c in cls_out], [torch.stack(b) for b in box_out],
                    torch.stack(positives))

    # ----- loss -----

    def new_focal_loss(logits, targets, alpha: float, gamma: float, normalizer, label_smoothing: float = 0.01):
        pred_prob = logits.sigmoid()
        targets = targets.to(logits.dtype)
        onem_targets = 1.0 - targets
        p_t = targets * pred_prob + onem_targets * (1.0 - pred_prob)
        alpha_factor = targets * alpha + onem_targets * (1.0 - alpha)
        modulating_factor = (1.0 - p_t) ** gamma
        if label_smoothing > 0.0:
            targets = targets * (1.0 - label_smoothing) + 0.5 * label_smoothing
        ce = F.binary_cross_entropy_with_logits(logits, targets, reduction="none")
        return (1 / normalizer) * alpha_factor * modulating_factor * ce

    def focal_loss_legacy(logits, targets, alpha: float, gamma: float, normalizer):
        positive = targets == 1.0
        ce = F.binary_cross_entropy_with_logits(logits, targets.to(logits.dtype), reduction="none")
        neg_logits = -1.0 * logits
        modulator = torch.exp(gamma * targets * neg_logits - gamma * torch.log1p(torch.exp(neg_logits)))
        loss = modulator * ce
        return torch.where(positive, alpha * loss, (1.0 - alpha) * loss) / normalizer

    def huber_loss(input, target, delta: float = 1.0, weights: Any = None, size_average: bool = True):
        abs_err = (input - target).abs()
        quadratic = torch.clamp(abs_err, max=delta)
        linear = abs_err - quadratic
        loss = 0.5 * quadratic.pow(2) + delta * linear
        if weights is not None:
            loss = loss.mul(weights)
        return loss.mean() if size_average else loss.sum()

    def box_loss_at_level(box_outputs, box_targets, num_positives, delta: float):
        normalizer = num_positives * 4.0
        mask = box_targets != 0.0
        return huber_loss(box_outputs, box_targets, delta=delta, weights=mask, size_average=False) / normalizer

    def one_hot(x, num_classes: int):
        """effdet's one_hot with TorchBench's effdet.patch: the scatter index is cast to int64."""
        non_neg = (x >= 0).unsqueeze(-1)
        onehot = torch.zeros(x.shape + (num_classes,), device=x.device, dtype=torch.float32)
        index = (x.unsqueeze(-1) * non_neg).to(dtype=torch.int64)
        return onehot.scatter(-1, index, 1) * non_neg

    class DetectionLoss(nn.Module):
        def __init__(self, cfg: DetConfig) -> None:
            super().__init__()
            self.num_classes = cfg.num_classes
            self.alpha = cfg.alpha
            self.gamma = cfg.gamma
            self.delta = cfg.delta
            self.box_loss_weight = cfg.box_loss_weight
            self.label_smoothing = cfg.label_smoothing
            self.legacy_focal = cfg.legacy_focal

        def forward(self, cls_outputs: list, box_outputs: list, cls_targets: list, box_targets: list,
                    num_positives):
            num_positives_sum = (num_positives.sum() + 1.0).float()
            cls_losses, box_losses = [], []
            for level in range(len(cls_outputs)):
                cls_targets_oh = one_hot(cls_targets[level], self.num_classes)
                bs, height, width, _, _ = cls_targets_oh.shape
                cls_targets_oh = cls_targets_oh.view(bs, height, width, -1)
                cls_logits = cls_outputs[level].permute(0, 2, 3, 1).float()
                if self.legacy_focal:
                    cls_loss = focal_loss_legacy(cls_logits, cls_targets_oh, self.alpha, self.gamma,
                                                 num_positives_sum)
                else:
                    cls_loss = new_focal_loss(cls_logits, cls_targets_oh, self.alpha, self.gamma,
                                              num_positives_sum, label_smoothing=self.label_smoothing)
                cls_loss = cls_loss.view(bs, height, width, -1, self.num_classes)
                cls_loss = cls_loss * (cls_targets[level] != -2).unsqueeze(-1)
                cls_losses.append(cls_loss.sum())
                box_losses.append(box_loss_at_level(box_outputs[level].permute(0, 2, 3, 1).float(),
                                                    box_targets[level], num_positives_sum, self.delta))
            cls_loss = torch.sum(torch.stack(cls_losses, dim=-1), dim=-1)
            box_loss = torch.sum(torch.stack(box_losses, dim=-1), dim=-1)
            return cls_loss + self.box_loss_weight * box_loss, cls_loss, box_loss

    class DetBenchTrain(nn.Module):
        """effdet's training bench: model, anchors, optional in-model labeler, loss.

        Without a labeler (TorchBench's default) the forward takes the loader's label maps,
        ``(x, cls_P3..cls_P7, box_P3..box_P7, num_positives)``; with one, ``(x, boxes, classes)``.
        """

        def __init__(self, model: EfficientDet, cfg: DetConfig, create_labeler: bool) -> None:
            super().__init__()
            self.model = model
            self.num_classes = cfg.num_classes
            self.anchors = Anchors((cfg.image_size, cfg.image_size))
            self.anchor_labeler = AnchorLabeler(self.anchors, cfg.num_classes) if create_labeler else None
            self.loss_fn = DetectionLoss(cfg)

        def forward(self, x, *target):
            class_out, box_out = self.model(x)
            if self.anchor_labeler is None:
                cls_targets = list(target[:NUM_LEVELS])
                box_targets = list(target[NUM_LEVELS:2 * NUM_LEVELS])
                num_positives = target[2 * NUM_LEVELS]
            else:
                gt_boxes, gt_classes = target
                cls_targets, box_targets, num_positives = self.anchor_labeler.batch_label_anchors(
                    gt_boxes, gt_classes)
            loss, class_loss, box_loss = self.loss_fn(class_out, box_out, cls_targets, box_targets, num_positives)
            return {"loss": loss, "class_loss": class_loss, "box_loss": box_loss}

    return SimpleNamespace(EfficientDet=EfficientDet, DetBenchTrain=DetBenchTrain, Anchors=Anchors,
                           AnchorLabeler=AnchorLabeler, DetectionLoss=DetectionLoss, pairwise_iou=pairwise_iou)


def random_boxes(gen: Any, device: str, batch_size: int, count: int, image_size: int) -> tuple[Any, Any]:
    """COCO-like ground truth: (y0, x0, y1, x1) float boxes inside the image, classes 1..80 as floats."""
    import torch

    shape = (batch_size, count)
    centre_y = torch.rand(shape, device=device, generator=gen) * image_size
    centre_x = torch.rand(shape, device=device, generator=gen) * image_size
    lo, hi = math.log(0.02 * image_size), math.log(0.8 * image_size)
    height = torch.exp(lo + (hi - lo) * torch.rand(shape, device=device, generator=gen))
    width = torch.exp(lo + (hi - lo) * torch.rand(shape, device=device, generator=gen))
    boxes = torch.stack([centre_y - height / 2, centre_x - width / 2, centre_y + height / 2,
                         centre_x + width / 2], dim=-1).clamp(0, image_size)
    classes = torch.randint(1, DATASET_CLASSES + 1, shape, device=device, generator=gen).float()
    return boxes, classes


@dataclass(frozen=True)
class TimmEfficientDet(Workload):
    # effdet's ``create_labeler`` / TorchBench's ``--bench-labeler``: label the anchors inside the
    # step instead of in the data loader (TorchBench's default, False).
    bench_labeler: bool = False

    def build(self, device: str, batch_size: int, size: Size = "full") -> Any:
        c = _classes()
        cfg = _config(size)
        return c.DetBenchTrain(c.EfficientDet(cfg), cfg, create_labeler=self.bench_labeler).to(device).train()

    def inputs(self, model: Any, sample: int, device: str, batch_size: int, size: Size = "full") -> tuple:
        import torch

        cfg = _config(size)
        gen = generator(device, sample)
        images = torch.randn(batch_size, 3, cfg.image_size, cfg.image_size, device=device, generator=gen)
        boxes, classes = random_boxes(gen, device, batch_size, cfg.boxes_per_image, cfg.image_size)
        if self.bench_labeler:
            pad = MAX_INSTANCES - cfg.boxes_per_image
            boxes = torch.nn.functional.pad(boxes, (0, 0, 0, pad), value=-1.0)
            classes = torch.nn.functional.pad(classes, (0, pad), value=-1.0)
            return images, boxes, classes
        labeler = _classes().AnchorLabeler(model.anchors, cfg.num_classes)
        with torch.no_grad():
            cls_targets, box_targets, num_positives = labeler.batch_label_anchors(boxes, classes, filter_valid=False)
        return (images, *cls_targets, *box_targets, num_positives)

    def loss(self, output: Any) -> Any:
        return output["loss"]


register(TimmEfficientDet(
    "TEFD", "timm_efficientdet", "torchbench", "training", 1,
    idiom="none: 12 inputs (image + 11 anchor-label maps from the loader, 6.4 MiB) copied into the graph "
          "each replay; drop-path RNG; python-float loss constants",
    stochastic=True))

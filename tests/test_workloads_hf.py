"""The HuggingFace workloads keep the constructs of the benchmark's models that trip CUDA graphs."""

from __future__ import annotations

import pytest
import torch
from torch.overrides import TorchFunctionMode

from grace.bench.workloads import get

pytest.importorskip("transformers")


class _CreatedOn(TorchFunctionMode):
    """Records the device of every tensor that ``torch.arange`` and ``torch.tensor`` make."""

    def __init__(self) -> None:
        super().__init__()
        self.devices: dict[str, set[str]] = {"arange": set(), "tensor": set()}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = getattr(func, "__name__", "")
        if name in self.devices and isinstance(out, torch.Tensor):
            self.devices[name].add(out.device.type)
        return out


def _run_on_meta(name: str) -> _CreatedOn:
    """One step of the tiny model with weights and inputs on "meta": what lands on "cpu" was made there."""
    workload = get(name)
    torch.manual_seed(0)
    model = workload.build("cpu", 2, "tiny").to("meta")
    inputs = tuple(x.to("meta") for x in workload.inputs(model, 0, "cpu", 2, "tiny"))
    for module in model.modules():  # its eager-only padding check reads token values
        if hasattr(module, "warn_if_padding_and_no_attention_mask"):
            module.warn_if_padding_and_no_attention_mask = lambda input_ids, attention_mask: None
    mode = _CreatedOn()
    with mode, torch.no_grad():
        model(*inputs)
    return mode


def test_xlnet_builds_positions_on_the_cpu() -> None:
    assert "cpu" in _run_on_meta("XLNET-I").devices["arange"]


@pytest.mark.parametrize("name, module", [("DBV2", "deberta_v2"), ("DMLM", "deberta")])
def test_deberta_divides_by_a_cpu_scalar_tensor(name: str, module: str, monkeypatch) -> None:
    """``scaled_size_sqrt`` is TorchScript, which a TorchFunctionMode does not see: wrap it instead."""
    import importlib

    modeling = importlib.import_module(f"transformers.models.{module}.modeling_{module}")
    original = modeling.scaled_size_sqrt
    devices: list[str] = []

    def recording(query_layer, scale_factor):
        scale = original(query_layer, scale_factor)
        devices.append(scale.device.type)
        return scale

    monkeypatch.setattr(modeling, "scaled_size_sqrt", recording)
    _run_on_meta(name)
    assert devices and set(devices) == {"cpu"}


def test_mt5_feeds_input_ids_as_decoder_input_ids() -> None:
    workload = get("MTCG-I")
    torch.manual_seed(0)
    model = workload.build("cpu", 2, "tiny")
    seen: dict[str, torch.Tensor] = {}
    model.model.decoder.register_forward_pre_hook(
        lambda _m, args, kwargs: seen.update(ids=kwargs["input_ids"]), with_kwargs=True)
    inputs = workload.inputs(model, 0, "cpu", 2, "tiny")
    with torch.no_grad():
        model(*inputs)
    assert seen["ids"] is inputs[0]

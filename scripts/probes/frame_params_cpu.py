"""How Dynamo's per-call cost grows with a module's parameters, on the CPU (no GPU needed).

Also DenseNet-121, DNET's model (``--layers 0``).

With ``inline_inbuilt_nn_modules`` (2.11's default) a module's parameters are graph inputs: the
compiled frame's guards look at them, and its pre-graph bytecode fetches each one from the
module on every call. For a chain of ``N`` small linear layers (``2N`` parameter tensors),
compiled with ``aot_eager`` (Dynamo's and AOTAutograd's layers exactly as with Inductor) or with
``--backend first-outputs`` (the graph's call hands back its first outputs: Dynamo alone), this
times back to back, one thread:

- the compiled call;
- the cache entry's guard check alone (``GuardManagerWrapper.check`` on the frame's locals);
- its transformed bytecode alone, called as a plain function (the pre-graph bytecode, then
  AOTAutograd's wrappers and the graph run eagerly);
- the module called eagerly.

The compiled call less the other two is Dynamo's frame entry and exit; the bytecode less eager
is the pre-graph bytecode and AOTAutograd's wrappers, which :mod:`frame_overhead_cpu` sizes for
one tensor.

    python scripts/probes/frame_params_cpu.py [--layers 1,25,100,200,0] [--backend first-outputs] [--calls 1000] [--rounds 7]
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import torch
from frame_overhead_cpu import only_entry, per_call_us  # run as a script: its folder is on the path


class Chain(torch.nn.Module):
    def __init__(self, layers: int) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(4, 4) for _ in range(layers))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return x


def replay_first_outputs(gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]) -> Callable:
    """A backend whose compiled graph hands back the outputs of its first run: what remains of
    a call is Dynamo's frame and its pre-graph bytecode, the graph's cost taken out."""
    outputs = gm(*example_inputs)

    def run(*args: torch.Tensor) -> object:
        return outputs

    return run


def backend_named(name: str) -> object:
    return replay_first_outputs if name == "first-outputs" else name


def build(layers: int) -> tuple[torch.nn.Module, torch.Tensor]:
    """The chain of ``layers`` linear layers, or with ``layers`` 0 torchvision's DenseNet-121
    (DNET's model: 364 parameters and 363 buffers) on a small image."""
    if layers == 0:
        import torchvision

        return torchvision.models.densenet121().eval(), torch.randn(1, 3, 64, 64)
    return Chain(layers).eval(), torch.randn(2, 4)


def measure(layers: int, calls: int, rounds: int, backend: str) -> dict[str, float]:
    torch._dynamo.reset()
    model, x = build(layers)
    compiled = torch.compile(model, backend=backend_named(backend))
    forward = type(model).forward
    with torch.no_grad():
        for _ in range(5):
            compiled(x)
        guards, transformed = only_entry(forward)
        frame_locals = {"self": model, "x": x}
        if not (guards.check(frame_locals) and torch.equal(transformed(model, x), compiled(x))
                and (backend != "aot_eager" or torch.equal(compiled(x), model(x)))):
            raise SystemExit("the guard check or the transformed bytecode does not match the compiled call")
        return {
            "compiled call": per_call_us(lambda: compiled(x), calls, rounds),
            "guard check alone": per_call_us(lambda: guards.check(frame_locals), calls, rounds),
            "transformed bytecode alone": per_call_us(lambda: transformed(model, x), calls, rounds),
            "eager": per_call_us(lambda: model(x), max(calls // 10, 10), rounds),
        }


def model_tensors(layers: int) -> list[torch.Tensor]:
    model, _ = build(layers)
    return [*model.parameters(), *model.buffers()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", default="1,25,100,200,0", help="comma-separated; 0: DenseNet-121 (DNET)")
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--backend", default="aot_eager",
                        help="aot_eager, or first-outputs: the graph's call returns its first outputs (Dynamo alone)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}; backend {args.backend}; {args.calls} calls a round, median of {args.rounds} rounds, one thread; "
          f"us a call")
    names = ["compiled call", "guard check alone", "transformed bytecode alone", "eager"]
    print(f"{'layers':>6} {'tensors':>6} " + " ".join(f"{n:>27}" for n in names) + f" {'frame entry/exit':>17}")
    for layers in (int(n) for n in args.layers.split(",")):
        r = measure(layers, args.calls, args.rounds, args.backend)
        frame = r["compiled call"] - r["guard check alone"] - r["transformed bytecode alone"]
        tensors = sum(1 for _ in model_tensors(layers))
        print(f"{layers or 'DNET':>6} {tensors:>6} " + " ".join(f"{r[n]:>27.2f}" for n in names) + f" {frame:>17.2f}")


if __name__ == "__main__":
    main()

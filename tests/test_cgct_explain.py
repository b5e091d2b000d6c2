"""``grace explain``'s collector: Inductor's partition and skip records and Dynamo's graph breaks
turned into findings with root causes and the user's source lines (CPU).

The partition records come from real compiles for a fake CUDA device (a subprocess runs
Dynamo, AOTAutograd and Inductor's scheduler on fake tensors, tests/fixtures/cgct); the graph
break comes from a real CPU compile.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from grace.cgct.explain import Collector, classify, render, user_frame

FIXTURES = Path(__file__).parent / "fixtures" / "cgct"


@pytest.fixture(scope="module")
def fake_cuda_cases() -> dict:
    env = {**os.environ, "GRACE_CGCT": "0"}  # what stock PyTorch leaves to explain
    out = subprocess.run([sys.executable, str(FIXTURES / "explain_cases.py")], capture_output=True, text=True,
                         timeout=600, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_numpy_temperature_splits_off_a_cpu_scalar_partition(fake_cuda_cases) -> None:
    case = fake_cuda_cases["numpy"]
    assert case["graphs"] == [{"partitions": 2, "cudagraphable": 1, "non_cudagraphable": 1}]
    causes = {f["cause"] for f in case["findings"]}
    assert causes == {"cpu-scalar"}, case["findings"]
    assert any(f["ir"] == "DeviceCopy" for f in case["findings"])


def test_python_float_temperature_is_one_graph_with_nothing_to_explain(fake_cuda_cases) -> None:
    case = fake_cuda_cases["float"]
    assert case["graphs"] == [{"partitions": 1, "cudagraphable": 1, "non_cudagraphable": 0}]
    assert case["findings"] == []


def test_module_cpu_tensor_copy_is_traced_to_the_users_line(fake_cuda_cases) -> None:
    (finding,) = fake_cuda_cases["cpu-tensor"]["findings"]
    assert finding["cause"] == "cpu-tensor-copy" and finding["reason"] == "DeviceCopy ops"
    source = finding["source"]
    assert source["file"].endswith("explain_cases.py") and source["function"] == "forward"
    assert "self.table.to(x.device)" in source["code"]


def test_a_mask_copied_in_forward_and_kept_on_the_module_is_explained(fake_cuda_cases) -> None:
    """DALLE2's CLIP idiom: stock keeps the copy out of the graph (and its result, kept on the
    module, is a graph output: PT2-CG's "overwritten by a subsequent run" on the GPU)."""
    case = fake_cuda_cases["kept-mask"]
    assert case["graphs"][0]["non_cudagraphable"] == 1
    (finding,) = case["findings"]
    assert finding["cause"] == "cpu-tensor-copy" and "self.attn_mask.to(" in finding["source"]["code"]


def test_a_cpu_output_no_longer_splits_the_gpu_work_on_torch_2_11(fake_cuda_cases) -> None:
    """The paper's third rewrite (CPU outputs) has nothing to recover on 2.11: the scheduler
    gives the device-to-host copy a partition of its own and the GPU work stays one CUDA graph,
    which is why CGCT does not rewrite outputs. If a torch upgrade changes that, this fails."""
    case = fake_cuda_cases["cpu-output"]
    assert case["graphs"] == [{"partitions": 2, "cudagraphable": 1, "non_cudagraphable": 1}]
    (finding,) = case["findings"]
    assert finding["ir"] == "DeviceCopy" and "h.sum().cpu()" in finding["source"]["code"]


def test_graph_break_on_item_is_a_synchronization_with_its_line() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        y = x * 2
        n = int(y.sum().item())
        return y + n

    torch._dynamo.reset()
    with Collector() as collector:
        torch.compile(f, backend="eager")(torch.ones(4))
    (finding,) = collector.explanation.findings
    assert finding.kind == "graph-break" and finding.cause == "sync"
    assert finding.source is not None and finding.source.function == "f" and ".item()" in finding.source.code
    text = render(collector.explanation)
    assert ".item() / data-dependent synchronization (1)" in text and "not fixed by GraCE" in text


def test_skipped_graphs_are_found_once_with_their_stack() -> None:
    collector = Collector()
    msg = ("skipping cudagraphs due to mutated inputs (1 instances). Found from : \n"
           '   File "/work/model.py", line 12, in forward\n     x.add_(1)\n')
    collector.feed(msg)
    collector.feed(msg)
    (finding,) = collector.explanation.findings
    assert finding.cause == "input-mutation" and finding.kind == "skip"
    assert (finding.source.file, finding.source.line, finding.source.code) == ("/work/model.py", 12, "x.add_(1)")


@pytest.mark.parametrize("reason, fx, cause", [
    ("DeviceCopy ops", "prims.device_put.default(arg3_1, cuda:0)", "cpu-tensor-copy"),
    ("DeviceCopy ops", "prims.device_put.default(cat_default, cuda:0, True)", "cpu-scalar"),
    ("cpu ops", "aten.mul.Tensor(arg0_1, 2)", "cpu-op"),
    ("cpu ops", "aten._local_scalar_dense.default(buf0)", "sync"),
    ("CUDAGraph-unsafe custom ops", "", "unsafe-custom-op"),
    ("unbacked binding ops", "", "dynamic-shape"),
    ("skipping cudagraphs due to cpu device (arg3_1)", "", "cpu-op"),
    ("skipping cudagraphs due to multiple devices: cuda:0, cuda:1", "", "multiple-devices"),
    ("something new upstream", "", "other"),
])
def test_classify(reason: str, fx: str, cause: str) -> None:
    assert classify(reason, fx) == cause


def test_user_frame_is_the_innermost_with_its_code() -> None:
    lines = ['File "/a.py", line 3, in main', "run()", 'File "/m.py", line 9, in forward', "y = x.cpu()"]
    frame = user_frame(lines)
    assert (frame.file, frame.line, frame.function, frame.code) == ("/m.py", 9, "forward", "y = x.cpu()")
    assert user_frame(["no frames here"]) is None


def test_cli_names_unknown_workloads_and_a_missing_gpu(capsys) -> None:
    from grace.cli import main

    assert main(["explain", "no-such-workload"]) == 2
    assert "unknown workload" in capsys.readouterr().err
    if not torch.cuda.is_available():
        assert main(["explain", "micro-attn-numpy"]) == 2
        assert "needs a CUDA GPU" in capsys.readouterr().err

"""GraCE's hardening of CUDA graph trees on the GPU (grace.trees, with any switch on)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from grace.paths import REPO_ROOT

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a CUDA GPU")


def test_an_overwritten_input_raises_and_the_next_call_in_the_generation_records_and_is_right() -> None:
    """A replay whose input a later replay overwrote raises before its node becomes current, so
    the recording that follows in the same generation does not list a freed output as live
    (the probe run with GRACE_DISABLE=1 shows stock there)."""
    env = {**os.environ, "GRACE_DISABLE": "0", "GRACE_SCG_FORCE": "graph"}
    proc = subprocess.run([sys.executable, str(REPO_ROOT / "scripts/probes/replay_input_overwritten.py")],
                          capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = dict(line.split(": ", 1) for line in proc.stdout.splitlines() if ": " in line)
    assert lines["f(z), z overwritten"].startswith("RuntimeError") and "overwritten" in lines["f(z), z overwritten"]
    assert lines["f(fresh), same generation"] == "ok, equal to eager: True", proc.stdout


@pytest.mark.parametrize("lean", ["0", "1"])
def test_outputs_only_autograd_holds_are_not_overwritten_before_their_backward(lean: str) -> None:
    """A layer's forward whose outputs only autograd holds, then another function or the same
    layer again, then one backward: each step's gradients equal eager's (stock 2.11 aborts there,
    "invalid device pointer" in its allocator restore)."""
    env = {**os.environ, "GRACE_DISABLE": "0", "GRACE_LEAN_REPLAY": lean}
    proc = subprocess.run([sys.executable, str(REPO_ROOT / "scripts/probes/saved_output_dead.py")],
                          capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    steps = [line for line in proc.stdout.splitlines() if " step " in line]
    assert len(steps) == 14, proc.stdout
    assert all(line.endswith("(equal)") for line in steps), proc.stdout


def test_an_output_read_after_the_next_call_took_it_as_input_raises_or_is_right() -> None:
    """``y = f(x); g(y); y.clone()`` with both functions in graphs: with
    ``grace.config.stale_outputs_raise`` every read either raises the tree's overwritten-output
    error or equals eager (stock 2.11 aborts earlier; without the switch, ``y`` read after a
    replayed ``g`` can hold ``g``'s output)."""
    import re

    env = {**os.environ, "GRACE_DISABLE": "0", "GRACE_SCG_FORCE": "graph", "GRACE_STALE_OUTPUTS_RAISE": "1"}
    proc = subprocess.run([sys.executable, str(REPO_ROOT / "scripts/probes/interleaved_fed_back.py")],
                          capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    diffs = [float(d) for d in re.findall(r"max diff (\S+?)[;\s]", proc.stdout + "\n")]
    assert len(diffs) >= 5, proc.stdout  # the fed-back steps at least
    assert all(d <= 1e-4 for d in diffs), proc.stdout


def test_accumulated_gradients_equal_eagers_with_gradients_copied() -> None:
    """Gradient accumulation through a compiled training step with ``grace.config.copy_grads``:
    at every micro-step, warm-up, recording and replays, every ``.grad`` equals eager's (the
    probe run with GRACE_DISABLE=1 shows stock there). A ``.grad`` autograd adopted may lie in a
    graph pool until the next compiled call copies it."""
    env = {**os.environ, "GRACE_DISABLE": "0", "GRACE_COPY_GRADS": "1", "GRACE_SCG_FORCE": "graph"}
    proc = subprocess.run([sys.executable, str(REPO_ROOT / "scripts/probes/grad_accumulation.py")],
                          capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    steps = [line for line in proc.stdout.splitlines() if line.startswith("window ")]
    assert len(steps) == 18, proc.stdout
    assert all(line.endswith("(equal)") for line in steps), proc.stdout


@pytest.mark.parametrize("case", ["first", "new-size"])
@pytest.mark.parametrize("scg_force", ["graph", ""])
def test_an_input_off_alignment_at_a_first_call_gives_eagers_result(case: str, scg_force: str) -> None:
    """An input 4 bytes off 16-byte alignment at the first call of a function, or at the first
    call of a new size of a dynamic one whose kernels assume it aligned and load it with vector
    instructions (64 columns, Inductor's first configuration kept), with every switch on, SCG
    keeping each graph or deciding: every call equals eager's and none faults (stock's warm-up
    reads the input off alignment, grace.input_alignment)."""
    env = {**os.environ, "GRACE_DISABLE": "0", "GRACE_SCG_FORCE": scg_force}
    proc = subprocess.run([sys.executable, str(REPO_ROOT / "scripts/probes/misaligned_first_call.py"), "--case", case,
                           "--cols", "64", "--no-autotune"],
                          capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.count(" ok") == (4 if case == "new-size" else 3), proc.stdout


@pytest.mark.parametrize("rearm", ["reload", "overwritten"])
def test_a_function_whose_kernel_was_armed_again_is_recorded_without_autotuning_in_the_capture(rearm: str) -> None:
    """A warmed-up function recorded after its Triton kernel was armed to autotune again
    (scripts/probes/autotune_in_capture.py): with GraCE's switches at their defaults (the probe
    forces SCG to record) it is warmed up again, then recorded, and every step equals eager's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRACE_")}
    proc = subprocess.run([sys.executable, str(REPO_ROOT / "scripts/probes/autotune_in_capture.py"), "--rearm", rearm],
                          capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.count(" ok") == 3, proc.stdout


ALIAS_HELD = """
import sys
import torch

torch.manual_seed(0)
layer = torch.nn.Linear(16, 16).cuda().requires_grad_(False)
f = torch.compile(layer, mode="reduce-overhead")
x = torch.randn(2, 3, 16, device="cuda")  # a 3-D input: Inductor hands out a reinterpreted mm buffer
for _ in range(3):  # warm-up, recording, replay
    torch.compiler.cudagraph_mark_step_begin()
    y = f(x)
node = torch._inductor.cudagraph_trees.get_container(0).tree_manager.current_node
cached = [t for t in node.cached_tensor_outputs if t is not None]
print("handed out the cached tensor:", any(y is t for t in cached))
expected = y.clone()
del y
print("holders of the cached outputs' storages, none held:",
      sorted({torch._C._storage_Use_Count(t.untyped_storage()._cdata) for t in cached}))
del cached
torch.compiler.cudagraph_mark_step_begin()
y = f(x)
expected = y.clone()
torch.compiler.cudagraph_mark_step_begin()
z = f(x + 1)  # the next generation's replay writes where y lies
try:
    same = torch.equal(y, expected)
    print("read y after the next replay:", "right" if same else "STALE")
except RuntimeError as e:
    print("read y after the next replay: raised", "overwritten" in str(e))
print("z right:", torch.allclose(z, layer(x + 1)))
"""


def test_an_output_the_framework_aliased_raises_once_the_next_generation_replays() -> None:
    """A 3-D linear layer's output is not the node's cached tensor but Inductor's reinterpretation
    of its buffer, made between graph partitions: held across ``cudagraph_mark_step_begin`` and
    read after the next replay, it raises the tree's overwritten-output error with the guard on
    (stock reads it stale, silently)."""
    env = {**os.environ, "GRACE_DISABLE": "0", "GRACE_SCG_FORCE": "graph", "GRACE_STALE_OUTPUTS_RAISE": "1"}
    proc = subprocess.run([sys.executable, "-c", ALIAS_HELD], capture_output=True, text=True, env=env,
                          cwd=REPO_ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "handed out the cached tensor: False" in proc.stdout, proc.stdout
    assert "holders of the cached outputs' storages, none held: [2]" in proc.stdout, proc.stdout  # the tree's two
    assert "read y after the next replay: raised True" in proc.stdout, proc.stdout
    assert "z right: True" in proc.stdout, proc.stdout

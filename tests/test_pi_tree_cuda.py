"""PI inside real CUDA graph trees (needs a GPU and GraCE's overlay; skips otherwise).

Behaviour only, never timing: with ``grace.config.pi`` on, a graph whose inputs only Triton
kernels read replays them through the pointer table, and every replay equals eager on inputs
it has never seen (fresh allocations each call, so the capture-time inputs are freed and their
memory reused), for pointwise kernels and a reduction; an input that a cuBLAS matmul reads keeps
its copy; misaligned and overlapping
inputs are right; a training step's gradients equal eager's; with the switch off no node has a
PI plan.
"""

from __future__ import annotations

import inspect
from typing import Any, Iterator

import pytest

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

N = 1 << 16


def _overlay_active() -> bool:
    from torch._inductor import cudagraph_trees

    return "grace_pi" in inspect.getsource(cudagraph_trees)


@pytest.fixture
def pi() -> Iterator[None]:
    if not _overlay_active():
        pytest.skip("GraCE's overlay with the PI patch is not active here (run `make setup`)")
    import torch._dynamo
    from torch._inductor import cudagraph_trees

    import grace.config

    torch._dynamo.reset()
    cudagraph_trees.reset_cudagraph_trees()
    with grace.config.patch(pi=True, scg=False):
        yield
    torch._dynamo.reset()
    cudagraph_trees.reset_cudagraph_trees()


def _nodes() -> list[Any]:
    from grace.trees import recorded_nodes

    return recorded_nodes()


def _fresh(*shape: int) -> Any:
    return torch.randn(*shape, device="cuda")


def test_pointwise_inputs_are_indirected_and_every_replay_reads_its_own_inputs(pi) -> None:
    def f(a: Any, b: Any) -> Any:
        return (a + b) * torch.sin(a)

    cf = torch.compile(f, mode="reduce-overhead")
    for step in range(8):
        a, b = _fresh(N), _fresh(N)
        torch.testing.assert_close(cf(a, b), f(a, b), msg=f"call {step}")
    (node,) = _nodes()
    assert node.grace_pi is not None, "the graph records with a PI plan"
    assert node.grace_pi.plan.indirected == (0, 1)
    assert node.grace_pi.plan.copy_bytes_after == 0


def test_a_graph_that_fails_its_check_is_recorded_again_stock_and_stays_right(pi, monkeypatch, caplog) -> None:
    import logging

    from grace.pi import check

    monkeypatch.setattr(check, "first_difference", lambda *a, **k: "forced by the test")

    def f(a: Any, b: Any) -> Any:
        return (a + b) * torch.sin(a)

    cf = torch.compile(f, mode="reduce-overhead")
    logger = logging.getLogger("grace.pi")  # the grace logger does not propagate to root
    level = logger.level
    logger.addHandler(caplog.handler)
    logger.setLevel(logging.WARNING)
    try:
        for step in range(6):
            a, b = _fresh(N), _fresh(N)
            torch.testing.assert_close(cf(a, b), f(a, b), msg=f"call {step}")
            del a, b  # the next call's inputs may take their memory
    finally:
        logger.removeHandler(caplog.handler)
        logger.setLevel(level)
    (node,) = _nodes()
    assert node.grace_pi is None, "the second capture is stock: the tree copies every input"
    assert "recorded again without indirection: differs from the stock kernels" in caplog.text


def test_a_reduction_reads_its_input_through_the_table(pi) -> None:
    def r(b: Any) -> Any:
        return b.sum(-1, keepdim=True) * 2

    cr = torch.compile(r, mode="reduce-overhead")
    for step in range(6):
        b = _fresh(256, 64)
        torch.testing.assert_close(cr(b), r(b), msg=f"call {step}")
    (node,) = _nodes()
    assert node.grace_pi is not None and node.grace_pi.plan.indirected == (0,), \
        "the reduction's graph passes its check against stock kernels (else it is recorded again, stock)"


def test_an_input_read_by_a_matmul_keeps_its_copy(pi) -> None:
    def g(a: Any, b: Any, w: Any) -> Any:
        return torch.relu(a @ w) + b.sum(-1, keepdim=True)

    cg = torch.compile(g, mode="reduce-overhead")
    for step in range(6):
        a, b, w = _fresh(256, 128), _fresh(256, 64), _fresh(128, 32)
        torch.testing.assert_close(cg(a, b, w), g(a, b, w), msg=f"call {step}")
    plans = [n.grace_pi.plan for n in _nodes() if n.grace_pi is not None]
    assert plans, "b is read by a Triton kernel only, so the graph has a plan"
    (plan,) = plans
    copied = [d for d in plan.decisions if not d.indirect]
    assert len(plan.indirected) == 1, "b only"
    assert copied and all("aten.mm" in d.reason or "aten.addmm" in d.reason for d in copied), \
        [d.reason for d in copied]


def test_misaligned_and_overlapping_inputs_equal_eager(pi) -> None:
    def f(a: Any, b: Any) -> Any:
        return a * 2 + b

    cf = torch.compile(f, mode="reduce-overhead")
    for step in range(4):
        a, b = _fresh(N), _fresh(N)
        torch.testing.assert_close(cf(a, b), f(a, b))
    for step in range(4):
        base = _fresh(2 * N + 1)
        misaligned, overlapping = base[1:N + 1], base[N // 2:N // 2 + N]
        torch.testing.assert_close(cf(misaligned, overlapping), f(misaligned, overlapping), msg=f"call {step}")


def test_an_output_fed_back_as_the_next_input_equals_eager(pi) -> None:
    """``x = f(x)``: the last call's output lies in the graph's pool, where this replay writes its
    own output; read through the table during the replay, elements moved by ``roll`` would be
    read after being overwritten. The guard must give it the copy that stock makes."""
    def f(x: Any) -> Any:
        return torch.roll(x, 4097) * 0.5 + x.sum() * 1e-7

    cf = torch.compile(f, mode="reduce-overhead")
    for step in range(3):  # recorded on fresh inputs first
        x = _fresh(N)
        torch.testing.assert_close(cf(x), f(x))
    copied: list[int] = []
    from grace.pi.replay import PIReplay

    for node in _nodes():  # note what the guard sends to the copy path
        if not isinstance(node.grace_pi, PIReplay):
            continue
        guard = node.grace_pi.guard

        class Spy:
            inputs = guard.inputs

            def must_copy(self, inputs: Any, ptrs: Any = None, guard: Any = guard) -> list[int]:
                out = guard.must_copy(inputs, ptrs)
                copied.extend(out)
                return out

        node.grace_pi.guard = Spy()
    x = _fresh(N)
    expected = x.clone()
    for step in range(6):
        expected = f(expected)
        x = cf(x)
        torch.testing.assert_close(x, expected, msg=f"call {step} on the last call's output")
        x = x.clone() if step == 2 else x  # one call in between on memory outside the pool
    assert copied, "the fed-back output was never sent to the copy path: the test missed the case"


def test_training_gradients_equal_eager_with_fresh_inputs(pi) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.GELU(), torch.nn.Linear(64, 8)).cuda()
    reference = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.GELU(), torch.nn.Linear(64, 8)).cuda()
    reference.load_state_dict(model.state_dict())

    def step(m: Any, x: Any, scale: Any) -> Any:
        return (m(torch.tanh(x) * scale) ** 2).mean()

    compiled = torch.compile(lambda x, s: step(model, x, s), mode="reduce-overhead")
    for i in range(6):
        x, s = _fresh(32, 64), _fresh(32, 64)
        for p in (*model.parameters(), *reference.parameters()):
            p.grad = None
        loss = compiled(x, s)
        loss.backward()
        expected = step(reference, x, s)
        expected.backward()
        torch.testing.assert_close(loss, expected, msg=f"loss, step {i}")
        for p, q in zip(model.parameters(), reference.parameters()):
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5, msg=f"grad, step {i}")


def test_a_backward_that_fails_its_check_after_its_activations_died_is_retired(pi, monkeypatch) -> None:
    """Strategy ptx does not hold a backward's activations (outputs of the forward's graph)
    through its capture, so the graph may reuse their memory as stock's does. Forced to fail its
    check, such a graph cannot be captured again on activations that died, so it is retired:
    that step's gradients come from the stock kernels, the node never replays, the backward
    records again stock at the next step, and every step equals eager."""
    from grace.pi import finish, retire

    forced: list[str] = []

    def untrusted(rec: Any, captured: Any, *args: Any) -> str:
        forced.append(captured.name)
        return "forced by the test"

    monkeypatch.setattr(finish, "why_untrusted", untrusted)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 8)).cuda()
    reference = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 8)).cuda()
    reference.load_state_dict(model.state_dict())

    def step(m: Any, x: Any) -> Any:
        return (m(torch.tanh(x)) ** 2).mean()

    compiled = torch.compile(lambda x: step(model, x), mode="reduce-overhead")
    for i in range(6):
        x = _fresh(32, 64)
        for p in (*model.parameters(), *reference.parameters()):
            p.grad = None
        loss = compiled(x)
        loss.backward()
        expected = step(reference, x)
        expected.backward()
        torch.testing.assert_close(loss, expected, msg=f"loss, step {i}")
        for p, q in zip(model.parameters(), reference.parameters()):
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5, msg=f"grad, step {i}")
    retired = [n for n in _nodes() if n.grace_retired]
    assert forced and len(retired) == 1, f"checks forced to fail: {forced}; retired: {len(retired)}"
    assert isinstance(retired[0].graph, retire.RetiredGraph)
    assert retire.refused(retired[0].wrapped_function.model) == "forced by the test"


def _matmul_and_reduction_calls_equal_eager(strategy: str) -> None:
    """Six calls, each on fresh inputs, of a function whose inputs a cuBLAS matmul and a Triton
    reduction read, compiled under PI's ``strategy``: each equal to eager."""
    import grace.config

    def g(a: Any, b: Any, w: Any) -> Any:
        return torch.relu(a @ w) + b.sum(-1, keepdim=True)

    with grace.config.patch(pi_strategy=strategy):
        cg = torch.compile(g, mode="reduce-overhead")
        for step in range(6):
            a, b, w = _fresh(256, 128), _fresh(256, 64), _fresh(128, 32)
            torch.testing.assert_close(cg(a, b, w), g(a, b, w), msg=f"call {step}")
            del a, b, w


@pytest.mark.parametrize("strategy", ["exec-update", "prelude"])
def test_kernel_arguments_rewritten_for_triton_and_cublas_equal_eager(pi, strategy: str) -> None:
    """Strategies (3) and (2): the graph's arguments are rewritten, from the host or by the
    prelude kernel on the device; every call's fresh inputs must be read."""
    _matmul_and_reduction_calls_equal_eager(strategy)
    (node,) = _nodes()
    assert node.grace_pi is not None, "the graph's arguments are rewritten, not its inputs copied"
    assert 2 in node.grace_pi.plan.indirected, "b, read by a Triton kernel's plain pointer argument"


def test_the_prelude_rewrites_the_arguments_of_convolutions_and_matmuls(pi) -> None:
    """Strategy (2) where cuDNN convolutions and a cuBLAS matmul read the inputs, then Triton
    kernels: the check passes, so the rewrite is deployed, and every call's fresh inputs are read.

    The graphs where the prelude's writes were lost at an un-uploaded first launch (MMC, ST) do
    not shrink to a test: this one passes with or without the upload; the probe
    ``scripts/probes/prelude_check.py`` runs those workloads."""
    import grace.config

    weights = [torch.randn(8, 3, 3, 3, device="cuda") for _ in range(4)]

    def g(img: Any, t: Any, w: Any) -> Any:
        maps = [torch.conv2d(img, k, padding=1) for k in weights]
        pooled = torch.stack([m.amax(dim=(1, 2, 3)) for m in maps], -1)
        return pooled.argmax(-1), pooled.sum(-1) + (t @ w).sum(-1)

    with grace.config.patch(pi_strategy="prelude"):
        cg = torch.compile(g, mode="reduce-overhead")
        for step in range(5):
            img, t, w = _fresh(4, 3, 32, 32), _fresh(4, 64), _fresh(64, 16)
            got, expected = cg(img, t, w), g(img, t, w)
            torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4, msg=f"call {step}")
            del img, t, w
    (node,) = _nodes()
    assert node.grace_pi is not None, "the check failed: the rewrite was not deployed"
    assert len(node.grace_pi.plan.indirected) >= 2, "img (cuDNN) and t (cuBLAS) read through the prelude"


@pytest.mark.parametrize("strategy", ["exec-update", "prelude"])
def test_a_rewrite_that_fails_its_check_falls_back_to_the_captured_graph_and_stays_right(
        pi, monkeypatch, strategy: str) -> None:
    """Strategy (3) drops its rewrite and replays the graph as captured, its arguments put back
    at the placeholders; strategy (2) captures again stock. Either way every copy is kept and
    each call's fresh inputs are read: a graph left pointing at the check's moved copies would
    read freed memory."""
    from grace.pi import check

    monkeypatch.setattr(check, "first_difference", lambda *a, **k: "forced by the test")
    _matmul_and_reduction_calls_equal_eager(strategy)
    (node,) = _nodes()
    assert node.grace_pi is None, "no rewrite deployed: the tree copies every input"


def _pool_bytes(node: Any) -> int:
    from torch._inductor.cudagraph_trees import get_cudagraph_segments

    return sum(int(seg["total_size"]) for seg in get_cudagraph_segments(node.cuda_graphs_pool))


def test_placeholders_stay_in_the_graph_pool_as_stock(pi) -> None:
    """Placeholders are the tree's own, in the graph's pool: with PI the pool is no larger than
    stock's, and an output that aliases an input (a view of it) is a pool output, which the
    tree's slow-path pool checks assert after the capture. Replays equal eager, including one
    that must copy (a misaligned input goes to its placeholder)."""
    import torch._dynamo
    import torch._inductor.config
    from torch._inductor import cudagraph_trees

    import grace.config

    m = 1 << 24  # 64 MiB of float32 per input

    def f(a: Any, b: Any) -> Any:
        return a * 2 + b, a.view(-1)

    pools = {}
    for on in (False, True):
        torch._dynamo.reset()
        cudagraph_trees.reset_cudagraph_trees()
        with grace.config.patch(pi=on, scg=False), torch._inductor.config.patch(
                {"triton.slow_path_cudagraph_asserts": True}):
            cf = torch.compile(f, mode="reduce-overhead")
            for step in range(3):
                a, b = _fresh(m), _fresh(m)
                torch.testing.assert_close(cf(a, b), f(a, b), msg=f"pi={on}, call {step}")
            (node,) = _nodes()
            pools[on] = _pool_bytes(node)
            if on:
                assert node.grace_pi is not None and set(node.grace_pi.plan.indirected) == {1}, \
                    "b is read through the table; a keeps its copy, since an output aliases it"
                base = _fresh(m + 1)
                misaligned = base[1:]
                torch.testing.assert_close(cf(a, misaligned), f(a, misaligned))
    assert pools[True] <= pools[False], f"graph pools (bytes): {pools}"


def test_a_placeholder_past_its_last_use_gives_the_graph_its_memory_as_stock() -> None:
    """Stock's capture lets a later buffer take an input's placeholder memory once the input is
    read for the last time; strategy ptx's capture does too (it does not hold the placeholders),
    so the pool is no larger than stock's. Replays equal eager with fresh inputs each call."""
    if not _overlay_active():
        pytest.skip("GraCE's overlay with the PI patch is not active here (run `make setup`)")
    import torch._dynamo
    from torch._inductor import cudagraph_trees

    import grace.config

    rows, cols = 1 << 12, 1 << 12  # 64 MiB of float32: x, and the second product, which may take x's memory

    def f(x: Any, w: Any) -> Any:
        h = torch.relu(x @ w)  # x's last use
        return (h @ w).sum(0)

    pools = {}
    for on in (False, True):
        torch._dynamo.reset()
        cudagraph_trees.reset_cudagraph_trees()
        with grace.config.patch(pi=on, pi_strategy="ptx", scg=False):
            cf = torch.compile(f, mode="reduce-overhead")
            for step in range(3):
                x, w = _fresh(rows, cols), _fresh(cols, cols) / cols
                torch.testing.assert_close(cf(x, w), f(x, w), msg=f"pi={on}, call {step}", rtol=1e-3, atol=1e-3)
                del x, w
            (node,) = _nodes()
            pools[on] = _pool_bytes(node)
    torch._dynamo.reset()
    cudagraph_trees.reset_cudagraph_trees()
    assert pools[True] <= pools[False], f"graph pools (bytes): {pools}"


def test_the_capture_check_leaves_no_vendor_workspace_allocated() -> None:
    """PI's check runs the model once outside a capture, and its matmul takes a cuBLAS workspace
    for the stream it runs on (32 MiB on Hopper); stock's warm-up frees such workspaces, and so
    does the check: after the recording the process holds no more memory with PI than without
    (its pointer table, 8 KiB, aside)."""
    if not _overlay_active():
        pytest.skip("GraCE's overlay with the PI patch is not active here (run `make setup`)")
    import torch._dynamo
    from torch._inductor import cudagraph_trees

    import grace.config

    def f(x: Any, w: Any, b: Any) -> Any:
        return torch.relu(x @ w) + b  # b is indirected: the graph gets a PI plan and its check

    allocated, calls = {}, []
    for on in (False, True):
        torch._dynamo.reset()
        cudagraph_trees.reset_cudagraph_trees()
        torch.cuda.synchronize()
        torch._C._cuda_clearCublasWorkspaces()  # no workspace left by an earlier test's eager matmul
        start = torch.cuda.memory_allocated()
        with grace.config.patch(pi=on, pi_strategy="ptx", scg=False):
            cf = torch.compile(f, mode="reduce-overhead")
            for step in range(3):
                x, w, b = _fresh(512, 512), _fresh(512, 512), _fresh(512)
                calls.append((on, step, (x, w, b), cf(x, w, b).clone()))
            torch.cuda.synchronize()
            allocated[on] = torch.cuda.memory_allocated() - start
            if on:
                (node,) = _nodes()
                assert node.grace_pi is not None and 2 in node.grace_pi.plan.indirected
    torch._dynamo.reset()
    cudagraph_trees.reset_cudagraph_trees()
    for on, step, args, out in calls:  # eager matmuls only now, after the memory was read
        torch.testing.assert_close(out, f(*args), msg=f"pi={on}, call {step}", rtol=1e-3, atol=1e-3)
    assert allocated[True] - allocated[False] < 1 << 20, f"memory allocated after recording (bytes): {allocated}"


def test_the_capture_check_gives_its_copies_back(pi, monkeypatch) -> None:
    """The capture-time check holds a snapshot and a moved copy of each indirected input and the
    stock run's outputs (for DR-I, three times 6.5 GB); once it has run, that memory is no
    longer reserved by the process."""
    from grace.pi import check, finish

    m = 1 << 24  # 64 MiB of float32 per input
    reserved: dict[str, int] = {}
    compare, why_untrusted = check.compare, finish.why_untrusted

    def compare_then_note(*args: Any) -> Any:
        why = compare(*args)
        reserved["after the check"] = torch.cuda.memory_reserved()
        return why

    def check_then_note(*args: Any) -> Any:
        why = why_untrusted(*args)
        reserved["after its release"] = torch.cuda.memory_reserved()
        return why

    monkeypatch.setattr(check, "compare", compare_then_note)
    monkeypatch.setattr(finish, "why_untrusted", check_then_note)

    def f(a: Any, b: Any) -> Any:
        return a * 2 + b

    cf = torch.compile(f, mode="reduce-overhead")
    for step in range(3):
        a, b = _fresh(m), _fresh(m)
        torch.testing.assert_close(cf(a, b), f(a, b), msg=f"call {step}")
    (node,) = _nodes()
    assert node.grace_pi is not None and set(node.grace_pi.plan.indirected) == {0, 1}
    released = reserved["after the check"] - reserved["after its release"]
    assert released >= 2 * 4 * m, f"reserved bytes: {reserved}"


def test_with_the_switch_off_no_node_has_a_plan() -> None:
    if not _overlay_active():
        pytest.skip("GraCE's overlay with the PI patch is not active here (run `make setup`)")
    import torch._dynamo
    from torch._inductor import cudagraph_trees

    import grace.config

    torch._dynamo.reset()
    cudagraph_trees.reset_cudagraph_trees()
    with grace.config.patch(pi=False, scg=False):
        cf = torch.compile(lambda a, b: a * b + 1, mode="reduce-overhead")
        for _ in range(4):
            a, b = _fresh(N), _fresh(N)
            torch.testing.assert_close(cf(a, b), a * b + 1)
        assert _nodes() and all(n.grace_pi is None for n in _nodes())
    torch._dynamo.reset()
    cudagraph_trees.reset_cudagraph_trees()


class _DropoutModel(torch.nn.Module):
    """A training forward through dropout whose input a Triton kernel reads first."""

    def __init__(self) -> None:
        super().__init__()
        self.dropout, self.linear = torch.nn.Dropout(0.5), torch.nn.Linear(32, 32)

    def forward(self, x: Any) -> Any:
        return self.linear(self.dropout(x * 2 + 1))


def _dropout_steps(steps: int) -> list[str]:
    """Training steps of :class:`_DropoutModel` compiled and eager, each side seeded alike
    (Inductor's fallback_random: eager's masks); what differed from eager at each step."""
    import copy

    import torch._inductor.config as inductor_config
    from torch._inductor import cudagraph_trees

    torch._dynamo.reset()
    cudagraph_trees.reset_cudagraph_trees()
    torch.manual_seed(0)
    model = _DropoutModel().cuda()
    reference = copy.deepcopy(model)
    differences = []
    with inductor_config.patch(fallback_random=True):
        f = torch.compile(model, mode="reduce-overhead")
        for step in range(steps):
            x = torch.randn(8, 32, device="cuda")
            torch.manual_seed(100 + step)
            loss = f(x).square().sum()
            loss.backward()
            compiled_state = torch.cuda.get_rng_state()
            torch.manual_seed(100 + step)
            expected = reference(x).square().sum()
            expected.backward()
            if not torch.allclose(loss, expected, rtol=1e-4, atol=1e-4):
                differences.append(f"step {step}: loss {loss.item()} against {expected.item()}")
            if not torch.equal(compiled_state, torch.cuda.get_rng_state()):
                differences.append(f"step {step}: the generator's state")
            for (name, p), q in zip(model.named_parameters(), reference.parameters()):
                if not torch.allclose(p.grad, q.grad, rtol=1e-4, atol=1e-4):
                    differences.append(f"step {step}: {name}.grad")
                p.grad = q.grad = None
    return differences


def test_a_graph_that_draws_random_numbers_is_indirected_once_checked_and_leaves_the_generator_as_eager(
        pi, monkeypatch) -> None:
    """Dropout in a training forward, its input read by a Triton kernel: with PI the forward is
    captured once, checked with the generator forked, and replays its input through the table.
    Every step's loss and gradients equal eager's, and so does the generator's state after it
    (the check draws nothing for good), as they do with PI off."""
    import grace.config
    from grace.pi import tree_hook
    from grace.pi.replay import PIReplay

    with grace.config.patch(pi=False):
        assert _dropout_steps(5) == [], "stock's own graphs against eager (the test's premise)"
    second_captures = []
    real = tree_hook.new_graph
    monkeypatch.setattr(tree_hook, "new_graph",
                        lambda *a, **k: second_captures.append(k) or real(*a, **k))
    assert _dropout_steps(5) == []
    replays = [n.grace_pi for n in _nodes() if isinstance(n.grace_pi, PIReplay)]
    assert any(r.plan.indirected for r in replays), "the forward that draws replays its input by pointer"
    assert not [k for k in second_captures if not k.get("keep_graph")], "no graph was captured a second time"


def test_training_attention_with_dropout_is_checked_with_its_saved_state_on_the_host() -> None:
    """Attention with dropout saves a philox seed and offset that a captured forward keeps on the
    device; its backward, run outside a capture, would dereference them on the host (DGPT2 and
    MT5 training died with SIGSEGV in PI's check that way). PI's check runs that backward's stock
    side with host copies of the state, and compares the forward's saved state on the host: no
    graph is recorded again, an input replays by pointer, and every step's loss and gradients
    equal eager's, as with PI off (the premise). In its own process, so a crash fails the test."""
    import os
    import subprocess
    import sys

    from grace.paths import REPO_ROOT

    if not _overlay_active():
        pytest.skip("GraCE's overlay with the PI patch is not active here (run `make setup`)")

    def steps_of(case: str) -> tuple[list[str], str]:
        proc = subprocess.run([sys.executable, str(REPO_ROOT / "scripts/probes/rng_training.py"), "--case", case],
                              capture_output=True, text=True, cwd=REPO_ROOT, timeout=600,
                              env={**os.environ, "GRACE_LOGS": "info"})
        out = proc.stdout + proc.stderr
        assert proc.returncode == 0, out[-3000:]
        return [line for line in out.splitlines() if f"{case}: step" in line], out

    stock, out = steps_of("sdpa-dropout-stock")
    assert len(stock) == 5 and all("equal to eager" in line for line in stock), "the premise\n" + out[-3000:]
    steps, out = steps_of("sdpa-dropout-pi")
    assert len(steps) == 5 and all("equal to eager" in line for line in steps), out[-3000:]
    assert "recorded again without indirection" not in out and "outside its capture" not in out, out[-3000:]
    assert "input(s) indirected" in out, "an input replays by pointer\n" + out[-3000:]


@pytest.mark.parametrize("switches", [{"cgct": False, "pi": True, "scg": False, "lean_replay": False},
                                      {"cgct": True, "pi": False, "scg": False, "lean_replay": False},
                                      {"cgct": False, "pi": False, "scg": False, "lean_replay": True},
                                      {"cgct": False, "pi": False, "scg": False, "lean_replay": False}])
def test_a_node_records_with_the_cyclic_collector_paused_only_under_grace(switches, monkeypatch) -> None:
    """What dies during a recording must be what reference counts free (the tree checks the
    same deaths at every replay), so with a GraCE switch on (lean replay's included) no cyclic
    collection may run then; with every switch off the tree is stock."""
    if not _overlay_active():
        pytest.skip("GraCE's overlay with the PI patch is not active here (run `make setup`)")
    import gc

    import torch._dynamo
    from torch._inductor import cudagraph_trees

    import grace.config

    seen: list[bool] = []
    original = cudagraph_trees.CUDAGraphNode.__init__

    def init(node: Any, *args: Any, **kwargs: Any) -> None:
        seen.append(gc.isenabled())
        original(node, *args, **kwargs)
        seen.append(gc.isenabled())

    monkeypatch.setattr(cudagraph_trees.CUDAGraphNode, "__init__", init)
    torch._dynamo.reset()
    cudagraph_trees.reset_cudagraph_trees()
    try:
        with grace.config.patch(**switches):
            cf = torch.compile(lambda a: torch.cos(a) + 1, mode="reduce-overhead")
            for _ in range(3):
                a = _fresh(N)
                torch.testing.assert_close(cf(a), torch.cos(a) + 1)
    finally:
        torch._dynamo.reset()
        cudagraph_trees.reset_cudagraph_trees()
    assert seen, "the function was recorded"
    grace_on = any(switches.values())
    assert seen == [not grace_on] * len(seen)
    assert gc.isenabled(), "the collector is back on after the recording"


def test_the_differential_program_where_stock_asserts_after_an_overwritten_warm_up_input_runs(pi) -> None:
    """Program 22056001's first three calls (``python -m grace.difftest show --seed 22056001
    --max-steps 3``): a call fed the previous call's output, which the tree has overwritten,
    then a call of a recompiled function. Stock 2.11 raises the overwritten error at the second
    call (by design) and then fails its own assertion in ``dealloc_current_path_weakrefs`` at the
    third; with GraCE the third call runs and equals eager."""
    from grace.difftest.execute import run_program
    from grace.difftest.programs import generate

    program = generate(22056001, None, 3)
    assert [s.mode for s in program.steps] == ["rows", "feedback", "reuse"], "the generator still makes this program"
    result = run_program(program, "cuda")
    assert result["status"] == "ok", result["detail"]
    assert result["expected_detail"] == ["step 1: fed-back input overwritten before the call"]

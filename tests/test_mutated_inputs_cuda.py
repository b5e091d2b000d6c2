"""Functions that mutate inputs the tree copies, on the GPU (grace.mutated_inputs): with
``grace.config.mutated_inputs`` each gets a graph, and every call leaves the caller's tensors and
the outputs as eager does, for fresh, reused and aliased inputs and a mutated input that is also
returned; ``x = f(x)`` as stock's graph of the same function without the mutation. With the
option off, stock's refusal stands (each test's premise), and a refused function fed an
overwritten graph output raises. A mutated input off alignment keeps its mutation with any switch
on, the option off."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a CUDA GPU")

N = 1024
_TOL = dict(rtol=1e-5, atol=1e-5)


def _fresh() -> None:
    import torch._dynamo
    from torch._inductor import cudagraph_trees

    torch._dynamo.reset()
    cudagraph_trees.reset_cudagraph_trees()


def tke_like(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """Updates two of its arrays in place, as pyhpc's TKE does, and returns a function of them.
    Elementwise, but Triton contracts ``a + b * c`` into one fused multiply-add where eager
    rounds twice: over calls that accumulate, the two drift apart by a few float32 ulps (twice
    ``assert_close``'s default tolerance seen on the GPU), which is no part of what these tests
    check; they compare with ``_TOL``, as stale data would miss by far more."""
    a.add_(b * c)
    c.mul_(0.5).add_(a)
    return a * 2 + c


def _graphs() -> int:
    from torch._inductor import cudagraph_trees

    container = cudagraph_trees.get_container(torch.cuda.current_device())
    manager = container.tree_manager
    return 0 if manager is None else sum(1 for _ in manager.get_roots())


def _calls(fn: Callable, make_inputs: Callable[[int], list[torch.Tensor]], calls: int) -> list[str]:
    """``calls`` calls of ``fn`` compiled and of ``fn`` eager on copies of the same inputs; what
    differed, call by call (outputs and every input afterwards)."""
    compiled = torch.compile(fn, mode="reduce-overhead")
    differences = []
    for k in range(calls):
        inputs = make_inputs(k)
        eager_inputs = [x.clone() for x in inputs]
        got = compiled(*inputs)
        expected = fn(*eager_inputs)
        torch.cuda.synchronize()
        if not torch.allclose(got, expected, **_TOL):
            differences.append(f"call {k}: output")
        for i, (x, e) in enumerate(zip(inputs, eager_inputs)):
            if not torch.allclose(x, e, **_TOL):
                differences.append(f"call {k}: input {i}")
    return differences


def _both(fn: Callable, make_inputs: Callable[[int], list[torch.Tensor]], calls: int = 6) -> dict[bool, Any]:
    """Each way: what differed from eager, the graphs recorded and the skips counted."""
    import grace.config
    from torch._dynamo.utils import counters

    out = {}
    for on in (False, True):
        _fresh()
        counters.clear()
        with grace.config.patch(mutated_inputs=on, scg_force="graph"):
            differences = _calls(fn, make_inputs, calls)
            out[on] = (differences, _graphs(), counters["inductor"]["cudagraph_skips"])
        _fresh()
    return out


def bump(x: torch.Tensor) -> torch.Tensor:
    """Updates its input in place and returns a function of the result."""
    x.mul_(0.5).add_(1.0)
    return torch.sin(x) * 2


def other(x: torch.Tensor) -> torch.Tensor:
    return torch.cos(x) + x


def _rand(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, device="cuda")


def test_fresh_inputs_get_a_graph_and_eager_values() -> None:
    out = _both(tke_like, lambda k: [_rand(N), _rand(N), _rand(N)])
    assert out[False][0] == [] and out[False][2] > 0, "stock: no graph, eager values (the premise)"
    differences, graphs, skips = out[True]
    assert differences == [] and graphs >= 1 and skips == 0


@pytest.mark.parametrize("switches", [dict(scg_force="graph"), dict(scg=False, pi=False), dict(scg=False, pi=True)],
                         ids=["scg-deciding-pi", "copy-back-alone", "pi-alone"])
def test_reused_inputs_accumulate_as_in_eager(switches: dict[str, Any]) -> None:
    """The same tensors at every call, updated in place: eager's values, with SCG choosing
    whether the graph uses PI (as by default), and with each way fixed."""
    kept = [_rand(N), _rand(N), _rand(N)]
    twins = [x.clone() for x in kept]
    import grace.config

    _fresh()
    with grace.config.patch(mutated_inputs=True, **switches):
        compiled = torch.compile(tke_like, mode="reduce-overhead")
        for _ in range(6):
            got = compiled(*kept)
            expected = tke_like(*twins)
            torch.testing.assert_close(got, expected, **_TOL)
            for x, e in zip(kept, twins):
                torch.testing.assert_close(x, e, **_TOL)
        assert _graphs() >= 1
    _fresh()


def test_aliased_inputs_give_eager_values() -> None:
    """Two inputs over one storage, one of them mutated: recorded or not, eager's values."""
    def make(k: int) -> list[torch.Tensor]:
        base = _rand(2 * N)
        return [base[:N], base[N:], _rand(N)]

    for on, (differences, _, _) in _both(tke_like, make).items():
        assert differences == [], (on, differences)


def _chain(fn: Callable[[torch.Tensor], torch.Tensor], calls: int = 6) -> list[Any]:
    """``x = fn(x)`` compiled, from one seeded tensor: each call's values, or the error that
    ended the chain (a fed-back graph output the tree has overwritten raises, by design)."""
    compiled = torch.compile(fn, mode="reduce-overhead")
    x = torch.randn(N, device="cuda", generator=torch.Generator("cuda").manual_seed(0))
    seen: list[Any] = []
    for _ in range(calls):
        try:
            x = compiled(x)
        except RuntimeError as e:
            seen.append("overwritten" if "overwritten by a subsequent run" in str(e) else str(e))
            break
        seen.append(x.clone())
    return seen


def test_x_equals_f_of_x_behaves_as_a_graph_of_the_pure_function() -> None:
    """Fed its own output, a recorded function that mutates its input does what stock's graph of
    the same function written without the mutation does: the same values call by call, and the
    same error where the tree has overwritten the output fed back. Without the option, stock's
    refusal: no graph, eager's values at every call (the premise)."""

    def step(x: torch.Tensor) -> torch.Tensor:
        x.mul_(0.9)
        return x + 1

    def pure(x: torch.Tensor) -> torch.Tensor:
        return x * 0.9 + 1

    import grace.config

    runs = {}
    for name, fn, on in (("refused", step, False), ("pure", pure, True), ("recorded", step, True)):
        _fresh()
        with grace.config.patch(mutated_inputs=on, scg_force="graph"):
            runs[name] = _chain(fn)
        _fresh()
    expected = torch.randn(N, device="cuda", generator=torch.Generator("cuda").manual_seed(0))
    for k, got in enumerate(runs["refused"]):
        expected = pure(expected)
        assert isinstance(got, torch.Tensor), f"stock's refusal raised at call {k}: {got}"
        torch.testing.assert_close(got, expected)
    assert len(runs["recorded"]) == len(runs["pure"])
    for k, (got, want) in enumerate(zip(runs["recorded"], runs["pure"])):
        if isinstance(want, str):
            assert got == want, f"call {k}: {got!r}, the pure function's graph: {want!r}"
        else:
            assert isinstance(got, torch.Tensor), f"call {k} raised {got!r}; the pure function's graph gave values"
            torch.testing.assert_close(got, want)


def test_a_graph_output_fed_in_gives_eager_outputs() -> None:
    """Another function's graph output, of an earlier generation, fed into a recorded function
    that mutates it: the outputs are eager's, and the fed tensor holds eager's mutation or, where
    the call's graph took its memory, raises the tree's overwritten-output error on reading
    (invariant 6), never wrong values."""

    import grace.config

    _fresh()
    compared = 0
    with grace.config.patch(mutated_inputs=True, scg_force="graph"):
        bump_c, other_c = torch.compile(bump, mode="reduce-overhead"), torch.compile(other, mode="reduce-overhead")
        for k in range(10):
            bump_c(_rand(N))  # a fresh input: the function's graph copies this one back
            a = _rand(N)
            fed, fed_eager = other_c(a), other(a.clone())
            try:
                got = bump_c(fed)
            except RuntimeError as e:
                # while a root warms up or records, a new generation frees the one before,
                # and reading its output raises, as in stock with or without the option
                assert "overwritten by a subsequent run" in str(e), e
                continue
            expected = bump(fed_eager)
            torch.cuda.synchronize()
            compared += 1
            torch.testing.assert_close(got, expected, msg=lambda m: f"call {k}: output: {m}")
            try:
                torch.testing.assert_close(fed, fed_eager, msg=lambda m: f"call {k}: fed input: {m}")
            except RuntimeError as e:
                assert "overwritten by a subsequent run" in str(e), e
        assert _graphs() >= 1
    _fresh()
    assert compared >= 5, f"only {compared} of 10 calls ran (the rest raised before the call)"


def test_an_overwritten_output_fed_to_a_refused_function_raises() -> None:
    """With the option off, a function that mutates an input the tree does not manage runs its
    compiled code without a graph (stock's refusal). Fed another graph's output that a later
    replay overwrote, every call raises the tree's overwritten-output error, as reading that
    output does, and a fresh input still gets eager's values. (The compiled code's kernel
    launcher read the overwritten input first and the process died with SIGSEGV.)"""

    import grace.config

    _fresh()
    raised = 0
    with grace.config.patch(mutated_inputs=False, scg_force="graph"):
        bump_c, other_c = torch.compile(bump, mode="reduce-overhead"), torch.compile(other, mode="reduce-overhead")
        for k in range(6):
            fresh = _rand(N)
            expected = bump(fresh.clone())
            torch.testing.assert_close(bump_c(fresh), expected, msg=lambda m: f"call {k}: {m}")
            stale = other_c(_rand(N))
            other_c(_rand(N))
            try:
                stale.sum()
            except RuntimeError:
                pass
            else:
                continue  # not overwritten at this call (a warm-up's outputs stay readable)
            with pytest.raises(RuntimeError, match="overwritten by a subsequent run"):
                bump_c(stale)
            raised += 1
    _fresh()
    assert raised >= 3, f"an overwritten output was fed in {raised} of 6 calls"


def test_a_mutated_input_off_alignment_keeps_its_mutation() -> None:
    """A function that mutates an input the tree does not manage runs eagerly (stock's refusal),
    on what the tree's alignment wrapper hands it: an input aligned at the first call and off
    alignment at a later one is cloned. Stock leaves the caller's tensor unchanged (the premise,
    with every switch off); with GraCE's switches on the mutation is copied back."""

    def bump(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x.mul_(0.5).add_(1.0)
        return torch.sin(x) + y

    def off_alignment() -> torch.Tensor:
        flat = _rand(N + 1)
        return flat[1:]

    import grace.config

    kept = {}
    for hardened in (False, True):
        _fresh()
        with grace.config.patch(cgct=hardened, pi=hardened, scg=hardened, lean_replay=hardened, mutated_inputs=False):
            compiled = torch.compile(bump, mode="reduce-overhead")
            for _ in range(3):
                compiled(_rand(N), _rand(N))
            x, y = off_alignment(), _rand(N)
            assert x.data_ptr() % 16
            ex, ey = x.clone(), y.clone()
            got = compiled(x, y)
            expected = bump(ex, ey)
            torch.cuda.synchronize()
            torch.testing.assert_close(got, expected)
            kept[hardened] = torch.allclose(x, ex)
        _fresh()
    assert kept == {False: False, True: True}, kept


def test_a_mutated_input_that_is_also_returned() -> None:
    def bump(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x.add_(y)
        return x, y * 2

    import grace.config

    _fresh()
    with grace.config.patch(mutated_inputs=True, scg_force="graph"):
        compiled = torch.compile(bump, mode="reduce-overhead")
        for _ in range(6):
            x, y = _rand(N), _rand(N)
            ex, ey = x.clone(), y.clone()
            got = compiled(x, y)
            expected = bump(ex, ey)
            assert got[0] is x or torch.equal(got[0], x)
            torch.testing.assert_close(got[0], expected[0])
            torch.testing.assert_close(got[1], expected[1])
            torch.testing.assert_close(x, ex)
    _fresh()

"""Outputs of a recorded forward that only autograd holds, and the tree's verdict on them.

The tree decides that a cached output is dead from two counts (``StorageWeakRefWrapper.expired``
with the ``check_refcount`` of ``CUDAGraphNode._initialize_cached_tensors``): its Python reference
count, where a C++ holder of the tensor counts once however many there are, and its storage's use
count less the tree's own two. A tensor autograd saved for backward (``out.square()`` saves
``out``; AOTAutograd's ``ctx.save_for_backward`` saves the activations) holds the same
``TensorImpl``: neither count sees it (``--cpu`` shows it with the tree's own
``StorageWeakRefWrapper`` and the same check, no GPU needed). The allocator restore recounts
after dropping its cached tensors, and sees such outputs live; but ``all_outputs_are_dead``,
which ``try_end_curr_execution`` asks while a backward is pending, counts with them, so it can
end the path under a pending backward. The next call of the same function then replays its root
again, into the memory the first forward's saved tensors still point at.

Two programs, each step's gradients compared with eager's:

- ``other``: a linear layer's forward, the loss keeping only autograd's reference to its output,
  then a second compiled function of the same size (warm-up, recording, replays) before the
  backward;
- ``twice``: the same layer on two batches before one backward
  (``loss = f(a).square().sum() + f(b).square().sum()``), as a siamese or contrastive step does,
  from step 3 on: by then ``f``'s graph has replayed and holds cached outputs, and the second
  call finds no child of it to replay, so the tree asks whether the path's outputs are all dead.

    GRACE_DISABLE=1 python scripts/probes/saved_output_dead.py     # stock
    python scripts/probes/saved_output_dead.py                      # GraCE, its defaults
    python scripts/probes/saved_output_dead.py --cpu                # the liveness check alone
"""

from __future__ import annotations

import copy
import sys

import torch


def tree_counts_output_dead(manager: object) -> str:
    """The tree's verdict on the first output of its first root's node, if there is one."""
    roots = [n for nodes in getattr(manager, "roots", {}).values() for n in nodes]
    if not roots or not roots[0].outputs_weakrefs:
        return "no recorded root"
    ref = roots[0].outputs_weakrefs[0]
    return "no weakref" if ref is None else ("dead" if ref() is None else "live")


def liveness_on_the_cpu() -> None:
    """The tree's liveness test of a cached output, as ``_initialize_cached_tensors`` builds it,
    on a CPU tensor: held by the user, saved by autograd as well, then held by autograd alone."""
    from torch._inductor.cudagraph_trees import StorageWeakRefWrapper

    torch._C._set_cached_tensors_enabled(True)
    storage = torch.UntypedStorage(256)
    out = torch.empty(0).set_(storage, 0, (64,), (1,))
    torch._C._add_cached_tensor(out)
    cached = [out]
    del storage

    def check_refcount() -> bool:  # the tree's, for output 0
        refcount = sys.getrefcount(cached[0])
        return refcount == 3 if cached[0]._use_count() > 1 else refcount == 2

    weakref = StorageWeakRefWrapper(cached[0], extra_ref_check=check_refcount)
    import grace.config
    from grace.tree_liveness import cached_output_check

    class Node:  # what the hardened test reads of a CUDAGraphNode
        cached_tensor_outputs = cached
        children: dict = {}
        outputs_weakrefs: list = []
        _path_to_root = property(lambda self: iter([self]))

    node = Node()
    with grace.config.patch(cgct=True):  # hardened, as with any switch on; made where the tree makes it
        hardened = cached_output_check(check_refcount, lambda: node, 0, cached[0])
    hardened_weakref = StorageWeakRefWrapper(cached[0], extra_ref_check=hardened)
    node.outputs_weakrefs = [hardened_weakref]
    print("held by the user: dead =", weakref.expired())
    user = out.requires_grad_()
    del out
    loss = user.square().sum()
    print("held by the user, saved by autograd: dead =", weakref.expired())
    del user
    dead = weakref.expired()  # before anything here takes a Python reference to the saved tensor
    same = loss.grad_fn.next_functions[0][0]._saved_self.data_ptr() == cached[0].data_ptr()
    print("saved by autograd only: dead =", dead, "| autograd's saved tensor is that output:", same)
    print("saved by autograd only, GraCE's hardened test: dead =", hardened_weakref.expired())


def program(name: str, steps: int = 7) -> None:
    """Run ``name`` (``other`` or ``twice``) and print each step's outcome."""
    from torch._inductor import cudagraph_trees

    torch.manual_seed(0)
    layer = torch.nn.Linear(64, 64).cuda()
    reference = copy.deepcopy(layer)
    f = torch.compile(layer, mode="reduce-overhead")
    g = torch.compile(lambda y: (y * 3 + 1).relu(), mode="reduce-overhead")
    for step in range(steps):
        a, b = torch.randn(32, 64, device="cuda"), torch.randn(32, 64, device="cuda")
        loss = f(a).square().sum()  # only autograd holds f's output now
        manager = cudagraph_trees.get_container(0).tree_manager
        verdict = tree_counts_output_dead(manager) if manager is not None else "no tree"
        if name == "other":
            g(torch.randn(32, 64, device="cuda")).sum().item()  # same size as f's output
            expected = reference(a).square().sum()
        elif step >= 3:
            loss = loss + f(b).square().sum()
            expected = reference(a).square().sum() + reference(b).square().sum()
        else:  # warm-up, recording, first replay: one forward a step
            expected = reference(a).square().sum()
        loss.backward()
        expected.backward()
        torch.cuda.synchronize()
        diff = (layer.weight.grad - reference.weight.grad).abs().max().item()
        print(f"{name} step {step}: the tree counted f's first output {verdict}; weight grad max difference "
              f"{diff:.3g} ({'equal' if diff <= 1e-3 else 'WRONG'})", flush=True)
        for p in (*layer.parameters(), *reference.parameters()):
            p.grad = None


def main() -> None:
    if "--cpu" in sys.argv[1:]:
        liveness_on_the_cpu()
        return
    import torch._dynamo

    torch.backends.cuda.matmul.allow_tf32 = False
    for name in ("other", "twice"):
        program(name)
        torch._dynamo.reset()
        from torch._inductor import cudagraph_trees

        cudagraph_trees.reset_cudagraph_trees()


if __name__ == "__main__":
    main()

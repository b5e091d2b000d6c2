"""A replayed output its node does not cache, read after a new generation ended its path.

``f`` is the differential test's MutateBuf; its output ``y`` is fed to a compiled training
forward, which saves its input, so the forward graph returns ``y`` itself: recorded as a child
of ``f``'s node, it marks ``f``'s output aliased (``CUDAGraphNode._mark_prior_graph_output_as_aliased``),
and from then on every replay of ``f``'s node hands out a new tensor instead of a cached one.
When a new generation ends ``f``'s replayed path, stock marks nothing (a replayed path), so ``y``
read after ``h`` (a root replayed over ``f``'s memory) returns ``h``'s values. GraCE's
stale-output guard notes such outputs as the replay hands them out
(``grace.stale_outputs.StaleOutputGuard.replayed``), and the read raises.

    GRACE_DISABLE=0 GRACE_CGCT=1 GRACE_PI=0 GRACE_SCG=0 python scripts/probes/uncached_replay_output.py          # raises
    GRACE_DISABLE=0 GRACE_CGCT=1 GRACE_PI=0 GRACE_SCG=0 python scripts/probes/uncached_replay_output.py --clone  # raises
    GRACE_DISABLE=1 python scripts/probes/uncached_replay_output.py [--clone]                                   # stock: silent

With ``--clone`` the training forward gets ``y.clone()``, ``f``'s output stays cached, and the
guard's first rule makes the read raise (the control).
"""
import sys

import torch
from torch import nn
from torch._inductor import cudagraph_trees as ct

torch.manual_seed(0)
mark = torch.compiler.cudagraph_mark_step_begin
W, B = 26, 7


class MutateBuf(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("buf", torch.zeros(W))

    def forward(self, x):
        self.buf.add_(x.sum())
        return x + self.buf


class MLPLoss(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(W, 16), nn.Linear(16, W)

    def forward(self, x):
        return self.fc2(torch.tanh(self.fc1(x))).square().mean()


f = torch.compile(MutateBuf().cuda(), mode="reduce-overhead")
mlp = MLPLoss().cuda()
loss_fn = torch.compile(mlp, mode="reduce-overhead")
h = torch.compile(lambda x: x * 3 - 1, mode="reduce-overhead")
x = torch.randn(B, W, device="cuda")
x2 = torch.randn(B, W, device="cuda")
feed = (lambda y: y.clone()) if "--clone" in sys.argv else (lambda y: y)

for _ in range(3):  # warm-up, record, replay: h a root; f a root with a training child fed y
    mark(); h(x2)
    mark(); y = f(x); loss = loss_fn(feed(y)); loss.backward()
    mlp.zero_grad(set_to_none=True)
    del y, loss

m = ct.get_manager(0, create_if_none_exists=False)
mark(); y = f(x)  # replay of f's root node
node = m.current_node
print("f node", node.id, m.path_state.name, "| cached", [c is not None for c in node.cached_tensor_outputs],
      "| unaliased_in_all_paths", node.unaliased_in_all_paths,
      "| y is the cached tensor", any(y is c for c in node.cached_tensor_outputs if c is not None))
before = y.clone()
mark(); z = h(x2)  # new generation: ends f's replayed path, replays h's root
try:
    after = y.clone()
    print("y READ SILENTLY after h | changed:", not torch.equal(after, before),
          "| equals h's output:", torch.equal(after, z), "| y at", hex(y.data_ptr()), "h out at", hex(z.data_ptr()))
except RuntimeError as e:
    print("y raised (contract kept):", str(e)[:80])

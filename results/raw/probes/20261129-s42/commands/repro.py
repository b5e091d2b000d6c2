import sys, torch
import torch.nn.functional as F
import grace.config
from grace.pi import prelude
from grace.trees import recorded_nodes
name, upload = sys.argv[1], sys.argv[2] == "upload"
if not upload:
    prelude.upload = lambda raw_exec, device: None
dev = "cuda"
def fresh(*s): return torch.randn(*s, device=dev)
if name == "patch":
    w = torch.randn(256, 3, 16, 16, device=dev) * 0.05
    def g(img, t):
        f = F.conv2d(img, w, stride=16).flatten(2).transpose(1, 2)
        f = F.layer_norm(f, (256,))
        return f.argmax(-1), f.sum(-1) + t.sum()
    args = lambda: (fresh(8, 3, 224, 224), fresh(8, 196))
elif name == "chain":
    ws = [torch.randn(320, 320, device=dev) * 0.05 for _ in range(6)]
    def g(x, m):
        h = x
        for W in ws:
            h = F.layer_norm(h @ W + x, (320,))
        return h * m
    args = lambda: (fresh(1, 167, 320), fresh(1, 167, 1))
elif name == "convs":
    ks = [torch.randn(32, 3, 3, 3, device=dev) for _ in range(8)]
    def g(img, t):
        maps = [F.conv2d(img, k, padding=1) for k in ks]
        pooled = torch.stack([m.amax(dim=(1, 2, 3)) for m in maps], -1)
        return pooled.argmax(-1), pooled.sum(-1) + t.sum(-1)
    args = lambda: (fresh(16, 3, 64, 64), fresh(16, 64))
elif name == "mlp":
    ws = [torch.randn(1024, 1024, device=dev) * 0.03 for _ in range(12)]
    def g(x, b):
        h = x
        for W in ws:
            h = torch.relu(h @ W) + x + b
        return h
    args = lambda: (fresh(64, 1024), fresh(1024))
with grace.config.patch(pi=True, scg=False, pi_strategy="prelude"):
    cg = torch.compile(g, mode="reduce-overhead")
    bad = 0
    for i in range(4):
        a = args()
        try:
            torch.testing.assert_close(cg(*a), g(*a), rtol=1e-3, atol=1e-3)
        except AssertionError as e:
            bad += 1
nodes = recorded_nodes()
print(f"{name} upload={upload}: {len(nodes)} graphs, deployed {[n.grace_pi is not None for n in nodes]}, wrong calls {bad}")

import sys, torch, torch._inductor.config as ic, torch._inductor.cudagraph_trees as ct
mode = sys.argv[1]
if mode == "part_index": ic.custom_should_partition_ops = ["aten::index.Tensor"]
if mode == "no_asserts": ic.triton.slow_path_cudagraph_asserts = False
rec = ct.CUDAGraphNode._record
def spy(self, model, inputs):
    print(" record: n_inputs", len(inputs), "cpu (idx, ptr):", [(i, hex(t.untyped_storage().data_ptr())) for i, t in enumerate(inputs) if isinstance(t, torch.Tensor) and not t.is_cuda], flush=True)
    return rec(self, model, inputs)
ct.CUDAGraphNode._record = spy
dev = "cuda" if mode == "gpu_idx" else None
def f(x):  # DLRM's dot interaction (tb_dlrm.py:115-124)
    z = torch.bmm(x, x.transpose(1, 2)); n = z.shape[1]
    li = torch.tensor([i for i in range(n) for j in range(i)], device=dev)
    lj = torch.tensor([j for i in range(n) for j in range(i)], device=dev)
    return torch.relu(z[:, li, lj]) * 2
g = torch.compile(f, mode="reduce-overhead")
try:
    for k in range(4):
        x = torch.randn(8, 9, 16, device="cuda"); torch.testing.assert_close(g(x), f(x))
    print(mode, "OK")
except Exception as e:
    print(mode, "FAIL", type(e).__name__, str(e)[:200])

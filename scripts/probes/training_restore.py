"""Why the tree's allocator restore raises "invalid device pointer" (raw_delete in
apply_checkpoint_execution_state_in_allocator) in
tests/test_lean_cuda.py::test_training_steps_with_their_backward_pending, and in the differential
test's seed 1975012 under `lean` (docs/upstream_cudagraph_trees.md, docs/lab_checkpoint_restore.md).

Candidates it tells apart:
  R  a backward re-records under a replayed node (the restore at _run's recording branch runs
     inside loss.backward()): logged as "re-record" with the check_invariants status that failed,
     e.g. StaticInputIdxMismatch on the saved input x (a static input of the backward that is the
     caller's tensor, not a tree output, under graph partitioning). Variant `samex` keeps x and
     the extra forward's input in fixed buffers: if the crash goes away, moving saved inputs are
     the trigger.
  A3 a pointer in data_ptrs_dead_since_invocation recorded DEAD at the node's recording and LIVE
     now (the diff is symmetric): printed as "A3" with whether it was live before the restore's
     remove_path_cached_tensors ("pre") -- a cached output counted dead by the refcount test and
     live by storage count afterwards shows pre=False now=True.
  A2 recorded LIVE but its block not allocated at the node's checkpoint (a death between the
     liveness snapshot and _cuda_getCheckpointState): printed as "A2".
  GC cyclic collections inside a restore or a node's construction (C3/C4): "gc-in-window";
     variant `nogc` turns the collector off for the run and collects between steps only.

Usage (on the GPU machine, from the repo root, with the interpreter `make setup` chose):
  python scripts/probes/training_restore.py                  # training scenario, all configs
  python scripts/probes/training_restore.py --configs stock,grace,grace-samex --steps 12
  python scripts/probes/training_restore.py --difftest 1975012   # failure 2: stock/lean x gc
  python scripts/probes/training_restore.py --child grace        # one child, env as given
Each child prints one line per step ("[cfg r0] step i: ..."), a line per restore whose list has a
suspicious pointer or that raises, and a final "RESULT {json}" line; the parent prints a table.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ON = {"GRACE_DISABLE": "0", "GRACE_LEAN_REPLAY": "0"}
CONFIGS: dict[str, dict[str, str]] = {
    "stock": {"GRACE_DISABLE": "1"},
    "grace": {**ON, "GRACE_CGCT": "1", "GRACE_PI": "1", "GRACE_SCG": "1", "GRACE_SCG_FORCE": "graph"},
    "grace-lean": {**ON, "GRACE_CGCT": "1", "GRACE_PI": "1", "GRACE_SCG": "1", "GRACE_SCG_FORCE": "graph",
                   "GRACE_LEAN_REPLAY": "1"},
    "cgct": {**ON, "GRACE_CGCT": "1", "GRACE_PI": "0", "GRACE_SCG": "0"},
    "pi": {**ON, "GRACE_CGCT": "0", "GRACE_PI": "1", "GRACE_SCG": "0"},
    "scg": {**ON, "GRACE_CGCT": "0", "GRACE_PI": "0", "GRACE_SCG": "1", "GRACE_SCG_FORCE": "graph"},
    "lean": {**ON, "GRACE_CGCT": "0", "GRACE_PI": "0", "GRACE_SCG": "0", "GRACE_LEAN_REPLAY": "1"},
}
# name suffixes: -samex (saved inputs at fixed addresses), -nogc (collector off, collect between steps)
TRAIN_DEFAULT = "stock,grace,grace-lean,cgct,pi,scg,grace-samex,grace-nogc"
DIFF_DEFAULT = "stock,lean,stock-nogc,lean-nogc"


def split(name: str) -> tuple[str, set[str]]:
    base, *variants = name.split("-")
    if base == "grace" and variants[:1] == ["lean"]:
        base, variants = "grace-lean", variants[1:]
    if base not in CONFIGS:
        raise SystemExit(f"unknown config {name!r}: bases {', '.join(CONFIGS)}, variants -samex -nogc")
    return base, set(variants)


# --------------------------------------------------------------------------------------------
# Instrumentation (child). Wraps tree methods; never changes what they decide.

class Probe:
    def __init__(self, tag: str) -> None:
        self.tag = tag
        self.step = -1
        self.window: str | None = None  # "restore graph N" / "record" while inside one
        self.counts = {"calls": 0, "records": 0, "bwd_records_from_exec": 0, "restores": 0,
                       "restores_in_bwd": 0, "A2": 0, "A3": 0, "gc_in_window": 0, "dead_but_held": 0}
        self.fails: dict[str, int] = {}
        self.ckpt_blocks: set[int] | None = None

    def say(self, text: str) -> None:
        print(f"[{self.tag}] {text}", flush=True)

    def install(self) -> None:
        import torch
        from torch._inductor import cudagraph_trees as ct

        self.ct = ct
        M, N = ct.CUDAGraphTreeManager, ct.CUDAGraphNode
        probe = self
        self.say(f"cudagraph_trees from {ct.__file__}")

        orig_get = torch._C._cuda_getCheckpointState

        def get_ckpt(device, pool):  # the blocks allocated at each node's checkpoint
            state = orig_get(device, pool)
            probe.ckpt_blocks = set(ct.get_block_addrs(pool))
            return state
        torch._C._cuda_getCheckpointState = get_ckpt

        orig_add = N._add_first_outputs

        def _add_first_outputs(node, *a, **k):
            out = orig_add(node, *a, **k)
            node._probe_ckpt_blocks = probe.ckpt_blocks
            return out
        N._add_first_outputs = _add_first_outputs

        orig_init = N.__init__

        def __init__(node, *a, **k):
            was, probe.window = probe.window, "record"
            try:
                orig_init(node, *a, **k)
            finally:
                probe.window = was
        N.__init__ = __init__

        orig_check = N.check_invariants

        def check_invariants(node, inputs):
            status, logger = orig_check(node, inputs)
            if status != ct.CheckInvariantStatus.SUCCESS and probe.real_pool(node):
                moved = ""
                if status == ct.CheckInvariantStatus.StaticInputIdxMismatch:
                    moved = " moved static inputs " + str(probe.moved(node, inputs))
                key = status.name
                probe.fails[key] = probe.fails.get(key, 0) + 1
                probe.say(f"  step {probe.step}: check graph {node.id.id}: {key}{moved}")
            return status, logger
        N.check_invariants = check_invariants

        orig_record = M.record_function

        def record_function(manager, new_inputs, function_id):
            if probe.private(manager):
                return orig_record(manager, new_inputs, function_id)
            before = manager.current_node
            state = manager.path_state.name
            out = orig_record(manager, new_inputs, function_id)
            probe.counts["records"] += 1
            mode = manager.id_to_mode[function_id].name
            if mode == "BACKWARD" and before is not None and state == "EXECUTION":
                probe.counts["bwd_records_from_exec"] += 1
            probe.say(f"  step {probe.step}: record fn {function_id.id} ({mode}) as graph "
                      f"{manager.current_node.id.id} under {None if before is None else before.id.id} ({state})")
            return out
        M.record_function = record_function

        orig_apply = M.apply_checkpoint_execution_state_in_allocator

        def apply(manager):
            if probe.private(manager):
                return orig_apply(manager)
            node = manager.current_node
            probe.counts["restores"] += 1
            in_bwd = getattr(manager.mode, "name", "") == "BACKWARD"
            probe.counts["restores_in_bwd"] += in_bwd
            rec = [list(r) for r in node.recorded_liveness_after_graph]
            pre = node._get_liveness(node.path_weakrefs)  # before remove_path_cached_tensors
            was, probe.window = probe.window, f"restore of graph {node.id.id}"
            try:
                orig_apply(manager)
                error = None
            except BaseException as e:  # noqa: BLE001 - reported, then raised on
                error = e
            finally:
                probe.window = was
            post = node._get_liveness(node.path_weakrefs)  # what the tree's diff saw
            lines = probe.classify(node, rec, pre, post)
            if error is not None or any(" A2" in x or " A3" in x for x in lines):
                probe.say(f"  step {probe.step}: restore of graph {node.id.id} ({'backward' if in_bwd else manager.mode}) "
                          f"path {[n.id.id for n in node._path_from_root]}: "
                          f"{'RAISED ' + str(error).splitlines()[0][:80] if error else 'ok'}")
                for x in lines:
                    probe.say("    " + x)
            if error is not None:
                raise error
        M.apply_checkpoint_execution_state_in_allocator = apply

        orig_dead = N.all_outputs_are_dead

        def all_outputs_are_dead(node):
            # The tree ends a path on this (try_end_curr_execution). A cached output that autograd
            # still holds through its own TensorImpl (a SavedVariable of the original tensor)
            # adds no storage reference: if the refcount test calls it dead, say so.
            dead = orig_dead(node)
            if dead and probe.real_pool(node):
                held = []
                for n in node._path_from_root:
                    for i, t in enumerate(n.cached_tensor_outputs):
                        # one C++ holder (autograd's saved tensor) already makes 2: the tree's
                        # test does not see it (scripts/probes/saved_output_dead.py --cpu)
                        if t is not None and t._use_count() > 1:
                            held.append((n.id.id, i, t._use_count(), sys.getrefcount(t) - 1))
                if held:
                    probe.counts["dead_but_held"] += 1
                    probe.say(f"  step {probe.step}: graph {node.id.id}: all outputs dead, yet cached outputs "
                              f"(graph, index, use_count, refcount) {held} are held elsewhere")
            return dead
        N.all_outputs_are_dead = all_outputs_are_dead

        orig_run = M.run

        def run(manager, new_inputs, function_id):
            probe.counts["calls"] += 0 if probe.private(manager) else 1
            return orig_run(manager, new_inputs, function_id)
        M.run = run

        def on_gc(phase, info):
            if phase == "stop" and probe.window is not None:
                probe.counts["gc_in_window"] += 1
                probe.say(f"  step {probe.step}: gc gen {info.get('generation')} collected "
                          f"{info.get('collected')} inside {probe.window}")
        gc.callbacks.append(on_gc)

    @staticmethod
    def private(manager) -> bool:
        """An SCG profiling tree (grace.scg.tree_hook), not the program's."""
        if os.environ.get("GRACE_DISABLE") == "1" or os.environ.get("GRACE_SCG") == "0":
            return False
        try:
            from grace.scg import tree_hook
        except Exception:  # noqa: BLE001 - stock: no GraCE
            return False
        return manager in tree_hook._profiling_trees

    def real_pool(self, node) -> bool:
        manager = self.ct.get_container(node.device).tree_manager
        return manager is not None and node.cuda_graphs_pool == manager.cuda_graphs_thread_pool

    @staticmethod
    def moved(node, inputs) -> list:
        import torch

        out = []
        for i in node.static_input_idxs:
            t = inputs[i]
            if not isinstance(t, torch.Tensor):
                continue
            try:
                ptr = t.data_ptr()
            except RuntimeError:
                ptr = None
            if ptr != node.static_input_data_ptrs[i]:
                owner = "tree output" if ptr is not None and node._is_cuda_graph_recorded_tensor(t) else "caller's tensor"
                out.append((i, owner))
        return out

    def classify(self, node, rec, pre, post) -> list[str]:
        path = list(node._path_from_root)
        ckpt = getattr(node, "_probe_ckpt_blocks", None)
        out = []
        for d, (r_row, a_row, b_row) in enumerate(zip(rec, pre, post)):
            for j, (r, a, b) in enumerate(zip(r_row, a_row, b_row)):
                if r == b:
                    continue
                md = path[d].outputs_metadata[j]
                ptr = md["data_ptr"] if isinstance(md, dict) else 0
                if not r:
                    kind = "A3 recorded dead, live now"
                    self.counts["A3"] += 1
                elif ckpt is not None and ptr not in ckpt:
                    kind = "A2 recorded live, not allocated at the checkpoint"
                    self.counts["A2"] += 1
                else:
                    kind = "dead since (allocated at the checkpoint)"
                out.append(f"({d},{j}) of graph {path[d].id.id} ptr {ptr:#x} recorded={r} "
                           f"pre-uncache={a} now={b}: {kind}")
        return out


# --------------------------------------------------------------------------------------------
# Children.

def train_child(tag: str, steps: int, rounds: int, variants: set[str]) -> dict:
    import torch

    probe = Probe(tag)
    probe.install()
    if "nogc" in variants:
        gc.disable()
    result = {"config": tag, "crashed": None, "error": None}
    for r in range(rounds):
        if r:
            import torch._dynamo
            from torch._inductor import cudagraph_trees

            torch._dynamo.reset()
            cudagraph_trees.reset_cudagraph_trees()
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).cuda()
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        f = torch.compile(model, mode="reduce-overhead")
        xbuf = torch.empty(8, 16, device="cuda")
        ebuf = torch.empty(8, 16, device="cuda")
        for i in range(steps):
            probe.step = f"{r}.{i}"
            before = dict(probe.counts)
            try:
                x = torch.randn(8, 16, device="cuda")
                if "samex" in variants:
                    x = xbuf.copy_(x)
                loss = f(x).square().mean()
                if i % 3 == 2:  # a second forward while the first's backward is pending
                    e = torch.randn(8, 16, device="cuda")
                    if "samex" in variants:
                        e = ebuf.copy_(e)
                    extra = f(e).sum()
                    loss = loss + 0 * extra
                loss.backward()
                opt.step()
                opt.zero_grad()
                torch.cuda.synchronize()
                what = f"ok loss {loss.item():.4f}"
            except Exception as err:  # noqa: BLE001 - every failure is this step's outcome
                what = f"RAISED {str(err).splitlines()[0][:100]}"
                result.update(crashed=probe.step, error=str(err).splitlines()[0][:160])
            delta = {k: v - before.get(k, 0) for k, v in probe.counts.items() if v != before.get(k, 0)}
            probe.say(f"step {probe.step}: {what}; {delta}")
            if "nogc" in variants:
                gc.collect()
            if result["crashed"] is not None:
                break
        if result["crashed"] is not None:
            break
    result.update(probe.counts, check_failures=probe.fails)
    return result


def diff_child(tag: str, seed: int, variants: set[str]) -> dict:
    from grace.difftest.execute import run_program
    from grace.difftest.programs import generate

    probe = Probe(tag)
    probe.install()
    if "nogc" in variants:
        gc.disable()

    def on_step(index, step):
        probe.step = index
        if "nogc" in variants:
            gc.collect()  # the same collection points in every configuration

    out = run_program(generate(seed, None, 600), "cuda", "inductor", on_step)
    out.update(probe.counts, check_failures=probe.fails, config=tag)
    return out


# --------------------------------------------------------------------------------------------
# Parent.

def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--configs", default=None)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--rounds", type=int, default=2, help="fresh trees in one process, as the test's two passes")
    p.add_argument("--difftest", type=int, default=None, metavar="SEED")
    p.add_argument("--child", default=None)
    p.add_argument("--timeout", type=float, default=170.0)
    args = p.parse_args()

    if args.child is not None:
        base, variants = split(args.child)
        res = (diff_child(args.child, args.difftest, variants) if args.difftest is not None
               else train_child(args.child, args.steps, args.rounds, variants))
        print("RESULT " + json.dumps(res, default=str), flush=True)
        return 0

    names = [c for c in (args.configs or (DIFF_DEFAULT if args.difftest is not None else TRAIN_DEFAULT)).split(",") if c]
    scratch = Path(tempfile.mkdtemp(prefix="probe-training-"))
    procs = {}
    for name in names:
        base, _ = split(name)
        env = dict(os.environ, **CONFIGS[base], PYTHONUNBUFFERED="1", TORCHINDUCTOR_COMPILE_THREADS="1",
                   GRACE_SCG_CACHE_DIR=str(scratch / name / "scg-cache"),
                   GRACE_SCG_REPORT=str(scratch / name / "scg-report.json"),
                   TORCHINDUCTOR_CACHE_DIR=str(scratch / name / "inductor"))
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
        if args.difftest is not None:  # as grace.difftest.runner.child_env
            env.update(TORCHINDUCTOR_FX_GRAPH_CACHE="0", TORCHINDUCTOR_AUTOGRAD_CACHE="0")
        cmd = [sys.executable, __file__, "--child", name, "--steps", str(args.steps), "--rounds", str(args.rounds)]
        if args.difftest is not None:
            cmd += ["--difftest", str(args.difftest)]
        log = open(scratch / f"{name}.log", "w")
        procs[name] = (subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT), log)
    start = time.monotonic()
    results = {}
    for name, (proc, log) in procs.items():
        try:
            proc.wait(timeout=max(1.0, args.timeout - (time.monotonic() - start)))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        text = (scratch / f"{name}.log").read_text(errors="replace")
        print(f"===== {name} (exit {proc.returncode}) =====")
        body = [ln for ln in text.splitlines() if ln.startswith("[") or ln.startswith("RESULT")]
        print("\n".join(body[-60:]) if body else text[-3000:])
        got = [ln for ln in text.splitlines() if ln.startswith("RESULT ")]
        results[name] = json.loads(got[-1][7:]) if got else {"config": name, "crashed": f"exit {proc.returncode}",
                                                            "error": (text.strip().splitlines() or ["?"])[-1][:160]}
    print("===== summary =====")
    for name, r in results.items():
        if args.difftest is not None:
            head = f"{r.get('status')} step {r.get('step')} {str(r.get('error_kind') or r.get('error') or '')[:70]}"
        else:
            head = "ok" if not r.get("crashed") else f"CRASH at {r['crashed']}: {str(r.get('error'))[:70]}"
        keys = ("calls", "records", "bwd_records_from_exec", "restores", "restores_in_bwd", "A2", "A3", "gc_in_window",
                "dead_but_held")
        print(f"{name:>16}: {head} | " + " ".join(f"{k}={r.get(k)}" for k in keys) + f" | fails={r.get('check_failures')}")
    print(f"(child logs in {scratch})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

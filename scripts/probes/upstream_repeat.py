"""One of PyTorch's CUDA graph trees tests run many times, each in a fresh process with fresh
caches, under the switches of the environment: how often it fails, and the tree it left each time.

A test that fails once in a run and passes on its recheck (``test_aliasing_static_ref`` under
``all-lean-copy``: ``first_node.unaliased_in_all_paths[1]`` true, the first node caching an output
a later graph's output aliases) is either GraCE's, intermittently, or stock Inductor's choice
changing under load: ``pad_mm`` times the padded and unpadded matmul and keeps the faster, which
changes the graph (the failing run's counters show the 12x12 padded matmul). Each run prints one
JSON line: whether it passed, the assertion, Inductor's matmul and ``pad_mm`` counters, what SCG
chose for each graph by timing and how PI deployed it, and every node of the tree (its function,
its outputs' aliasing, which it caches) as the test left it, so that ``--summarize`` can set a
failing run against a passing one. ``--no-storage-mark`` turns off the stale-output
guard's storage-level mark (``grace.stale_outputs._shared_indices`` finds nothing), to tell it
apart from the rest of GraCE.

    env $(python -m grace.report.upstream --env all-lean-copy) python scripts/probes/upstream_repeat.py \
        .upstream CudaGraphTreeTests.test_aliasing_static_ref --runs 24 --jobs 8 [--no-storage-mark]
    python scripts/probes/upstream_repeat.py --summarize results/raw/probes/<series>/repeat.*.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import unittest
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any


def tree_state(manager: Any) -> dict[str, Any]:
    """Every node of the tree under ``manager``, depth first from each root."""
    nodes: list[dict[str, Any]] = []

    def walk(node: Any, depth: int) -> None:
        nodes.append({
            "id": getattr(node.id, "id", node.id), "depth": depth, "kind": type(node).__name__,
            "function": getattr(getattr(node.wrapped_function, "id", None), "id", None),
            "aliases": [repr(a) for a in getattr(node, "output_storage_alias", [])],
            "unaliased": list(getattr(node, "unaliased_in_all_paths", [])),
            "cached": [c is not None for c in getattr(node, "cached_tensor_outputs", [])]})
        for children in getattr(node, "children", {}).values():
            for child in children:
                walk(child, depth + 1)

    for roots in manager.roots.values():
        for root in roots:
            walk(root, 0)
    current = manager.current_node
    return {"nodes": nodes, "current": getattr(getattr(current, "id", None), "id", None),
            "generation": manager.current_gen}


def _decisions() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """What SCG chose for each graph (its medians: a timed choice can change with load) and how
    PI deployed each, where GraCE is loaded; empty lists under stock."""
    try:
        from grace.pi import report as pi_report
        from grace.scg import report as scg_report
    except ImportError:
        return [], []
    scg = [{"name": r.name, "choice": r.choice, "medians_us": r.medians_us} for r in scg_report.records()]
    pi = [{"name": r.name, "strategy": r.strategy, "indirected": r.indirected} for r in pi_report.records()]
    return scg, pi


def run_one(folder: str, test: str, no_storage_mark: bool) -> dict[str, Any]:
    """The test, once, in this process; what it left."""
    sys.path.insert(0, folder)
    if no_storage_mark:
        import grace.stale_outputs

        grace.stale_outputs._shared_indices = lambda node: []
    import test_cudagraph_trees as suite
    from torch._dynamo.utils import counters

    cls_name, method = test.split(".")
    cls = getattr(suite, cls_name)
    original = getattr(cls, method)
    seen: dict[str, Any] = {}

    def observed(self: Any) -> None:
        try:
            original(self)
        except BaseException as e:
            seen["error"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            raise
        finally:
            seen["tree"] = tree_state(self.get_manager())
            seen["mm"] = dict(counters["aten_mm_info"])
            seen["pad_mm"] = {k: v for k, v in counters["inductor"].items() if "pad_mm" in k}
            seen["scg"], seen["pi"] = _decisions()

    setattr(cls, method, observed)
    # a suite, so that the class fixtures run as under pytest (setUpClass patches Inductor's config)
    result = unittest.TextTestRunner(stream=open(os.devnull, "w"), verbosity=0).run(unittest.TestSuite([cls(method)]))
    seen["passed"] = result.wasSuccessful()
    if not seen["passed"] and "error" not in seen:  # failed outside the test's body (a fixture)
        problems = result.errors + result.failures
        seen["error"] = problems[0][1].strip().splitlines()[-1] if problems else "not run"
    return seen


def spawn(folder: str, test: str, index: int, no_storage_mark: bool) -> dict[str, Any]:
    """One run in a fresh process with its own Inductor and Triton caches."""
    with tempfile.TemporaryDirectory(prefix=f"upstream-repeat-{index}-") as cache:
        env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": f"{cache}/inductor", "TRITON_CACHE_DIR": f"{cache}/triton",
               "GRACE_SCG_CACHE_DIR": f"{cache}/scg"}
        args = [sys.executable, __file__, folder, test, "--one"] + (["--no-storage-mark"] if no_storage_mark else [])
        try:
            proc = subprocess.run(args, capture_output=True, text=True, env=env, timeout=600)
        except subprocess.TimeoutExpired:
            return {"run": index, "no_storage_mark": no_storage_mark, "passed": False, "error": "timeout (600 s)"}
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    row = json.loads(lines[-1]) if lines else {"passed": False, "error": f"exit {proc.returncode}: "
                                                                          f"{proc.stderr[-500:]}"}
    return {"run": index, "no_storage_mark": no_storage_mark, **row}


def tree_differences(passing: dict[str, Any], failing: dict[str, Any]) -> list[str]:
    """Node by node, depth first, what the failing run's tree has that a passing run's has not."""
    out = []
    if len(passing["nodes"]) != len(failing["nodes"]):
        out.append(f"{len(failing['nodes'])} nodes, a passing run {len(passing['nodes'])}")
    for i, (p, f) in enumerate(zip(passing["nodes"], failing["nodes"])):
        for key in ("depth", "kind", "function", "aliases", "unaliased", "cached"):
            if p.get(key) != f.get(key):
                out.append(f"node {i} {key}: {f.get(key)} (a passing run: {p.get(key)})")
    return out


def summarize(paths: list[Path]) -> str:
    """Per file of runs: how many passed, grouped by Inductor's matmul counters and SCG's choices,
    and each failure set against the first passing run's tree."""
    lines = []
    for path in paths:
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.startswith("{")]
        failed = [r for r in rows if not r.get("passed")]
        lines.append(f"{path.name}: {len(rows)} runs, {len(rows) - len(failed)} passed, {len(failed)} failed")
        groups: Counter[tuple[bool, str, str]] = Counter()
        for r in rows:
            choices = ", ".join(f"{d['name']}: {d['choice']}" for d in r.get("scg", [])) or "-"
            groups[(bool(r.get("passed")), json.dumps(r.get("mm", {}), sort_keys=True), choices)] += 1
        for (passed, mm, choices), n in sorted(groups.items()):
            lines.append(f"  {'passed' if passed else 'failed'} {n}x; aten_mm_info {mm}; SCG {choices}")
        reference = next((r["tree"] for r in rows if r.get("passed") and r.get("tree")), None)
        for r in failed:
            lines.append(f"  run {r.get('run')}: {r.get('error')}")
            if reference is not None and r.get("tree"):
                lines.extend(f"    {d}" for d in tree_differences(reference, r["tree"]))
    return "\n".join(lines)


def main() -> int:
    if sys.argv[1:2] == ["--summarize"]:
        if len(sys.argv) < 3:
            print("usage: upstream_repeat.py --summarize RUNS.jsonl [...]", file=sys.stderr)
            return 2
        print(summarize([Path(a) for a in sys.argv[2:]]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", help="the folder of test_cudagraph_trees.py")
    parser.add_argument("test", help="Class.method, e.g. CudaGraphTreeTests.test_aliasing_static_ref")
    parser.add_argument("--runs", type=int, default=16)
    parser.add_argument("--jobs", type=int, default=4, help="runs at once (their load is part of the probe)")
    parser.add_argument("--no-storage-mark", action="store_true")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.runs < 1 or args.jobs < 1:
        parser.error("--runs and --jobs must be at least 1")
    if not (Path(args.folder) / "test_cudagraph_trees.py").is_file():
        parser.error(f"{args.folder} has no test_cudagraph_trees.py")
    if args.one:
        print(json.dumps(run_one(args.folder, args.test, args.no_storage_mark), default=str))
        return 0
    outcomes: Counter[tuple[bool, str]] = Counter()
    with ThreadPoolExecutor(args.jobs) as pool:
        for row in pool.map(lambda i: spawn(args.folder, args.test, i, args.no_storage_mark), range(args.runs)):
            print(json.dumps(row), flush=True)
            outcomes[(row["passed"], json.dumps(row.get("mm", {}), sort_keys=True))] += 1
    for (passed, mm), n in sorted(outcomes.items()):
        print(f"# {'passed' if passed else 'failed'} {n}x with aten_mm_info {mm}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

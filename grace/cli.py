"""``python -m grace <command>`` (also installed as ``grace``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def _setup(args: argparse.Namespace) -> int:
    from grace.install import setup
    from grace.patching.overlay import PatchApplyError
    from grace.versions import UnsupportedVersionError

    try:
        result = setup()
    except UnsupportedVersionError as e:
        print(f"grace setup: {e}", file=sys.stderr)
        return 2
    except PatchApplyError as e:
        print(f"grace setup: {e}\nNothing was changed.", file=sys.stderr)
        return 3
    print(f"grace setup: {len(result.patches)} patch(es) in overlay {result.path}")
    for name in result.patches:
        print(f"  - {name}")
    return 0


def _patches(args: argparse.Namespace) -> int:
    from grace.patching.overlay import PatchApplyError, plan
    from grace.patching.series import load_series
    from grace.versions import pins

    series = load_series()
    for entry in series:
        files = ", ".join(f.path for f in entry.patch.files)
        summary = entry.patch.description.splitlines()[0] if entry.patch.description else ""
        print(f"{entry.name}: {summary} [{files}]")
    if not series:
        print("(the series is empty)")
    if args.check:
        try:
            plan(series, pins().upstream_sha256)
        except PatchApplyError as e:
            print(e, file=sys.stderr)
            return 3
        print(f"all {len(series)} patch(es) apply to the installed sources")
    return 0


def _doctor(args: argparse.Namespace) -> int:
    from grace.doctor import main

    return main()


def _cache(args: argparse.Namespace) -> int:
    from grace.scg import cache

    if args.action == "clear":
        print(f"grace cache: removed {cache.clear()} SCG decision(s) from {cache.root()}")
    else:
        stored = cache.entries()
        print(f"{len(stored)} SCG decision(s) in {cache.root()}"
              + ("" if cache.enabled() else " (GRACE_SCG_CACHE=0: not used)"))
    return 0


def _scg_report(args: argparse.Namespace) -> int:
    from grace.paths import cache_dir
    from grace.scg import report

    path = args.file
    if path is None:
        found = sorted((cache_dir() / "reports").glob("scg-*.json"), key=lambda p: p.stat().st_mtime)
        if not found:
            print(f"grace scg-report: no SCG report in {cache_dir() / 'reports'} "
                  "(run a program with torch.compile(mode='reduce-overhead') first, or pass a file)", file=sys.stderr)
            return 2
        path = found[-1]
    try:
        records = report.load(path)
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"grace scg-report: cannot read {path}: {e}", file=sys.stderr)
        return 2
    print(f"SCG decisions in {path}:")
    print(report.format_table(records))
    return 0


def _explain(args: argparse.Namespace) -> int:
    import torch

    from grace.bench.workloads import get

    try:
        get(args.workload)
    except KeyError as e:
        print(f"grace explain: {e.args[0]}", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("grace explain: needs a CUDA GPU (Inductor only partitions graphs for CUDA graphs when it "
              "compiles for one); torch.cuda.is_available() is False here", file=sys.stderr)
        return 2
    from grace.cgct.explain import render

    print(f"grace explain: {args.workload}, {args.iterations} iteration(s), torch.compile(mode={args.mode!r})")
    print(render(_explain_workload(args.workload, args.iterations, args.size, args.batch_size, args.mode)))
    return 0


def _explain_workload(name: str, iterations: int, size: str, batch_size: int | None, mode: str) -> Any:
    """Compile a registered workload, run ``iterations`` steps on the GPU, and explain its graphs
    (:class:`grace.cgct.explain.Explanation`)."""
    import torch

    from grace.bench.precision import exact_float32
    from grace.bench.workloads import get
    from grace.cgct.explain import Collector

    exact_float32()  # the graphs the benchmark runs
    workload = get(name)
    batch = batch_size or workload.batch_size
    torch.manual_seed(0)
    model = workload.build("cuda", batch, size)
    torch._dynamo.reset()
    compiled = torch.compile(model, mode=mode)
    with Collector() as collector:
        for sample in range(iterations):
            inputs = workload.inputs(model, sample, "cuda", batch, size)
            if workload.kind == "training":
                workload.loss(compiled(*inputs)).backward()
            else:
                with torch.no_grad():
                    compiled(*inputs)
        torch.cuda.synchronize()
    return collector.explanation


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="grace", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("setup", help="apply the patch series and install the autoload hook").set_defaults(fn=_setup)
    sub.add_parser("doctor", help="versions, GPU, patches and switches").set_defaults(fn=_doctor)
    p = sub.add_parser("patches", help="list the patch series")
    p.add_argument("--check", action="store_true", help="dry-run: check every hunk applies")
    p.set_defaults(fn=_patches)
    c = sub.add_parser("cache", help="SCG's on-disk decisions")
    c.add_argument("action", choices=["list", "clear"])
    c.set_defaults(fn=_cache)
    r = sub.add_parser("scg-report", help="print an SCG decision report (default: the latest one)")
    r.add_argument("file", nargs="?", type=Path, default=None)
    r.set_defaults(fn=_scg_report)
    e = sub.add_parser("explain", help="why a workload's kernels stay out of CUDA graphs (GPU)")
    e.add_argument("workload", help="a registered workload (python -m grace.bench --list)")
    e.add_argument("--iterations", type=int, default=3)
    e.add_argument("--size", choices=["full", "tiny"], default="full")
    e.add_argument("--batch-size", type=int, default=None)
    e.add_argument("--mode", default="reduce-overhead")
    e.set_defaults(fn=_explain)
    args = parser.parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())

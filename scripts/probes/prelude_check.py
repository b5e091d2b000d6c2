"""Why PI's prelude (strategy 2) fails its check on real workloads.

Under SCG's strategy choice (``grace-pi-choice``) the prelude failed PI's check on MMC (max
difference 0.241, no NaN) and on ST (NaN), where strategies (1) and (3) passed on the same
graphs; on ST the process then stopped with an illegal memory access. Both strategies (2) and
(3) rewrite the same argument words (:func:`grace.pi.exec_update.scan`); (2) does it on the
device, from a kernel added before the graph's roots. The cause: the graph was launched for the
first time (the check's replay) without having been uploaded, and that launch's own upload can
overwrite the prelude's writes; GraCE uploads it (:func:`grace.pi.prelude.upload`). This probe
warms a workload up under the prelude and reports, per graph, what the prelude rewrote (nodes,
writes, writes per node, kernel names) and whether its check passed, under variants that each
test one explanation:

- ``as-is``: GraCE's prelude, the graph uploaded before its first launch;
- ``no-upload``: the upload left out, which reproduces the failure;
- ``serial``: one thread of the prelude makes every write in turn (concurrent writes into one
  node's parameters might race), uploaded;
- ``no-upload-serial``: serial writes without the upload.

With ``--blocking`` the child runs with ``CUDA_LAUNCH_BLOCKING=1``, so that an illegal access is
reported at the launch that made it. Nothing is timed.

    python scripts/probes/prelude_check.py --mode grace-cgct-pi-prelude --workload MMC --variant no-upload
"""

from __future__ import annotations

import collections
import logging
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from scripts.probes._in_mode import mode_parser, run_in_mode  # noqa: E402

VARIANTS = ("as-is", "no-upload", "serial", "no-upload-serial")

SERIAL_SOURCE = r"""
struct Entry { cudaGraphDeviceNode_t node; unsigned long long offset; unsigned long long slot; };

extern "C" __global__ void grace_pi_prelude(const Entry* entries, unsigned int count,
                                            const unsigned long long* table) {
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    for (unsigned int i = 0; i < count; ++i) {
      const unsigned long long value = table[entries[i].slot];
      cudaGraphKernelNodeSetParam(entries[i].node, entries[i].offset, &value, sizeof(value));
    }
  }
}
"""


class Messages(logging.Handler):
    """The ``grace.pi`` records of the run, kept to be counted."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record.getMessage())


def patch_variant(variant: str, installs: list[dict[str, Any]]) -> None:
    """Apply ``variant`` to :mod:`grace.pi.prelude` and note what each install rewrote."""
    from grace.pi import exec_update, prelude

    if "serial" in variant:
        prelude.PRELUDE_SOURCE = SERIAL_SOURCE
        prelude.compile_prelude.cache_clear()
    if "no-upload" in variant:
        prelude.upload = lambda raw_exec, device: None
    original_layout = prelude.layout

    def layout(sites: Any, nodes: Any) -> Any:
        slots, entries = original_layout(sites, nodes)
        names = {n.index: n.name for n in nodes if isinstance(n, exec_update.KernelNode)}
        per_node = collections.Counter(e.node for e in entries)
        installs.append({"writes": len(entries), "nodes": len(per_node), "slots": len(slots),
                         "max_writes_per_node": max(per_node.values(), default=0),
                         "kernels": sorted({names.get(e.node, "?") for e in entries})})
        return slots, entries

    prelude.layout = layout


def child(args: Any) -> None:
    from grace.bench.modes import MODES
    from grace.bench.precision import exact_float32
    from grace.bench.worker import Case
    from grace.bench.workloads import get

    messages = Messages()
    logging.getLogger("grace.pi").addHandler(messages)
    installs: list[dict[str, Any]] = []
    patch_variant(args.variant, installs)
    exact_float32()
    workload = get(args.workload)
    case = Case(workload, MODES[args.mode], args.device, workload.batch_size, args.size, check_after=True)
    error = None
    try:
        case.warm_up(5)
        for _ in range(args.iterations):
            case.untimed_step()
        case.check_kept()
    except Exception as e:  # noqa: BLE001 - the report is the point; an error is one outcome
        error = f"{type(e).__name__}: {str(e).splitlines()[0]}"
    failed = [m for m in messages.records if "prelude rewriting" in m]
    print(f"variant {args.variant}: {len(installs)} prelude(s) installed, {len(failed)} failed the check, "
          f"error: {error or 'none'}")
    for k, info in enumerate(installs):
        kernels = ", ".join(info.pop("kernels"))
        print(f"  install {k}: {info}; kernels: {kernels}")
    for m in failed:
        print(f"  check: {m[:400]}")


def main() -> int:
    ap = mode_parser(__doc__, "MMC", dry_run="the prelude's installs")
    ap.add_argument("--variant", choices=VARIANTS, default="as-is")
    ap.add_argument("--iterations", type=int, default=5, help="untimed iterations after the warm-up")
    ap.add_argument("--blocking", action="store_true", help="CUDA_LAUNCH_BLOCKING=1 in the child")
    args = ap.parse_args()
    if args.blocking and not args.child:
        os.environ["CUDA_LAUNCH_BLOCKING"] = "1"
    if not args.child:
        print(f"variant {args.variant}{' (launches blocking)' if args.blocking else ''}", flush=True)
    return run_in_mode(args, __file__, lambda: child(args))


if __name__ == "__main__":
    sys.exit(main())

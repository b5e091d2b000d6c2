#!/usr/bin/env bash
# The artifact's entry point: check CUDA, run the smoke workloads (configs/workloads_smoke.txt)
# under PT2-CG and under GraCE, write the results, print both times and the speedup of each.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/check_gpu.sh
PY=$(bash scripts/python.sh)
"$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' || {
  echo "[FAIL] torch.cuda.is_available() is False: no usable CUDA GPU for torch $("$PY" -c 'import torch; print(torch.__version__)')." >&2
  exit 2; }
"$PY" -m grace doctor
echo
"$PY" -m grace.bench --workloads smoke --modes pt2-cg,grace --baseline pt2-cg \
    --repeat "${REPEAT:-50}" --experiment smoke "$@"
"$PY" - <<'PY'
import json, pathlib
root = pathlib.Path("results/raw/smoke")
run = (root / "latest.txt").read_text().strip()
rows = {(r["workload"], r["mode"]): r for r in map(json.loads, (root / run / "rows.jsonl").read_text().splitlines())}
for workload in dict.fromkeys(w for w, _ in rows):
    cg, gr = rows.get((workload, "pt2-cg")), rows.get((workload, "grace"))
    if not (cg and gr and cg["status"] == gr["status"] == "ok"):
        print(f"{workload}: no comparison (PT2-CG {cg and cg['status']}, GraCE {gr and gr['status']})")
        continue
    c, g = cg["iter_us"]["median"], gr["iter_us"]["median"]
    print(f"{workload}: PT2-CG {c:.1f} us/iter, GraCE {g:.1f} us/iter "
          f"(medians of {gr['repeat']}), GraCE speedup over PT2-CG {c / g:.2f}x")
PY
echo "[OK] Workload run completed."

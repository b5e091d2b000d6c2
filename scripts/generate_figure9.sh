#!/usr/bin/env bash
# Figure 9 (per-iteration time against the number of indirected parameters, with and without
# PI) from the latest run of results/raw/figure9/ (`STEPS=figure9 bash scripts/gpu_checks_pi_cgct.sh`
# makes one); extra arguments go to `python -m grace.report figure9` (--run-id R, ...).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-$(bash scripts/python.sh 2>/dev/null || echo python3)}
exec "$PY" -m grace.report figure9 --experiment figure9 "$@"

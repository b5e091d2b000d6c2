#!/usr/bin/env bash
# SCG's decision tables (tables/table4_scg.csv, tables/scg_decisions.csv), the never-slower
# check and Figure 13 from the latest run of results/raw/<experiment>/ (default single_gpu).
# Extra arguments go to `python -m grace.report scg` (--experiment E, --run-id R, --second-run-id R2).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-$(bash scripts/python.sh 2>/dev/null || echo python3)}
exec "$PY" -m grace.report scg "$@"

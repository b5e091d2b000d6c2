#!/usr/bin/env bash
# Figure 12 from a run of scripts/run_tp_experiments.sh: results/processed/figure12.csv (columns
# workload,tp,mode,status,median_us,speedup_over_nocg) and figures/figure12.{pdf,png}.
#
#   bash scripts/generate_tp_figure.sh [--run-id RUN_ID]     (default: results/raw/tp/latest.txt)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=$(bash scripts/python.sh)
exec "$PY" -m grace.report figure12 --experiment tp "$@"

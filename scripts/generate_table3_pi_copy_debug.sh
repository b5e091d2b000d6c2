#!/usr/bin/env bash
# tables/table3_pi_copy_debug.csv from the latest run of scripts/run_table3_pi_copy_debug.sh
# (EXPERIMENT and RUN_ID pick another). RUNS=FILE draws it from the runs FILE lists instead, one
# EXPERIMENT/RUN_ID a line, later rows replacing earlier ones: configs/table3_runs.txt is the
# committed table's.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=$(bash scripts/python.sh)
if [ -n "${RUNS:-}" ]; then
  mapfile -t runs < <(grep -v '^[[:space:]]*#' "$RUNS" | grep .)
  [ ${#runs[@]} -gt 0 ] || { echo "generate_table3: $RUNS lists no run" >&2; exit 2; }
  args=(--experiment "${runs[0]%%/*}" --run-id "${runs[0]#*/}")
  for run in "${runs[@]:1}"; do args+=(--also "$run"); done
  exec "$PY" -m grace.report table3 "${args[@]}" "$@"
fi
exec "$PY" -m grace.report table3 --experiment "${EXPERIMENT:-table3}" ${RUN_ID:+--run-id "$RUN_ID"} "$@"

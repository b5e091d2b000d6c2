#!/usr/bin/env bash
# tables/table3_pi_copy_debug.csv from the latest run of scripts/run_table3_pi_copy_debug.sh
# (EXPERIMENT and RUN_ID pick another).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=$(bash scripts/python.sh)
exec "$PY" -m grace.report table3 --experiment "${EXPERIMENT:-table3}" ${RUN_ID:+--run-id "$RUN_ID"} "$@"

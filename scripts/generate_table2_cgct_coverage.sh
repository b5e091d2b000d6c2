#!/usr/bin/env bash
# tables/table2_cgct_coverage.csv from the latest run of scripts/run_table2_cgct_coverage.sh
# (EXPERIMENT and RUN_ID pick another; python -m grace.report tables23 --help for --also).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=$(bash scripts/python.sh)
exec "$PY" -m grace.report table2 --experiment "${EXPERIMENT:-table2}" ${RUN_ID:+--run-id "$RUN_ID"} "$@"

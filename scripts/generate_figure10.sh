#!/usr/bin/env bash
# Figure 10 from the latest run of results/raw/<experiment>/ (default single_gpu); extra
# arguments go to `python -m grace.report figure10` (--experiment E, --run-id R, ...).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-$(bash scripts/python.sh 2>/dev/null || echo python3)}
exec "$PY" -m grace.report figure10 "$@"

#!/usr/bin/env bash
# Figures 10 and 11: every workload of WORKLOADS (a config in configs/, default: micro) in
# every mode, interleaved. A sweep can be split into shards, each under 10 minutes:
#   RUN_ID=$(date +%Y%m%d-%H%M%S) SHARD=1/3 bash scripts/run_single_gpu_experiments.sh
#   RUN_ID=<same> SHARD=2/3 ...
# Without SHARD it runs SHARDS (default 1) shards back to back under one run id.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/check_gpu.sh
PY=$(bash scripts/python.sh)
WORKLOADS=${WORKLOADS:-micro}
RUN_ID=${RUN_ID:-$(date +%Y%m%d-%H%M%S)-$$}
EXPERIMENT=${EXPERIMENT:-single_gpu}
if [ -n "${SHARD:-}" ]; then
  shards=("$SHARD")
else
  n=${SHARDS:-1}
  shards=()
  for ((i = 1; i <= n; i++)); do shards+=("$i/$n"); done
fi
for s in "${shards[@]}"; do
  echo "== shard $s of run $RUN_ID ($WORKLOADS) =="
  "$PY" -m grace.bench --workloads "$WORKLOADS" --experiment "$EXPERIMENT" --run-id "$RUN_ID" \
      --shard "$s" --repeat "${REPEAT:-100}" --timeout "${TIMEOUT:-300}" "$@" || status=$?
done
echo "results: results/raw/$EXPERIMENT/$RUN_ID/rows.jsonl"
exit "${status:-0}"

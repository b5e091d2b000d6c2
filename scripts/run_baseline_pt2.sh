#!/usr/bin/env bash
# The PT2 baseline: every workload of WORKLOADS (default: the paper's 25) under eager,
# PT2-NoCG and PT2-CG, interleaved per workload, then results/processed/baseline_pt2.csv.
# CONCURRENT runners share the GPU (scripts/run_sharded.sh says how).
#
#   RUN_ID=$(date +%Y%m%d)-baseline REPEAT=30 bash scripts/run_baseline_pt2.sh
#   RUN_ID=<same> bash scripts/run_baseline_pt2.sh --resume --stop-after 420   # finish it
#   # a workload whose three compilations do not fit one shard one after another (DALLE2, TEFD):
#   RUN_ID=<same> CONCURRENT=1 WORKLOADS=DALLE2 bash scripts/run_baseline_pt2.sh --resume --compile-together
#   # one whose three modes do not fit on the GPU at once (XLNET-T, DR-I): alone, compiling one
#   # mode after another (three warm-ups at once would not fit either), returning memory between chunks:
#   RUN_ID=<same> CONCURRENT=1 TIMEOUT=540 WORKLOADS=XLNET-T bash scripts/run_baseline_pt2.sh --resume \
#       --retry error --release-memory
set -euo pipefail
cd "$(dirname "$0")/.."
export EXPERIMENT=${EXPERIMENT:-baseline_pt2} WORKLOADS=${WORKLOADS:-single_gpu_25}
export RUN_ID=${RUN_ID:-$(date +%Y%m%d-%H%M%S)-$$} MODES=${MODES:-eager,pt2-nocg,pt2-cg}
status=0
bash scripts/run_sharded.sh "$@" || status=$?
(( status == 2 )) && exit 2  # no GPU or a bad setting: nothing ran
PY=$(bash scripts/python.sh)
"$PY" -m grace.report baseline --experiment "$EXPERIMENT" --run-id "$RUN_ID" --workloads "$WORKLOADS" || status=$?
echo "results: results/raw/$EXPERIMENT/$RUN_ID/rows.jsonl"
exit "$status"

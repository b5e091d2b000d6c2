#!/usr/bin/env bash
# Tables 2 and 3 on the suite (issues 6 and 5): every workload of WORKLOADS (default: the
# paper's 25) under PT2-CG, GraCE-CGCT and GraCE-CGCT-PI, interleaved per workload, each mode
# profiled for COVERAGE (default 3) iterations after timing, then tables/table2_cgct_coverage.csv
# (share of kernels launched by graph replays, compile time over PT2-CG's) and
# tables/table3_pi_copy_debug.csv (bytes copied per replay, graphs using PI, peak memory).
# CONCURRENT runners share the GPU (scripts/run_sharded.sh says how). REPORT (default tables23)
# names the report it ends with; the artifact's run_table2_cgct_coverage.sh and
# run_table3_pi_copy_debug.sh run this with their own modes and one table each.
#
#   RUN_ID=$(date +%Y%m%d)-tables23 CONCURRENT=3 bash scripts/run_tables23.sh --compile-together --stop-after 400
#   RUN_ID=<same> CONCURRENT=3 bash scripts/run_tables23.sh --resume --compile-together --stop-after 400
set -euo pipefail
cd "$(dirname "$0")/.."
export EXPERIMENT=${EXPERIMENT:-tables23} WORKLOADS=${WORKLOADS:-single_gpu_25}
export RUN_ID=${RUN_ID:-$(date +%Y%m%d-%H%M%S)-$$} MODES=${MODES:-pt2-cg,grace-cgct,grace-cgct-pi}
export REPEAT=${REPEAT:-10}
status=0
bash scripts/run_sharded.sh --coverage "${COVERAGE:-3}" "$@" || status=$?
(( status == 2 )) && exit 2
PY=$(bash scripts/python.sh)
"$PY" -m grace.report "${REPORT:-tables23}" --experiment "$EXPERIMENT" --run-id "$RUN_ID" || status=$?
echo "results: results/raw/$EXPERIMENT/$RUN_ID/rows.jsonl"
exit "$status"

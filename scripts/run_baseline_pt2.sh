#!/usr/bin/env bash
# The PT2 baseline (issue 3): every workload of WORKLOADS (default: the paper's 25) under eager,
# PT2-NoCG and PT2-CG, interleaved per workload, then results/processed/baseline_pt2.csv.
#
# Compilation dominates a sweep of the suite (tens of seconds per workload and mode), so
# CONCURRENT runners (default 2) share the GPU: each takes every CONCURRENT-th workload, runs
# its compilations on the cores left after the timing cores, and times on a core of its own
# while holding a lock that the other runners also take to time. Compilation overlaps; timed
# rounds never do. Compile times are then measured with CONCURRENT compilations at once.
#
#   RUN_ID=$(date +%Y%m%d)-baseline REPEAT=30 bash scripts/run_baseline_pt2.sh
#   RUN_ID=<same> bash scripts/run_baseline_pt2.sh --resume --stop-after 420   # finish it
#   # a workload whose three compilations do not fit one shard one after another (DALLE2,
#   # TEFD), or whose three modes do not fit on the GPU together as well (XLNET-T, DR-I):
#   RUN_ID=<same> CONCURRENT=1 WORKLOADS=DALLE2 bash scripts/run_baseline_pt2.sh --resume --compile-together
#   RUN_ID=<same> CONCURRENT=1 TIMEOUT=540 WORKLOADS=XLNET-T bash scripts/run_baseline_pt2.sh --resume \
#       --retry error --compile-together --release-memory
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/check_gpu.sh
PY=$(bash scripts/python.sh)
WORKLOADS=${WORKLOADS:-single_gpu_25}
EXPERIMENT=${EXPERIMENT:-baseline_pt2}
RUN_ID=${RUN_ID:-$(date +%Y%m%d-%H%M%S)-$$}
CONCURRENT=${CONCURRENT:-2}
MODES=${MODES:-eager,pt2-nocg,pt2-cg}
NCPU=$(nproc)
if (( CONCURRENT < 1 || CONCURRENT >= NCPU )); then
  echo "run_baseline_pt2: CONCURRENT=$CONCURRENT must be between 1 and $((NCPU - 1))" >&2; exit 2
fi
RUN_DIR=results/raw/$EXPERIMENT/$RUN_ID
mkdir -p "$RUN_DIR"
COMPILE_CORES=0-$((NCPU - CONCURRENT - 1))
pids=()
# Each runner leads its own process group (setsid), so that stopping this script stops the
# runners' workers too instead of leaving them compiling on the GPU.
trap 'for p in "${pids[@]}"; do kill -TERM -- "-$p" 2>/dev/null; done' TERM INT
for ((i = 1; i <= CONCURRENT; i++)); do
  pin=$((NCPU - i))
  echo "== runner $i/$CONCURRENT: compiles on cores $COMPILE_CORES, times on core $pin =="
  setsid taskset -c "$COMPILE_CORES" "$PY" -m grace.bench --workloads "$WORKLOADS" --modes "$MODES" \
      --experiment "$EXPERIMENT" --run-id "$RUN_ID" --shard "$i/$CONCURRENT" \
      --repeat "${REPEAT:-30}" --warmup "${WARMUP:-3}" --timeout "${TIMEOUT:-420}" \
      --pin-cpu "$pin" --timing-lock "$RUN_DIR/timing.lock" "$@" \
      > "$RUN_DIR/runner.$i.$$.out" 2>&1 &
  pids+=($!)
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=$?; done
cat "$RUN_DIR"/runner.*.$$.out
"$PY" -m grace.report baseline --experiment "$EXPERIMENT" --run-id "$RUN_ID" --workloads "$WORKLOADS" || status=$?
echo "results: $RUN_DIR/rows.jsonl"
exit "$status"

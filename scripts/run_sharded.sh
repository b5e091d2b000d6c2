#!/usr/bin/env bash
# Run WORKLOADS in MODES with CONCURRENT runners sharing the GPU, under one run id; the scripts
# for the baseline (run_baseline_pt2.sh) and for Tables 2 and 3 (run_tables23.sh) call this.
#
# Compilation dominates a sweep of the suite (tens of seconds per workload and mode), so
# CONCURRENT runners (default 2) share the GPU: each takes every CONCURRENT-th workload, runs
# its compilations on the cores left after the timing cores, and times on a core of its own
# while holding a lock that the other runners also take to time. Compilation overlaps; timed
# rounds never do. Compile times are then measured with CONCURRENT compilations at once.
# Arguments after the environment go to every runner (`python -m grace.bench --help`).
#
#   EXPERIMENT=x RUN_ID=y WORKLOADS=single_gpu_25 MODES=pt2-cg,grace-cgct bash scripts/run_sharded.sh --resume
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/check_gpu.sh
PY=$(bash scripts/python.sh)
: "${EXPERIMENT:?set EXPERIMENT}" "${RUN_ID:?set RUN_ID}" "${MODES:?set MODES}"
WORKLOADS=${WORKLOADS:-single_gpu_25}
CONCURRENT=${CONCURRENT:-2}
NCPU=$(nproc)
if (( CONCURRENT < 1 || CONCURRENT >= NCPU )); then
  echo "run_sharded: CONCURRENT=$CONCURRENT must be between 1 and $((NCPU - 1))" >&2; exit 2
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
exit "$status"

#!/usr/bin/env bash
# Run WORKLOADS in MODES with CONCURRENT runners sharing the GPU, under one run id; the scripts
# for the baseline (run_baseline_pt2.sh) and for Tables 2 and 3 (run_tables23.sh) call this.
#
# Compilation dominates a sweep of the suite (tens of seconds per workload and mode), so
# CONCURRENT runners (default 2) share the GPU: each takes every CONCURRENT-th workload, runs
# its compilations on the cores left after the timing cores, and times on a core of its own
# while holding a lock that the other runners on its GPU also take to time. Compilation
# overlaps; timed rounds on one GPU never do. Compile times are then measured with CONCURRENT
# compilations at once. On a machine of several GPUs the runners take the visible GPUs in turn
# (runner i the (i-1 mod n)-th), each GPU with its own lock: a workload's modes interleave on one
# card, and runners on different cards time side by side.
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
read -ra GPUS <<< "$(bash scripts/visible_gpus.sh)"
pids=()
# Each runner leads its own process group (setsid), so that stopping this script stops the
# runners' workers too instead of leaving them compiling on the GPU.
trap 'for p in "${pids[@]}"; do kill -TERM -- "-$p" 2>/dev/null; done' TERM INT
# with --resume, what an earlier call cut is read as of now: no runner takes a workload another
# runner of this call has just started for a cut one (grace.bench.targets.pending)
started=$(date +%s.%N)
for ((i = 1; i <= CONCURRENT; i++)); do
  pin=$((NCPU - i))
  gpu=${GPUS[$(( (i - 1) % ${#GPUS[@]} ))]}
  echo "== runner $i/$CONCURRENT: GPU $gpu, compiles on cores $COMPILE_CORES, times on core $pin =="
  CUDA_VISIBLE_DEVICES=$gpu setsid taskset -c "$COMPILE_CORES" "$PY" -m grace.bench --workloads "$WORKLOADS" \
      --modes "$MODES" --experiment "$EXPERIMENT" --run-id "$RUN_ID" --shard "$i/$CONCURRENT" \
      --repeat "${REPEAT:-30}" --warmup "${WARMUP:-3}" --timeout "${TIMEOUT:-420}" \
      --pin-cpu "$pin" --timing-lock "$RUN_DIR/timing.gpu$gpu.lock" --attempts-before "$started" "$@" \
      > "$RUN_DIR/runner.$i.$$.out" 2>&1 &
  pids+=($!)
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=$?; done
cat "$RUN_DIR"/runner.*.$$.out
exit "$status"

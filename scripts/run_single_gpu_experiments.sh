#!/usr/bin/env bash
# Figures 10 and 11 (the artifact's single-GPU sweep): every workload of WORKLOADS (a config in
# configs/, default single_gpu_25: the paper's 25) in every mode of MODES (default: the modes of
# Figures 10 and 11, eager for the reference included), interleaved, under one run id.
#
#   bash scripts/run_single_gpu_experiments.sh                       # a new run, to the end
#   RUN_ID=R STOP_AFTER=420 bash scripts/run_single_gpu_experiments.sh   # at most ~10 minutes a call
#   RUN_ID=R STOP_AFTER=420 bash scripts/run_single_gpu_experiments.sh   # ...again: it resumes
#
# A run whose rows.jsonl exists is resumed: workloads with rows for every mode are skipped
# (`--resume`; RETRY=error,timeout,mismatch reruns those). STOP_AFTER starts no new workload
# after that many seconds, so one call of a machine lent for ten minutes ends in time; the next
# call with the same RUN_ID goes on. SHARD=i/n (or SHARDS=n, run one after another) splits the
# workloads instead. Progress, with the time left, is printed as workloads finish. WORKLOADS=micro
# runs the eight micro-workloads only (minutes). Extra arguments go to `python -m grace.bench`.
# On a machine of several GPUs, without SHARD or SHARDS, each visible GPU runs its own shard side
# by side (CUDA_VISIBLE_DEVICES picks them; PER_GPU=0 runs one shard after another on the first
# instead): every workload's modes still interleave on one GPU, each shard times on a core of
# its own, and the shards compile on the other cores.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/check_gpu.sh
PY=$(bash scripts/python.sh)
WORKLOADS=${WORKLOADS:-single_gpu_25}
MODES=${MODES:-eager,pt2-nocg,pt2-cg,grace-cgct,grace-cgct-pi,grace}
RUN_ID=${RUN_ID:-$(date +%Y%m%d-%H%M%S)-$$}
EXPERIMENT=${EXPERIMENT:-single_gpu}
RUN_DIR=results/raw/$EXPERIMENT/$RUN_ID
resume=()
if [ -s "$RUN_DIR/rows.jsonl" ]; then
  resume=(--resume)
  [ -n "${RETRY:-}" ] && resume+=(--retry "$RETRY")
  echo "== resuming run $RUN_ID ($(wc -l < "$RUN_DIR/rows.jsonl") rows so far) =="
fi
stop=()
[ -n "${STOP_AFTER:-}" ] && stop=(--stop-after "$STOP_AFTER")
if [ -n "${SHARD:-}" ]; then
  shards=("$SHARD")
else
  n=${SHARDS:-1}
  shards=()
  for ((i = 1; i <= n; i++)); do shards+=("$i/$n"); done
fi
bench() {  # bench SHARD ARGS...: one runner of this run
  local s=$1; shift
  "$PY" -m grace.bench --workloads "$WORKLOADS" --modes "$MODES" --experiment "$EXPERIMENT" --run-id "$RUN_ID" \
      --shard "$s" --repeat "${REPEAT:-100}" --timeout "${TIMEOUT:-420}" "${resume[@]}" "${stop[@]}" "$@"
}
read -ra GPUS <<< "$(bash scripts/visible_gpus.sh)"
status=0
if [ -z "${SHARD:-}" ] && [ -z "${SHARDS:-}" ] && [ "${#GPUS[@]}" -gt 1 ] && [ "${PER_GPU:-1}" = 1 ]; then
  n=${#GPUS[@]}
  ncpu=$(nproc)
  echo "== run $RUN_ID ($WORKLOADS; $MODES): $n shards side by side on GPUs ${GPUS[*]} =="
  pids=()
  trap 'for p in "${pids[@]}"; do kill -TERM -- "-$p" 2>/dev/null; done' TERM INT
  for ((g = 0; g < n; g++)); do
    cores=() pin=(--pin-cpu none)
    if (( ncpu > 2 * n )); then  # the last n cores time, one per shard; the others compile
      cores=(taskset -c "0-$((ncpu - n - 1))") pin=(--pin-cpu "$((ncpu - 1 - g))")
    fi
    # its own process group (setsid), so that stopping this script stops its workers too
    CUDA_VISIBLE_DEVICES=${GPUS[$g]} setsid "${cores[@]}" \
      bash -c "set -o pipefail; $(declare -f bench); $(declare -p PY WORKLOADS MODES EXPERIMENT RUN_ID resume stop)
               bench $((g + 1))/$n ${pin[*]} \"\$@\" 2>&1 | sed -u 's/^/[GPU ${GPUS[$g]}] /'" _ "$@" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || status=$?; done
else
  for s in "${shards[@]}"; do
    echo "== shard $s of run $RUN_ID ($WORKLOADS; $MODES) =="
    bench "$s" "$@" || status=$?
  done
fi
echo "results: $RUN_DIR/rows.jsonl (run again with RUN_ID=$RUN_ID to resume)"
exit "$status"

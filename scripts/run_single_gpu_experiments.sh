#!/usr/bin/env bash
# Figures 10 and 11 (the artifact's single-GPU sweep): every workload of WORKLOADS (a config in
# configs/, default single_gpu_25: the paper's 25) in every mode of MODES (default: the modes of
# Figures 10 and 11, eager for the reference included), interleaved, under one run id.
#
#   bash scripts/run_single_gpu_experiments.sh                       # a new run, to the end
#   RUN_ID=R STOP_AFTER=420 bash scripts/run_single_gpu_experiments.sh   # at most ~10 minutes a call
#   RUN_ID=R STOP_AFTER=420 bash scripts/run_single_gpu_experiments.sh   # ...again: it resumes
#
# A run that has started is resumed: workloads with rows for every mode are skipped, and those
# an earlier call cut go after the rest (`--resume`; RETRY=error,timeout,mismatch reruns those;
# REDO=BERT,MTCG-T reruns those where their rows ran other code than the checkout's);
# a run packed into <run>.tar.xz (grace.report.archive) is unpacked back into its folder first.
# STOP_AFTER starts no new workload after that many seconds, so one call of a machine lent for
# ten minutes ends in time; the next call with the same RUN_ID goes on. END_AFTER has every
# workload write its rows within that many seconds, with fewer rounds (at least 4) where need
# be. WALLS_FROM=EXPERIMENT/RUN (an earlier run of these workloads) then starts, after a call's
# first workload, only those whose wall time there fits before END_AFTER, the others waiting for
# a later call (grace.bench.walls); WALLS_STRICT=1 holds the first to that too, and starts none
# whose wall time is unknown (a call that began with other work). SHARD=i/n (or SHARDS=n, run one after another) splits the workloads instead. Progress,
# with the time left, is printed as workloads finish. WORKLOADS=micro runs the eight
# micro-workloads only (minutes). A config line's together=N warm-ups at once scale to the GPU's
# memory (WAVE_GIB overrides what nvidia-smi says). BENCH_DEFAULTS (default `--gpu-time
# --gpu-time-every 4 --compile-together`) and then any extra arguments go to `python -m grace.bench`. On a machine
# of several GPUs, without SHARD or SHARDS, each visible GPU runs its own shard side by side
# through scripts/run_sharded.sh (CUDA_VISIBLE_DEVICES picks them; PER_GPU=0 runs one shard
# after another on the first instead): every workload's modes still interleave on one GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/check_gpu.sh
PY=$(bash scripts/python.sh)
WORKLOADS=${WORKLOADS:-single_gpu_25}
MODES=${MODES:-eager,pt2-nocg,pt2-cg,grace-cgct,grace-cgct-pi,grace-no-lean,grace}
RUN_ID=${RUN_ID:-$(date +%Y%m%d-%H%M%S)-$$}
EXPERIMENT=${EXPERIMENT:-single_gpu}
RUN_DIR=results/raw/$EXPERIMENT/$RUN_ID
# a run packed at the end of an earlier session goes on in its folder again
if [ ! -e "$RUN_DIR" ] && [ -f "$RUN_DIR.tar.xz" ]; then
  "$PY" -m grace.report.archive restore "$RUN_DIR"
fi
resume=()
if [ -s "$RUN_DIR/rows.jsonl" ] || [ -s "$RUN_DIR/attempts.jsonl" ]; then  # rows, or workloads started
  resume=(--resume)
  [ -n "${RETRY:-}" ] && resume+=(--retry "$RETRY")
  [ -n "${REDO:-}" ] && resume+=(--redo "$REDO")
  echo "== resuming run $RUN_ID ($(cat "$RUN_DIR/rows.jsonl" 2>/dev/null | wc -l) rows so far) =="
fi
stop=()
[ -n "${STOP_AFTER:-}" ] && stop=(--stop-after "$STOP_AFTER")
[ -n "${END_AFTER:-}" ] && stop+=(--end-after "$END_AFTER")
[ -n "${WALLS_FROM:-}" ] && stop+=(--walls-from "$WALLS_FROM")
[ -n "${WALLS_STRICT:-}" ] && stop+=(--walls-strict)
# config lines' together=N (written for an 80 GB H100) scale to the smallest GPU's memory, or WAVE_GIB's
gib=${WAVE_GIB:-$( { nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits 2>/dev/null || true; } \
  | awk 'NR == 1 || $1 < m { m = $1 } END { if (NR) printf "%.1f", m / 1024 }')}
[ -n "$gib" ] && stop+=(--wave-gib "$gib")
# as the committed sweeps ran: each mode's device time on a quarter of the samples (the headline's
# iteration over device time) and every mode of a workload compiling at once; BENCH_DEFAULTS= for none
read -ra defaults <<< "${BENCH_DEFAULTS---gpu-time --gpu-time-every 4 --compile-together}"
stop+=("${defaults[@]}")
if [ -n "${SHARD:-}" ]; then
  shards=("$SHARD")
else
  n=${SHARDS:-1}
  shards=()
  for ((i = 1; i <= n; i++)); do shards+=("$i/$n"); done
fi
read -ra GPUS <<< "$(bash scripts/visible_gpus.sh)"
status=0
if [ -z "${SHARD:-}" ] && [ -z "${SHARDS:-}" ] && [ "${#GPUS[@]}" -gt 1 ] && [ "${PER_GPU:-1}" = 1 ]; then
  EXPERIMENT=$EXPERIMENT RUN_ID=$RUN_ID WORKLOADS=$WORKLOADS MODES=$MODES CONCURRENT=${#GPUS[@]} \
    REPEAT=${REPEAT:-100} WARMUP=${WARMUP:-5} TIMEOUT=${TIMEOUT:-420} \
    bash scripts/run_sharded.sh "${resume[@]}" "${stop[@]}" "$@" || status=$?
else
  for s in "${shards[@]}"; do
    echo "== shard $s of run $RUN_ID ($WORKLOADS; $MODES) =="
    "$PY" -m grace.bench --workloads "$WORKLOADS" --modes "$MODES" --experiment "$EXPERIMENT" --run-id "$RUN_ID" \
        --shard "$s" --repeat "${REPEAT:-100}" --timeout "${TIMEOUT:-420}" "${resume[@]}" "${stop[@]}" "$@" || status=$?
  done
fi
# what the run has left, per workload: done, failed modes, cut by a call's deadline, not started
"$PY" -m grace.bench.status --experiment "$EXPERIMENT" --run-id "$RUN_ID" --workloads "$WORKLOADS" --modes "$MODES" \
  ${WALLS_FROM:+--walls-from "$WALLS_FROM"} || true
echo "results: $RUN_DIR/rows.jsonl (run again with RUN_ID=$RUN_ID to resume)"
exit "$status"

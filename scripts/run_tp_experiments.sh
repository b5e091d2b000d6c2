#!/usr/bin/env bash
# Tensor parallelism (the paper's Figure 12): each workload of WORKLOADS (default: every one with a
# plan in grace/tp/plans.py) at each degree of TP_LIST (default "1 2 4", limited to the GPUs
# present, saying which it skipped) in each mode of MODES (default "pt2-nocg pt2-cg grace"), one
# `torchrun` per (workload, degree, group of modes that start with the same switches: PT2-NoCG
# and PT2-CG share one, their iterations interleaved in it; GraCE has its own).
# HANG_DUMP_S (default 180) prints each rank's stacks that often while a launch lasts, so that
# a launch stuck in a collective shows where before LAUNCH_TIMEOUT (default 900) ends it.
# SPLIT_MODES=1 starts each mode in its own torchrun (a workload that compiles for minutes per mode).
# ROUNDS (default 3) repeats the whole sweep, the launches interleaved within each round, so that
# drift hits every mode alike; each launch times REPEAT iterations per mode (default 30) after
# WARMUP (5).
# Rows go to results/raw/tp/<RUN_ID>/rows.jsonl, logs beside them; then
# `bash scripts/generate_tp_figure.sh` draws Figure 12. On machines of several GPUs keep NVLink
# multicast off (NCCL_NVLS_ENABLE=0, set here unless already set).
#
#   bash scripts/run_tp_experiments.sh
#   TP_LIST="1 2" WORKLOADS=ST ROUNDS=1 bash scripts/run_tp_experiments.sh
set -uo pipefail
cd "$(dirname "$0")/.."
PY=$(bash scripts/python.sh) || { bash scripts/setup.sh >/dev/null && PY=$(bash scripts/python.sh); } || exit 2
DEVICE=${DEVICE:-cuda}
if [ "$DEVICE" = cuda ]; then
  GPUS=$("$PY" -c 'import torch; print(torch.cuda.device_count())')
  [ "$GPUS" -ge 1 ] || { echo "run_tp_experiments: no CUDA GPU (DEVICE=cpu runs the plumbing on gloo)" >&2; exit 2; }
else
  GPUS=${CPU_RANKS:-2}
fi
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
RUN_ID=${RUN_ID:-$(date -u +%Y%m%d-%H%M%S)}
RAW=results/raw/tp/$RUN_ID
mkdir -p "$RAW/logs"
echo "$RUN_ID" > results/raw/tp/latest.txt
WORKLOADS=${WORKLOADS:-$("$PY" -c 'from grace.tp.plans import workloads; print(" ".join(workloads()))')}
MODES=${MODES:-"pt2-nocg pt2-cg grace"}
ROUNDS=${ROUNDS:-3}
# modes that start with the same switches share a torchrun (PT2-NoCG and PT2-CG), interleaved in it;
# SPLIT_MODES=1 gives each mode its own (a workload whose two compiles do not fit one launch: DALLE2)
if [ -n "${SPLIT_MODES:-}" ]; then
  groups=$(printf '%s\n' $MODES)
else
  groups=$("$PY" -m grace.tp --groups "$MODES") || exit 2
fi
mapfile -t GROUPS_OF_MODES <<< "$groups"
DEGREES=()
for tp in ${TP_LIST:-1 2 4}; do
  if [ "$tp" -le "$GPUS" ]; then DEGREES+=("$tp"); else echo "run_tp_experiments: TP=$tp skipped: $GPUS device(s) here"; fi
done
# appended: launches on disjoint GPUs may share a run, each adding its own lines
{ echo "code sha256 $(bash scripts/code_digest.sh)"; echo "visible GPUs ${CUDA_VISIBLE_DEVICES:-all}"
  echo "workloads $WORKLOADS"; echo "degrees ${DEGREES[*]}";
  echo "modes $MODES"; echo "rounds $ROUNDS repeat ${REPEAT:-30} warmup ${WARMUP:-5} device $DEVICE ${SIZE:-full}"
  "$PY" -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu")'
} >> "$RAW/meta.txt"
status=0
for round in $(seq 1 "$ROUNDS"); do
  for wl in $WORKLOADS; do
    for tp in "${DEGREES[@]}"; do
      for group in "${GROUPS_OF_MODES[@]}"; do
        echo "round $round: $wl tp=$tp $group"
        log="$RAW/logs/$wl.tp$tp.${group//,/+}.round$round.log"
        env $("$PY" -m grace.tp --env "${group%%,*}") timeout "${LAUNCH_TIMEOUT:-900}" \
          "$PY" -m torch.distributed.run --nproc-per-node "$tp" --standalone -m grace.tp \
          --workload "$wl" --mode "$group" --device "$DEVICE" --size "${SIZE:-full}" \
          --warmup "${WARMUP:-5}" --repeat "${REPEAT:-30}" --round "$round" --out "$RAW/rows.jsonl" \
          --hang-dump "${HANG_DUMP_S:-180}" > "$log" 2>&1 || { rc=$?; status=1; tail -3 "$log"
            # a launch cut by its deadline or by a dead rank writes no rows: its modes get a timeout or crash row
            "$PY" -m grace.tp --lost-launch "$rc" --workload "$wl" --mode "$group" --tp "$tp" --round "$round" \
              --out "$RAW/rows.jsonl" --log "$log"; }
      done
    done
  done
done
echo "rows: $RAW/rows.jsonl"
exit $status

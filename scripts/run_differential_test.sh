#!/usr/bin/env bash
# Randomized differential test of torch.compile(mode="reduce-overhead") (CUDA graph trees) against
# eager, under stock PyTorch and every GraCE configuration side by side on one GPU: the same
# random programs (grace/difftest/programs.py), each (program, configuration) in its own process.
# Writes results/raw/differential/<run>/ (results.jsonl, summary.csv, worse_than_stock.md, logs/
# of the runs that were not ok) and prints the summary.
#
#   bash scripts/run_differential_test.sh
#   SECONDS_BUDGET=900 JOBS=6 CONFIGS="stock all" bash scripts/run_differential_test.sh
#
# SECONDS_BUDGET: no new program starts after it (default 300); programs already started still
# run under every configuration, unless HARD_SECONDS (default SECONDS_BUDGET + 270) ends them
# first (those runs are dropped, not counted). CONFIGS: configuration names (default: those
# `python -m grace.report.upstream --list` names, and stock-again: stock once more, its own noise floor). JOBS: processes at a time (default 4). START_SEED
# (default: a fresh one per run, printed), MAX_STEPS (default 150), KINDS (default: every kind but the opt-in train_accum, train_keep and dropout), TIMEOUT
# seconds per (program, configuration) (default 240), RUN_ID; DEVICE=cpu checks the plumbing on a
# machine without a GPU (no CUDA graphs there). RESUME=1 with the RUN_ID of an earlier run adds
# new programs to it (its results kept, its settings required), so that runs of several device
# calls add up. PROBE (e.g. trace,guard): the tree's probes in every child, written into the logs
# kept for failures and stale reads (python -m grace.difftest run-one --help lists them).
set -uo pipefail
cd "$(dirname "$0")/.."
PY=$(bash scripts/python.sh) || { bash scripts/setup.sh >/dev/null && PY=$(bash scripts/python.sh); } || exit 2
DEVICE=${DEVICE:-cuda}
[ "$DEVICE" = cpu ] || "$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' || {
  echo "run_differential_test: no CUDA GPU; CUDA graphs need one (DEVICE=cpu runs the plumbing only)" >&2; exit 2; }

RUN_ID=${RUN_ID:-$(date -u +%Y%m%d-%H%M%S)}
RAW=results/raw/differential/$RUN_ID
SECONDS_BUDGET=${SECONDS_BUDGET:-300}
HARD_SECONDS=${HARD_SECONDS:-$((SECONDS_BUDGET + 270))}
CONFIGS=${CONFIGS:-$("$PY" -c 'from grace.difftest.runner import RUN_BY_DEFAULT; print(*RUN_BY_DEFAULT)')}
JOBS=${JOBS:-4}
START_SEED=${START_SEED:-$(( $(date +%s) % 100000 * 1000 ))}
MAX_STEPS=${MAX_STEPS:-150}
TIMEOUT=${TIMEOUT:-240}
if [ "${RESUME:-0}" = 1 ] && [ ! -f "$RAW/results.jsonl" ]; then
  echo "run_differential_test: RESUME=1 needs the RUN_ID of an earlier run; $RAW has no results.jsonl" >&2; exit 2
fi
mkdir -p "$RAW"
echo "$RUN_ID" > results/raw/differential/latest.txt
if [ "${RESUME:-0}" = 1 ]; then
  { echo; echo "resumed $(date -u +%Y-%m-%dT%H:%M:%SZ)"; } >> "$RAW/meta.txt"
else
  : > "$RAW/meta.txt"
fi
{ echo "code sha256 $(bash scripts/code_digest.sh) (scripts/code_digest.sh at a commit finds it)";
  echo "configs $CONFIGS"; echo "jobs $JOBS"; echo "start seed $START_SEED"; echo "max steps $MAX_STEPS";
  echo "kinds ${KINDS:-all}"
  "$PY" -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu")'
} >> "$RAW/meta.txt"
echo "run $RUN_ID: $RAW (start seed $START_SEED)"

"$PY" -m grace.difftest run --device "$DEVICE" --out "$RAW" --configs "$(echo $CONFIGS | tr ' ' ',')" \
  --seconds "$SECONDS_BUDGET" --hard-seconds "$HARD_SECONDS" --jobs "$JOBS" --start-seed "$START_SEED" \
  --max-steps "$MAX_STEPS" --timeout "$TIMEOUT" ${KINDS:+--kinds "$KINDS"} ${PROBE:+--probe "$PROBE"} \
  $([ "${RESUME:-0}" = 1 ] && echo --resume)
status=$?
echo
cat "$RAW/summary.csv" 2>/dev/null
echo "worse than stock: $RAW/worse_than_stock.md"
exit $status

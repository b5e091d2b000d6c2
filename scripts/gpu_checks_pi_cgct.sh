#!/usr/bin/env bash
# PI and CGCT on the GPU in one go (issues 5 and 6): their GPU tests; the micro-workloads under
# the stock and GraCE modes, interleaved, with Table 2's coverage profile, then Tables 2 and 3;
# then Figure 9 (time against the number of indirected parameters). Each step has its own time
# limit and writes under CHECKS_DIR (default results/raw/gpu_checks/<run id>); a step that fails
# or times out is reported and the next one still runs. With TARBALL set, everything the run
# wrote (its directories, Figure 9's CSV and plots) is packed into that one file at the end,
# which is how results come back from a machine that returns few files. The micro-workloads
# take a few hundred microseconds an iteration, so each timed sample is the mean of INNER
# (default 20) iterations run back to back: one synchronised iteration is mostly host jitter
# (timed singly, their p90 was twice the median).
#
#   RUN_ID=$(date +%Y%m%d)-pi-cgct TARBALL=$OUT/checks.tgz TOTAL_S=540 bash scripts/gpu_checks_pi_cgct.sh
#
# STEPS picks steps (default: all of "pi_tests pi_prelude_tests cgct_tests micro figure9"; the
# suite workloads with large inputs, "pi_large" and "pi_dri", run only when named);
# MICRO_WORKLOADS, MICRO_MODES and FIG9_WORKLOADS narrow the timed steps, for a call that
# re-measures one thing; MICRO_FLAGS and PI_LARGE_FLAGS add bench flags to those steps (e.g.
# --gpu-time).
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/check_gpu.sh || exit 2
PY=$(bash scripts/python.sh) || exit 2
RUN_ID=${RUN_ID:-$(date +%Y%m%d-%H%M%S)-pi-cgct}
CHECKS_DIR=${CHECKS_DIR:-results/raw/gpu_checks/$RUN_ID}
mkdir -p "$CHECKS_DIR"
export GRACE_LOGS=${GRACE_LOGS:-info}

# The whole run ends by itself within TOTAL_S seconds (default 540), packing included: each
# step's limit is cut to what is left, and a step with no time left is skipped and says so. An
# outer `timeout` that fired first would lose the tarball.
DEADLINE=$((SECONDS + ${TOTAL_S:-540} - 20))

STEPS=" ${STEPS:-pi_tests pi_prelude_tests cgct_tests micro figure9} "

step() {  # step NAME SECONDS COMMAND...: run, log to CHECKS_DIR/NAME.log, report the outcome
  local name=$1 limit=$2; shift 2
  [[ $STEPS == *" $name "* ]] || return 0
  local start=$SECONDS left=$((DEADLINE - SECONDS))
  (( left < limit )) && limit=$left
  if (( limit <= 0 )); then
    echo "== $name: skipped, no time left within TOTAL_S=${TOTAL_S:-540}"
    return
  fi
  timeout "$limit" "$@" > "$CHECKS_DIR/$name.log" 2>&1
  local rc=$?
  echo "== $name: exit $rc after $((SECONDS - start)) s (log: $CHECKS_DIR/$name.log)"
  tail -n 3 "$CHECKS_DIR/$name.log"
}

step pi_tests "${PI_TESTS_S:-120}" "$PY" -m pytest -q -rs tests/test_pi_cuda.py tests/test_pi_tree_cuda.py -k "not prelude"
# The prelude's driver layer has its own process: a crash there must not take the others' results.
step pi_prelude_tests "${PI_TESTS_S:-120}" "$PY" -m pytest -q -rs tests/test_pi_tree_cuda.py -k prelude
step cgct_tests "${CGCT_TESTS_S:-120}" "$PY" -m pytest -q -rs tests/test_cgct_cuda.py
step micro "${MICRO_S:-300}" "$PY" -m grace.bench --compile-together \
    --workloads "${MICRO_WORKLOADS:-micro-eos,micro-attn-numpy,micro-attn-float,micro-attn-cputensor,micro-cpu-tensor}" \
    --modes "${MICRO_MODES:-pt2-nocg,pt2-cg,grace-cgct,grace-cgct-pi}" --repeat "${REPEAT:-30}" --inner "${INNER:-20}" --coverage 3 \
    --experiment gpu_checks --run-id "$RUN_ID" ${MICRO_FLAGS:-}
if [[ $STEPS == *" micro "* ]]; then
  "$PY" -m grace.report tables23 --experiment gpu_checks --run-id "$RUN_ID" --tables-dir "$CHECKS_DIR/tables" \
      > "$CHECKS_DIR/tables.log" 2>&1
  cat "$CHECKS_DIR/tables.log"
fi
# Where a replay's input copies cost GPU time rather than host time: suite workloads with large
# inputs, each of its modes in its own worker, interleaved, one iteration per sample.
step pi_large "${PI_LARGE_S:-300}" "$PY" -m grace.bench --compile-together \
    --workloads "${PI_LARGE_WORKLOADS:-LCNET,ALNET,EOS}" \
    --modes "${PI_LARGE_MODES:-pt2-nocg,pt2-cg,grace-cgct-pi,grace-cgct-pi-exec,grace}" \
    --repeat "${PI_LARGE_REPEAT:-15}" --experiment gpu_checks --run-id "$RUN_ID" ${PI_LARGE_FLAGS:-}
# DR-I copies a 6.5 GB input per stock replay, read by cuBLAS (only strategy (3) redirects it).
# Two workers fit on an 80 GB H100 together because strategy (3)'s capture-time check gives its
# copies back.
# Workers start in the order of the modes: strategy (3)'s first, so that its capture-time check
# (a snapshot, a moved copy and the stock run's 6.5 GB output) has the device to itself.
step pi_dri "${PI_DRI_S:-300}" "$PY" -m grace.bench --release-memory \
    --workloads DR-I --modes "${PI_DRI_MODES:-grace-cgct-pi-exec,pt2-cg}" \
    --repeat "${PI_DRI_REPEAT:-8}" --experiment gpu_checks --run-id "$RUN_ID"
if [[ $STEPS == *" pi_large "* || $STEPS == *" pi_dri "* ]]; then
  "$PY" -m grace.report tables23 --experiment gpu_checks --run-id "$RUN_ID" --tables-dir "$CHECKS_DIR/tables" \
      > "$CHECKS_DIR/tables.log" 2>&1
  cat "$CHECKS_DIR/tables.log"
fi
step figure9 "${FIG9_S:-240}" "$PY" -m grace.bench --compile-together --workloads "${FIG9_WORKLOADS:-figure9}" \
    --modes pt2-nocg,pt2-cg,grace-cgct-pi,grace-cgct-pi-prelude,grace-cgct-pi-exec --gpu-time \
    --repeat "${REPEAT:-30}" --inner "${INNER:-20}" --experiment figure9 --run-id "$RUN_ID"
if [[ $STEPS == *" figure9 "* ]]; then
  "$PY" -m grace.report figure9 --experiment figure9 --run-id "$RUN_ID" > "$CHECKS_DIR/figure9.log" 2>&1
  cat "$CHECKS_DIR/figure9.log"
fi
echo "results: $CHECKS_DIR and results/raw/gpu_checks/$RUN_ID"
if [[ -n "${TARBALL:-}" ]]; then
  tar czf "$TARBALL" "$CHECKS_DIR" "results/raw/gpu_checks/$RUN_ID" "results/raw/figure9/$RUN_ID" \
      results/processed/figure9.csv figures/figure9.png figures/figure9.pdf 2>/dev/null
  echo "packed: $TARBALL"
fi

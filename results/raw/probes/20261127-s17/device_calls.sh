#!/usr/bin/env bash
# Device calls planned for the seventeenth session (carry [".upstream", ".diag", ".trees"]). Unpack each call's
# tarball into the checkout before the next call: untracked results travel with it, so a cut upstream run or a
# differential run resumes where it ended. The machine may count its whole held time: three calls a session.
#   STAGE=12 PRUN=<date>-s17 URUN=<date>-s17-u T=590 bash .diag/s17.sh   same-run vs af7dbe8 (300 a mode) + paired reports,
#                                                                        the guard's probes; then upstream (4 shards a configuration)
#   STAGE=9 URUN=<date>-s17-u TRUN=<date>-s17-tests T=590 bash .diag/s17.sh   upstream continued; the CUDA tests beside it
#   STAGE=3 URUN=<date>-s17-u DRUN=<date>-s17-diff JOBS=6 T=590 bash .diag/s17.sh   upstream's rechecks; the differential test
# Earlier stages: results/raw/probes/20261127-s16/device_calls.sh and results/raw/probes/20261127-s15/device_calls.sh.
set -u
T=${T:-585}
if [ -z "${INNER:-}" ]; then  # the stage under a deadline; whatever it wrote comes back in one tarball
  mkdir -p "$OUT"
  RESUME=${RESUME:-} INNER=1 timeout -k 5 $((T - 20)) bash "$0"; echo "stage $STAGE: exit $?"
  tar czf "$OUT/s$STAGE.tgz" results/raw/upstream_cudagraph_trees/${URUN:-none} results/processed/upstream_cudagraph_trees.csv \
    results/processed/upstream_cudagraph_trees_differ.md results/raw/probes/${PRUN:-none} results/raw/gpu_checks/${TRUN:-none} \
    results/raw/differential/${DRUN:-none} results/raw/differential/latest.txt \
    $( [ "$STAGE" = 12 ] && echo results/raw/same_run ) 2>/dev/null
  ls -la "$OUT"; exit 0
fi
T=$((T - 20))
start=$SECONDS
left() { echo $((T - (SECONDS - start))); }
mkdir -p "$OUT"
nvidia-smi -L > "$OUT/gpus.txt" 2>&1
bash scripts/setup.sh > "$OUT/setup.$STAGE.log" 2>&1 || { echo "setup failed"; tail -20 "$OUT/setup.$STAGE.log"; }
PY=$(bash scripts/python.sh)
upstream_bg() {
  ( SHARDS=${SHARDS:-4} STEP=upstream UPSTREAM_RUN=${URUN:?} UPSTREAM_DIR=.upstream TOTAL_S=$(( $(left) - 25 )) \
      bash scripts/gpu_trust_checks.sh > "$OUT/upstream.$STAGE.log" 2>&1 ) &
}
UP="results/raw/upstream_cudagraph_trees/${URUN:-none} results/processed/upstream_cudagraph_trees.csv results/processed/upstream_cudagraph_trees_differ.md"
case "$STAGE" in
  12)  # the replay path against af7dbe8 (quiet machine first); then upstream, with the guard's probes and train_accum beside it
    P=results/raw/probes/${PRUN:?}; mkdir -p "$P"
    MODES="pt2-cg grace grace-no-guard" BEFORE=.trees/af7dbe8 REPEAT=${REPEAT:-300} timeout 330 bash scripts/run_same_run_comparison.sh > "$P/same_run.log" 2>&1
    rows=results/raw/same_run/$(cat results/raw/same_run/latest.txt)/rows.jsonl
    "$PY" -m grace.report.paired "$rows" --baseline grace@before > "$P/same_run.paired.txt" 2>&1
    "$PY" -m grace.report.paired "$rows" --baseline grace-no-guard >> "$P/same_run.paired.txt" 2>&1
    upstream_bg
    # gradient accumulation: stock, GraCE, GraCE copying gradients (grace.config.copy_grads)
    GRACE_DISABLE=1 TORCHINDUCTOR_CACHE_DIR=/tmp/ig-stock timeout 150 "$PY" scripts/probes/grad_accumulation.py \
      > "$P/grad_accumulation.stock.txt" 2>&1 &
    env $("$PY" -m grace.report.upstream --env all) TORCHINDUCTOR_CACHE_DIR=/tmp/ig-all GRACE_SCG_CACHE_DIR=/tmp/sg-all \
      timeout 150 "$PY" scripts/probes/grad_accumulation.py > "$P/grad_accumulation.all.txt" 2>&1 &
    env $("$PY" -m grace.report.upstream --env all) GRACE_COPY_GRADS=1 TORCHINDUCTOR_CACHE_DIR=/tmp/ig-copy GRACE_SCG_CACHE_DIR=/tmp/sg-copy \
      timeout 150 "$PY" scripts/probes/grad_accumulation.py > "$P/grad_accumulation.all-copy.txt" 2>&1 &
    for seed in 1 2 3; do
      env $("$PY" -m grace.report.upstream --env all) GRACE_COPY_GRADS=1 TORCHINDUCTOR_CACHE_DIR=/tmp/ia-copy-$seed GRACE_SCG_CACHE_DIR=/tmp/sa-copy-$seed \
        timeout 120 "$PY" -m grace.difftest run-one --seed $seed --kinds train_accum,pointwise --device cuda --max-steps 40 \
        > "$P/train_accum.s$seed.all-copy.txt" 2>&1 &
    done
    for c in all stock; do
      env $("$PY" -m grace.report.upstream --env "$c") timeout 120 "$PY" scripts/probes/uncached_replay_output.py > "$P/uncached_replay_output.$c.txt" 2>&1 &
      env $("$PY" -m grace.report.upstream --env "$c") timeout 120 "$PY" scripts/probes/handoff_clobber.py > "$P/handoff_clobber.$c.txt" 2>&1 &
      # gradient accumulation (upstream reports silent wrong gradients): three programs each
      for seed in 1 2 3; do
        env $("$PY" -m grace.report.upstream --env "$c") TORCHINDUCTOR_CACHE_DIR=/tmp/ia-$c-$seed GRACE_SCG_CACHE_DIR=/tmp/sa-$c-$seed \
          timeout 120 "$PY" -m grace.difftest run-one --seed $seed --kinds train_accum,pointwise --device cuda --max-steps 40 \
          > "$P/train_accum.s$seed.$c.txt" 2>&1 &
      done
    done
    wait
    ;;
  9)  # upstream under every configuration; the project's CUDA tests beside it
    upstream_bg
    D=results/raw/gpu_checks/${TRUN:?}; mkdir -p "$D"
    for f in test_trees_cuda test_lean_cuda; do
      [ "$(left)" -gt 60 ] || break
      timeout $(( $(left) - 30 < 300 ? $(left) - 30 : 300 )) "$PY" -m pytest -q -rs tests/$f.py > "$D/$f.log" 2>&1; echo "$f: $(tail -n 1 "$D/$f.log")"
    done
    wait
    ;;
  3)  # the upstream run finished and rechecked (background); the differential test beside it, fewer jobs
    [ -n "${URUN:-}" ] && upstream_bg
    STEP=difftest DIFF_RUN=${DRUN:?} TOTAL_S=$(( $(left) - 10 )) DIFF_SECONDS=$(( $(left) - 200 )) JOBS=${JOBS:-6} \
      bash scripts/gpu_trust_checks.sh > "$OUT/diff.$STAGE.log" 2>&1
    wait
    ;;
esac
echo "stage $STAGE done in $((SECONDS - start)) s"

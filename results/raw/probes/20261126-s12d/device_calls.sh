#!/usr/bin/env bash
# Device calls of the twelfth session. STAGE picks the call; T its seconds.
set -u
T=${T:-585}
start=$SECONDS
left() { echo $((T - (SECONDS - start))); }
mkdir -p "$OUT"
nvidia-smi -L > "$OUT/gpus.txt" 2>&1
bash scripts/setup.sh > "$OUT/setup.$STAGE.log" 2>&1 || { echo "setup failed"; tail -20 "$OUT/setup.$STAGE.log"; }
PY=$(bash scripts/python.sh)
case "$STAGE" in
  1)  # upstream under every configuration (background); the liveness and restore probes
    ( STEP=upstream UPSTREAM_RUN=${URUN:?} UPSTREAM_DIR=.upstream TOTAL_S=$(( $(left) - 25 )) \
        bash scripts/gpu_trust_checks.sh > "$OUT/upstream.log" 2>&1 ) &
    P=results/raw/probes/${PRUN:?}; mkdir -p "$P"
    GRACE_DISABLE=1 timeout 120 "$PY" scripts/probes/saved_output_dead.py > "$P/saved_output_dead.stock.txt" 2>&1
    timeout 120 "$PY" scripts/probes/saved_output_dead.py > "$P/saved_output_dead.grace.txt" 2>&1
    GRACE_LEAN_REPLAY=1 timeout 120 "$PY" scripts/probes/saved_output_dead.py > "$P/saved_output_dead.grace-lean.txt" 2>&1
    timeout 200 "$PY" scripts/probes/training_restore.py > "$P/training_restore.txt" 2>&1
    timeout 100 "$PY" scripts/probes/training_restore.py --difftest 1975012 > "$P/training_restore.1975012.txt" 2>&1
    wait
    tar czf "$OUT/s1.tgz" results/raw/upstream_cudagraph_trees/$URUN results/processed/upstream_cudagraph_trees.csv \
      results/processed/upstream_cudagraph_trees_differ.md "$P" 2>/dev/null ;;
  2)  # upstream under every configuration (background, resumable); the project's CUDA tests
    ( STEP=upstream UPSTREAM_RUN=${URUN:?} UPSTREAM_DIR=.upstream TOTAL_S=$(( $(left) - 25 )) \
        bash scripts/gpu_trust_checks.sh > "$OUT/upstream.log" 2>&1 ) &
    P=results/raw/probes/${PRUN:?}; mkdir -p "$P"
    ( timeout 220 "$PY" scripts/probes/training_restore.py > "$P/training_restore.txt" 2>&1 ) &
    STEP=tests TESTS_RUN=${TRUN:?} TOTAL_S=$(( $(left) - 30 )) bash scripts/gpu_trust_checks.sh > "$OUT/tests.log" 2>&1
    wait
    tar czf "$OUT/s2.tgz" results/raw/upstream_cudagraph_trees/$URUN results/processed/upstream_cudagraph_trees.csv \
      results/processed/upstream_cudagraph_trees_differ.md results/raw/gpu_checks/$TRUN "$P" 2>/dev/null ;;
  3)  # upstream resumed (background); lean's CUDA tests; the differential test, a new run
    ( STEP=upstream UPSTREAM_RUN=${URUN:?} UPSTREAM_DIR=.upstream TOTAL_S=$(( $(left) - 25 )) \
        bash scripts/gpu_trust_checks.sh > "$OUT/upstream.log" 2>&1 ) &
    D=results/raw/gpu_checks/${TRUN:?}; mkdir -p "$D"
    ( timeout 200 "$PY" -m pytest -q -rs tests/test_lean_cuda.py > "$D/test_lean_cuda.log" 2>&1 ) &
    STEP=difftest DIFF_RUN=${DRUN:?} TOTAL_S=$(( $(left) - 30 )) DIFF_SECONDS=$(( $(left) - 200 )) JOBS=${JOBS:-12} \
      bash scripts/gpu_trust_checks.sh > "$OUT/diff.log" 2>&1
    wait
    tar czf "$OUT/s3.tgz" results/raw/upstream_cudagraph_trees/$URUN results/processed/upstream_cudagraph_trees.csv \
      results/processed/upstream_cudagraph_trees_differ.md "$D" results/raw/differential/$DRUN results/raw/differential/latest.txt 2>/dev/null ;;
  4)  # upstream finished (background); the interleaved scenario against eager; hash-seed dependence of train_step mismatches
    ( STEP=upstream UPSTREAM_RUN=${URUN:?} UPSTREAM_DIR=.upstream TOTAL_S=$(( $(left) - 25 )) \
        bash scripts/gpu_trust_checks.sh > "$OUT/upstream.log" 2>&1 ) &
    P=results/raw/probes/${PRUN:?}; mkdir -p "$P"
    GRACE_DISABLE=1 timeout 90 "$PY" .diag/interleaved.py > "$P/interleaved.stock.txt" 2>&1
    GRACE_SCG_FORCE=graph timeout 90 "$PY" .diag/interleaved.py > "$P/interleaved.grace-forced.txt" 2>&1
    timeout 90 "$PY" .diag/interleaved.py > "$P/interleaved.grace.txt" 2>&1
    for h in 0 1 2; do for r in 1 2; do
      ( GRACE_DISABLE=1 PYTHONHASHSEED=$h TORCHINDUCTOR_CACHE_DIR=/tmp/ind-a$h$r TRITON_CACHE_DIR=/tmp/tri-a$h$r timeout 170 "$PY" -m grace.difftest run-one --seed 11908011 --device cuda --max-steps 60 > "$P/hash.11908011.stock.h$h.r$r.txt" 2>&1 ) &
      ( GRACE_DISABLE=1 PYTHONHASHSEED=$h TORCHINDUCTOR_CACHE_DIR=/tmp/ind-b$h$r TRITON_CACHE_DIR=/tmp/tri-b$h$r timeout 170 "$PY" -m grace.difftest run-one --seed 11908009 --device cuda --max-steps 80 > "$P/hash.11908009.stock.h$h.r$r.txt" 2>&1 ) &
    done; done
    wait
    tar czf "$OUT/s4.tgz" results/raw/upstream_cudagraph_trees/$URUN results/processed/upstream_cudagraph_trees.csv \
      results/processed/upstream_cudagraph_trees_differ.md "$P" 2>/dev/null ;;
  5)  # upstream at the final liveness code (background); the liveness probes; the interleaved scenario per configuration
    ( STEP=upstream UPSTREAM_RUN=${URUN:?} UPSTREAM_DIR=.upstream TOTAL_S=$(( $(left) - 25 )) \
        bash scripts/gpu_trust_checks.sh > "$OUT/upstream.log" 2>&1 ) &
    P=results/raw/probes/${PRUN:?}; mkdir -p "$P"
    timeout 120 "$PY" scripts/probes/saved_output_dead.py > "$P/saved_output_dead.grace.txt" 2>&1
    GRACE_LEAN_REPLAY=1 timeout 120 "$PY" scripts/probes/saved_output_dead.py > "$P/saved_output_dead.grace-lean.txt" 2>&1
    ( timeout 220 "$PY" scripts/probes/training_restore.py > "$P/training_restore.txt" 2>&1 ) &
    run() { local name=$1; shift; env GRACE_SCG_FORCE=graph "$@" timeout 90 "$PY" .diag/interleaved.py > "$P/interleaved.$name.txt" 2>&1; }
    run forced
    run forced-nopi GRACE_PI=0
    run forced-nocgct GRACE_CGCT=0
    run pi-ptx GRACE_CGCT=0 GRACE_SCG=0
    run pi-prelude GRACE_CGCT=0 GRACE_SCG=0 GRACE_PI_STRATEGY=prelude
    run scg-forced GRACE_CGCT=0 GRACE_PI=0
    run cgct GRACE_PI=0 GRACE_SCG=0
    wait
    tar czf "$OUT/s5.tgz" results/raw/upstream_cudagraph_trees/$URUN results/processed/upstream_cudagraph_trees.csv \
      results/processed/upstream_cudagraph_trees_differ.md "$P" 2>/dev/null ;;
  6)  # upstream finished (background); the trees' and lean's CUDA tests at the final code
    ( STEP=upstream UPSTREAM_RUN=${URUN:?} UPSTREAM_DIR=.upstream TOTAL_S=$(( $(left) - 20 )) \
        bash scripts/gpu_trust_checks.sh > "$OUT/upstream.log" 2>&1 ) &
    D=results/raw/gpu_checks/${TRUN:?}; mkdir -p "$D"
    for f in test_trees_cuda test_lean_cuda test_pi_tree_cuda; do
      timeout 200 "$PY" -m pytest -q -rs tests/$f.py > "$D/$f.log" 2>&1; echo "$f: $(tail -n 1 "$D/$f.log")"
    done
    wait
    tar czf "$OUT/s6.tgz" results/raw/upstream_cudagraph_trees/$URUN results/processed/upstream_cudagraph_trees.csv \
      results/processed/upstream_cudagraph_trees_differ.md "$D" 2>/dev/null ;;
esac
echo "stage $STAGE done in $((SECONDS - start)) s"

#!/usr/bin/env bash
# Device calls of the thirteenth session. STAGE picks the call; T its seconds.
set -u
T=${T:-585}
start=$SECONDS
left() { echo $((T - (SECONDS - start))); }
mkdir -p "$OUT"
nvidia-smi -L > "$OUT/gpus.txt" 2>&1
bash scripts/setup.sh > "$OUT/setup.$STAGE.log" 2>&1 || { echo "setup failed"; tail -20 "$OUT/setup.$STAGE.log"; }
PY=$(bash scripts/python.sh)
upstream_bg() {
  ( STEP=upstream UPSTREAM_RUN=${URUN:?} UPSTREAM_DIR=.upstream TOTAL_S=$(( $(left) - 25 )) \
      bash scripts/gpu_trust_checks.sh > "$OUT/upstream.$STAGE.log" 2>&1 ) &
}
UP="results/raw/upstream_cudagraph_trees/${URUN:-none} results/processed/upstream_cudagraph_trees.csv results/processed/upstream_cudagraph_trees_differ.md"
case "$STAGE" in
  1)  # upstream under every configuration (background); handoff probes; trees+lean CUDA tests; seed 11908004
    upstream_bg
    P=results/raw/probes/${PRUN:?}; mkdir -p "$P"
    D=results/raw/gpu_checks/${TRUN:?}; mkdir -p "$D"
    hc() { local name=$1; shift; env "$@" timeout 90 "$PY" scripts/probes/handoff_clobber.py $HCARGS > "$P/handoff.$name.txt" 2>&1; }
    HCARGS=--stock hc stock GRACE_DISABLE=1
    HCARGS= hc cgct-forced GRACE_CGCT=1 GRACE_PI=0 GRACE_SCG=0 GRACE_SCG_FORCE=graph
    HCARGS= hc cgct-forced-stale GRACE_CGCT=1 GRACE_PI=0 GRACE_SCG=0 GRACE_SCG_FORCE=graph GRACE_STALE_OUTPUTS_RAISE=1
    HCARGS= hc all-forced-stale GRACE_SCG_FORCE=graph GRACE_STALE_OUTPUTS_RAISE=1
    HCARGS= hc all-default-stale GRACE_STALE_OUTPUTS_RAISE=1
    for f in test_trees_cuda test_lean_cuda; do
      timeout 220 "$PY" -m pytest -q -rs tests/$f.py > "$D/$f.log" 2>&1; echo "$f: $(tail -n 1 "$D/$f.log")"
    done
    GRACE_STALE_OUTPUTS_RAISE=1 timeout 200 "$PY" -m pytest -q -rs tests/test_trees_cuda.py > "$D/test_trees_cuda.stale.log" 2>&1
    for r in 1 2 3; do
      ( GRACE_CGCT=0 GRACE_PI=1 GRACE_SCG=0 GRACE_PI_STRATEGY=ptx TORCHINDUCTOR_CACHE_DIR=/tmp/i-p$r TRITON_CACHE_DIR=/tmp/t-p$r \
          timeout 150 "$PY" -m grace.difftest run-one --seed 11908004 --device cuda --max-steps 30 > "$P/s11908004.pi-ptx.r$r.txt" 2>&1 ) &
      ( GRACE_DISABLE=1 TORCHINDUCTOR_CACHE_DIR=/tmp/i-s$r TRITON_CACHE_DIR=/tmp/t-s$r \
          timeout 150 "$PY" -m grace.difftest run-one --seed 11908004 --device cuda --max-steps 30 > "$P/s11908004.stock.r$r.txt" 2>&1 ) &
    done
    ( GRACE_DISABLE=1 TORCHINDUCTOR_CACHE_DIR=/tmp/i-n TRITON_CACHE_DIR=/tmp/t-n \
        timeout 150 "$PY" -m grace.difftest run-one --seed 11908004 --device cuda --max-steps 30 --backend inductor-nocg > "$P/s11908004.stock-nocg.txt" 2>&1 ) &
    ( GRACE_CGCT=0 GRACE_PI=1 GRACE_SCG=0 GRACE_PI_STRATEGY=ptx TORCHINDUCTOR_CACHE_DIR=/tmp/i-pn TRITON_CACHE_DIR=/tmp/t-pn \
        timeout 150 "$PY" -m grace.difftest run-one --seed 11908004 --device cuda --max-steps 30 --backend inductor-nocg > "$P/s11908004.pi-ptx-nocg.txt" 2>&1 ) &
    wait
    tar czf "$OUT/s1.tgz" $UP "$P" "$D" 2>/dev/null ;;
  2)  # upstream finished (background); difftest at final code
    upstream_bg
    STEP=difftest DIFF_RUN=${DRUN:?} TOTAL_S=$(( $(left) - 30 )) DIFF_SECONDS=$(( $(left) - 200 )) JOBS=${JOBS:-12} \
      bash scripts/gpu_trust_checks.sh > "$OUT/diff.log" 2>&1
    wait
    tar czf "$OUT/s2.tgz" $UP results/raw/differential/$DRUN results/raw/differential/latest.txt 2>/dev/null ;;
  d)  # upstream resumed (background); seed 11908004 under stock with the tree's probes; handoff with the fixed probe
    upstream_bg
    P=results/raw/probes/${PRUN:?}; mkdir -p "$P"
    hc() { local name=$1; shift; env "$@" timeout 90 "$PY" scripts/probes/handoff_clobber.py $HCARGS > "$P/handoff.$name.txt" 2>&1; }
    HCARGS=--stock hc stock GRACE_DISABLE=1
    HCARGS=--stock hc stock-order-cgct GRACE_CGCT=1 GRACE_PI=0 GRACE_SCG=0 GRACE_SCG_FORCE=graph
    HCARGS=--stock hc stock-order-cgct-stale GRACE_CGCT=1 GRACE_PI=0 GRACE_SCG=0 GRACE_SCG_FORCE=graph GRACE_STALE_OUTPUTS_RAISE=1
    HCARGS= hc cgct-forced GRACE_CGCT=1 GRACE_PI=0 GRACE_SCG=0 GRACE_SCG_FORCE=graph
    HCARGS= hc cgct-forced-stale GRACE_CGCT=1 GRACE_PI=0 GRACE_SCG=0 GRACE_SCG_FORCE=graph GRACE_STALE_OUTPUTS_RAISE=1
    HCARGS= hc all-default GRACE_DISABLE=0
    for r in 1 2 3 4 5 6; do
      ( GRACE_DISABLE=1 TORCHINDUCTOR_CACHE_DIR=/tmp/i-q$r TRITON_CACHE_DIR=/tmp/t-q$r \
          timeout 200 "$PY" -m grace.difftest run-one --seed 11908004 --device cuda --max-steps 19 --probe all > "$P/s11908004.stock-probe.r$r.txt" 2>&1 ) &
    done
    for r in 1 2 3; do
      ( GRACE_SCG_FORCE=graph GRACE_STALE_OUTPUTS_RAISE=1 TORCHINDUCTOR_CACHE_DIR=/tmp/i-a$r TRITON_CACHE_DIR=/tmp/t-a$r \
          timeout 200 "$PY" -m grace.difftest run-one --seed 11908004 --device cuda --max-steps 19 > "$P/s11908004.all-stale.r$r.txt" 2>&1 ) &
    done
    wait
    tar czf "$OUT/sd.tgz" $UP "$P" 2>/dev/null ;;
  e)  # which condition makes stock's wrong train_step gradient (seed 11908004) go away
    P=results/raw/probes/${PRUN:?}; mkdir -p "$P"
    one() { local name=$1 seed=$2 steps=$3; shift 3
      ( env GRACE_DISABLE=1 TORCHINDUCTOR_CACHE_DIR=/tmp/i-$name-$seed TRITON_CACHE_DIR=/tmp/t-$name-$seed "$@" \
          timeout 250 "$PY" -m grace.difftest run-one --seed $seed --device cuda --max-steps $steps $BK > "$P/s$seed.$name.txt" 2>&1 ) & }
    for r in 5 6; do
      BK= one plain$r 11908004 19
      BK= one determ$r 11908004 19 TORCHINDUCTOR_DETERMINISTIC=1
    done
    for r in 1 2 3 4; do
      BK= one plain$r 11908004 19
      BK= one determ$r 11908004 19 TORCHINDUCTOR_DETERMINISTIC=1
      BK= one blocking$r 11908004 19 CUDA_LAUNCH_BLOCKING=1
      BK= one nopad$r 11908004 19 TORCHINDUCTOR_SHAPE_PADDING=0 TORCHINDUCTOR_COMPREHENSIVE_PADDING=0
      BK="--backend inductor-nocg" one nocg$r 11908004 19
    done
    for r in 1 2; do
      BK= one plain$r 21317000 24
      BK= one determ$r 21317000 24 TORCHINDUCTOR_DETERMINISTIC=1
    done
    wait
    tar czf "$OUT/se.tgz" "$P" 2>/dev/null ;;
  f)  # padding off against plain, more runs
    P=results/raw/probes/${PRUN:?}; mkdir -p "$P"
    one() { local name=$1 seed=$2 steps=$3; shift 3
      ( env GRACE_DISABLE=1 TORCHINDUCTOR_CACHE_DIR=/tmp/j-$name-$seed TRITON_CACHE_DIR=/tmp/u-$name-$seed "$@" \
          timeout 250 "$PY" -m grace.difftest run-one --seed $seed --device cuda --max-steps $steps > "$P/s$seed.$name.txt" 2>&1 ) & }
    for r in 1 2 3 4 5 6 7 8; do one nopad$r 11908004 19 TORCHINDUCTOR_SHAPE_PADDING=0 TORCHINDUCTOR_COMPREHENSIVE_PADDING=0; done
    for r in 1 2 3 4 5 6; do one plain$r 11908004 19; done
    wait
    tar czf "$OUT/sf.tgz" "$P" 2>/dev/null ;;
  g)  # the cyclic collector off for the whole program; the CUDA stream sanitizer
    P=results/raw/probes/${PRUN:?}; mkdir -p "$P"
    for r in 1 2 3 4 5 6 7 8; do
      ( GRACE_DISABLE=1 TORCHINDUCTOR_CACHE_DIR=/tmp/k-$r TRITON_CACHE_DIR=/tmp/v-$r timeout 150 "$PY" -c "import gc, runpy, sys; gc.disable(); sys.argv = ['grace.difftest', 'run-one', '--seed', '11908004', '--device', 'cuda', '--max-steps', '19']; runpy.run_module('grace.difftest', run_name='__main__')" > "$P/s11908004.gc-disabled$r.txt" 2>&1 ) &
    done
    for r in 1 2; do
      ( GRACE_DISABLE=1 TORCH_CUDA_SANITIZER=1 TORCHINDUCTOR_CACHE_DIR=/tmp/k-c$r TRITON_CACHE_DIR=/tmp/v-c$r timeout 150 "$PY" -m grace.difftest run-one --seed 11908004 --device cuda --max-steps 19 > "$P/s11908004.csan$r.txt" 2>&1 ) &
    done
    wait
    tar czf "$OUT/sg.tgz" "$P" 2>/dev/null ;;
esac
echo "stage $STAGE done in $((SECONDS - start)) s"

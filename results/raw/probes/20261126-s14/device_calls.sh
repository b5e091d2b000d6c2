#!/usr/bin/env bash
# Device calls planned for the fourteenth session. STAGE picks the call; T its seconds.
set -u
T=${T:-585}
if [ -z "${INNER:-}" ]; then  # the stage under a deadline; whatever it wrote comes back in one tarball
  mkdir -p "$OUT"
  INNER=1 timeout -k 5 $((T - 20)) bash "$0"; echo "stage $STAGE: exit $?"
  tar czf "$OUT/s$STAGE.tgz" results/raw/upstream_cudagraph_trees/${URUN:-none} results/processed/upstream_cudagraph_trees.csv \
    results/processed/upstream_cudagraph_trees_differ.md results/raw/probes/${PRUN:-none} results/raw/gpu_checks/${TRUN:-none} \
    results/raw/differential/${DRUN:-none} results/raw/differential/latest.txt 2>/dev/null
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
  ( STEP=upstream UPSTREAM_RUN=${URUN:?} UPSTREAM_DIR=.upstream TOTAL_S=$(( $(left) - 25 )) \
      bash scripts/gpu_trust_checks.sh > "$OUT/upstream.$STAGE.log" 2>&1 ) &
}
UP="results/raw/upstream_cudagraph_trees/${URUN:-none} results/processed/upstream_cudagraph_trees.csv results/processed/upstream_cudagraph_trees_differ.md"
case "$STAGE" in
  1)  # upstream (background); the Triton race: kernel alone, and the program without donated buffers / without graphs
    upstream_bg
    P=results/raw/probes/${PRUN:?}; mkdir -p "$P"
    D=results/raw/gpu_checks/${TRUN:?}; mkdir -p "$D"
    timeout 150 "$PY" scripts/probes/inplace_reduction_race.py --launches 20000 > "$P/inplace_reduction_race.gpu.jsonl" 2>&1
    # seed 11908004, 24 runs, 5 at a time, none started in the last 150 s
    : > /tmp/seedjobs
    for r in 1 2 3 4 5 6 7 8; do
      echo "plain$r env GRACE_DISABLE=1 TORCH_LOGS=+torch._inductor.runtime.triton_heuristics" >> /tmp/seedjobs
      echo "racefree$r env GRACE_DISABLE=0 GRACE_CGCT=0 GRACE_PI=0 GRACE_SCG=0 GRACE_RACE_FREE_KERNELS=1 GRACE_LOGS=info" >> /tmp/seedjobs
    done
    for r in 1 2 3 4; do
      echo "nocg$r env GRACE_DISABLE=1 NOCG=1" >> /tmp/seedjobs
      echo "nodonate$r env GRACE_DISABLE=1 NODONATE=1" >> /tmp/seedjobs
    done
    export PY P DEADLINE=$(( $(date +%s) + $(left) - 250 ))
    seed_one() {
      local name=$1; shift
      [ "$(date +%s)" -lt "$DEADLINE" ] || { echo "skipped: late" > "$P/s11908004.$name.txt"; return; }
      "$@" TORCHINDUCTOR_CACHE_DIR=/tmp/i-$name TRITON_CACHE_DIR=/tmp/t-$name timeout 150 "$PY" -c "
import os, runpy, sys
import torch._functorch.config as c
if os.environ.get('NODONATE'): c.donated_buffer = False
sys.argv = ['grace.difftest', 'run-one', '--seed', '11908004', '--device', 'cuda', '--max-steps', '19'] + (['--backend', 'inductor-nocg'] if os.environ.get('NOCG') else [])
runpy.run_module('grace.difftest', run_name='__main__')" > "$P/s11908004.$name.txt" 2>&1
    }
    export -f seed_one
    xargs -P 5 -L 1 bash -c 'seed_one "$@"' _ < /tmp/seedjobs
    wait
    for f in test_trees_cuda test_lean_cuda; do
      [ "$(left)" -gt 60 ] || break
      timeout $(( $(left) - 30 < 200 ? $(left) - 30 : 200 )) "$PY" -m pytest -q -rs tests/$f.py > "$D/$f.log" 2>&1; echo "$f: $(tail -n 1 "$D/$f.log")"
    done
    wait
    ;;
  2)  # upstream finished (background); the autotuner's choice in right and wrong runs; the project's CUDA tests
    upstream_bg
    P=results/raw/probes/${PRUN:?}; mkdir -p "$P"
    D=results/raw/gpu_checks/${TRUN:?}; mkdir -p "$D"
    : > /tmp/choicejobs
    for r in 1 2 3 4 5 6 7 8; do
      echo "choice-stock$r env GRACE_DISABLE=1" >> /tmp/choicejobs
      echo "choice-racefree$r env GRACE_DISABLE=0 GRACE_CGCT=0 GRACE_PI=0 GRACE_SCG=0 GRACE_RACE_FREE_KERNELS=1 GRACE_LOGS=info" >> /tmp/choicejobs
    done
    export PY P DEADLINE=$(( $(date +%s) + $(left) - 300 ))
    choice_one() {
      local name=$1; shift
      [ "$(date +%s)" -lt "$DEADLINE" ] || { echo "skipped: late" > "$P/s11908004.$name.txt"; return; }
      "$@" TORCHINDUCTOR_COMPILE_THREADS=1 TORCHINDUCTOR_CACHE_DIR=/tmp/i-$name TRITON_CACHE_DIR=/tmp/t-$name timeout 120 \
        "$PY" scripts/probes/autotune_choice.py --seed 11908004 --device cuda --max-steps 19 > "$P/s11908004.$name.txt" 2>&1
    }
    export -f choice_one
    xargs -P 4 -L 1 bash -c 'choice_one "$@"' _ < /tmp/choicejobs
    for f in test_trees_cuda test_lean_cuda; do
      [ "$(left)" -gt 60 ] || break
      timeout $(( $(left) - 30 < 200 ? $(left) - 30 : 200 )) "$PY" -m pytest -q -rs tests/$f.py > "$D/$f.log" 2>&1; echo "$f: $(tail -n 1 "$D/$f.log")"
    done
    wait
    ;;
  3)  # the upstream run's rechecks (background); the differential test (the scale kind runs now); RESUME=1 adds to DRUN
    [ -n "${URUN:-}" ] && upstream_bg
    STEP=difftest DIFF_RUN=${DRUN:?} TOTAL_S=$(( $(left) - 10 )) DIFF_SECONDS=$(( $(left) - 200 )) JOBS=${JOBS:-12} \
      bash scripts/gpu_trust_checks.sh > "$OUT/diff.$STAGE.log" 2>&1
    wait
    ;;
  4)  # upstream under every configuration (background); the race-free variants and the guard's new notes on the programs that showed them
    upstream_bg
    P=results/raw/probes/${PRUN:?}; mkdir -p "$P"
    D=results/raw/gpu_checks/${TRUN:?}; mkdir -p "$D"
    : > /tmp/jobs4
    for seed in 29721002 29721005; do for c in all cgct stock; do echo "$seed $c" >> /tmp/jobs4; done; done
    for seed in 29721006 29721007; do for c in all all-free stock; do echo "$seed $c" >> /tmp/jobs4; done; done
    export PY P DEADLINE=$(( $(date +%s) + $(left) - 200 ))
    prog_one() {
      local seed=$1 c=$2
      [ "$(date +%s)" -lt "$DEADLINE" ] || { echo "skipped: late" > "$P/s$seed.$c.txt"; return; }
      env $("$PY" -m grace.report.upstream --env "$c") GRACE_LOGS=info TORCHINDUCTOR_COMPILE_THREADS=1 TORCHINDUCTOR_FX_GRAPH_CACHE=0 TORCHINDUCTOR_CACHE_DIR=/tmp/i-$seed-$c TRITON_CACHE_DIR=/tmp/t-$seed-$c \
        GRACE_SCG_CACHE_DIR=/tmp/s-$seed-$c timeout 150 "$PY" -m grace.difftest run-one --seed $seed --device cuda --max-steps 600 > "$P/s$seed.$c.txt" 2>&1
    }
    export -f prog_one
    xargs -P 4 -L 1 bash -c 'prog_one "$@"' _ < /tmp/jobs4
    for f in test_trees_cuda test_lean_cuda; do
      [ "$(left)" -gt 60 ] || break
      timeout $(( $(left) - 30 < 200 ? $(left) - 30 : 200 )) "$PY" -m pytest -q -rs tests/$f.py > "$D/$f.log" 2>&1; echo "$f: $(tail -n 1 "$D/$f.log")"
    done
    wait
    ;;
esac
echo "stage $STAGE done in $((SECONDS - start)) s"

#!/usr/bin/env bash
# Device calls planned for the sixteenth session (carry [".upstream", ".diag", ".trees"]). Unpack each call's
# tarball into the checkout before the next call: untracked results travel with it, so a cut upstream run or a
# differential run resumes where it ended.
#   STAGE=11 PRUN=<date>-s16 TRUN=<date>-s16-tests T=590 bash .diag/s16.sh   same-run vs af7dbe8 (300 a mode) + paired report,
#                                                                            uncached_replay_output, seed 39308002 all-free, CUDA tests
#   STAGE=9 URUN=<date>-s16-u T=590 bash .diag/s16.sh                        upstream under every configuration (again to finish it)
#   STAGE=3 URUN= DRUN=<date>-s16-diff T=590 bash .diag/s16.sh               differential test; then RESUME=1 for >= 2,000 calls
# Older stages as in the fifteenth session's script (results/raw/probes/20261127-s15/device_calls.sh).
set -u
T=${T:-585}
if [ -z "${INNER:-}" ]; then  # the stage under a deadline; whatever it wrote comes back in one tarball
  mkdir -p "$OUT"
  RESUME=${RESUME:-} INNER=1 timeout -k 5 $((T - 20)) bash "$0"; echo "stage $STAGE: exit $?"
  tar czf "$OUT/s$STAGE.tgz" results/raw/upstream_cudagraph_trees/${URUN:-none} results/processed/upstream_cudagraph_trees.csv \
    results/processed/upstream_cudagraph_trees_differ.md results/raw/probes/${PRUN:-none} results/raw/gpu_checks/${TRUN:-none} \
    results/raw/differential/${DRUN:-none} results/raw/differential/latest.txt \
    $( [ "$STAGE" = 6 ] || [ "$STAGE" = 8 ] || [ "$STAGE" = 11 ] && echo results/raw/same_run results/raw/smoke ) 2>/dev/null
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
  5)  # upstream under every configuration (background); the tree's trace of the programs whose stale reads the guard misses
    upstream_bg
    P=results/raw/probes/${PRUN:?}; mkdir -p "$P"
    : > /tmp/jobs5
    for c in stock all; do echo "29721006 $c" >> /tmp/jobs5; echo "31174002 $c" >> /tmp/jobs5; done
    echo "31174004 all-free" >> /tmp/jobs5; echo "31174004 stock" >> /tmp/jobs5
    export PY P DEADLINE=$(( $(date +%s) + $(left) - 200 ))
    trace_one() {
      local seed=$1 c=$2
      [ "$(date +%s)" -lt "$DEADLINE" ] || { echo "skipped: late" > "$P/trace.s$seed.$c.txt"; return; }
      env $("$PY" -m grace.report.upstream --env "$c") GRACE_LOGS=info TORCHINDUCTOR_COMPILE_THREADS=1 TORCHINDUCTOR_FX_GRAPH_CACHE=0 \
        TORCHINDUCTOR_CACHE_DIR=/tmp/i5-$seed-$c TRITON_CACHE_DIR=/tmp/t5-$seed-$c GRACE_SCG_CACHE_DIR=/tmp/s5-$seed-$c TORCH_LOGS=perf_hints \
        timeout 180 "$PY" -m grace.difftest run-one --seed $seed --device cuda --max-steps 600 --probe trace > "$P/trace.s$seed.$c.txt" 2>&1
    }
    export -f trace_one
    for c in stock cgct all; do for v in "" --clone; do
      env $("$PY" -m grace.report.upstream --env "$c") timeout 120 "$PY" scripts/probes/uncached_replay_output.py $v \
        > "$P/uncached_replay_output.$c$v.txt" 2>&1
    done; done
    xargs -P 3 -L 1 bash -c 'trace_one "$@"' _ < /tmp/jobs5
    wait
    ;;
  7)  # upstream resumed (background); seed 39308002's all-free mismatch, again and with one switch off at a time
    [ -n "${URUN:-}" ] && upstream_bg
    P=results/raw/probes/${PRUN:?}; mkdir -p "$P"
    : > /tmp/jobs7
    for r in 1 2; do echo "free$r all-free" >> /tmp/jobs7; done
    echo "free-norace all-free GRACE_RACE_FREE_KERNELS=0" >> /tmp/jobs7
    echo "free-nopi all-free GRACE_PI=0" >> /tmp/jobs7
    echo "free-nocgct all-free GRACE_CGCT=0" >> /tmp/jobs7
    echo "free-noguard all-free GRACE_STALE_OUTPUTS_RAISE=0" >> /tmp/jobs7
    echo "all all" >> /tmp/jobs7
    echo "free3 all-free" >> /tmp/jobs7
    export PY P DEADLINE=$(( $(date +%s) + $(left) - 200 ))
    rep_one() {
      local name=$1 c=$2; shift 2
      [ "$(date +%s)" -lt "$DEADLINE" ] || { echo "skipped: late" > "$P/s39308002.$name.txt"; return; }
      env $("$PY" -m grace.report.upstream --env "$c") "$@" GRACE_LOGS=info TORCHINDUCTOR_COMPILE_THREADS=1 TORCHINDUCTOR_FX_GRAPH_CACHE=0 \
        TORCHINDUCTOR_CACHE_DIR=/tmp/i7-$name TRITON_CACHE_DIR=/tmp/t7-$name GRACE_SCG_CACHE_DIR=/tmp/s7-$name \
        timeout 180 "$PY" -m grace.difftest run-one --seed 39308002 --device cuda --max-steps 600 --probe trace > "$P/s39308002.$name.txt" 2>&1
    }
    export -f rep_one
    xargs -P 4 -L 1 bash -c 'rep_one "$@"' _ < /tmp/jobs7
    wait
    ;;
  8)  # the all-free mismatch under the outputs probe; the guard's rule 4 again; the replay path against af7dbe8; the CUDA tests
    P=results/raw/probes/${PRUN:?}; mkdir -p "$P"
    D=results/raw/gpu_checks/${TRUN:?}; mkdir -p "$D"
    env $("$PY" -m grace.report.upstream --env all-free) GRACE_LOGS=info TORCHINDUCTOR_COMPILE_THREADS=1 TORCHINDUCTOR_FX_GRAPH_CACHE=0 \
      TORCHINDUCTOR_CACHE_DIR=/tmp/i8 TRITON_CACHE_DIR=/tmp/t8 GRACE_SCG_CACHE_DIR=/tmp/s8 \
      timeout 150 "$PY" -m grace.difftest run-one --seed 39308002 --device cuda --max-steps 600 --probe outputs,trace > "$P/s39308002.all-free.outputs.txt" 2>&1 &
    for c in all stock; do for v in "" --clone; do
      env $("$PY" -m grace.report.upstream --env "$c") timeout 120 "$PY" scripts/probes/uncached_replay_output.py $v \
        > "$P/uncached_replay_output.$c$v.txt" 2>&1
    done; done
    wait
    BEFORE=.trees/af7dbe8 REPEAT=${REPEAT:-300} timeout $(( $(left) - 200 )) bash scripts/run_same_run_comparison.sh > "$P/same_run.log" 2>&1
    for f in test_trees_cuda test_lean_cuda; do
      [ "$(left)" -gt 40 ] || break
      timeout $(( $(left) - 20 < 200 ? $(left) - 20 : 200 )) "$PY" -m pytest -q -rs tests/$f.py > "$D/$f.log" 2>&1; echo "$f: $(tail -n 1 "$D/$f.log")"
    done
    ;;
  9)  # upstream under every configuration, alone on the machine
    upstream_bg
    wait
    ;;
  10)  # seed 39308002: all-free with Inductor's generated code logged; stock without CUDA graphs
    P=results/raw/probes/${PRUN:?}; mkdir -p "$P"
    env $("$PY" -m grace.report.upstream --env all-free) GRACE_LOGS=info TORCHINDUCTOR_COMPILE_THREADS=1 TORCHINDUCTOR_FX_GRAPH_CACHE=0 \
      TORCHINDUCTOR_CACHE_DIR=/tmp/i10 TRITON_CACHE_DIR=/tmp/t10 GRACE_SCG_CACHE_DIR=/tmp/s10 TORCH_LOGS=output_code,recompiles \
      timeout 150 "$PY" -m grace.difftest run-one --seed 39308002 --device cuda --max-steps 600 --probe outputs,trace > "$P/s39308002.all-free.code.txt" 2>&1 &
    env GRACE_DISABLE=1 TORCHINDUCTOR_COMPILE_THREADS=1 TORCHINDUCTOR_FX_GRAPH_CACHE=0 TORCHINDUCTOR_CACHE_DIR=/tmp/i10n TRITON_CACHE_DIR=/tmp/t10n \
      TORCH_LOGS=output_code timeout 150 "$PY" -m grace.difftest run-one --seed 39308002 --device cuda --max-steps 600 --backend inductor-nocg --probe outputs \
      > "$P/s39308002.nocg.code.txt" 2>&1 &
    wait
    ;;
  11)  # the replay path against af7dbe8 (quiet machine first), then the guard's probes and the CUDA tests
    P=results/raw/probes/${PRUN:?}; mkdir -p "$P"
    D=results/raw/gpu_checks/${TRUN:?}; mkdir -p "$D"
    MODES="pt2-cg grace grace-no-guard" BEFORE=.trees/af7dbe8 REPEAT=${REPEAT:-300} timeout 330 bash scripts/run_same_run_comparison.sh > "$P/same_run.log" 2>&1
    rows=results/raw/same_run/$(cat results/raw/same_run/latest.txt)/rows.jsonl
    "$PY" -m grace.report.paired "$rows" --baseline grace@before > "$P/same_run.paired.txt" 2>&1
    "$PY" -m grace.report.paired "$rows" --baseline grace-no-guard >> "$P/same_run.paired.txt" 2>&1
    env $("$PY" -m grace.report.upstream --env all-free) GRACE_LOGS=info TORCHINDUCTOR_CACHE_DIR=/tmp/i11 TRITON_CACHE_DIR=/tmp/t11 GRACE_SCG_CACHE_DIR=/tmp/s11 \
      timeout 150 "$PY" -m grace.difftest run-one --seed 39308002 --device cuda --max-steps 600 --probe outputs > "$P/s39308002.all-free.txt" 2>&1 &
    for c in all stock; do
      env $("$PY" -m grace.report.upstream --env "$c") timeout 120 "$PY" scripts/probes/uncached_replay_output.py > "$P/uncached_replay_output.$c.txt" 2>&1
    done
    wait
    for f in test_trees_cuda test_lean_cuda; do
      [ "$(left)" -gt 40 ] || break
      timeout $(( $(left) - 20 < 200 ? $(left) - 20 : 200 )) "$PY" -m pytest -q -rs tests/$f.py > "$D/$f.log" 2>&1; echo "$f: $(tail -n 1 "$D/$f.log")"
    done
    ;;
  6)  # the replay path against the code before the guard and race-free kernels were on (af7dbe8), same run; the smoke test
    P=results/raw/probes/${PRUN:?}; mkdir -p "$P"
    BEFORE=.trees/af7dbe8 REPEAT=${REPEAT:-60} timeout $(( $(left) - 150 )) bash scripts/run_same_run_comparison.sh > "$P/same_run.log" 2>&1
    timeout $(( $(left) - 20 )) make smoke > "$P/smoke.log" 2>&1
    ;;
esac
echo "stage $STAGE done in $((SECONDS - start)) s"

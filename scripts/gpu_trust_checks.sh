#!/usr/bin/env bash
# What "trust" asks of every change to the tree, PI, SCG or CGCT, in device calls of ten minutes:
#
#   STEP=tests      the project's CUDA tests (PI, SCG, CGCT, bench, lean replay), each file in its own process,
#                   the files shared out over the visible GPUs
#   STEP=difftest   the randomized differential test, every configuration, DIFF_SECONDS of new
#                   programs (default 240), into DIFF_RUN (default: a new run); with RESUME=1 it
#                   adds to DIFF_RUN (default: the latest run). Its programs, and the upstream
#                   step's pytest processes, take the visible GPUs in turn
#   STEP=upstream   PyTorch's CUDA graph trees tests under every configuration, with the recheck
#                   (resumable: a second call with the same UPSTREAM_RUN finishes it)
#
#   STEP=tests bash scripts/gpu_trust_checks.sh
#   STEP=difftest DIFF_RUN=20261126-a bash scripts/gpu_trust_checks.sh
#   STEP=difftest RESUME=1 DIFF_RUN=20261126-a bash scripts/gpu_trust_checks.sh
#   STEP=upstream UPSTREAM_RUN=20261126-u UPSTREAM_DIR=.upstream bash scripts/gpu_trust_checks.sh
#
# Each step runs from a clean environment (TORCHINDUCTOR_* cache settings of the caller are
# dropped: PyTorch's tests count FX graph cache hits) and ends by itself within TOTAL_S seconds
# (default 570). TARBALL names a file to pack the step's results into, for a device call that
# returns few files.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/check_gpu.sh || exit 2
PY=$(bash scripts/python.sh) || exit 2
read -ra GPUS <<< "$(bash scripts/visible_gpus.sh)"  # the steps spread their processes over these
for v in $(env | grep -o '^TORCHINDUCTOR_[A-Z_]*'); do unset "$v"; done
TOTAL_S=${TOTAL_S:-570}
STEP=${STEP:?"set STEP to tests, difftest or upstream"}
case "$STEP" in
  tests)
    OUT=results/raw/gpu_checks/${TESTS_RUN:-$(date -u +%Y%m%d-%H%M%S)-trust}
    mkdir -p "$OUT"
    deadline=$((SECONDS + TOTAL_S - 15))
    # one lane per visible GPU, each running its share of the files one after another
    files=(tests/test_pi_tree_cuda.py tests/test_pi_cuda.py tests/test_scg_cuda.py tests/test_cgct_cuda.py
           tests/test_bench_cuda.py tests/test_lean_cuda.py tests/test_trees_cuda.py)
    for ((lane = 0; lane < ${#GPUS[@]}; lane++)); do
      (
        export CUDA_VISIBLE_DEVICES=${GPUS[$lane]}
        for ((k = lane; k < ${#files[@]}; k += ${#GPUS[@]})); do
          f=${files[$k]}; log="$OUT/$(basename "$f" .py).log"
          left=$((deadline - SECONDS)); (( left > 0 )) || { echo "== $f: skipped, no time left"; continue; }
          timeout "$left" "$PY" -m pytest -q -rs "$f" > "$log" 2>&1
          echo "== $f: exit $? on GPU $CUDA_VISIBLE_DEVICES ($(tail -n 1 "$log"))"
        done
      ) &
    done
    wait
    paths=("$OUT") ;;
  difftest)
    if [ "${RESUME:-0}" = 1 ]; then  # add to the named run, or to the latest one
      run=${DIFF_RUN:-$(cat results/raw/differential/latest.txt)}
    else  # a new run: never the latest one's folder, which a fresh run would empty
      run=${DIFF_RUN:-$(date -u +%Y%m%d-%H%M%S)}
    fi
    budget=${DIFF_SECONDS:-240}
    jobs=$(( 13 * ${#GPUS[@]} < $(nproc) - 2 ? 13 * ${#GPUS[@]} : $(nproc) - 2 ))  # children take the GPUs in turn
    RUN_ID=$run MAX_STEPS=${MAX_STEPS:-600} SECONDS_BUDGET=$budget HARD_SECONDS=$((TOTAL_S - 60)) \
      JOBS=${JOBS:-$jobs} TIMEOUT=${TIMEOUT:-$((TOTAL_S - 90))} timeout "$TOTAL_S" bash scripts/run_differential_test.sh
    paths=("results/raw/differential/$run" results/raw/differential/latest.txt) ;;
  upstream)
    run=${UPSTREAM_RUN:-$(date -u +%Y%m%d-%H%M%S)}
    RUN_ID=$run timeout "$TOTAL_S" bash scripts/run_upstream_cudagraph_tests.sh
    echo "upstream: exit $? (run the same command again to finish a cut run)"
    paths=("results/raw/upstream_cudagraph_trees/$run" results/processed/upstream_cudagraph_trees.csv
           results/processed/upstream_cudagraph_trees_differ.md) ;;
  *) echo "gpu_trust_checks: unknown STEP=$STEP (tests, difftest, upstream)" >&2; exit 2 ;;
esac
if [ -n "${TARBALL:-}" ]; then
  tar czf "$TARBALL" "${paths[@]}" 2>/dev/null && echo "packed: $TARBALL"
fi

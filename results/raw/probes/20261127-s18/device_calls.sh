#!/usr/bin/env bash
# Device calls planned for the eighteenth session, on the four-GPU kind (run's kind "nvidia-h100-x4": 4 H100s, 64
# cores; device time counts held wall time, as for one GPU). carry [".upstream", ".diag", ".trees"]. Unpack each
# call's tarball into the checkout before the next call: untracked results travel with it, so a cut upstream run or a
# differential run resumes where it ended. The machine may count its whole held time: three calls a session.
#   STAGE=9 URUN=<date>-s18-u SHARDS=5 T=590 bash .diag/s18.sh   upstream, every default configuration and all-copy,
#        55 shards of ~38 tests in one wave over 64 processes and four GPUs (~170 s), then the rechecks: one call
#   STAGE=13 PRUN=<date>-s18 TRUN=<date>-s18-tests T=590 bash .diag/s18.sh   gradient accumulation (probe, CUDA tests,
#        train_accum programs), the pi-prelude stale read and seed 39308003 replayed, spread over the GPUs; then,
#        quiet, what gradient copies cost on training workloads (bench modes pt2-cg, grace, grace-copy-grads)
#   STAGE=3 URUN=<date>-s18-u DRUN=<date>-s18-diff T=590 bash .diag/s18.sh   upstream finished if it was cut; the
#        differential test with 13 jobs a GPU, default configurations and all-copy
#   STAGE=14 PRUN=<date>-s18 URUN=<date>-s18-u T=590 bash .diag/s18.sh   (when a call is left) same-run vs af7dbe8,
#        two workers a mode and samples of 5 iterations (quiet); then upstream
# Earlier stages: results/raw/probes/20261127-s17/device_calls.sh, results/raw/probes/20261127-s16/device_calls.sh.
set -u
T=${T:-585}
if [ -z "${INNER:-}" ]; then  # the stage under a deadline; whatever it wrote comes back in one tarball
  mkdir -p "$OUT"
  RESUME=${RESUME:-} INNER=1 timeout -k 5 $((T - 20)) bash "$0"; echo "stage $STAGE: exit $?"
  tar czf "$OUT/s$STAGE.tgz" results/raw/upstream_cudagraph_trees/${URUN:-none} results/processed/upstream_cudagraph_trees.csv \
    results/processed/upstream_cudagraph_trees_differ.md results/raw/probes/${PRUN:-none} results/raw/gpu_checks/${TRUN:-none} \
    results/raw/differential/${DRUN:-none} results/raw/differential/latest.txt \
    $( [ "$STAGE" = 14 ] && echo results/raw/same_run ) $( [ "$STAGE" = 13 ] && echo results/raw/copy_grads results/raw/dlrm_check ) 2>/dev/null
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
  ( CONFIGS="$("$PY" -m grace.report.upstream --list) all-copy" SHARDS=${SHARDS:-4} STEP=upstream UPSTREAM_RUN=${URUN:?} UPSTREAM_DIR=.upstream TOTAL_S=$(( $(left) - 25 )) \
      bash scripts/gpu_trust_checks.sh > "$OUT/upstream.$STAGE.log" 2>&1 ) &
}
UP="results/raw/upstream_cudagraph_trees/${URUN:-none} results/processed/upstream_cudagraph_trees.csv results/processed/upstream_cudagraph_trees_differ.md"
case "$STAGE" in
  13)  # gradient accumulation and the open stale reads, spread over the GPUs; then, quiet, the cost of gradient copies
    P=results/raw/probes/${PRUN:?}; mkdir -p "$P"; D=results/raw/gpu_checks/${TRUN:?}; mkdir -p "$D"
    read -ra G <<< "$(bash scripts/visible_gpus.sh)"; n=0
    gpu_next() { n=$((n + 1)); GPU=CUDA_VISIBLE_DEVICES=${G[$((n % ${#G[@]}))]}; }  # in this shell, not a subshell
    gpu_next; env $GPU timeout 300 "$PY" -m pytest -q -rs tests/test_trees_cuda.py > "$D/test_trees_cuda.log" 2>&1 &
    gpu_next; env $GPU timeout 300 "$PY" -m pytest -q -rs tests/test_lean_cuda.py > "$D/test_lean_cuda.log" 2>&1 &
    gpu_next; env $GPU GRACE_DISABLE=1 TORCHINDUCTOR_CACHE_DIR=/tmp/ig-stock timeout 150 "$PY" scripts/probes/grad_accumulation.py \
      > "$P/grad_accumulation.stock.txt" 2>&1 &
    gpu_next; env $GPU $("$PY" -m grace.report.upstream --env all-copy) TORCHINDUCTOR_CACHE_DIR=/tmp/ig-copy GRACE_SCG_CACHE_DIR=/tmp/sg-copy \
      timeout 150 "$PY" scripts/probes/grad_accumulation.py > "$P/grad_accumulation.all-copy.txt" 2>&1 &
    for seed in 1 2 3 4; do
      for c in stock all all-copy; do
        gpu_next; env $GPU $("$PY" -m grace.report.upstream --env "$c") TORCHINDUCTOR_CACHE_DIR=/tmp/ia-$c-$seed GRACE_SCG_CACHE_DIR=/tmp/sa-$c-$seed \
          timeout 150 "$PY" -m grace.difftest run-one --seed $seed --kinds train_accum,pointwise --device cuda --max-steps 40 \
          > "$P/train_accum.s$seed.$c.txt" 2>&1 &
      done
    done
    # the one stale read of 20261127-s17-diff (pi-prelude): the guard's routes and the tree's calls, beside
    # pi-exec-update (which read nothing stale) and a plain pi-prelude run (is it reproducible?)
    for c in pi-prelude pi-exec-update; do
      gpu_next; env $GPU $("$PY" -m grace.report.upstream --env $c) TORCHINDUCTOR_CACHE_DIR=/tmp/ip-$c timeout 240 "$PY" -m grace.difftest \
        run-one --seed 59554000 --device cuda --max-steps 600 --probe guard,trace > "$P/s59554000.$c.json" 2> "$P/s59554000.$c.log" &
    done
    gpu_next; env $GPU $("$PY" -m grace.report.upstream --env pi-prelude) TORCHINDUCTOR_CACHE_DIR=/tmp/ip-plain timeout 240 "$PY" -m grace.difftest \
      run-one --seed 59554000 --device cuda --max-steps 600 > "$P/s59554000.pi-prelude.plain.txt" 2>&1 &
    gpu_next; env $GPU $("$PY" -m grace.report.upstream --env all) TORCHINDUCTOR_CACHE_DIR=/tmp/ip-3 GRACE_SCG_CACHE_DIR=/tmp/sp-3 timeout 240 \
      "$PY" -m grace.difftest run-one --seed 39308003 --device cuda --max-steps 600 --probe outputs > "$P/s39308003.all.txt" 2>&1 &
    # DLRM: the CPU-built indices behind stock's "not allocated in pool" (a 20-line reproduction: stock, the
    # indices built on the GPU, the index op partitioned out; and under GraCE, whose CGCT builds them on the GPU),
    # and the workload itself under PT2-CG and GraCE (a check that it runs, not a timing)
    for m in stock gpu_idx part_index; do
      gpu_next; env $GPU GRACE_DISABLE=1 TORCHINDUCTOR_CACHE_DIR=/tmp/id-$m timeout 150 "$PY" .diag/dlrm_repro.py $m > "$P/dlrm_repro.$m.txt" 2>&1 &
    done
    gpu_next; env $GPU $("$PY" -m grace.report.upstream --env all) GRACE_LOGS=info TORCHINDUCTOR_CACHE_DIR=/tmp/id-grace timeout 150 \
      "$PY" .diag/dlrm_repro.py stock > "$P/dlrm_repro.grace-all.txt" 2>&1 &
    gpu_next; env $GPU GRACE_LOGS=info timeout 280 "$PY" -m grace.bench --workloads DLRM --modes pt2-cg,grace --repeat 10 \
      --experiment dlrm_check --run-id "${PRUN}-dlrm" > "$P/dlrm_bench.log" 2>&1 &
    # the partition count of test_graph_partition_reorder_cpu_and_gpu_interleave with mm padding forced and off,
    # stock and all-lean (pad_mm's benchmark padded its mms where all-lean counted two graphs)
    PT=$("$PY" -c 'import pytest_timeout' 2>/dev/null && echo "--timeout=200" || true)
    for pad in 1 0; do
      for c in stock all-lean scg; do
        gpu_next; ( cd .upstream && env $GPU $("$PY" -m grace.report.upstream --env $c) GRACE_DIAG_PAD=$pad PYTHONPATH="$PWD/..:$PWD/../.diag" \
          TORCHINDUCTOR_CACHE_DIR=/tmp/ir-$c-$pad GRACE_SCG_CACHE_DIR=/tmp/sr-$c-$pad timeout 220 "$PY" -m pytest -c /dev/null --rootdir . \
          -p no:cacheprovider -p pad_plugin $PT -rfE --tb=short -v test_cudagraph_trees.py::CudaGraphTreeTests::test_graph_partition_reorder_cpu_and_gpu_interleave \
          > "../$P/reorder_interleave.pad$pad.$c.log" 2>&1 ) &
      done
    done
    wait
    # quiet, one GPU: gradient copies against GraCE and PT2-CG on training workloads, interleaved
    CUDA_VISIBLE_DEVICES=${G[0]} timeout $(( $(left) - 15 )) "$PY" -m grace.bench --workloads DR-T,BERT \
      --modes pt2-cg,grace,grace-copy-grads --repeat ${REPEAT:-60} --experiment copy_grads --run-id "${PRUN}-copy" \
      > "$P/copy_grads.log" 2>&1
    ;;
  14)  # the replay path against af7dbe8: two workers a mode (the process-level floor), 5 iterations a sample (quiet)
    P=results/raw/probes/${PRUN:?}; mkdir -p "$P"
    REPLICAS=2 MODES="grace grace-no-guard" BEFORE=.trees/af7dbe8 REPEAT=${REPEAT:-40} timeout 330 \
      bash scripts/run_same_run_comparison.sh --inner 5 > "$P/same_run.replicas.log" 2>&1
    rows=results/raw/same_run/$(cat results/raw/same_run/latest.txt)/rows.jsonl
    "$PY" -m grace.report.paired "$rows" --baseline grace@before > "$P/same_run.replicas.paired.txt" 2>&1
    "$PY" -m grace.report.paired "$rows" --baseline grace >> "$P/same_run.replicas.paired.txt" 2>&1
    upstream_bg
    wait
    ;;
  9)  # upstream under every configuration, alone on the machine
    upstream_bg
    wait
    ;;
  3)  # the upstream run finished and rechecked (background); the differential test beside it
    [ -n "${URUN:-}" ] && upstream_bg
    CONFIGS="$("$PY" -c 'from grace.difftest.runner import RUN_BY_DEFAULT; print(*RUN_BY_DEFAULT)') all-copy" \
    STEP=difftest DIFF_RUN=${DRUN:?} TOTAL_S=$(( $(left) - 10 )) DIFF_SECONDS=$(( $(left) - 200 )) env ${JOBS:+JOBS=$JOBS} \
      bash scripts/gpu_trust_checks.sh > "$OUT/diff.$STAGE.log" 2>&1
    wait
    ;;
esac

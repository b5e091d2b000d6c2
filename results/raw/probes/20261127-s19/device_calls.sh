#!/usr/bin/env bash
# Device calls planned for the nineteenth session, on the four-GPU kind (run's kind "nvidia-h100-x4": 4 H100s, 64
# cores; device time counts held wall time, as for one GPU). carry [".upstream", ".diag", ".trees"]. Unpack each
# call's tarball into the checkout before the next call: untracked results travel with it, so a cut upstream run or a
# differential run resumes where it ended. Three calls a session; call them back to back (the machine stays warm
# 30 s, and a fresh one costs its start).
#   STAGE=9 URUN=<date>-s19-u SHARDS=5 T=590 bash .diag/s19.sh   upstream, every default configuration and all-copy
#        (the code changed patches/scg/0009): 55 shards over 64 processes and four GPUs (~333 s), then the rechecks
#   STAGE=15 PRUN=<date>-s19 TRUN=<date>-s19-tests T=560 bash .diag/s19.sh   spread over the GPUs: gradient
#        accumulation (the probe naming the adopted parameters, stock / all-copy, and all-copy with Inductor's output
#        code; the CUDA tests; train_accum seeds 1-4 under stock and all-copy); the partition-count test with mm
#        padding forced and off (stock, all-lean, scg); then, quiet: the copy's cost on DR-T, and the same-run
#        comparison against af7dbe8 with two workers a mode, samples of 5 iterations
#   STAGE=3 URUN=<date>-s19-u ULRUN=<date>-s19-ul DRUN=<date>-s19-diff T=560 bash .diag/s19.sh   upstream finished
#        (rechecks); upstream under the -lean twins (stock cgct-lean pi-*-lean scg-lean all-free-lean); the differential
#        test of stock and all-copy, 16 jobs, both training kinds in every program
# Earlier stages: results/raw/probes/20261127-s18/device_calls.sh (and s17's, s16's).
set -u
T=${T:-585}
if [ -z "${INNER:-}" ]; then  # the stage under a deadline; whatever it wrote comes back in one tarball
  mkdir -p "$OUT"
  RESUME=${RESUME:-} INNER=1 timeout -k 5 $((T - 20)) bash "$0"; echo "stage $STAGE: exit $?"
  tar czf "$OUT/s$STAGE.tgz" results/raw/upstream_cudagraph_trees/${URUN:-none} results/raw/upstream_cudagraph_trees/${ULRUN:-none} results/processed/upstream_cudagraph_trees.csv \
    results/processed/upstream_cudagraph_trees_differ.md results/raw/probes/${PRUN:-none} results/raw/gpu_checks/${TRUN:-none} \
    results/raw/differential/${DRUN:-none} results/raw/differential/latest.txt \
    $( [ "$STAGE" = 14 ] && echo results/raw/same_run ) $( [ "$STAGE" = 15 ] && echo results/raw/copy_grads results/raw/same_run ) 2>/dev/null
  ls -la "$OUT"; exit 0
fi
T=$((T - 20))
start=$SECONDS
left() { echo $((T - (SECONDS - start))); }
mkdir -p "$OUT"
nvidia-smi -L > "$OUT/gpus.txt" 2>&1
bash scripts/setup.sh > "$OUT/setup.$STAGE.log" 2>&1 || { echo "setup failed"; tail -20 "$OUT/setup.$STAGE.log"; }
PY=$(bash scripts/python.sh)
# expecttest (PyTorch's tests import it) once, before any stage's processes could install it side by side
"$PY" -c 'import expecttest' 2>/dev/null || "$PY" -m pip install -q --no-index --no-deps --target /tmp/grace-upstream-site \
  .upstream/expecttest-*.whl > "$OUT/expecttest.$STAGE.log" 2>&1
export PYTHONPATH=/tmp/grace-upstream-site${PYTHONPATH:+:$PYTHONPATH}
upstream_bg() {
  ( CONFIGS="$("$PY" -m grace.report.upstream --list) all-copy" SHARDS=${SHARDS:-4} STEP=upstream UPSTREAM_RUN=${URUN:?} UPSTREAM_DIR=.upstream TOTAL_S=$(( $(left) - 25 )) \
      bash scripts/gpu_trust_checks.sh > "$OUT/upstream.$STAGE.log" 2>&1 ) &
}
UP="results/raw/upstream_cudagraph_trees/${URUN:-none} results/processed/upstream_cudagraph_trees.csv results/processed/upstream_cudagraph_trees_differ.md"
case "$STAGE" in
  15)  # gradient accumulation and the partition-count test, spread over the GPUs; then, quiet, the copy's cost and same-run
    P=results/raw/probes/${PRUN:?}; mkdir -p "$P"; D=results/raw/gpu_checks/${TRUN:?}; mkdir -p "$D"
    read -ra G <<< "$(bash scripts/visible_gpus.sh)"; n=0
    gpu_next() { n=$((n + 1)); GPU=CUDA_VISIBLE_DEVICES=${G[$((n % ${#G[@]}))]}; }  # in this shell, not a subshell
    gpu_next; env $GPU timeout 300 "$PY" -m pytest -q -rs tests/test_trees_cuda.py > "$D/test_trees_cuda.log" 2>&1 &
    gpu_next; env $GPU GRACE_DISABLE=1 TORCHINDUCTOR_CACHE_DIR=/tmp/ig-stock timeout 150 "$PY" scripts/probes/grad_accumulation.py \
      > "$P/grad_accumulation.stock.txt" 2>&1 &
    gpu_next; env $GPU $("$PY" -m grace.report.upstream --env all-copy) TORCHINDUCTOR_CACHE_DIR=/tmp/ig-copy GRACE_SCG_CACHE_DIR=/tmp/sg-copy \
      timeout 150 "$PY" scripts/probes/grad_accumulation.py > "$P/grad_accumulation.all-copy.txt" 2>&1 &
    gpu_next; env $GPU $("$PY" -m grace.report.upstream --env all-copy) TORCH_LOGS=output_code TORCHINDUCTOR_CACHE_DIR=/tmp/ig-oc \
      GRACE_SCG_CACHE_DIR=/tmp/sg-oc timeout 150 "$PY" scripts/probes/grad_accumulation.py --windows 2 > "$P/grad_accumulation.all-copy.output_code.txt" 2>&1 &
    for kind in train_accum train_keep; do
      for seed in 1 2 3; do
        for c in stock all-copy; do
          gpu_next; env $GPU $("$PY" -m grace.report.upstream --env "$c") TORCHINDUCTOR_CACHE_DIR=/tmp/ia-$kind-$c-$seed \
            GRACE_SCG_CACHE_DIR=/tmp/sa-$kind-$c-$seed timeout 150 "$PY" -m grace.difftest run-one --seed $seed \
            --kinds $kind,pointwise --device cuda --max-steps 40 > "$P/$kind.s$seed.$c.txt" 2>&1 &
        done
      done
    done
    # DLRM's interaction with device=None indices: stock fails ("not allocated in pool"); CGCT builds them on the GPU now
    gpu_next; env $GPU GRACE_DISABLE=1 TORCHINDUCTOR_CACHE_DIR=/tmp/id-stock timeout 150 "$PY" .diag/dlrm_repro.py stock \
      > "$P/dlrm_repro.stock.txt" 2>&1 &
    gpu_next; env $GPU $("$PY" -m grace.report.upstream --env all) GRACE_LOGS=info TORCHINDUCTOR_CACHE_DIR=/tmp/id-grace \
      GRACE_SCG_CACHE_DIR=/tmp/sd-grace timeout 150 "$PY" .diag/dlrm_repro.py stock > "$P/dlrm_repro.grace-all.txt" 2>&1 &
    gpu_next; env $GPU $("$PY" -m grace.report.upstream --env cgct) GRACE_LOGS=info TORCHINDUCTOR_CACHE_DIR=/tmp/id-cgct \
      timeout 150 "$PY" .diag/dlrm_repro.py stock > "$P/dlrm_repro.cgct.txt" 2>&1 &
    # the partition count of test_graph_partition_reorder_cpu_and_gpu_interleave with mm padding forced and off
    PT=$("$PY" -c 'import pytest_timeout' 2>/dev/null && echo "--timeout=200" || true)
    for pad in 1 0; do
      for c in stock all-lean scg; do
        gpu_next; ( cd .upstream && env $GPU $("$PY" -m grace.report.upstream --env $c) GRACE_DIAG_PAD=$pad \
          PYTHONPATH="/tmp/grace-upstream-site:$PWD/..:$PWD/../.diag" TORCHINDUCTOR_CACHE_DIR=/tmp/ir-$c-$pad GRACE_SCG_CACHE_DIR=/tmp/sr-$c-$pad \
          timeout 220 "$PY" -m pytest -c /dev/null --rootdir . -p no:cacheprovider -p pad_plugin $PT -rfE --tb=short -v \
          test_cudagraph_trees.py::CudaGraphTreeTests::test_graph_partition_reorder_cpu_and_gpu_interleave \
          > "../$P/reorder_interleave.pad$pad.$c.log" 2>&1 ) &
      done
    done
    wait
    # quiet, one GPU: what the copy costs on DR-T, interleaved with GraCE and PT2-CG
    CUDA_VISIBLE_DEVICES=${G[0]} timeout 120 "$PY" -m grace.bench --workloads DR-T --modes pt2-cg,grace,grace-copy-grads \
      --repeat ${REPEAT_COPY:-40} --experiment copy_grads --run-id "${PRUN}-copy" > "$P/copy_grads.log" 2>&1
    # quiet: the replay path against af7dbe8, two workers a mode, samples of 5 iterations
    CUDA_VISIBLE_DEVICES=${G[0]} REPLICAS=2 MODES="grace grace-no-guard" BEFORE=.trees/af7dbe8 REPEAT=${REPEAT:-40} \
      timeout $(( $(left) - 25 )) bash scripts/run_same_run_comparison.sh --inner 5 > "$P/same_run.replicas.log" 2>&1
    rows=results/raw/same_run/$(cat results/raw/same_run/latest.txt)/rows.jsonl
    "$PY" -m grace.report.paired "$rows" --baseline grace@before > "$P/same_run.replicas.paired.txt" 2>&1
    "$PY" -m grace.report.paired "$rows" --baseline grace >> "$P/same_run.replicas.paired.txt" 2>&1
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
  3)  # the upstream run's rechecks finished; the lean twins' upstream run (lean replay's condition for going on by
    # default); the differential test of stock against all-copy with both training kinds in every program
    [ -n "${URUN:-}" ] && upstream_bg
    ( CONFIGS="stock cgct-lean pi-ptx-lean pi-prelude-lean pi-exec-update-lean scg-lean all-free-lean" SHARDS=${SHARDS:-5} \
        STEP=upstream UPSTREAM_RUN=${ULRUN:?} UPSTREAM_DIR=.upstream TOTAL_S=$(( $(left) - 25 )) \
        bash scripts/gpu_trust_checks.sh > "$OUT/upstream-lean.$STAGE.log" 2>&1 ) &
    CONFIGS="stock all-copy" KINDS="pointwise,binary,reduction,matmul,conv_bn,train_step,cpu_buf,scale,alias,mutate_buf,train_accum,train_keep" \
    STEP=difftest DIFF_RUN=${DRUN:?} TOTAL_S=$(( $(left) - 10 )) DIFF_SECONDS=$(( $(left) - 200 )) JOBS=${JOBS:-16} \
      bash scripts/gpu_trust_checks.sh > "$OUT/diff.$STAGE.log" 2>&1
    wait
    ;;
esac

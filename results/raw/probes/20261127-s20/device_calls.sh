#!/usr/bin/env bash
# Device calls planned for the twentieth session, on the four-GPU kind (run's kind "nvidia-h100-x4": 4 H100s or H200s,
# 64 cores; device time counts held wall time). carry [".upstream", ".diag", ".trees"]. Unpack each call's tarball into
# the checkout before the next call: untracked results travel with it, so a cut upstream run or a differential run
# resumes where it ended. Three calls a session; call them back to back (the machine stays warm 30 s).
#   STAGE=9 URUN=<date>-s20-u SHARDS=5 T=590 bash .diag/s20.sh   upstream, every default configuration (all-lean-copy,
#        GraCE's defaults, among them; patches/scg/0009 is new): 55 shards over 64 processes and four GPUs, then rechecks
#   STAGE=16 PRUN=<date>-s20 T=560 bash .diag/s20.sh   spread over the GPUs: the alignment probe under stock and the
#        defaults; gradient accumulation under the defaults; train_accum and train_keep seeds 1-3 under all-lean-copy.
#        Then, quiet, one GPU: lean replay's gain (pt2-nocg, pt2-cg, grace-no-lean, grace on five workloads), the guard
#        with calls back to back (same run against af7dbe8, samples of 5 calls), gradient copies' cost on DR-T
#   STAGE=3 URUN=<date>-s20-u ULRUN=<date>-s20-ul DRUN=<date>-s20-diff TRUN=<date>-s20-tests T=585 bash .diag/s20.sh
#        upstream finished (rechecks); the project's CUDA tests; the -lean twins again (the tree changed); the
#        differential test of stock, all-lean-copy and all-free-lean-copy (the defaults exactly), 16 jobs, every kind
#        including train_accum and train_keep
# Earlier stages: results/raw/probes/20261127-s19/device_calls.sh (and s18's, s17's).
set -u
T=${T:-585}
if [ -z "${INNER:-}" ]; then  # the stage under a deadline; whatever it wrote comes back in one tarball
  mkdir -p "$OUT"
  RESUME=${RESUME:-} INNER=1 timeout -k 5 $((T - 20)) bash "$0"; echo "stage $STAGE: exit $?"
  tar czf "$OUT/s$STAGE.tgz" results/raw/upstream_cudagraph_trees/${URUN:-none} results/raw/upstream_cudagraph_trees/${ULRUN:-none} results/processed/upstream_cudagraph_trees.csv \
    results/processed/upstream_cudagraph_trees_differ.md results/raw/probes/${PRUN:-none} results/raw/gpu_checks/${TRUN:-none} \
    results/raw/differential/${DRUN:-none} results/raw/differential/latest.txt \
    $( [ "$STAGE" = 14 ] && echo results/raw/same_run ) $( [ "$STAGE" = 16 ] && echo results/raw/lean_gain results/raw/copy_grads results/raw/same_run ) 2>/dev/null
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
  ( CONFIGS="$("$PY" -m grace.report.upstream --list)" SHARDS=${SHARDS:-4} STEP=upstream UPSTREAM_RUN=${URUN:?} UPSTREAM_DIR=.upstream TOTAL_S=$(( $(left) - 25 )) \
      bash scripts/gpu_trust_checks.sh > "$OUT/upstream.$STAGE.log" 2>&1 ) &
}
UP="results/raw/upstream_cudagraph_trees/${URUN:-none} results/processed/upstream_cudagraph_trees.csv results/processed/upstream_cudagraph_trees_differ.md"
case "$STAGE" in
  16)  # the CUDA tests, the alignment probe, gradient accumulation under the defaults, spread over the GPUs; then quiet
    P=results/raw/probes/${PRUN:?}; mkdir -p "$P"
    read -ra G <<< "$(bash scripts/visible_gpus.sh)"; n=0
    gpu_next() { n=$((n + 1)); GPU=CUDA_VISIBLE_DEVICES=${G[$((n % ${#G[@]}))]}; }  # in this shell, not a subshell
    for case in first new-size; do
      gpu_next; env $GPU GRACE_DISABLE=1 TORCHINDUCTOR_CACHE_DIR=/tmp/im-stock-$case timeout 150 "$PY" \
        scripts/probes/misaligned_first_call.py --case $case > "$P/misaligned.$case.stock.txt" 2>&1 &
      gpu_next; env $GPU TORCHINDUCTOR_CACHE_DIR=/tmp/im-grace-$case GRACE_SCG_CACHE_DIR=/tmp/sm-grace-$case timeout 150 "$PY" \
        scripts/probes/misaligned_first_call.py --case $case > "$P/misaligned.$case.defaults.txt" 2>&1 &
    done
    # the defaults, as a user gets them: no GRACE_ variable at all
    gpu_next; env $GPU TORCHINDUCTOR_CACHE_DIR=/tmp/ig-def GRACE_SCG_CACHE_DIR=/tmp/sg-def timeout 150 "$PY" \
      scripts/probes/grad_accumulation.py > "$P/grad_accumulation.defaults.txt" 2>&1 &
    for kind in train_accum train_keep; do
      for seed in 1 2 3; do
        gpu_next; env $GPU $("$PY" -m grace.report.upstream --env all-lean-copy) TORCHINDUCTOR_CACHE_DIR=/tmp/ia-$kind-$seed \
          GRACE_SCG_CACHE_DIR=/tmp/sa-$kind-$seed timeout 150 "$PY" -m grace.difftest run-one --seed $seed \
          --kinds $kind,pointwise --device cuda --max-steps 40 > "$P/$kind.s$seed.all-lean-copy.txt" 2>&1 &
      done
    done
    wait
    # quiet, one GPU: lean replay's gain, interleaved with the stock modes (Figure 11's fourth bar on five workloads)
    CUDA_VISIBLE_DEVICES=${G[0]} timeout 170 "$PY" -m grace.bench --workloads micro-eos,micro-mlp16,ALNET,EOS,DR-T \
      --modes pt2-nocg,pt2-cg,grace-no-lean,grace --repeat ${REPEAT_LEAN:-30} --experiment lean_gain --run-id "${PRUN}-lean" \
      > "$P/lean_gain.log" 2>&1
    "$PY" -m grace.report.paired results/raw/lean_gain/${PRUN}-lean/rows.jsonl --baseline grace-no-lean > "$P/lean_gain.paired.txt" 2>&1
    "$PY" -m grace.report.paired results/raw/lean_gain/${PRUN}-lean/rows.jsonl --baseline pt2-cg >> "$P/lean_gain.paired.txt" 2>&1
    # quiet: the stale-output guard with calls back to back (samples of 5 calls holding the last output), against
    # af7dbe8 and with the guard off, two workers a mode; an explicit run id (a cut run does not update latest.txt)
    CUDA_VISIBLE_DEVICES=${G[0]} WORKLOADS=micro-mlp16,ALNET REPLICAS=2 MODES="grace grace-no-guard" BEFORE=.trees/af7dbe8 \
      REPEAT=${REPEAT:-30} timeout 150 bash scripts/run_same_run_comparison.sh --inner 5 --run-id "${PRUN}-same" \
      > "$P/same_run.replicas.log" 2>&1
    rows=results/raw/same_run/${PRUN}-same/rows.jsonl
    "$PY" -m grace.report.paired "$rows" --baseline grace@before > "$P/same_run.replicas.paired.txt" 2>&1
    "$PY" -m grace.report.paired "$rows" --baseline grace-no-guard >> "$P/same_run.replicas.paired.txt" 2>&1
    # quiet: what gradient copies cost, on by default now, with what time is left
    [ "$(left)" -gt 90 ] && CUDA_VISIBLE_DEVICES=${G[0]} timeout $(( $(left) - 15 )) "$PY" -m grace.bench --workloads DR-T \
      --modes pt2-cg,grace,grace-no-copy-grads --repeat ${REPEAT_COPY:-40} --experiment copy_grads --run-id "${PRUN}-copy" \
      > "$P/copy_grads.log" 2>&1
    "$PY" -m grace.report.paired results/raw/copy_grads/${PRUN}-copy/rows.jsonl --baseline grace-no-copy-grads \
      > "$P/copy_grads.paired.txt" 2>&1
    ;;
  9)  # upstream under every configuration, alone on the machine
    upstream_bg
    wait
    ;;
  3)  # the upstream run's rechecks finished; the lean twins' upstream run (the tree changed since they ran); the
    # differential test of stock against GraCE's defaults with both training kinds in every program
    [ -n "${URUN:-}" ] && upstream_bg
    # the project's CUDA tests (the alignment copy's two among them), beside the rest: they assert behaviour, not time
    if [ -n "${TRUN:-}" ]; then
      D=results/raw/gpu_checks/$TRUN; mkdir -p "$D"
      read -ra G <<< "$(bash scripts/visible_gpus.sh)"
      CUDA_VISIBLE_DEVICES=${G[2 % ${#G[@]}]} timeout 400 "$PY" -m pytest -q -rs tests/test_trees_cuda.py > "$D/test_trees_cuda.log" 2>&1 &
      CUDA_VISIBLE_DEVICES=${G[3 % ${#G[@]}]} timeout 400 "$PY" -m pytest -q -rs tests/test_lean_cuda.py > "$D/test_lean_cuda.log" 2>&1 &
    fi
    [ -n "${ULRUN:-}" ] && ( CONFIGS="stock cgct-lean pi-ptx-lean pi-prelude-lean pi-exec-update-lean scg-lean all-free-lean" SHARDS=${SHARDS:-5} \
        STEP=upstream UPSTREAM_RUN=${ULRUN} UPSTREAM_DIR=.upstream TOTAL_S=$(( $(left) - 25 )) \
        bash scripts/gpu_trust_checks.sh > "$OUT/upstream-lean.$STAGE.log" 2>&1 ) &
    CONFIGS="stock all-lean-copy all-free-lean-copy" KINDS="pointwise,binary,reduction,matmul,conv_bn,train_step,cpu_buf,scale,alias,mutate_buf,train_accum,train_keep" \
    STEP=difftest DIFF_RUN=${DRUN:?} TOTAL_S=$(( $(left) - 10 )) DIFF_SECONDS=$(( $(left) - 200 )) JOBS=${JOBS:-16} \
      bash scripts/gpu_trust_checks.sh > "$OUT/diff.$STAGE.log" 2>&1
    wait
    ;;
esac

#!/usr/bin/env bash
# The lab's device calls: one stage a call, under a deadline, everything it wrote packed into one tarball under $OUT.
# Copy it into an ignored folder (.diag/) and carry that folder; carry [".upstream", ".diag"] (.upstream: PyTorch's
# test_cudagraph_trees.py and the expecttest wheel, from ../shared/upstream). Unpack each call's tarball into the
# checkout before the next call: a cut upstream or differential run resumes where it ended. Call back to back (an idle
# machine is given back after 30 s). A checkout over 64 MiB does not travel: pack finished upstream runs first
# (python -m grace.report.archive pack results/raw/upstream_cudagraph_trees/<run>).
#   STAGE=9 URUN=<date>-u PRUN=<date> TRUN=<date>-tests SHARDS=5 T=590 bash .diag/device_session.sh
#        upstream under every configuration of --list; beside it, spread over the GPUs: the alignment probe (64 columns,
#        Inductor's first configuration kept, and autotuned) under stock, the defaults and SCG forced; the autotune probe
#        under stock and the defaults; the in-place reduction's race counted plain and ordered by a barrier; the
#        project's CUDA tests (the benchmark's in stage 3); with CRUN=<date>-compile,
#        BERT's and MTCG-T's compile under PT2-CG and GraCE-CGCT (the benchmark, one GPU each)
#   STAGE=3 URUN=<date>-u ULRUN=<date>-ul DRUN=<date>-diff TRUN=<date>-tests [DCONFIGS=...] [PROBE=trace,guard] SHARDS=5 T=585 bash .diag/device_session.sh
#        upstream's rechecks; the -lean twins; the differential test of DCONFIGS (default stock, GraCE's defaults
#        all-free-mut-lean-copy and all-mut-lean-copy, and all-lean-copy, which refuses the mutate_input kind's functions);
#        PROBE: the tree's probes in every program's process, their lines kept in the logs of failures and stale reads;
#        each stale read's log and its explain-stale report are copied into the run's stale/ folder
#   STAGE=17 PRUN=<date> ULRUN=<date>-ul [LEAN_WORKLOADS=...] [LEAN_MODES=...] [LEAN_ONLY=1] T=<left> bash .diag/device_session.sh
#        what the lean twins have left; then, quiet, one GPU: lean replay's gain (EOS and DR-T first: earlier runs were
#        cut before them); beside it on another GPU: the harness against a tight loop of the same call (ALNET) with
#        cuDNN's TF32 off (the benchmark's) and on, and the benchmark pinned and unpinned; the smoke test on a third GPU,
#        then the host's CPU readings of scripts/probes/pregraph_region_cost.py and frame_params_cpu.py (LEAN_ONLY:
#        the gain alone, for one GPU)
#   STAGE=21 MRUN=<date>-map PRUN=<date> [TRUN=<date>-tests TESTS=pi_tree] [SRUN=<date>-sweep] T=<left> bash .diag/device_session.sh
#        the replay map (scripts/run_replay_map.sh), a shard on each GPU but the first; call again with the same MRUN to
#        resume; its report judges the lean replay path's targets (grace.report.replay_targets); with PRUN, the harness
#        checks of stage 17 on the first GPU, after the CUDA tests TESTS with TRUN (on one GPU, the tight loop alone,
#        after the map; with BWD, scripts/probes/backward_thread.py then); with SRUN, stage 23's sweep in what the map
#        leaves of the call, the workloads whose wall time fits
#   STAGE=23 SRUN=<date>-sweep [TRUN=<date>-tests TESTS="scg pi_tree"] T=<left> bash .diag/device_session.sh
#        (on one GPU, TESTS names test files whole, default "bench_cuda device_busy", run before the sweep)
#        the paper's 25 workloads in every mode of Figures 10 and 11 (scripts/run_single_gpu_experiments.sh with
#        --gpu-time), a shard on each GPU; call again with the same SRUN until every workload has its rows; with TRUN,
#        the CUDA tests TESTS on the first GPU and the sweep on the others
#   STAGE=25 PRUN=<date> [SRUN=<date>-sweep] T=<left> bash .diag/device_session.sh
#        a training step's host time under GraCE split by its per-call parts (the benchmark with --layers; the training
#        probe per mode), and EOS's iteration under GraCE against PT2-NoCG (replay_overhead.py), on two GPUs; with SRUN,
#        the sweep goes on over the others
#   STAGE=27 PRUN=<date> T=<left> bash .diag/device_session.sh
#        BERT's compile under PT2-CG and GraCE-CGCT with race-free kernels on and off (the benchmark, one GPU each);
#        the program of seed 28784022 under all-lean-copy with the tree's probes, and with lean replay, PI, CGCT off
#   STAGE=28 PRUN=<date> [SRUN=<date>-sweep] T=<left> bash .diag/device_session.sh
#        where BERT's compile time goes with race-free kernels on and off (scripts/probes/compile_profile.py, every
#        kernel compiled in the process, one GPU each), and with Inductor's compile workers logging GraCE's choices;
#        seed 28784022 under all-lean-copy, four copies at once, twice (do its stale reads come back under load?), then
#        alone with the cyclic collector's threshold at 1, 50, 5000 and off; with SRUN, the sweep after it
#   STAGE=29 PRUN=<date> DRUN=<date>-diff T=<left> bash .diag/device_session.sh
#        the stale reads under all-lean-copy, whose programs came back right when run alone: seeds 41324020 and
#        28784022 alone (GPU 0) as run with the tree's probes, then with SCG off (PI on every graph) and PI off (SCG
#        picks between them by timing, which the load may change); and the differential run that read 41324020
#        stale, its 38 seeds from 41324000 under all-lean-copy, 16 programs at a time (its load), on the other GPUs
#   STAGE=30 PRUN=<date> [TEST=Class.method RUNS=32] [RCONFIGS="..."] [TRUN=<date>-tests TESTS=layout_race] T=<left> bash .diag/device_session.sh
#        one of upstream's tests (default test_aliasing_static_ref, which failed once under all-lean-copy and passed on
#        its recheck) 32 times in fresh processes, under stock, all-lean, all-lean-copy and all-lean-copy without the
#        stale-output guard's storage mark (or RCONFIGS' configurations, "<name>:no-storage-mark" for that variant), a
#        configuration per GPU (scripts/probes/upstream_repeat.py); with TRUN, the
#        CUDA tests TESTS beside them; with T3RUN=<date>-table3, Table 3's copies per replay for the training workloads
#        that draw random numbers (T3_WORKLOADS), resumable with the same T3RUN
#   STAGE=31 URUN=<date>-u TRUN=<date>-tests [T3RUN=<date>-table3 [T3_MODES=...] [T3TKE=1]] [UEXTRA="all-free-mut-lean-copy pi-ptx-untrusted"] SHARDS=5 T=590 bash .diag/device_session.sh
#        upstream under every configuration of --list or UCONFIGS (and UEXTRA's), with the project's CUDA tests (TESTS) spread over
#        the GPUs beside it (the benchmark's in stage 3); with T3RUN, Table 3's copies for the training workloads that
#        draw random numbers on the last GPU (copies are bytes, not times: the load does not change them), then with
#        T3TKE TKE's under pt2-cg and grace-mutated-inputs (run <T3RUN>-tke). The run writes tables/table3_pi_copy_debug.csv
#        from its own rows: add it to configs/table3_runs.txt and draw the table again with RUNS=configs/table3_runs.txt
#        bash scripts/generate_table3_pi_copy_debug.sh (a CPU test holds the committed table to that list)
#   STAGE=33 PRUN=<date> [SEEDS="..."] [URUN=<date>-u] [ULRUN=<date>-ul] T=<left> bash .diag/device_session.sh
#        diagnostics: scripts/probes/eager_fallback_overwritten.py under stock and all-lean-copy (GPU 0), then the
#        differential test's programs SEEDS (those that crashed or drifted) replayed under all-lean-copy side by side
#        (GPU 1)
#   STAGE=32 TPRUN=<date>-tp [TP4_FIRST=1] [SPLIT_MODES=1] T=<left> bash .diag/device_session.sh
#        tensor parallelism, one round (scripts/run_tp_experiments.sh): TP 2 of TP2_WORKLOADS on GPUs 0,1 and TP 1 of
#        each TP1_WORKLOADS on GPUs 2 and 3 side by side for half the call, then TP 4 of TP4_WORKLOADS on all four
#        (with TP4_FIRST, TP 4 for the first half; an empty list skips its degree; SPLIT_MODES: a launch per mode);
#        on two GPUs, TP 2 for half the call, then TP 1 of each TP1_WORKLOADS on the two side by side (no TP 4)
#   STAGE=34 PRUN=<date> MRUN=<date>-map [SRUN=<date>-sweep] T=<left> bash .diag/device_session.sh
#        on one GPU: ALNET and micro-mlp16 under PT2-CG and GraCE timed plain (no --layers, no --gpu-time: what the map's
#        rows are to match), then the replay map MRUN with its layer phase after the last round and autograd's backward
#        thread pinned (the map of 20261129-s40 ran the phase after each round: ALNET 704 us there, 570 in the sweep,
#        566 in a tight loop), after scripts/probes/kept_out_pool.py on EOS (GraCE, PT2-CG); call again with the same
#        MRUN to resume it; with SRUN, the sweep in what is left
#   STAGE=35 T3RUN=<date>-t3choice [T3_WORKLOADS=...] [T3_MODES=...] [SRUN=<date>-sweep] T=<left> bash .diag/device_session.sh
#        on one GPU: Table 3's copies per replay with SCG choosing PI's strategy by measurement (grace-pi-choice),
#        beside PT2-CG and GraCE-CGCT-PI, on the workloads that keep copies under ptx (configs/workloads_table3_choice.txt: MMC, ST, STCLM,
#        BSCG), resumable; then, with SRUN, the sweep in what is left. The tarball's tables/table3_pi_copy_debug.csv
#        is this run's alone: after unpacking, `git checkout tables` and add the run to configs/table3_runs.txt
#   STAGE=36 PRUN=<date> [SPLIT_WORKLOADS=mode_split] [SPLIT_MODESET=a,b] [SPLIT_REPEAT=40] [SRUN=<date>-sweep] T=<left> bash .diag/device_session.sh
#        on one GPU: where GraCE's time goes against PT2-CG's on SPLIT_WORKLOADS (a config or names; configs/workloads_mode_split.txt, VM: 1.076 of PT2-CG in the
#        sweep, CGCT alone 1.12): PT2-CG, GraCE's tree alone over stock's graphs (grace-tree), CGCT, GraCE without
#        the stale-output guard and GraCE, interleaved, with --layers and --gpu-time (mode_split/<PRUN>-split),
#        and whether GraCE and GraCE without the guard, each with its own decision cache, decided alike (scg_agreement.<workload>.txt);
#        then, with SRUN, the sweep in what is left
# Each series' README (results/raw/probes/<series>/README.md) lists its calls and the commit of this script they ran.
set -u
T=${T:-585}
if [ -z "${INNER:-}" ]; then  # the stage under a deadline; whatever it wrote comes back in one tarball
  mkdir -p "$OUT"
  # a warm machine keeps processes between calls: no benchmark of an earlier call may share the GPUs with this one
  leftovers() { pgrep -f "python[0-9.]* -m grace\.bench" | tr '\n' ' '; }
  [ -n "$(leftovers)" ] && { echo "killing an earlier call's benchmark processes: $(leftovers)"; pkill -9 -f "python[0-9.]* -m grace\.bench"; sleep 3; }
  RESUME=${RESUME:-} INNER=1 timeout -k 5 $((T - 20)) bash "$0"; echo "stage $STAGE: exit $?"
  [ -n "$(leftovers)" ] && { echo "left running at the deadline, killed: $(leftovers)"; pkill -9 -f "python[0-9.]* -m grace\.bench"; }
  # what the sweep has left after this call, per workload (the runners cut at the deadline print none)
  W=${WALLS_FROM-single_gpu/20261127-s25-sweep}
  [ -n "${SRUN:-}" ] && "$(bash scripts/python.sh)" -m grace.bench.status --run-id "$SRUN" ${W:+--walls-from "$W"} \
    | tee "$OUT/status.$STAGE.txt" | tail -1
  tar czf "$OUT/s$STAGE.tgz" results/raw/upstream_cudagraph_trees/${URUN:-none} results/raw/upstream_cudagraph_trees/${ULRUN:-none} results/processed/upstream_cudagraph_trees.csv \
    results/processed/upstream_cudagraph_trees_differ.md results/raw/probes/${PRUN:-none} results/raw/gpu_checks/${TRUN:-none} \
    results/raw/differential/${DRUN:-none} results/raw/differential/latest.txt \
    $( [ "$STAGE" = 17 ] && echo results/raw/lean_gain ) $( [ "$STAGE" = 17 ] || [ "$STAGE" = 21 ] && echo results/raw/harness_check ) \
    $( [ "$STAGE" = 21 ] || [ "$STAGE" = 34 ] && echo results/raw/replay_map/${MRUN:-none} results/processed/replay_map.csv \
       results/processed/replay_overhead.csv results/processed/replay_targets.csv figures/replay_overhead.p* ) \
    $( [ -n "${SRUN:-}" ] && echo results/raw/single_gpu/${SRUN} ) \
    $( [ "$STAGE" = 25 ] && echo results/raw/training_host/${PRUN:-none}-train ) \
    $( [ "$STAGE" = 34 ] && echo results/raw/harness_check/${PRUN:-none}-plain ) \
    $( [ "$STAGE" = 36 ] && echo results/raw/mode_split/${PRUN:-none}-split ) \
    $( [ "$STAGE" = 27 ] && echo results/raw/compile_probe/${PRUN:-none}-bert-rf{0,1} ) \
    $( [ -n "${CRUN:-}" ] && echo results/raw/compile_probe/${CRUN}-* ) \
    $( [ -n "${T3RUN:-}" ] && echo results/raw/table3/${T3RUN} results/raw/table3/${T3RUN}-tke tables/table3_pi_copy_debug.csv ) \
    $( [ -n "${TPRUN:-}" ] && echo results/raw/tp/${TPRUN} results/raw/tp/latest.txt ) 2>/dev/null
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
upstream_bg() {  # every configuration of --list (or UCONFIGS, in its order), UEXTRA's, and any other the run's folder
  local listed extra  # already holds (a resumed run); configurations run one after another, so on one GPU order them
  listed=${UCONFIGS:-$("$PY" -m grace.report.upstream --list)}
  extra=$(ls -d results/raw/upstream_cudagraph_trees/${URUN:?}/*/ 2>/dev/null | xargs -rn1 basename | grep -vxF -f <(tr ' ' '\n' <<< "$listed") | tr '\n' ' ')
  ( CONFIGS="$listed $(tr ' ' '\n' <<< "${UEXTRA:-} $extra" | grep . | grep -vxF -f <(tr ' ' '\n' <<< "$listed") | sort -u | tr '\n' ' ')" SHARDS=${SHARDS:-4} STEP=upstream \
      UPSTREAM_RUN=$URUN UPSTREAM_DIR=.upstream TOTAL_S=$(( $(left) - 25 )) \
      bash scripts/gpu_trust_checks.sh > "$OUT/upstream.$STAGE.log" 2>&1 ) &
}
upstream_lean_bg() {  # $1: seconds; stock and the -lean twins (run ULRUN), beside the rest
  ( CONFIGS="stock cgct-lean pi-ptx-lean pi-prelude-lean pi-exec-update-lean scg-lean all-free-lean" SHARDS=${SHARDS:-5} \
      STEP=upstream UPSTREAM_RUN=${ULRUN:?} UPSTREAM_DIR=.upstream TOTAL_S=$1 \
      bash scripts/gpu_trust_checks.sh > "$OUT/upstream-lean.$STAGE.log" 2>&1 ) &
}
UP="results/raw/upstream_cudagraph_trees/${URUN:-none} results/processed/upstream_cudagraph_trees.csv results/processed/upstream_cudagraph_trees_differ.md"
# on GPU $1, one process at a time: the harness against a tight loop of the same call (ALNET under PT2-CG), the loop
# in the benchmark's arithmetic (cuDNN TF32 off) and in PyTorch's default; the benchmark with its timing thread pinned
# (a core of its own, claimed) and unpinned; with a second argument "loop", the tight loop in the benchmark's arithmetic
# alone (on one GPU, against the map's or the sweep's ALNET row)
harness_checks() {
  local P=results/raw/probes/${PRUN:?}; mkdir -p "$P"
  if [ "${2:-}" = loop ]; then
    CUDA_VISIBLE_DEVICES=$1 timeout 150 "$PY" scripts/probes/replay_overhead.py --mode pt2-cg --workload ALNET \
      > "$P/harness.replay_overhead.txt" 2>&1
    return
  fi
  for tf32 in "" --cudnn-tf32; do
    CUDA_VISIBLE_DEVICES=$1 timeout 150 "$PY" scripts/probes/replay_overhead.py --mode pt2-cg --workload ALNET $tf32 \
      > "$P/harness.replay_overhead${tf32:+.tf32}.txt" 2>&1
  done
  for pin in auto none; do
    CUDA_VISIBLE_DEVICES=$1 timeout 150 "$PY" -m grace.bench --workloads ALNET --modes pt2-nocg,pt2-cg,grace --repeat 40 \
      --experiment harness_check --run-id "${PRUN}-harness-pin-$pin" --pin-cpu $pin > "$P/harness.bench.pin-$pin.log" 2>&1
  done
}

# the single-GPU sweep SRUN (stage 23's comment says how) on the GPUs $1 (comma-separated), for the time left; with
# a second argument "strict", after other work: not even its first workload starts unless its wall time fits
sweep() {
  # shellcheck disable=SC2086
  # its own REPEAT (SWEEP_REPEAT, default the script's 100), not the map's of the same call
  CUDA_VISIBLE_DEVICES=$1 RUN_ID=${SRUN:?} STOP_AFTER=$(( $(left) - 240 )) WALLS_STRICT=${2:+1} REPEAT=${SWEEP_REPEAT:-100} \
    END_AFTER=$(( $(left) - 25 )) WALLS_FROM=${WALLS_FROM-single_gpu/20261127-s25-sweep} \
    bash scripts/run_single_gpu_experiments.sh \
    ${SWEEP_ARGS:---gpu-time --gpu-time-every 4 --compile-together} >> "$OUT/sweep.$STAGE.log" 2>&1
}

# each stale read of the differential run $1, its child's log (with PROBE, the tree's trace) and what
# `grace.difftest explain-stale` reads in it, copied out of the run's logs/ (not committed) into stale/
stale_read_back() {
  local log name
  for log in $(grep -l '"stale": \[\[' "$1"/logs/*/seed-*.log 2>/dev/null); do
    mkdir -p "$1/stale"; name="$(basename "$(dirname "$log")").$(basename "$log" .log)"
    cp "$log" "$1/stale/$name.log"
    timeout 60 "$PY" -m grace.difftest explain-stale "$log" > "$1/stale/$name.explained.txt" 2>&1
  done
}

K=pointwise,binary,reduction,matmul,conv_bn,train_step,cpu_buf,scale,alias,mutate_buf,train_accum,train_keep,dropout,mutate_input  # every kind of the differential test
ALC=$("$PY" -m grace.report.upstream --env all-lean-copy)  # every switch, SCG forced to record
case "$STAGE" in
  9)  # upstream, and beside it the probes, spread over the GPUs
    upstream_bg
    P=results/raw/probes/${PRUN:?}; mkdir -p "$P"
    read -ra G <<< "$(bash scripts/visible_gpus.sh)"; n=0
    gpu_next() { n=$((n + 1)); GPU=${G[$((n % ${#G[@]}))]}; }  # in this shell, not a subshell
    for mode in reload overwritten; do
      gpu_next; env CUDA_VISIBLE_DEVICES=$GPU GRACE_DISABLE=1 TORCHINDUCTOR_CACHE_DIR=/tmp/at-stock-$mode timeout 200 "$PY" \
        scripts/probes/autotune_in_capture.py --rearm $mode > "$P/autotune.$mode.stock.txt" 2>&1 &
      gpu_next; env CUDA_VISIBLE_DEVICES=$GPU TORCHINDUCTOR_CACHE_DIR=/tmp/at-def-$mode GRACE_SCG_CACHE_DIR=/tmp/as-def-$mode \
        timeout 200 "$PY" scripts/probes/autotune_in_capture.py --rearm $mode > "$P/autotune.$mode.defaults.txt" 2>&1 &
    done
    # the alignment probe: stock, the defaults exactly (no GRACE_ variable) and SCG forced to record, with Inductor's
    # first configuration kept (expected: stock faults at the new size) and, at the new size, autotuned twice (fresh caches)
    for case in new-size first; do
      for cfg in stock defaults scg-forced; do
        case $cfg in stock) E="GRACE_DISABLE=1";; defaults) E="";; scg-forced) E="GRACE_SCG_FORCE=graph";; esac
        tunes="no-autotune 1 2"; [ $case = first ] && tunes=no-autotune
        for tune in $tunes; do
          A=(--case $case --cols 64); [ $tune = no-autotune ] && A+=(--no-autotune)
          c=/tmp/al-$case-$cfg-$tune
          gpu_next; env CUDA_VISIBLE_DEVICES=$GPU $E TORCHINDUCTOR_CACHE_DIR=$c/i TRITON_CACHE_DIR=$c/t GRACE_SCG_CACHE_DIR=$c/s \
            timeout 150 "$PY" scripts/probes/misaligned_first_call.py "${A[@]}" > "$P/misaligned64.$case.$cfg.$tune.txt" 2>&1 &
        done
      done
    done
    if [ -n "${TRUN:-}" ]; then
      D=results/raw/gpu_checks/$TRUN; mkdir -p "$D"
      # every CUDA test of the project but the benchmark's (stage 3), one file a process
      for t in trees lean pi pi_tree scg cgct layout_race; do
        gpu_next; CUDA_VISIBLE_DEVICES=$GPU timeout 450 "$PY" -m pytest -v -rs tests/test_${t}_cuda.py > "$D/test_${t}_cuda.log" 2>&1 &
      done
    fi
    # the in-place reduction's race, launch by launch: the plain kernel, and ordered by grace.layout_race's barrier
    for order in "" --order; do
      gpu_next; CUDA_VISIBLE_DEVICES=$GPU TRITON_CACHE_DIR=/tmp/race${order:+-ordered} timeout 300 "$PY" \
        scripts/probes/inplace_reduction_race.py --launches 20000 $order > "$P/inplace_race${order:+.ordered}.jsonl" 2>&1 &
    done
    if [ -n "${CRUN:-}" ]; then  # BERT's and MTCG-T's compile under PT2-CG and GraCE-CGCT, race-free kernels on
      for w in BERT MTCG-T; do
        gpu_next; CUDA_VISIBLE_DEVICES=$GPU GRACE_LOGS=info timeout $(( $(left) - 30 )) "$PY" -m grace.bench --workloads $w \
          --modes pt2-cg,grace-cgct --repeat 8 --timeout 500 --gpu-time --compile-together --experiment compile_probe \
          --run-id "${CRUN}-$w" > "$P/compile.$w.log" 2>&1 &
      done
      # and BERT's kernels that race in every configuration, their Inductor source kept for the CPU (TTGIR on sm_90)
      gpu_next; ( CUDA_VISIBLE_DEVICES=$GPU GRACE_LOGS=info TORCHINDUCTOR_CACHE_DIR=/tmp/racy-bert timeout 400 "$PY" \
          scripts/probes/compile_profile.py --workload BERT --mode grace-cgct > "$P/racy_kernels.BERT.log" 2>&1
        mkdir -p "$P/racy_kernels"
        for k in $(grep -o "triton_[a-z]*_fused[A-Za-z0-9_]*: every configuration" "$P/racy_kernels.BERT.log" | cut -d: -f1 | sort -u); do
          grep -rl --include='*.py' "def $k(" /tmp/racy-bert | head -1 | xargs -r -I{} cp {} "$P/racy_kernels/$k.py"
        done ) &
    fi
    wait
    ;;
  3)  # upstream's rechecks; the -lean twins; the differential test of stock against GraCE's defaults
    [ -n "${URUN:-}" ] && upstream_bg
    if [ -n "${TRUN:-}" ]; then  # the benchmark's CUDA test, beside the rest
      D=results/raw/gpu_checks/$TRUN; mkdir -p "$D"
      read -ra G <<< "$(bash scripts/visible_gpus.sh)"
      CUDA_VISIBLE_DEVICES=${G[$((3 % ${#G[@]}))]} timeout 450 "$PY" -m pytest -q -rs tests/test_bench_cuda.py \
        > "$D/test_bench_cuda.log" 2>&1 &
    fi
    [ -n "${ULRUN:-}" ] && upstream_lean_bg $(( $(left) - 25 ))
    CONFIGS="${DCONFIGS:-stock all-free-mut-lean-copy all-mut-lean-copy all-lean-copy}" KINDS=$K \
    STEP=difftest DIFF_RUN=${DRUN:?} TOTAL_S=$(( $(left) - 20 )) DIFF_SECONDS=$(( $(left) - 210 )) JOBS=${JOBS:-16} \
      bash scripts/gpu_trust_checks.sh > "$OUT/diff.$STAGE.log" 2>&1
    stale_read_back "results/raw/differential/$DRUN"
    wait
    ;;
  17)  # what upstream runs have left; then, quiet, one GPU: lean replay's gain
    [ -n "${URUN:-}" ] && upstream_bg
    [ -n "${ULRUN:-}" ] && upstream_lean_bg $(( $(left) / 2 ))
    wait
    P=results/raw/probes/${PRUN:?}; mkdir -p "$P"
    read -ra G <<< "$(bash scripts/visible_gpus.sh)"
    # with LEAN_ONLY, nothing beside the gain (on one GPU the checks below would share its GPU and cores)
    [ -z "${LEAN_ONLY:-}" ] && harness_checks "${G[$((1 % ${#G[@]}))]}" &
    # and the artifact's smoke test on a third GPU (behaviour unchanged after a refactor)
    # then, on the host's CPU (the probes run CPU tensors), Dynamo's pre-graph profiler region's cost with lean
    # replay off and on, and Dynamo's per-call cost against the number of parameter tensors (DenseNet-121 last)
    [ -z "${LEAN_ONLY:-}" ] && ( CUDA_VISIBLE_DEVICES=${G[$((2 % ${#G[@]}))]} timeout 300 bash scripts/smoke_test.sh > "$P/smoke_test.log" 2>&1
      CUDA_VISIBLE_DEVICES= timeout 200 "$PY" scripts/probes/pregraph_region_cost.py > "$P/pregraph_region_cost.txt" 2>&1
      CUDA_VISIBLE_DEVICES= timeout 300 "$PY" scripts/probes/frame_params_cpu.py --backend first-outputs --calls 1000 \
        --rounds 9 > "$P/frame_params.first-outputs.txt" 2>&1 ) &
    CUDA_VISIBLE_DEVICES=${G[0]} timeout $(( $(left) - 20 )) "$PY" -m grace.bench --workloads ${LEAN_WORKLOADS:-EOS,DR-T,micro-mlp16,ALNET,micro-eos} \
      --modes ${LEAN_MODES:-pt2-nocg,pt2-cg,grace-no-lean,grace} --repeat ${REPEAT_LEAN:-30} --compile-together \
      --experiment lean_gain --run-id "${PRUN}-lean" \
      > "$P/lean_gain.log" 2>&1
    "$PY" -m grace.report.paired results/raw/lean_gain/${PRUN}-lean/rows.jsonl --baseline grace-no-lean > "$P/lean_gain.paired.txt" 2>&1
    "$PY" -m grace.report.round_position results/raw/lean_gain/${PRUN}-lean/rows.jsonl > "$P/round_position.lean_gain.txt" 2>&1
    "$PY" -m grace.report.paired results/raw/lean_gain/${PRUN}-lean/rows.jsonl --baseline pt2-cg >> "$P/lean_gain.paired.txt" 2>&1
    [[ ${LEAN_MODES:-} == *grace-no-lean-aot* ]] && "$PY" -m grace.report.paired results/raw/lean_gain/${PRUN}-lean/rows.jsonl \
      --baseline grace-no-lean-aot >> "$P/lean_gain.paired.txt" 2>&1
    wait
    ;;
  21)  # the replay map, a shard on each GPU but the first (scripts/run_sharded.sh), resumable; the harness checks on
    # the first, with PRUN (each benchmark claims its own timing core)
    read -ra G <<< "$(bash scripts/visible_gpus.sh)"
    if [ -n "${PRUN:-}" ] && [ ${#G[@]} -gt 1 ]; then
      (
        if [ -n "${TRUN:-}" ]; then  # with TRUN, first the CUDA tests named in TESTS (default: the PI tree's)
          D=results/raw/gpu_checks/$TRUN; mkdir -p "$D"
          for t in ${TESTS:-pi_tree}; do
            CUDA_VISIBLE_DEVICES=${G[0]} timeout 300 "$PY" -m pytest -v -rs tests/test_${t}_cuda.py > "$D/test_${t}_cuda.log" 2>&1
          done
        fi
        harness_checks "${G[0]}"
      ) &
      G=("${G[@]:1}")
    fi
    CUDA_VISIBLE_DEVICES=$(IFS=,; echo "${G[*]}") RUN_ID=${MRUN:?} STOP_AFTER=$(( $(left) - 150 )) \
      bash scripts/run_replay_map.sh > "$OUT/replay_map.$STAGE.log" 2>&1
    # each mode's median at each place in a round: flat once every sample follows an iteration
    "$PY" -m grace.report.round_position "results/raw/replay_map/$MRUN/rows.jsonl" > "$OUT/round_position.$STAGE.txt" 2>&1
    # on one GPU with PRUN, the harness's tight loop after the map (ALNET under PT2-CG, against the map's row)
    [ -n "${PRUN:-}" ] && [ ${#G[@]} -eq 1 ] && [ "$(left)" -gt 200 ] && harness_checks "${G[0]}" loop
    # with BWD, where a training step's backward runs (scripts/probes/backward_thread.py), PT2-CG and GraCE
    if [ -n "${BWD:-}" ] && [ -n "${PRUN:-}" ]; then
      mkdir -p "results/raw/probes/$PRUN"
      for m in pt2-cg grace; do
        [ "$(left)" -gt 150 ] && CUDA_VISIBLE_DEVICES=${G[0]} timeout 120 "$PY" scripts/probes/backward_thread.py --mode $m \
          --workload micro-mlp16-T > "results/raw/probes/$PRUN/backward_thread.micro-mlp16-T.$m.txt" 2>&1
      done
    fi
    # with SRUN, the sweep goes on in what the map left of the call (a map that ended early: one GPU's calls are few)
    [ -n "${SRUN:-}" ] && [ "$(left)" -gt 150 ] && sweep "$(IFS=,; echo "${G[*]}")" strict
    wait
    ;;
  23)  # the single-GPU sweep (Figures 10, 11, the README's headline), resumable, a shard on each GPU
    # every mode's worker compiles at once (--compile-together): DALLE2 and TEFD compile for about five minutes a
    # mode, too long one mode after another in a ten-minute call; the rows' compile times then overlap (Figure 13
    # wants a run without it), but for the memory-bound workloads, whose config lines start them a few at a time
    # (configs/workloads_single_gpu_25.txt); those marked first (DALLE2, TEFD, XLNET-T) start a call; after a call's
    # first, a workload starts only where its wall time in WALLS_FROM (default the s25 sweep; empty: none) fits
    # before the deadline, one that run lacks not in the last four minutes; each writes its rows before the
    # deadline with fewer rounds where need be (at least 4), and a workload the deadline still cuts runs again
    # after the others
    # With TRUN, the CUDA tests named in TESTS run on the first GPU, one file after another, and the sweep on the others;
    # on one GPU, the tests first (tests/test_<t>.py, each at most 120 s), then the sweep.
    read -ra G <<< "$(bash scripts/visible_gpus.sh)"
    if [ -n "${TRUN:-}" ] && [ ${#G[@]} -eq 1 ]; then
      D=results/raw/gpu_checks/$TRUN; mkdir -p "$D"
      for t in ${TESTS:-bench_cuda device_busy}; do
        CUDA_VISIBLE_DEVICES=${G[0]} timeout 120 "$PY" -m pytest -v -rs tests/test_${t}.py > "$D/test_${t}.log" 2>&1
      done
    fi
    if [ -n "${TRUN:-}" ] && [ ${#G[@]} -gt 1 ]; then
      D=results/raw/gpu_checks/$TRUN; mkdir -p "$D"
      ( for t in ${TESTS:-scg pi_tree}; do
          CUDA_VISIBLE_DEVICES=${G[0]} timeout 300 "$PY" -m pytest -v -rs tests/test_${t}_cuda.py > "$D/test_${t}_cuda.log" 2>&1
        done ) &
      G=("${G[@]:1}")
    fi
    sweep "$(IFS=,; echo "${G[*]}")"
    wait
    ;;
  25)  # a training step's extra host time under GraCE split by its parts: the benchmark with --layers in PT2-CG,
    # GraCE and GraCE without each per-call part (stale-output guard, gradient copies, lean replay) on the first GPU;
    # the training probe per mode on the second (scripts/probes/training_host.py); with SRUN, the sweep on the others
    read -ra G <<< "$(bash scripts/visible_gpus.sh)"
    P=results/raw/probes/${PRUN:?}; mkdir -p "$P"
    TM=pt2-cg,grace,grace-no-guard,grace-no-copy-grads,grace-no-lean
    ( CUDA_VISIBLE_DEVICES=${G[0]} timeout $(( $(left) - 40 )) "$PY" -m grace.bench --workloads micro-mlp16-T,DR-T \
        --modes $TM --layers --gpu-time --repeat 40 --experiment training_host --run-id "${PRUN}-train" \
        > "$P/training_host.bench.log" 2>&1
      "$PY" -m grace.report.paired "results/raw/training_host/${PRUN}-train/rows.jsonl" --baseline pt2-cg \
        > "$P/training_host.paired.txt" 2>&1 ) &
    ( for w in micro-mlp16-T DR-T; do
        for m in ${TM//,/ }; do
          CUDA_VISIBLE_DEVICES=${G[$((1 % ${#G[@]}))]} timeout 150 "$PY" scripts/probes/training_host.py --workload $w \
            --mode $m > "$P/training_host.$w.$m.txt" 2>&1
        done
      done
      # and EOS, which SCG keeps out of graphs, slower under GraCE than under PT2-NoCG (the replay map: 185 against
      # 163 us, host and device alike): where the iteration's extra time goes, per mode
      for m in pt2-nocg grace grace-cgct grace-no-lean; do
        CUDA_VISIBLE_DEVICES=${G[$((1 % ${#G[@]}))]} timeout 150 "$PY" scripts/probes/replay_overhead.py --workload EOS \
          --mode $m > "$P/replay_overhead.EOS.$m.txt" 2>&1
      done
      # and DNET's tree layer (286 us for one graph of hundreds of inputs): which of the tree's steps grows with them
      for m in pt2-cg grace; do
        CUDA_VISIBLE_DEVICES=${G[$((1 % ${#G[@]}))]} timeout 200 "$PY" scripts/probes/replay_overhead.py --workload DNET \
          --mode $m > "$P/replay_overhead.DNET.$m.txt" 2>&1
      done ) &
    if [ -n "${SRUN:-}" ] && [ ${#G[@]} -gt 2 ]; then
      # shellcheck disable=SC2086
      CUDA_VISIBLE_DEVICES=$(IFS=,; echo "${G[*]:2}") RUN_ID=$SRUN STOP_AFTER=$(( $(left) - 240 )) \
        bash scripts/run_single_gpu_experiments.sh ${SWEEP_ARGS:---gpu-time --gpu-time-every 4 --compile-together} > "$OUT/sweep.$STAGE.log" 2>&1
    fi
    wait
    ;;
  27)  # BERT's backward compiles for six minutes under GraCE against seven seconds under PT2-CG: the benchmark
    # with race-free kernels on (the default) and off, one GPU each, fresh caches, GraCE's info log (the
    # autotuner's left-out configurations and compiled variants); and the stale reads of seed 28784022 under
    # all-lean-copy, with the tree's probes, then with lean replay, PI and CGCT off in turn, on the other GPUs
    read -ra G <<< "$(bash scripts/visible_gpus.sh)"
    P=results/raw/probes/${PRUN:?}; mkdir -p "$P"
    for rf in 1 0; do
      CUDA_VISIBLE_DEVICES=${G[$(( (1 - rf) % ${#G[@]} ))]} GRACE_RACE_FREE_KERNELS=$rf GRACE_LOGS=info \
        timeout $(( $(left) - 30 )) "$PY" -m grace.bench --workloads BERT --modes pt2-cg,grace-cgct --repeat 8 \
        --timeout 540 --gpu-time --compile-together --experiment compile_probe --run-id "${PRUN}-bert-rf$rf" \
        > "$P/bert_compile.race_free$rf.log" 2>&1 &
    done
    n=2
    for variant in as-run lean-off pi-off cgct-off; do
      case $variant in as-run) E="";; lean-off) E="GRACE_LEAN_REPLAY=0";; pi-off) E="GRACE_PI=0";; cgct-off) E="GRACE_CGCT=0";; esac
      probe=""; [ $variant = as-run ] && probe="--probe trace,guard,outputs"
      # shellcheck disable=SC2086
      env $ALC $E CUDA_VISIBLE_DEVICES=${G[$((n % ${#G[@]}))]} timeout 300 "$PY" -m grace.difftest run-one \
        --seed 28784022 --device cuda --max-steps 600 --kinds $K $probe > "$P/program.28784022.$variant.txt" 2>&1 &
      n=$((n + 1))
    done
    wait
    ;;
  28)  # BERT's compile: the first step in one process under cProfile, race-free kernels on (GPU 0) and off (GPU 1),
    # Inductor compiling every kernel in the process; and the default compile with its workers' output kept (GPU 2);
    # seed 28784022 under all-lean-copy under load, then the sweep with SRUN (GPU 3)
    read -ra G <<< "$(bash scripts/visible_gpus.sh)"
    P=results/raw/probes/${PRUN:?}; mkdir -p "$P"
    for rf in 1 0; do
      CUDA_VISIBLE_DEVICES=${G[$(( (1 - rf) % ${#G[@]} ))]} GRACE_RACE_FREE_KERNELS=$rf GRACE_LOGS=info \
        timeout $(( $(left) - 30 )) "$PY" scripts/probes/compile_profile.py --workload BERT --mode grace-cgct \
        --threads 1 > "$P/compile_profile.BERT.race_free$rf.txt" 2>&1 &
    done
    CUDA_VISIBLE_DEVICES=${G[$((2 % ${#G[@]}))]} GRACE_LOGS=info TORCHINDUCTOR_WORKER_SUPPRESS_LOGGING=0 \
      TORCHINDUCTOR_WORKER_LOGPATH="$P/compile_workers.BERT.log" timeout $(( $(left) - 30 )) "$PY" \
      scripts/probes/compile_profile.py --workload BERT --mode grace-cgct > "$P/compile_profile.BERT.workers.txt" 2>&1 &
    ( # four copies at once on one GPU, twice: the load of a differential run of 16 programs over four GPUs,
      # under which two of its reads came back stale and alone none do
      for round in 1 2; do
        for i in 1 2 3 4; do
          # shellcheck disable=SC2086
          env $ALC CUDA_VISIBLE_DEVICES=${G[$((3 % ${#G[@]}))]} timeout 200 "$PY" -m grace.difftest run-one \
            --seed 28784022 --device cuda --max-steps 600 --kinds $K > "$P/program.28784022.load$round.$i.txt" 2>&1 &
        done
        wait
      done
      # alone, with Python's cyclic collector run at other moments (0: off): whether when it frees a held
      # output decides the program's path
      for th in 1 50 5000 0; do
        # shellcheck disable=SC2086
        env $ALC CUDA_VISIBLE_DEVICES=${G[$((3 % ${#G[@]}))]} timeout 100 "$PY" -m grace.difftest run-one \
          --seed 28784022 --device cuda --max-steps 600 --kinds $K --gc-threshold $th \
          > "$P/program.28784022.gc$th.txt" 2>&1
      done
      if [ -n "${SRUN:-}" ]; then
        CUDA_VISIBLE_DEVICES=${G[$((3 % ${#G[@]}))]} RUN_ID=$SRUN STOP_AFTER=$(( $(left) - 240 )) \
          END_AFTER=$(( $(left) - 25 )) bash scripts/run_single_gpu_experiments.sh \
          ${SWEEP_ARGS:---gpu-time --gpu-time-every 4 --compile-together} > "$OUT/sweep.$STAGE.log" 2>&1
      fi ) &
    wait
    ;;
  29)  # the stale reads under all-lean-copy: seed 41324020 alone, and again under the differential run's load
    read -ra G <<< "$(bash scripts/visible_gpus.sh)"
    P=results/raw/probes/${PRUN:?}; mkdir -p "$P"
    # alone: as run (with the probes), then with SCG's timed choice between a plain graph and PI taken away
    # (SCG off: every graph with PI; PI off: none), for both programs that read stale under load
    ( for seed in 41324020 28784022; do
        for variant in as-run scg-off pi-off; do
          case $variant in as-run) E="";; scg-off) E="GRACE_SCG=0";; pi-off) E="GRACE_PI=0";; esac
          probe=""; [ $variant = as-run ] && probe="--probe trace,guard,outputs"
          # shellcheck disable=SC2086
          env $ALC $E CUDA_VISIBLE_DEVICES=${G[0]} timeout 120 "$PY" -m grace.difftest run-one --seed $seed \
            --device cuda --max-steps 600 --kinds $K $probe > "$P/program.$seed.$variant.txt" 2>&1
        done
      done ) &
    if [ ${#G[@]} -gt 1 ]; then
      CUDA_VISIBLE_DEVICES=$(IFS=,; echo "${G[*]:1}") CONFIGS="all-lean-copy" KINDS=$K START_SEED=41324000 \
        STEP=difftest DIFF_RUN=${DRUN:?} TOTAL_S=$(( $(left) - 10 )) DIFF_SECONDS=$(( $(left) - 150 )) JOBS=${JOBS:-16} \
        bash scripts/gpu_trust_checks.sh > "$OUT/diff.$STAGE.log" 2>&1
    fi
    wait
    ;;
  30)  # one upstream test many times, fresh processes and caches, a configuration per GPU, eight at once on each
    P=results/raw/probes/${PRUN:?}; mkdir -p "$P"
    read -ra G <<< "$(bash scripts/visible_gpus.sh)"; n=0
    TEST=${TEST:-CudaGraphTreeTests.test_aliasing_static_ref}
    for cfg in ${RCONFIGS:-stock all-lean all-lean-copy all-lean-copy:no-storage-mark}; do
      E=$("$PY" -m grace.report.upstream --env "${cfg%%:*}"); A=(); [ "${cfg#*:}" = no-storage-mark ] && A=(--no-storage-mark)
      GPU=${G[$((n % ${#G[@]}))]}; n=$((n + 1))
      env CUDA_VISIBLE_DEVICES=$GPU $E timeout $(( $(left) - 30 )) "$PY" scripts/probes/upstream_repeat.py .upstream "$TEST" \
        --runs ${RUNS:-32} --jobs 8 "${A[@]}" > "$P/repeat.${TEST##*.}.${cfg/:/.}.jsonl" 2> "$P/repeat.${TEST##*.}.${cfg/:/.}.log" &
    done
    if [ -n "${TRUN:-}" ]; then  # and the CUDA tests TESTS (default: the race ordering's), on the first GPU after its share
      D=results/raw/gpu_checks/$TRUN; mkdir -p "$D"
      for t in ${TESTS:-layout_race}; do
        CUDA_VISIBLE_DEVICES=${G[0]} timeout 450 "$PY" -m pytest -v -rs tests/test_${t}_cuda.py > "$D/test_${t}_cuda.log" 2>&1 &
      done
    fi
    if [ -n "${T3RUN:-}" ]; then  # Table 3's copies for the training workloads that draw random numbers, on the second GPU
      ( CUDA_VISIBLE_DEVICES=${G[$((1 % ${#G[@]}))]} RUN_ID=$T3RUN WORKLOADS=${T3_WORKLOADS:-DR-T,DGPT2,STCLM,BSCG,XLNET-T,MTCG-T} \
          REPEAT=5 COVERAGE=0 bash scripts/run_table3_pi_copy_debug.sh --resume --compile-together \
          --stop-after $(( $(left) - 200 )) --end-after $(( $(left) - 60 )) > "$P/table3.log" 2>&1 ) &
    fi
    wait
    "$PY" scripts/probes/upstream_repeat.py --summarize "$P"/repeat.${TEST##*.}.*.jsonl > "$P/repeat.${TEST##*.}.summary.txt" 2>&1
    ;;
  31)  # upstream, every configuration; beside it the CUDA tests and, with T3RUN, Table 3's random-drawing rows
    read -ra G <<< "$(bash scripts/visible_gpus.sh)"; n=0
    # Table 3's benchmarks fill their GPU's memory (three processes of 40+ GiB): with two GPUs or more, the upstream
    # tests keep off the last one, where they ran out of memory beside them
    if [ -n "${T3RUN:-}" ] && [ ${#G[@]} -gt 1 ]; then
      CUDA_VISIBLE_DEVICES=$(IFS=,; echo "${G[*]:0:$(( ${#G[@]} - 1 ))}") upstream_bg
    else
      upstream_bg
    fi
    D=results/raw/gpu_checks/${TRUN:?}; mkdir -p "$D"
    # each file until the call's end: test_trees_cuda.py takes 377 s on an idle GPU, more beside the upstream tests
    for t in ${TESTS:-trees lean pi pi_tree scg cgct layout_race mutated_inputs}; do
      GPU=${G[$((n % ${#G[@]}))]}; n=$((n + 1))
      CUDA_VISIBLE_DEVICES=$GPU timeout $(( $(left) - 20 )) "$PY" -m pytest -v -rs tests/test_${t}_cuda.py > "$D/test_${t}_cuda.log" 2>&1 &
    done
    if [ -n "${T3RUN:-}" ]; then
      ( export CUDA_VISIBLE_DEVICES=${G[$(( ${#G[@]} - 1 ))]}
        RUN_ID=$T3RUN WORKLOADS=${T3_WORKLOADS:-DR-T,DGPT2,STCLM,BSCG,XLNET-T,MTCG-T} MODES=${T3_MODES:-pt2-cg,grace-cgct-pi} \
          REPEAT=5 COVERAGE=0 bash scripts/run_table3_pi_copy_debug.sh --resume --compile-together \
          --stop-after $(( $(left) - 200 )) --end-after $(( $(left) - 60 )) > "$OUT/table3.$STAGE.log" 2>&1
        # and TKE with functions that mutate copied inputs recorded, against PT2-CG
        [ -n "${T3TKE:-}" ] && RUN_ID=$T3RUN-tke WORKLOADS=TKE MODES=pt2-cg,grace-mutated-inputs REPEAT=5 COVERAGE=0 \
          bash scripts/run_table3_pi_copy_debug.sh --resume --compile-together --stop-after $(( $(left) - 120 )) \
          --end-after $(( $(left) - 40 )) > "$OUT/table3-tke.$STAGE.log" 2>&1 ) &
    fi
    wait
    ;;
  33)  # diagnostics: a refused function fed an overwritten output, stock and GraCE; the programs that crashed or drifted;
      # with URUN / ULRUN, what those upstream runs have left, beside them
    [ -n "${URUN:-}" ] && upstream_bg
    [ -n "${ULRUN:-}" ] && upstream_lean_bg $(( $(left) - 25 ))
    P=results/raw/probes/${PRUN:?}; mkdir -p "$P"
    read -ra G <<< "$(bash scripts/visible_gpus.sh)"
    ( env CUDA_VISIBLE_DEVICES=${G[0]} GRACE_DISABLE=1 timeout 300 "$PY" scripts/probes/eager_fallback_overwritten.py \
        > "$P/eager_fallback.stock.txt" 2>&1
      env CUDA_VISIBLE_DEVICES=${G[0]} $ALC timeout 300 "$PY" scripts/probes/eager_fallback_overwritten.py \
        > "$P/eager_fallback.all-lean-copy.txt" 2>&1 ) &
    # the differential test's programs, replayed with faulthandler on (by default those that crashed, then drifted)
    for seed in ${SEEDS:-71217001 71217008 71217011 71217019 71217000 71776049}; do
      env CUDA_VISIBLE_DEVICES=${G[$((1 % ${#G[@]}))]} $ALC timeout $(( $(left) - 30 )) "$PY" -m grace.difftest run-one --seed "$seed" \
        --device cuda --max-steps 600 --kinds "$K" > "$P/replay.$seed.all-lean-copy.txt" 2>&1 &
    done
    wait
    ;;
  32)  # tensor parallelism: TP 2 and TP 1 side by side, and TP 4 on every GPU (first with TP4_FIRST); rows of one run
    read -ra G <<< "$(bash scripts/visible_gpus.sh)"
    TPE="RUN_ID=${TPRUN:?} ROUNDS=1 HANG_DUMP_S=120 LAUNCH_TIMEOUT=${LAUNCH_TIMEOUT:-240} SPLIT_MODES=${SPLIT_MODES:-}"
    tp4() {  # $1: seconds
      [ -n "${TP4_WORKLOADS-ST XLNET-I}" ] && env $TPE TP_LIST=4 WORKLOADS="${TP4_WORKLOADS-ST XLNET-I}" timeout "$1" \
        bash scripts/run_tp_experiments.sh > "$OUT/tp4.log" 2>&1
    }
    if [ -n "${TP4_FIRST:-}" ]; then
      tp4 $(( $(left) / 2 )); half=$(( $(left) - 10 ))
    else
      half=$(( $(left) / 2 ))
    fi
    if [ ${#G[@]} -ge 4 ]; then
      [ -n "${TP2_WORKLOADS-XLNET-I ST}" ] && env $TPE CUDA_VISIBLE_DEVICES=${G[0]},${G[1]} TP_LIST=2 \
        WORKLOADS="${TP2_WORKLOADS-XLNET-I ST}" timeout $half bash scripts/run_tp_experiments.sh > "$OUT/tp2.log" 2>&1 &
      i=2
      for w in ${TP1_WORKLOADS-XLNET-I ST}; do
        env $TPE CUDA_VISIBLE_DEVICES=${G[$i]} TP_LIST=1 WORKLOADS="$w" timeout $half \
          bash scripts/run_tp_experiments.sh > "$OUT/tp1.$w.log" 2>&1 &
        i=$(( i == 2 ? 3 : 2 ))
      done
      wait
    elif [ ${#G[@]} -ge 2 ]; then  # two GPUs: TP 2 on both for half the call, then TP 1 of each workload side by side
      [ -n "${TP2_WORKLOADS-XLNET-I ST}" ] && env $TPE CUDA_VISIBLE_DEVICES=${G[0]},${G[1]} TP_LIST=2 \
        WORKLOADS="${TP2_WORKLOADS-XLNET-I ST}" timeout $half bash scripts/run_tp_experiments.sh > "$OUT/tp2.log" 2>&1
      i=0
      for w in ${TP1_WORKLOADS-XLNET-I ST}; do
        env $TPE CUDA_VISIBLE_DEVICES=${G[$i]} TP_LIST=1 WORKLOADS="$w" timeout $(( $(left) - 10 )) \
          bash scripts/run_tp_experiments.sh > "$OUT/tp1.$w.log" 2>&1 &
        i=$(( 1 - i ))
      done
      wait
    fi
    [ -z "${TP4_FIRST:-}" ] && [ ${#G[@]} -ge 4 ] && tp4 $(( $(left) - 10 ))
    ;;
  36)  # one GPU: a workload's time split by GraCE's parts, then the sweep
    read -ra G <<< "$(bash scripts/visible_gpus.sh)"
    P=results/raw/probes/${PRUN:?}; mkdir -p "$P"
    CUDA_VISIBLE_DEVICES=${G[0]} timeout $(( $(left) - 60 )) "$PY" -m grace.bench --workloads "${SPLIT_WORKLOADS:-mode_split}" \
      --modes "${SPLIT_MODESET:-pt2-cg,grace-tree,grace-cgct,grace-no-guard,grace}" --repeat "${SPLIT_REPEAT:-40}" \
      --layers --gpu-time --gpu-time-every 4 \
      --compile-together --scg-cache-per-mode --experiment mode_split --run-id "${PRUN}-split" > "$P/mode_split.log" 2>&1
    "$PY" -m grace.report.paired "results/raw/mode_split/${PRUN}-split/rows.jsonl" --baseline pt2-cg \
      > "$P/mode_split.paired.txt" 2>&1
    # do the SCG modes decide alike? (each with a decision cache of its own; their profiles wait for the
    # others' compilations: grace.scg.quiet)
    for r in results/raw/mode_split/${PRUN}-split/scg/*.grace.json; do
      "$PY" -m grace.report.scg_agreement "$r" "${r%.grace.json}.grace-no-guard.json" \
        > "$P/scg_agreement.$(basename "${r%.grace.json}").txt" 2>&1
    done
    [ -n "${SRUN:-}" ] && [ "$(left)" -gt 240 ] && sweep "${G[0]}" strict  # after other work: only a workload that fits starts
    ;;
  35)  # one GPU: Table 3 with SCG choosing PI's strategy, then the sweep
    read -ra G <<< "$(bash scripts/visible_gpus.sh)"
    resume=(); [ -s "results/raw/table3/${T3RUN:?}/rows.jsonl" ] && resume=(--resume)
    CUDA_VISIBLE_DEVICES=${G[0]} RUN_ID=$T3RUN WORKLOADS=${T3_WORKLOADS:-table3_choice} \
      MODES=${T3_MODES:-pt2-cg,grace-cgct-pi,grace-pi-choice} REPEAT=10 COVERAGE=0 CONCURRENT=1 \
      bash scripts/run_table3_pi_copy_debug.sh "${resume[@]}" --compile-together --stop-after $(( $(left) - 240 )) \
      --end-after $(( $(left) - 60 )) > "$OUT/table3.$STAGE.log" 2>&1
    [ -n "${SRUN:-}" ] && [ "$(left)" -gt 240 ] && sweep "${G[0]}" strict
    ;;
  34)  # one GPU: the plain reference the map's rows are to match, then the map (resumable), then the sweep's tail
    read -ra G <<< "$(bash scripts/visible_gpus.sh)"
    P=results/raw/probes/${PRUN:?}; mkdir -p "$P"
    [ -f "results/raw/harness_check/${PRUN}-plain/rows.jsonl" ] || CUDA_VISIBLE_DEVICES=${G[0]} timeout 200 "$PY" -m grace.bench \
      --workloads ALNET,micro-mlp16 --modes pt2-cg,grace --compile-together --repeat 50 --experiment harness_check \
      --run-id "${PRUN}-plain" > "$P/plain.log" 2>&1
    # where a kept-out function's graph-pool memory comes from (EOS under GraCE: no graph, 84 MB in pools)
    for m in grace pt2-cg; do
      [ -f "$P/kept_out_pool.EOS.$m.txt" ] || CUDA_VISIBLE_DEVICES=${G[0]} timeout 120 "$PY" scripts/probes/kept_out_pool.py \
        --mode $m --workload EOS > "$P/kept_out_pool.EOS.$m.txt" 2>&1
    done
    CUDA_VISIBLE_DEVICES=${G[0]} RUN_ID=${MRUN:?} STOP_AFTER=$(( $(left) - 150 )) \
      bash scripts/run_replay_map.sh > "$OUT/replay_map.$STAGE.log" 2>&1
    "$PY" -m grace.report.round_position "results/raw/replay_map/$MRUN/rows.jsonl" > "$OUT/round_position.$STAGE.txt" 2>&1
    # does the map time what the plain run does? (ALNET and micro-mlp16, PT2-CG and GraCE)
    "$PY" -m grace.report.runs_side_by_side "results/raw/harness_check/${PRUN}-plain/rows.jsonl" \
      "results/raw/replay_map/$MRUN/rows.jsonl" > "$P/plain_vs_map.txt" 2>&1
    [ -n "${SRUN:-}" ] && [ "$(left)" -gt 150 ] && sweep "${G[0]}" strict
    ;;
esac

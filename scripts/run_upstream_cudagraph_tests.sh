#!/usr/bin/env bash
# PyTorch's own CUDA graph trees tests (test/inductor/test_cudagraph_trees.py), unchanged, under
# stock PyTorch and every GraCE configuration, side by side on one GPU; then the table
# (results/processed/upstream_cudagraph_trees.csv) and the tests that differ from stock
# (results/processed/upstream_cudagraph_trees_differ.md).
#
#   UPSTREAM_DIR=.upstream bash scripts/run_upstream_cudagraph_tests.sh
#
# UPSTREAM_DIR holds test_cudagraph_trees.py and expecttest's wheel (PyTorch's BSD-licensed test
# file is never committed here: copy both into an ignored folder, docs/upstream_cudagraph_trees.md). CONFIGS picks
# configurations (default: grace/report/upstream.py's RUN_BY_DEFAULT, `python -m
# grace.report.upstream --list`; `--list-all` names every one), RUN_ID the folder under results/raw/upstream_cudagraph_trees/.
#
# The order is fixed: the tests are collected once and cut into SHARDS contiguous pieces (default
# 2), each run by its own pytest process in collection order, so every configuration runs each
# test after the same predecessors (some upstream tests depend on what ran before them in their
# process). At most PROCS pytest processes run at once (default 16 per visible GPU, at most one
# per core), each on the next visible GPU in turn. A shard whose junit XML
# exists is not run again, so a run cut short resumes; each runs under `timeout` (SHARD_TIMEOUT
# seconds) and its log names the tests it finished.
#
# Then every test whose outcome differs from stock's is run once more, alone in its
# configuration (and under stock), under grace/report/upstream_recheck.py: a failure's frames are released before
# tearDown's leak checks, and a FileCheck on generated code is recorded instead of raised, so
# the differences file can say whether a difference is a real leak, a wrong value, or only the
# code check (RECHECK=0 skips this; RECHECK_CHUNK tests per rerun process, by default as many
# as spread all the reruns over PROCS processes, at least 2; a resumed run keeps its first).
# ALSO_RUNS names earlier runs whose configurations the
# table takes where this run has none (each named in the differences).
set -uo pipefail
cd "$(dirname "$0")/.."
PY=$(bash scripts/python.sh) || { bash scripts/setup.sh >/dev/null && PY=$(bash scripts/python.sh); } || exit 2
UPSTREAM_DIR=$(cd "${UPSTREAM_DIR:-.upstream}" 2>/dev/null && pwd) || {
  echo "run_upstream_cudagraph_tests: UPSTREAM_DIR=${UPSTREAM_DIR:-.upstream} not found (copy test_cudagraph_trees.py and expecttest's wheel there: docs/upstream_cudagraph_trees.md)" >&2; exit 2; }
[ -f "$UPSTREAM_DIR/test_cudagraph_trees.py" ] || { echo "run_upstream_cudagraph_tests: no test_cudagraph_trees.py in $UPSTREAM_DIR" >&2; exit 2; }
"$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' || {
  echo "run_upstream_cudagraph_tests: no CUDA GPU; these tests need one" >&2; exit 2; }

if ! "$PY" -c 'import expecttest' 2>/dev/null; then
  "$PY" -m pip install -q --no-index --no-deps --target /tmp/grace-upstream-site "$UPSTREAM_DIR"/expecttest-*.whl || exit 2
  export PYTHONPATH=/tmp/grace-upstream-site${PYTHONPATH:+:$PYTHONPATH}
fi

RUN_ID=${RUN_ID:-$(date -u +%Y%m%d-%H%M%S)}
RAW=results/raw/upstream_cudagraph_trees/$RUN_ID
if [ -e "$RAW.tar.xz" ]; then
  echo "run $RUN_ID is finished and packed ($RAW.tar.xz); choose another RUN_ID, or unpack it there first" >&2
  exit 2
fi
CONFIGS=${CONFIGS:-$("$PY" -m grace.report.upstream --list)}
SHARDS=${SHARDS:-2}
# Every visible GPU takes pytest processes in turn (a caller's CUDA_VISIBLE_DEVICES picks them).
read -ra GPUS <<< "$(bash scripts/visible_gpus.sh)"
NGPU=${#GPUS[@]}
PROCS=${PROCS:-$(( 16 * NGPU < $(nproc) ? 16 * NGPU : $(nproc) ))}
launched=0
on_next_gpu() {  # on_next_gpu: the subshell about to start runs on the next GPU in turn
  if [ "$NGPU" -gt 1 ]; then
    GPU_FOR_NEXT=${GPUS[$((launched % NGPU))]}
  fi
  launched=$((launched + 1))
}
SHARD_TIMEOUT=${SHARD_TIMEOUT:-560}
RECHECK=${RECHECK:-1}
# Two tests need a torch newer than 2.11 (see the upstream folder's README).
DESELECT="not saved_activation_not_static and not no_partition_keeps_static"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
mkdir -p "$RAW"
echo "$RUN_ID" > results/raw/upstream_cudagraph_trees/latest.txt
{ echo "code sha256 $(bash scripts/code_digest.sh) (scripts/code_digest.sh at a commit finds it)";
  echo "test file sha256 $(sha256sum "$UPSTREAM_DIR/test_cudagraph_trees.py" | cut -c1-16)";
  echo "configs $CONFIGS"; echo "shards $SHARDS"; "$PY" -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name())'; } > "$RAW/meta.txt"

# pytest-timeout (on the GPU image) bounds each test; without it SHARD_TIMEOUT still bounds a shard
PER_TEST_TIMEOUT=$("$PY" -c 'import pytest_timeout' 2>/dev/null && echo "--timeout=240" || true)
pytest_in_upstream() {  # pytest_in_upstream LOG ARGS...: pytest from UPSTREAM_DIR under SHARD_TIMEOUT; log and exit status in LOG
  local log=$1; shift
  (cd "$UPSTREAM_DIR" && timeout -k 10 "$SHARD_TIMEOUT" "$PY" -m pytest -c /dev/null --rootdir "$UPSTREAM_DIR" \
     -p no:cacheprovider $PER_TEST_TIMEOUT -rfE --tb=short -v "$@" > "$log" 2>&1; echo "exit $?" >> "$log")
}

if [ ! -s "$RAW/tests.txt" ]; then
  (cd "$UPSTREAM_DIR" && GRACE_DISABLE=1 "$PY" -m pytest -c /dev/null --rootdir "$UPSTREAM_DIR" -p no:cacheprovider \
     --collect-only -q -k "$DESELECT" test_cudagraph_trees.py) | sed -n 's/^test_cudagraph_trees.py:://p' > "$RAW/tests.txt.part" \
    && mv "$RAW/tests.txt.part" "$RAW/tests.txt" || { echo "run_upstream_cudagraph_tests: collection failed" >&2; exit 2; }
  (cd "$RAW" && split -n "l/$SHARDS" -d -a 2 tests.txt shard-)
fi
echo "$(wc -l < "$RAW/tests.txt") tests, $(ls "$RAW"/shard-* | wc -l) shards per configuration"

start=$(date +%s)
for cfg in $CONFIGS; do
  env_line=$("$PY" -m grace.report.upstream --env "$cfg") || exit 2
  echo "[$cfg] $env_line"
  for shard in "$RAW"/shard-*; do
    k=${shard##*-}
    dir=$RAW/$cfg
    if [ -s "$dir/junit-$k.xml" ]; then echo "[$cfg] shard $k done earlier, kept"; continue; fi
    mkdir -p "$dir"
    while [ "$(jobs -rp | wc -l)" -ge "$PROCS" ]; do sleep 2; done
    on_next_gpu
    (
      [ -n "${GPU_FOR_NEXT:-}" ] && export CUDA_VISIBLE_DEVICES=$GPU_FOR_NEXT
      # a fresh SCG decision cache and report per configuration and shard: no decision is shared
      export GRACE_SCG_CACHE_DIR="$PWD/$dir/scg-cache-$k" GRACE_SCG_REPORT="$PWD/$dir/scg-report-$k.json"
      # and Inductor's caches of its own: their keys do not hold GraCE's switches, so configurations
      # running side by side must never serve each other compiled code
      export TORCHINDUCTOR_CACHE_DIR="/tmp/grace-upstream-inductor/$RUN_ID/$cfg-$k"
      for kv in $env_line; do export "$kv"; done
      mapfile -t tests < "$shard"
      pytest_in_upstream "$PWD/$dir/pytest-$k.log" --junitxml="$PWD/$dir/junit-$k.xml" \
        "${tests[@]/#/test_cudagraph_trees.py::}"
    ) &
  done
done
progress() {
  local tests; tests=$(cat "$RAW"/*/pytest-*.log 2>/dev/null | grep -cE ' (PASSED|FAILED|ERROR|SKIPPED)')
  echo "[$(( $(date +%s) - start )) s] $(grep -l '^exit ' "$RAW"/*/pytest-*.log 2>/dev/null | wc -l) shard(s) finished; $tests test results so far"
}
while [ -n "$(jobs -rp)" ]; do sleep 30; progress; done
wait

if [ "$RECHECK" = 1 ] && [ -d "$RAW/stock" ]; then
  # stock reruns every test any configuration differs on, the same way, so both sides are judged
  # alike; each configuration's list is cut into pieces of RECHECK_CHUNK tests run side by side
  declare -A to_recheck=()
  total=0
  for cfg in stock $(printf '%s\n' $CONFIGS | grep -vx stock); do
    [ -d "$RAW/$cfg" ] || continue
    to_recheck[$cfg]=$("$PY" -m grace.report.upstream --run-id "$RUN_ID" --to-recheck "$cfg")
    total=$((total + $(printf '%s' "${to_recheck[$cfg]}" | grep -c .)))
  done
  if [ -s "$RAW/recheck_chunk.txt" ]; then  # a resumed run: its pieces as first cut
    RECHECK_CHUNK=$(cat "$RAW/recheck_chunk.txt")
  elif compgen -G "$RAW/*/recheck-*.log" > /dev/null; then  # begun before the cut was recorded
    RECHECK_CHUNK=5
  else
    RECHECK_CHUNK=${RECHECK_CHUNK:-$(( (total + PROCS - 1) / PROCS > 2 ? (total + PROCS - 1) / PROCS : 2 ))}
    echo "$RECHECK_CHUNK" > "$RAW/recheck_chunk.txt"
  fi
  for cfg in stock $(printf '%s\n' $CONFIGS | grep -vx stock); do
    dir=$RAW/$cfg
    [ -d "$dir" ] || continue
    mapfile -t tests < <(printf '%s' "${to_recheck[$cfg]}" | grep .)
    [ "${#tests[@]}" -eq 0 ] && continue
    echo "[$cfg] rechecking ${#tests[@]} test(s)"
    env_line=$("$PY" -m grace.report.upstream --env "$cfg")
    for ((i = 0; i < ${#tests[@]}; i += $RECHECK_CHUNK)); do
      k=$(printf '%02d' $((i / $RECHECK_CHUNK)))
      [ -f "$dir/recheck-$k.log" ] && grep -q '^exit ' "$dir/recheck-$k.log" && continue
      while [ "$(jobs -rp | wc -l)" -ge "$PROCS" ]; do sleep 2; done
      on_next_gpu
      (
        [ -n "${GPU_FOR_NEXT:-}" ] && export CUDA_VISIBLE_DEVICES=$GPU_FOR_NEXT
        export GRACE_SCG_CACHE_DIR="$PWD/$dir/scg-cache-recheck-$k"
        export TORCHINDUCTOR_CACHE_DIR="/tmp/grace-upstream-inductor/$RUN_ID/$cfg-recheck-$k"
        export GRACE_UPSTREAM_RECHECK_OUT="$PWD/$dir/recheck-$k.jsonl"
        for kv in $env_line; do export "$kv"; done
        rm -f "$GRACE_UPSTREAM_RECHECK_OUT"
        chunk=("${tests[@]:i:$RECHECK_CHUNK}")
        pytest_in_upstream "$PWD/$dir/recheck-$k.log" -p grace.report.upstream_recheck "${chunk[@]/#/test_cudagraph_trees.py::}"
      ) &
    done
  done
  while [ -n "$(jobs -rp)" ]; do sleep 20; echo "[$(( $(date +%s) - start )) s] rechecks running: $(jobs -rp | wc -l)"; done
  wait
fi
"$PY" -m grace.report.upstream --run-id "$RUN_ID" ${ALSO_RUNS:+$(for r in $ALSO_RUNS; do printf -- '--also %s ' "$r"; done)}

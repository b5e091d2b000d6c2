#!/usr/bin/env bash
# PyTorch's own CUDA graph trees tests (test/inductor/test_cudagraph_trees.py), unchanged, under
# stock PyTorch and every GraCE configuration, side by side on one GPU; then the table
# (results/processed/upstream_cudagraph_trees.csv) and the tests that differ from stock
# (results/processed/upstream_cudagraph_trees_differ.md).
#
#   UPSTREAM_DIR=.upstream bash scripts/run_upstream_cudagraph_tests.sh
#
# UPSTREAM_DIR holds test_cudagraph_trees.py and expecttest's wheel (PyTorch's BSD-licensed test
# file is never committed here: copy ../shared/upstream into an ignored folder). CONFIGS picks
# configurations (default: all of grace/report/upstream.py's CONFIGURATIONS, `python -m
# grace.report.upstream --list`), JOBS the pytest-xdist workers of each, RUN_ID the folder under
# results/raw/upstream_cudagraph_trees/. A configuration whose junit.xml exists there is not run
# again, so a run cut short resumes. Each configuration's pytest runs under `timeout`
# (CONFIG_TIMEOUT seconds); its log names the tests it finished. ALSO_RUNS names earlier runs
# whose configurations the table takes where this run has none (each named in the differences).
set -uo pipefail
cd "$(dirname "$0")/.."
PY=$(bash scripts/python.sh) || { bash scripts/setup.sh >/dev/null && PY=$(bash scripts/python.sh); } || exit 2
UPSTREAM_DIR=$(cd "${UPSTREAM_DIR:-.upstream}" 2>/dev/null && pwd) || {
  echo "run_upstream_cudagraph_tests: UPSTREAM_DIR=${UPSTREAM_DIR:-.upstream} not found (copy ../shared/upstream there)" >&2; exit 2; }
[ -f "$UPSTREAM_DIR/test_cudagraph_trees.py" ] || { echo "run_upstream_cudagraph_tests: no test_cudagraph_trees.py in $UPSTREAM_DIR" >&2; exit 2; }
"$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' || {
  echo "run_upstream_cudagraph_tests: no CUDA GPU; these tests need one" >&2; exit 2; }

if ! "$PY" -c 'import expecttest' 2>/dev/null; then
  "$PY" -m pip install -q --no-index --no-deps --target /tmp/grace-upstream-site "$UPSTREAM_DIR"/expecttest-*.whl || exit 2
  export PYTHONPATH=/tmp/grace-upstream-site${PYTHONPATH:+:$PYTHONPATH}
fi

RUN_ID=${RUN_ID:-$(date -u +%Y%m%d-%H%M%S)}
RAW=results/raw/upstream_cudagraph_trees/$RUN_ID
CONFIGS=${CONFIGS:-$("$PY" -m grace.report.upstream --list)}
JOBS=${JOBS:-2}
CONFIG_TIMEOUT=${CONFIG_TIMEOUT:-560}
# Two tests need a torch newer than 2.11 (see the upstream folder's README).
DESELECT="not saved_activation_not_static and not no_partition_keeps_static"
mkdir -p "$RAW"
echo "$RUN_ID" > results/raw/upstream_cudagraph_trees/latest.txt
{ echo "code sha256 $(bash scripts/code_digest.sh) (scripts/code_digest.sh at a commit finds it)";
  echo "test file sha256 $(sha256sum "$UPSTREAM_DIR/test_cudagraph_trees.py" | cut -c1-16)";
  echo "configs $CONFIGS"; echo "jobs $JOBS"; "$PY" -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name())'; } > "$RAW/meta.txt"

start=$(date +%s)
pids=()
for cfg in $CONFIGS; do
  dir=$RAW/$cfg
  if [ -s "$dir/junit.xml" ]; then echo "[$cfg] done earlier, kept"; continue; fi
  mkdir -p "$dir"
  env_line=$("$PY" -m grace.report.upstream --env "$cfg") || exit 2
  echo "[$cfg] $env_line"
  (
    # a fresh SCG decision cache and report folder per configuration: no decision is shared
    export GRACE_SCG_CACHE_DIR="$PWD/$dir/scg-cache" GRACE_SCG_REPORT="$PWD/$dir/scg-report.json"
    # and Inductor's caches of its own: their keys do not hold GraCE's switches, so configurations
    # running side by side must never serve each other compiled code
    export TORCHINDUCTOR_CACHE_DIR="/tmp/grace-upstream-inductor/$RUN_ID/$cfg"
    for kv in $env_line; do export "$kv"; done
    cd "$UPSTREAM_DIR" && timeout -k 10 "$CONFIG_TIMEOUT" "$PY" -m pytest -c /dev/null --rootdir "$UPSTREAM_DIR" \
      -p no:cacheprovider -n "$JOBS" --timeout 240 -k "$DESELECT" -rfE --tb=short -v \
      test_cudagraph_trees.py --junitxml="$OLDPWD/$dir/junit.xml" > "$OLDPWD/$dir/pytest.log" 2>&1
    echo "exit $?" >> "$OLDPWD/$dir/pytest.log"
  ) &
  pids+=($!)
done
while [ -n "$(jobs -rp)" ]; do
  sleep 30
  done_n=$(grep -l '^exit ' "$RAW"/*/pytest.log 2>/dev/null | wc -l)
  tests=$(cat "$RAW"/*/pytest.log 2>/dev/null | grep -cE ' (PASSED|FAILED|ERROR|SKIPPED)')
  echo "[$(( $(date +%s) - start )) s] $done_n configuration(s) finished; $tests test results so far"
done
wait
"$PY" -m grace.report.upstream --run-id "$RUN_ID" ${ALSO_RUNS:+$(for r in $ALSO_RUNS; do printf -- '--also %s ' "$r"; done)}

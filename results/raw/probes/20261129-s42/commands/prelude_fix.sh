# the prelude uploaded before its first launch: PyTorch's tests under the prelude's configurations,
# the PI tree GPU tests (and the new one with the upload taken out, which must fail), the probe on MMC and ST
set -u
T0=$SECONDS; T=${T:-430}
mkdir -p "$OUT"
bash scripts/setup.sh > "$OUT/setup.log" 2>&1 || tail -5 "$OUT/setup.log"
PY=$(bash scripts/python.sh)
"$PY" -c 'import expecttest' 2>/dev/null || "$PY" -m pip install -q --no-index --no-deps --target /tmp/grace-upstream-site .upstream/expecttest-*.whl
export PYTHONPATH=/tmp/grace-upstream-site${PYTHONPATH:+:$PYTHONPATH}
left() { echo $((T - (SECONDS - T0))); }
( CONFIGS="pi-prelude pi-prelude-untrusted pi-prelude-lean" SHARDS=6 STEP=upstream UPSTREAM_RUN=20261129-s42-u \
    UPSTREAM_DIR=.upstream TOTAL_S=$(( $(left) - 30 )) bash scripts/gpu_trust_checks.sh > "$OUT/upstream.log" 2>&1 ) &
G=results/raw/gpu_checks/20261129-s42-tests; mkdir -p $G
( timeout 300 "$PY" -m pytest -q -rs tests/test_pi_tree_cuda.py > $G/test_pi_tree_cuda.log 2>&1
  echo "exit $?" >> $G/test_pi_tree_cuda.log
  timeout 120 "$PY" -c 'import sys, pytest
from grace.pi import prelude
prelude.upload = lambda raw_exec, device: None
sys.exit(pytest.main(["-q", "tests/test_pi_tree_cuda.py", "-k", "convolutions_and_matmuls"]))' > $G/without_upload.log 2>&1
  echo "exit $?" >> $G/without_upload.log ) &
for w in MMC ST; do
  timeout 200 "$PY" scripts/probes/prelude_check.py --mode grace-cgct-pi-prelude --workload $w --variant as-is --blocking \
    > "$OUT/prelude.$w.fixed.txt" 2>&1 &
done
wait
tail -3 "$OUT/upstream.log"; for f in $G/*.log; do echo "== $f"; tail -4 $f; done
for f in "$OUT"/prelude.*.txt; do echo "== $f"; grep -E '^(variant|  check)' "$f" | cut -c1-300; done
tar czf "$OUT/fix.tgz" $G results/raw/upstream_cudagraph_trees/20261129-s42-u results/processed/upstream_cudagraph_trees.csv results/processed/upstream_cudagraph_trees_differ.md 2>/dev/null

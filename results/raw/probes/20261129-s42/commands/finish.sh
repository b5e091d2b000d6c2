# the upstream run under the prelude's configurations finished, beside Table 3's strategy choice on MMC and ST
set -u
mkdir -p "$OUT"
bash scripts/setup.sh > "$OUT/setup.log" 2>&1 || tail -5 "$OUT/setup.log"
PY=$(bash scripts/python.sh)
"$PY" -c 'import expecttest' 2>/dev/null || "$PY" -m pip install -q --no-index --no-deps --target /tmp/grace-upstream-site .upstream/expecttest-*.whl
export PYTHONPATH=/tmp/grace-upstream-site${PYTHONPATH:+:$PYTHONPATH}
( CONFIGS="pi-prelude pi-prelude-untrusted pi-prelude-lean" SHARDS=6 STEP=upstream UPSTREAM_RUN=20261129-s42-u \
    UPSTREAM_DIR=.upstream TOTAL_S=$((T - 40)) bash scripts/gpu_trust_checks.sh > "$OUT/upstream.log" 2>&1 ) &
STAGE=35 T3RUN=20261129-s42-t3choice2 T3_WORKLOADS=MMC,ST T=$((T - 10)) bash .diag/device_session.sh > "$OUT/stage35.log" 2>&1
wait
tail -4 "$OUT/upstream.log"; tail -12 "$OUT/table3.35.log"
tar czf "$OUT/up.tgz" results/raw/upstream_cudagraph_trees/20261129-s42-u results/processed/upstream_cudagraph_trees.csv results/processed/upstream_cudagraph_trees_differ.md

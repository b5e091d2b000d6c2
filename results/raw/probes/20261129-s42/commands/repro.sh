mkdir -p "$OUT"; bash scripts/setup.sh > "$OUT/setup.log" 2>&1; PY=$(bash scripts/python.sh)
for c in patch chain convs mlp; do for u in no upload; do
  GRACE_LOGS=warning timeout 150 "$PY" .diag/repro.py $c $u > "$OUT/repro.$c.$u.txt" 2>&1 &
done; done; wait
for f in "$OUT"/repro.*.txt; do grep -E 'upload=|Error|grace\] WARN' "$f" | cut -c1-250 | tail -3; done

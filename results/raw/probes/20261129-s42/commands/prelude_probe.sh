# the prelude's check failures on MMC and ST, four variants each, concurrently
set -u
mkdir -p "$OUT"
bash scripts/setup.sh > "$OUT/setup.log" 2>&1 || tail -5 "$OUT/setup.log"
PY=$(bash scripts/python.sh)
for w in MMC ST; do
  for v in as-is upload serial upload-serial; do
    b=""; [ "$v" = as-is ] && b=--blocking
    timeout ${PT:-400} "$PY" scripts/probes/prelude_check.py --mode grace-cgct-pi-prelude --workload $w --variant $v $b \
      > "$OUT/prelude.$w.$v.txt" 2>&1 &
  done
done
wait
for f in "$OUT"/prelude.*.txt; do echo "== $f"; grep -E '^(variant|  install|  check)' "$f" | cut -c1-300; done

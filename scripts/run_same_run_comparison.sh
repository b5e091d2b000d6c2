#!/usr/bin/env bash
# Same-run comparison of this checkout's GraCE with an earlier version of it, on the smoke
# workloads (or WORKLOADS): PT2-CG, GraCE and GraCE-from-BEFORE measured interleaved in one
# run, so a change can be held to "no slower than before" (the speedup column divides by the
# earlier version's median).
#
#   BEFORE=df23841 bash scripts/run_same_run_comparison.sh
#
# BEFORE is a commit of this repository (exported with `git archive` into .trees/<commit>) or a
# folder that holds a checkout. MODES (default "pt2-cg grace"): each runs from this checkout,
# and MODE@before from BEFORE's. REPLICAS (default 1): workers per mode, grace@before included
# (MODE~2, ...), timed in the same rounds: two workers of one mode differ only by what a process
# brings, the floor any difference between modes must clear. REPEAT (default 50), EXPERIMENT
# (default same_run).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=$(bash scripts/python.sh)
BEFORE=${BEFORE:?set BEFORE to a commit or to a checkout folder}
if [ -d "$BEFORE" ]; then
  TREE=$(cd "$BEFORE" && pwd)
else
  commit=$(git rev-parse --short "$BEFORE^{commit}") || { echo "run_same_run_comparison: no commit $BEFORE" >&2; exit 2; }
  TREE=$PWD/.trees/$commit
  if [ ! -d "$TREE/grace" ]; then
    mkdir -p "$TREE"
    git archive "$commit" grace patches third_party configs scripts | tar -x -C "$TREE"
  fi
fi
MODES=${MODES:-pt2-cg grace}
modes=$(for m in $MODES grace@before; do printf '%s,' "$m"; for ((k = 2; k <= ${REPLICAS:-1}; k++)); do printf '%s,' "$m~$k"; done; done)
modes=${modes%,}
echo "same run: ${MODES} from $(bash scripts/code_digest.sh | cut -c1-16) (this checkout), grace@before from $TREE"
"$PY" -m grace.bench --workloads "${WORKLOADS:-smoke}" --modes "$modes" --tree "before=$TREE" \
    --baseline grace@before --repeat "${REPEAT:-50}" --experiment "${EXPERIMENT:-same_run}" "$@"

#!/usr/bin/env bash
# Every single-GPU figure and table, each from the latest run of its experiment: Figures 10 and
# 11, the README's headline table and the memory table (single_gpu), Figure 9 (figure9), Tables 2 and 3 (table2, table3), SCG's
# Table 4 and Figure 13 (the single_gpu run's GraCE rows). One whose experiment has no run yet is skipped with the
# command that makes it; the exit status is 1 if any failed, 2 if none could be made.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-$(bash scripts/python.sh 2>/dev/null || echo python3)}
status=0 made=0
make_one() {  # make_one WHAT EXPERIMENT HOW-TO-RUN REPORT-ARGS...
  local what=$1 experiment=$2 how=$3; shift 3
  if [ ! -s "results/raw/$experiment/latest.txt" ]; then
    echo "== $what: skipped, no run in results/raw/$experiment/ (run: $how)"
    return
  fi
  echo "== $what (results/raw/$experiment/$(cat "results/raw/$experiment/latest.txt"))"
  "$PY" -m grace.report "$@" --experiment "$experiment" || status=1
  made=$((made + 1))
}
make_one "Figure 10" single_gpu "bash scripts/run_single_gpu_experiments.sh" figure10
make_one "Figure 11" single_gpu "bash scripts/run_single_gpu_experiments.sh" figure11
make_one "the headline (README)" single_gpu "bash scripts/run_single_gpu_experiments.sh" headline
make_one "Table 4 and Figure 13" single_gpu "bash scripts/run_single_gpu_experiments.sh" scg
make_one "memory against PT2-CG" single_gpu "bash scripts/run_single_gpu_experiments.sh" memory
make_one "Figure 9" figure9 "STEPS=figure9 bash scripts/gpu_checks_pi_cgct.sh" figure9
make_one "Table 2" table2 "bash scripts/run_table2_cgct_coverage.sh" table2
make_one "Table 3" table3 "bash scripts/run_table3_pi_copy_debug.sh" table3
(( made == 0 && status == 0 )) && status=2
exit "$status"

#!/usr/bin/env bash
# Table 3, the bytes copied per replay, by the artifact's name: every workload of WORKLOADS
# (default the paper's 25) under PT2-CG and GraCE-CGCT-PI, timed (PI's report counts each
# graph's copies and pointers at capture), into results/raw/table3/<RUN_ID>/; then
# tables/table3_pi_copy_debug.csv. Resumable and sharded as scripts/run_tables23.sh.
#
#   bash scripts/run_table3_pi_copy_debug.sh
#   RUN_ID=<same> bash scripts/run_table3_pi_copy_debug.sh --resume --stop-after 400
export EXPERIMENT=${EXPERIMENT:-table3} MODES=${MODES:-pt2-cg,grace-cgct-pi} COVERAGE=${COVERAGE:-0} REPORT=table3
exec bash "$(dirname "$0")/run_tables23.sh" "$@"

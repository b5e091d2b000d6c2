#!/usr/bin/env bash
# Table 2, CUDA graph coverage, by the artifact's name: every workload of WORKLOADS (default the
# paper's 25) under PT2-CG, GraCE-CGCT and GraCE, each profiled for COVERAGE (default 3)
# iterations after timing, into results/raw/table2/<RUN_ID>/; then tables/table2_cgct_coverage.csv.
# Resumable and sharded as scripts/run_tables23.sh, which runs both tables from one sweep.
#
#   bash scripts/run_table2_cgct_coverage.sh
#   RUN_ID=<same> bash scripts/run_table2_cgct_coverage.sh --resume --stop-after 400
export EXPERIMENT=${EXPERIMENT:-table2} MODES=${MODES:-pt2-cg,grace-cgct,grace} REPORT=table2
exec bash "$(dirname "$0")/run_tables23.sh" "$@"

#!/usr/bin/env bash
# The replay map: a steady-state call's host time split by layer (Dynamo, AOTAutograd, Inductor's
# output code, the CUDA graph tree, the node's replay, PI, the launch) beside the iteration's
# device time and its time end to end, for PT2-NoCG, PT2-CG and GraCE, interleaved, on the
# workloads of configs/workloads_replay_map.txt; then results/processed/replay_map.csv,
# replay_overhead.csv and figures/replay_overhead.png.
#
#   bash scripts/run_replay_map.sh
#   RUN_ID=R STOP_AFTER=420 bash scripts/run_replay_map.sh     # resumable, as the sweep's script
#
# MODES (default pt2-nocg,pt2-cg,grace) and WORKLOADS (a config name, default replay_map) as in
# scripts/run_single_gpu_experiments.sh, whose options this passes on. A workload's modes start
# together (--compile-together): the map reads steady calls, not compile times, and one after
# another each worker took about 15 s to be ready on an H200 host, three times a workload's
# timed rounds on the micro-workloads (run 20261129-s39-map).
set -euo pipefail
cd "$(dirname "$0")/.."
export EXPERIMENT=replay_map
export WORKLOADS=${WORKLOADS:-replay_map}
export MODES=${MODES:-pt2-nocg,pt2-cg,grace}
export RUN_ID=${RUN_ID:-$(date +%Y%m%d-%H%M%S)-$$}
bash scripts/run_single_gpu_experiments.sh --layers --gpu-time --compile-together "$@"
PY=$(bash scripts/python.sh)
"$PY" -m grace.report replay-map --experiment replay_map --run-id "$RUN_ID"

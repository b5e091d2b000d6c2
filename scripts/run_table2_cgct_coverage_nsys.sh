#!/usr/bin/env bash
# The paper's appendix name for Table 2's run. The artifact counted kernels in CUDA graphs with
# Nsight Systems; GraCE counts them with PyTorch's profiler (grace/cgct/coverage.py: each kernel
# and whether a graph launch ran it), so no Nsight is needed: this is run_table2_cgct_coverage.sh.
exec bash "$(dirname "$0")/run_table2_cgct_coverage.sh" "$@"

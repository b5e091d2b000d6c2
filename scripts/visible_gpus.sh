#!/usr/bin/env bash
# Prints the GPUs a run may spread its processes over, space-separated, as CUDA_VISIBLE_DEVICES
# names them (the caller's choice, else every GPU torch sees); nothing without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=$(bash scripts/python.sh)
count=$("$PY" -c 'import torch; print(torch.cuda.device_count())')
(( count > 0 )) || exit 0
IFS=, read -ra named <<< "${CUDA_VISIBLE_DEVICES:-$(seq -s, 0 $((count - 1)))}"
echo "${named[@]:0:$count}"

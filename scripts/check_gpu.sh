#!/usr/bin/env bash
# One clear line and a non-zero exit when there is no NVIDIA GPU; silent when there is one.
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "[FAIL] No NVIDIA GPU found (nvidia-smi is missing or sees no device): GraCE's benchmarks need a CUDA GPU." >&2
  exit 2
fi

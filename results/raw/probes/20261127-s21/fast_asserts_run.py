"""Runs `python -m grace.difftest ...` with Inductor's fast-path CUDA graph asserts on (a diagnostic run)."""
import runpy
import sys

import torch._inductor.config as inductor_config

inductor_config.triton.fast_path_cudagraph_asserts = True
sys.argv = ["grace.difftest", *sys.argv[1:]]
runpy.run_module("grace.difftest", run_name="__main__", alter_sys=True)

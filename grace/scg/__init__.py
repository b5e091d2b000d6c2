"""Selective CUDA graphs (SCG): keep a CUDA graph only where it is measured to help.

The unit of decision is each CUDA graph PyTorch would record: on 2.11, each cudagraphable
partition of each compiled forward or backward graph. At capture time (never on replay) SCG
times the choices available for that graph (:mod:`grace.scg.choose`) and remembers the
decision on disk (:mod:`grace.scg.cache`) so a second run of the program skips profiling.
"""

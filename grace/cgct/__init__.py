"""CUDA-Graph-aware code transformation (CGCT): why kernels stay out of CUDA graphs
(:mod:`grace.cgct.explain`), and the rewrites that bring them in."""

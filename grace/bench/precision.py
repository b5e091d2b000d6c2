"""The float32 arithmetic of every timed call the project reports.

The benchmark checks each timed output against eager at a tolerance of 1e-4, so it turns
TensorFloat-32 off for matmuls (PyTorch's default already) and for cuDNN's convolutions (on by
default). Whatever times a workload to compare with the benchmark (the tensor-parallel runs,
the replay probes) calls :func:`exact_float32` first: with cuDNN's default, a convolutional
workload runs other kernels, and its time is not the benchmark's.
"""

from __future__ import annotations


def exact_float32() -> None:
    """TF32 off for matmuls and cuDNN convolutions, in this process."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False

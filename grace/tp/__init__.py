"""Tensor parallelism for the artifact's tensor-parallel workloads (the paper's Figure 12).

Each workload is sharded with PyTorch's own tensor parallelism: a plan of column- and row-wise
styles (``torch.distributed.tensor.parallel``) applied with ``parallelize_module`` over a
one-dimensional ``DeviceMesh``, one process per device. :mod:`grace.tp.plans` holds the plans.
"""

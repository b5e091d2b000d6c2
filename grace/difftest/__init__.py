"""Randomized differential testing of ``torch.compile(mode="reduce-overhead")`` against eager.

A program (:mod:`grace.difftest.programs`) is a short random sequence of calls to compiled
functions, fully determined by an integer seed, that stresses what CUDA graph trees and GraCE
rely on: input addresses (reused, freed and reallocated, misaligned, strided, overlapping, fed
back), outputs held across replays, buffer mutation, CPU scalars and CPU buffers, shape changes
and step boundaries. :mod:`grace.difftest.runner` runs each program in its own subprocess,
compares every compiled result with eager, and runs the same programs under several GraCE
configurations side by side so that a configuration's failures can be told apart from stock's.

    python -m grace.difftest run --configs stock,all --seconds 300 --out DIR
    python -m grace.difftest run-one --seed 7 --device cuda
    python -m grace.difftest show --seed 7
"""

"""Parameter indirection (PI): a CUDA graph replay copies 8-byte pointers instead of input tensors.

PT2-CG records each graph against static placeholders and, before every replay, copies each
non-static input into its placeholder. PI instead records the Triton kernels that read such an
input with a pointer-to-pointer parameter that points at a slot of a per-graph device pointer
table; a replay writes the new inputs' addresses into the table (one small host-to-device copy)
and copies nothing else.

Invariants, in the order they are established:

1. A kernel binary is indirected exactly where its name says so (:mod:`grace.pi.triton_stage`):
   the indirected parameter list is part of the kernel's name, hence of its source and of
   Triton's cache key, and a binary is checked (:func:`grace.pi.ptx.is_indirected`) before it is
   launched with a slot address.
2. The PTX rewrite is total or refused (:mod:`grace.pi.ptx`): every read of an indirected
   parameter is followed by the dereference, or the kernel is not indirected at all.
3. An input is indirected only if every reference to its placeholder in the recorded graph is
   a parameter we redirect; anything else that reaches it keeps the copy for that input.
4. Per replay, an input that breaks what the kernels were specialized on (alignment, strides,
   storage offset) or that aliases another input is copied, as PT2-CG does.

Modules: :mod:`~grace.pi.ptx` (the PTX pass), :mod:`~grace.pi.triton_stage` (the pass inside
Triton's compiler, keyed by kernel name), :mod:`~grace.pi.launch_args` (which launch arguments
read a placeholder), :mod:`~grace.pi.plan` (which inputs may be indirected),
:mod:`~grace.pi.guard` (which must be copied on a given replay), :mod:`~grace.pi.table` (the
pointer table and its ring of pinned host buffers), :mod:`~grace.pi.variant` (a kernel's
indirected variant, built through Inductor's code cache for the config it settled on).

Status: these pieces are implemented and tested on the CPU, the PTX pass on real Triton 3.6
PTX assembled by ptxas. Not yet done: the hook points in CUDA graph trees and in Inductor's
Triton launcher that use them while recording and replaying (``patches/pi/README.md`` names
them), the scan of recorded graphs for other references to placeholders, the vendor-kernel
strategies, and every GPU test. ``grace.config.pi`` therefore changes nothing yet.
"""

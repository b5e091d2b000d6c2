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
3. An input is indirected only if every use of its placeholder seen during the capture is a
   Triton launch we redirected (matched by storage identity); an ATen operator that reads it,
   a launch that could not be redirected, an output that aliases it or a mutation keeps the
   copy for that input, and a replay with the inputs moved must reproduce the outputs of the
   recorded function run with stock kernels, or the graph is captured again as stock.
4. Per replay, an input that breaks what the kernels were specialized on (alignment, strides,
   storage offset) or that aliases another input is copied, as PT2-CG does.
5. Under strategy (1) neither a placeholder nor an earlier graph's output (a managed input)
   is held through the capture, so that the graph may reuse its memory after the input's last
   use, as stock's does; a weak reference keeps a placeholder's storage identity (invariant 3
   matches by it) until the graph is deployed; static inputs are held until the check of 3
   has run the model on them; a second capture (stock's, where that check fails) gets
   placeholders of its own with the same bytes and the managed inputs themselves
   (:class:`grace.pi.tree_hook.HeldInputs`), and where a managed input died during the first
   capture the graph is retired instead (:mod:`grace.pi.retire`: this call's outputs from
   stock kernels, the node never replayed, the function recorded again stock); a check that
   cannot put the inputs' bytes back stops the recording. Strategies (2) and (3), which match
   by address, hold every recording input from before the capture until the graph is
   deployed.

Modules: :mod:`~grace.pi.ptx` (the PTX pass), :mod:`~grace.pi.triton_stage` (the pass inside
Triton's compiler, keyed by kernel name), :mod:`~grace.pi.launch_args` (which launch arguments
read a placeholder), :mod:`~grace.pi.plan` (which inputs may be indirected),
:mod:`~grace.pi.guard` (which must be copied on a given replay), :mod:`~grace.pi.table` (the
pointer table, rewritten on the replay's stream), :mod:`~grace.pi.variant` (a kernel's
indirected variant, built through Inductor's code cache for the config it settled on),
:mod:`~grace.pi.tree_hook` (what the patched CUDA graph trees call, and when),
:mod:`~grace.pi.observe` (the warm-up and the capture observed), :mod:`~grace.pi.finish` (after the capture, one finisher per strategy: plan, check,
deploy), :mod:`~grace.pi.check` (a captured graph against the recorded function
run with stock kernels), :mod:`~grace.pi.replay` (a node's replay: guard, copies, pointers,
launch),
:mod:`~grace.pi.prelude` (strategy (2): a prelude kernel rewrites the graph's kernel arguments
on the device), :mod:`~grace.pi.exec_update` (strategy (3): the instantiated graph's kernel
arguments rewritten, vendor kernels included) and :mod:`~grace.pi.report` (per-graph records
for Table 3).

Strategies (``grace.config.pi_strategy``): (1) ``"ptx"``, the Triton kernels recompiled as
above; (2) ``"prelude"``, a kernel added at the graph's root that rewrites the captured kernels'
arguments from the pointer table on the device; (3) ``"exec-update"``, the host rewrites them in
the instantiated graph before each replay. Invariants 1 to 3 are stated for strategy (1); (2)
and (3) leave every kernel as captured, find the arguments to rewrite by scanning the captured
graph (:func:`grace.pi.exec_update.scan`), and are checked against stock kernels the same way.
"""

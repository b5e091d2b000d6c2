"""The stale-output guard's path end (grace.stale_outputs.StaleOutputGuard.path_ends) split into
its per-node parts, on the fake two-node path of the session-23 training-step probe
(results/raw/probes/20261127-s23-cpu/training_step/micro.py: a forward caching 18 outputs and a
backward caching 32). Development CPU, hot loops, microseconds per call (medians).

    python results/raw/probes/20261128-s36-cpu/path_ends_parts.py
"""
import sys

sys.argv = ["micro.py", "32", "17"]
SOURCE = "results/raw/probes/20261127-s23-cpu/training_step/micro.py"
namespace: dict = {}
exec(compile(open(SOURCE).read().split("# (d)")[0], SOURCE, "exec"), namespace)

from grace import stale_outputs  # noqa: E402

F, B, med = namespace["F"], namespace["B"], namespace["med"]
print("held F", med(lambda: stale_outputs._held_indices(F)), "held B", med(lambda: stale_outputs._held_indices(B)))
print("shared F", med(lambda: stale_outputs._shared_indices(F)), "shared B",
      med(lambda: stale_outputs._shared_indices(B)))
print("note_and_swap F", med(lambda: stale_outputs._note_and_swap_held(F, [])), "B",
      med(lambda: stale_outputs._note_and_swap_held(B, [])))

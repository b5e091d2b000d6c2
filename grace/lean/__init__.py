"""Lean replay: the host path of a call that replays recorded CUDA graphs, cut to what that
call needs (:mod:`grace.lean.dispatch`; switch ``grace.config.lean_replay``)."""

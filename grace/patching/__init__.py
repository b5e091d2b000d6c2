"""Bringing GraCE's hook points into the pinned upstream sources.

``unidiff`` parses and applies the unified diffs in ``patches/``; ``series`` loads them in
order (cgct, pi, scg); ``overlay`` applies the whole series to the installed upstream files,
all or nothing, into an overlay directory that :mod:`grace._autoload` imports in their place.
The installed torch and triton files are never modified.
"""

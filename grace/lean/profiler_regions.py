"""Whether a compiled frame's pre-graph bytecode opens Dynamo's profiler region on every call.

With ``torch._dynamo.config.record_runtime_overhead`` on (its default), the bytecode Dynamo
generates for a compiled frame calls ``record_pregraph_bytecode_enter`` before it gathers the
graph's arguments and ``record_pregraph_bytecode_exit`` after: two calls through
``torch._disable_dynamo``, each with its own frame toggling and ``is_exporting`` test, on every
call of the frame, whether or not a profiler runs. They only name a region ("Pregraph bytecode")
in a profiler's trace; nothing else reads them. Under lean replay a steady call should cost what
its graph's launch needs, so GraCE leaves the two calls out of the bytecode of frames compiled
while ``grace.config.lean_replay`` is on, unless the user asked for the region: the setting set
or patched explicitly (``ConfigModule._is_default`` false), or turned on by its environment
variable. AOTAutograd's own region ("AOTDispatcher Runtime Wrapper Prologue") is kept: it costs
nothing while no profiler runs.

The answer is read when Dynamo generates a frame's bytecode (``PyCodegen``, called from
``patches/lean_replay/0004``); a frame keeps the bytecode it was compiled with.
"""

from __future__ import annotations

from typing import Any

SETTING = "record_runtime_overhead"


def pregraph_region(dynamo_config: Any) -> bool:
    """True where the pre-graph bytecode should open the profiler region: stock's
    ``dynamo_config.record_runtime_overhead``, except that with lean replay on the region is
    kept only where the user chose it."""
    if not getattr(dynamo_config, SETTING):
        return False
    from grace import config

    if not config.lean_replay:
        return True
    return not dynamo_config._is_default(SETTING)

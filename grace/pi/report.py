"""The per-run record of parameter indirection's plans (the paper's Table 3), one per graph.

Each recorded graph with placeholders gets a :class:`GraphRecord` when its capture finishes:
what PT2-CG copies per replay, what is still copied with the plan, the pointers updated per
replay, the strategy, and why each input that keeps its copy keeps it. The benchmark worker
reads the records in-process (:func:`records`) into its result rows; they are also logged
(``GRACE_LOGS=info``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from grace.option_values import PRELUDE, PTX
from grace.pi.plan import GraphPlan
from grace.run_records import RunRecords


@dataclass
class GraphRecord:
    name: str
    strategy: str
    copy_bytes_before: int  # what PT2-CG copies per replay
    copy_bytes_after: int  # what is still copied per replay, the pointer table excluded
    pointers: int  # table slots written per replay
    indirected: list[int]
    copied: dict[int, str] = field(default_factory=dict)  # input index -> why it keeps its copy

    @staticmethod
    def of(name: str, plan: GraphPlan, strategy: str = PTX) -> GraphRecord:
        return GraphRecord(name, strategy, plan.copy_bytes_before, plan.copy_bytes_after, len(plan.slots),
                           list(plan.indirected), {d.input_index: d.reason for d in plan.decisions if not d.indirect})

    @staticmethod
    def copying_all(name: str, why: str, copy_bytes: int, copied: dict[int, str] | None = None) -> GraphRecord:
        """A graph that copies every input per replay, as PT2-CG does; ``why`` fills the strategy
        column, ``copied`` the reason of each input."""
        return GraphRecord(name, why, copy_bytes, copy_bytes, 0, [], dict(copied or {}))


_RECORDS: RunRecords[GraphRecord] = RunRecords()
add = _RECORDS.add
records = _RECORDS.all
reset = _RECORDS.clear
# graphs that are not the program's (SCG's private profiling trees record candidates that are
# then shut down), which Table 3 must not count, are recorded inside ``discarded()``
discarded = _RECORDS.discarded


def summarize(recs: list[GraphRecord]) -> dict[str, Any]:
    """Table 3's columns for one run: bytes copied per replay before and after, graphs using PI."""
    return {
        "graphs": len(recs),
        "graphs_with_pi": sum(1 for r in recs if r.indirected),
        "copy_bytes_pt2_cg": sum(r.copy_bytes_before for r in recs),
        # the pointer table is copied to the device per replay; exec-update's pointers are not
        "copy_bytes_grace": sum(r.copy_bytes_after + (8 * r.pointers if r.strategy in (PTX, PRELUDE) else 0)
                                for r in recs if r.indirected)
        + sum(r.copy_bytes_before for r in recs if not r.indirected),
        "pointers_per_replay": sum(r.pointers for r in recs if r.indirected),
    }

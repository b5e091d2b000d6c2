"""Why kernels stay out of CUDA graphs: partition boundaries, skipped graphs and graph breaks,
each with its root cause and the user's source line.

Inductor already says most of it, under ``TORCH_LOGS=cudagraphs``: the scheduler logs every
graph's partitions and, for each node of a partition that cannot be graphed, the reason, the
IR node, the FX node and the user's stack trace; the tree and ``cudagraph_utils`` log every
graph skipped whole; Dynamo logs graph breaks under ``graph_breaks``; and CGCT logs each input
it made GPU-resident, or left on the CPU with the reason (``grace.cgct``), which is how a cause
that GraCE removed is still listed, as fixed. :class:`Collector` is a
logging handler that turns those records into :class:`Finding` objects while a program runs,
so nothing in torch is patched for it; :func:`classify` maps each upstream reason to one of the
root causes CGCT is about (:data:`CAUSES`), and :func:`render` prints them grouped by cause.

The collector must only be on while compiling and recording: with the ``cudagraphs`` artifact on,
the tree formats debug records on every replay.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

CAUSES = {
    "cpu-scalar": "CPU scalar operand (numpy or Python number, 0-d CPU tensor)",
    "cpu-tensor-copy": "CPU tensor copied to the GPU in forward",
    "cpu-op": "operation computed on the CPU",
    "cpu-output": "output placed on the CPU",
    "sync": ".item() / data-dependent synchronization",
    "input-mutation": "input mutated in place",
    "dynamic-shape": "dynamic or unbacked shapes",
    "rng": "RNG state operations",
    "unsafe-custom-op": "custom op marked cudagraph-unsafe",
    "control-flow": "data-dependent control flow",
    "multiple-devices": "several devices in one graph",
    "other": "other",
}

LOGGERS = ("torch._inductor.scheduler.__cudagraphs",
           "torch._inductor.cudagraph_utils.__cudagraphs",
           "torch._inductor.cudagraph_trees.__cudagraphs",
           "torch._dynamo.symbolic_convert.__graph_breaks",
           "grace.cgct")  # CGCT's own rewrites and refusals

_CREATED = re.compile(r"Created (\d+) graph partitions: (\d+) cudagraphable, (\d+) non-cudagraphable")
_PARTITION = re.compile(r"^\s*Partition (\d+): (\d+) nodes, (non-cudagraphable|cudagraphable)")
_NODE = re.compile(r"^\s*(\w+): reason=(.*?), ir=(\w+)(?:, fx=(.*))?$")
_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')
_BREAK_AT = re.compile(r"Graph break in user code at ([^\n:]+):(\d+)")
_BREAK_REASON = re.compile(r"Graph Break Reason: (.*)")
_STAGED = re.compile(r"CGCT: input (\d+) \((.*)\) made GPU-resident: (.*)")
_KEPT = re.compile(r"CGCT: input (\d+) \((.*)\) stays on the CPU: (.*)")
_SPECIALIZED = re.compile(r"CGCT: numpy scalar (.*) = (.*) specialized like a Python float")


@dataclass
class SourceLine:
    file: str
    line: int
    function: str
    code: str = ""

    def __str__(self) -> str:
        where = f"{self.file}:{self.line} in {self.function}"
        return f"{where}: {self.code}" if self.code else where


@dataclass
class Finding:
    """One thing that kept kernels out of a CUDA graph."""

    cause: str  # a key of CAUSES
    reason: str  # upstream's own words
    kind: str  # "partition", "skip" or "graph-break"
    graph: int  # index of the compiled graph (in logging order), -1 for graph breaks
    node: str = ""  # scheduler node, e.g. buf3
    ir: str = ""
    fx: str = ""
    source: SourceLine | None = None
    kept_out: int = 0  # nodes of its non-cudagraphable partition attributed to it
    fixed_by: str | None = None  # the GraCE rewrite that removed it, if one did


@dataclass
class GraphSummary:
    partitions: int
    cudagraphable: int
    non_cudagraphable: int


@dataclass
class Explanation:
    graphs: list[GraphSummary] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)


def classify(reason: str, fx: str = "") -> str:
    """The root cause behind one of Inductor's or Dynamo's reasons."""
    r, f = reason.lower(), fx.lower()
    if "item" in f or "_local_scalar_dense" in f or "item()" in r or "data-dependent" in r or "data dependent" in r:
        return "sync"
    if r == "devicecopy ops":
        return "cpu-scalar" if "cat" in f or "unbind" in f else "cpu-tensor-copy"
    if r == "cpu ops":
        if "unsqueeze" in f or "cat" in f:
            return "cpu-scalar"  # Inductor batching CPU scalars before their one device copy
        return "cpu-op"
    if "mutat" in r:
        return "input-mutation"
    if "unsafe" in r and "custom" in r:
        return "unsafe-custom-op"
    if "unbacked" in r or "dynamic shape" in r or "symint" in r:
        return "dynamic-shape"
    if "rng" in r or "generator" in r or "seed" in r:
        return "rng"
    if "conditional" in r or "control flow" in r or "cond" == r:
        return "control-flow"
    if "cpu device" in r or "non gpu" in r or "cpu tensor" in r:
        return "cpu-op"
    if "multiple devices" in r:
        return "multiple-devices"
    if "cpu" in r and "output" in r:
        return "cpu-output"
    return "other"


def user_frame(stack_lines: list[str]) -> SourceLine | None:
    """The innermost frame of an FX node's stack trace, with its code line if given."""
    found: SourceLine | None = None
    for i, line in enumerate(stack_lines):
        m = _FRAME.search(line)
        if m:
            code = stack_lines[i + 1].strip() if i + 1 < len(stack_lines) and not _FRAME.search(stack_lines[i + 1]) else ""
            found = SourceLine(m.group(1), int(m.group(2)), m.group(3), code)
    return found


class Collector(logging.Handler):
    """Builds an :class:`Explanation` from torch's cudagraphs and graph-break log records."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.explanation = Explanation()
        self._partition_nodes = 0
        self._in_bad_partition = False
        self._last: Finding | None = None
        self._partition: list[Finding] = []
        self._stack: list[str] = []
        self._seen_skips: set[str] = set()
        self._seen_rewrites: set[tuple] = set()

    # -- records --------------------------------------------------------------------------

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.feed(record.getMessage())
        except Exception:  # an explanation must never break the program it explains
            self.handleError(record)

    def feed(self, msg: str) -> None:
        if m := _CREATED.search(msg):
            self._close_node()
            self.explanation.graphs.append(GraphSummary(*map(int, m.groups())))
            return
        if m := _PARTITION.match(msg):
            self._close_node()
            self._partition = []
            self._partition_nodes = int(m.group(2))
            self._in_bad_partition = m.group(3) == "non-cudagraphable"
            return
        if self._in_bad_partition and (m := _NODE.match(msg)):
            self._close_node()
            node, reason, ir, fx = m.group(1), m.group(2), m.group(3), m.group(4) or ""
            self._last = Finding(classify(reason, fx), reason, "partition", len(self.explanation.graphs) - 1,
                                 node, ir, fx, kept_out=self._partition_nodes)
            self.explanation.findings.append(self._last)
            self._partition.append(self._last)
            if self._last.cause == "cpu-scalar":
                # The CPU kernel that packs the scalars has no FX origin of its own; it is
                # there for the same scalars as the device copy beside it.
                for f in self._partition:
                    if f.cause == "cpu-op" and not f.fx:
                        f.cause = "cpu-scalar"
            return
        if self._last is not None and msg.startswith("         "):
            self._stack.append(msg.strip())
            return
        if m := _STAGED.match(msg):
            self._close_node()
            cause = "cpu-tensor-copy" if m.group(3).startswith("mirrored") else "cpu-scalar"
            self._add_once(Finding(cause, f"{m.group(2)}: {m.group(3)}", "rewrite", len(self.explanation.graphs),
                                   fixed_by="CGCT input staging"))
            return
        if m := _SPECIALIZED.match(msg):
            self._close_node()
            self._add_once(Finding("cpu-scalar", f"{m.group(1)} = {m.group(2)}: a guarded constant, as a Python float",
                                   "rewrite", len(self.explanation.graphs), fixed_by="CGCT numpy scalar specialization"))
            return
        if m := _KEPT.match(msg):
            self._close_node()
            self._add_once(Finding("cpu-op", f"{m.group(2)} left on the CPU by CGCT: {m.group(3)}", "rewrite",
                                   len(self.explanation.graphs)))
            return
        if "skipping cudagraphs due to" in msg.lower():
            self._close_node()
            self._skip(msg)
            return
        if "Graph break" in msg or "Graph Break Reason" in msg:
            self._close_node()
            self._graph_break(msg)

    def _add_once(self, finding: Finding) -> None:
        """Dynamo may compile a frame twice (a restart); a rewrite is reported once per graph."""
        key = (finding.kind, finding.reason, finding.graph)
        if key not in self._seen_rewrites:
            self._seen_rewrites.add(key)
            self.explanation.findings.append(finding)

    def _close_node(self) -> None:
        if self._last is not None and self._stack:
            self._last.source = user_frame(self._stack)
        self._last, self._stack = None, []

    def _skip(self, msg: str) -> None:
        head, _, trace = msg.partition("Found from")
        reason = head.strip().rstrip(".")
        key = reason + trace[:200]
        if key in self._seen_skips:
            return
        self._seen_skips.add(key)
        lines = [ln for ln in trace.splitlines() if ln.strip()]
        self.explanation.findings.append(Finding(classify(reason), reason, "skip", len(self.explanation.graphs) - 1,
                                                 source=user_frame(lines)))

    def _graph_break(self, msg: str) -> None:
        reason_m = _BREAK_REASON.search(msg)
        reason = reason_m.group(1).strip() if reason_m else msg.splitlines()[0].strip()
        if reason.startswith("Encountered graph break"):  # the specific reason is the next line
            rest = [ln.strip() for ln in msg[reason_m.end():].splitlines() if ln.strip()] if reason_m else []
            reason = rest[0] if rest else reason
        msg = msg.split("User code traceback:", 1)[-1]
        at = _BREAK_AT.search(msg)
        lines = msg.splitlines()
        source = user_frame(lines) or (SourceLine(at.group(1), int(at.group(2)), "?") if at else None)
        self.explanation.findings.append(Finding(classify(reason), reason, "graph-break", -1, source=source))

    # -- installing -----------------------------------------------------------------------

    def __enter__(self) -> Collector:
        # The artifact loggers are turned up here and kept from propagating, so the records
        # reach this handler without torch also printing them.
        self._saved = []
        for name in LOGGERS:
            logger = logging.getLogger(name)
            self._saved.append((logger, logger.level, logger.propagate))
            logger.setLevel(logging.DEBUG)
            logger.propagate = False
            logger.addHandler(self)
        return self

    def __exit__(self, *exc: object) -> None:
        self._close_node()
        for logger, level, propagate in self._saved:
            logger.removeHandler(self)
            logger.setLevel(level)
            logger.propagate = propagate


def render(explanation: Explanation) -> str:
    """A report grouped by root cause, each finding with its source line and whether GraCE fixed it."""
    out: list[str] = []
    g = explanation.graphs
    if g:
        out.append(f"{len(g)} compiled graph(s): {sum(x.partitions for x in g)} partition(s), "
                   f"{sum(x.cudagraphable for x in g)} in CUDA graphs, {sum(x.non_cudagraphable for x in g)} not")
    else:
        out.append("no graph partition was logged (no GPU graph was compiled, or none was split)")
    if not explanation.findings:
        out.append("nothing kept kernels out of CUDA graphs")
        return "\n".join(out)
    by_cause: dict[str, list[Finding]] = {}
    for f in explanation.findings:
        by_cause.setdefault(f.cause, []).append(f)
    for cause, items in sorted(by_cause.items(), key=lambda kv: -len(kv[1])):
        out.append(f"\n{CAUSES[cause]} ({len(items)}):")
        for f in items:
            where = f"graph {f.graph}" if f.graph >= 0 and f.kind != "rewrite" else (
                "Dynamo" if f.kind == "graph-break" else "CGCT")
            what = f"{f.node} ({f.ir}) {f.fx}: {f.reason}" if f.node else f.reason
            fixed = f"fixed by GraCE ({f.fixed_by})" if f.fixed_by else "not fixed by GraCE"
            kept = f"; its partition keeps {f.kept_out} node(s) out of CUDA graphs" if f.kept_out else ""
            out.append(f"  - [{f.kind}, {where}] {what}{kept}; {fixed}")
            if f.source is not None:
                out.append(f"      at {f.source}")
    return "\n".join(out)


def summarize(findings: Iterable[Finding]) -> dict[str, int]:
    """Findings per cause, for result rows."""
    out: dict[str, int] = {}
    for f in findings:
        out[f.cause] = out.get(f.cause, 0) + 1
    return out


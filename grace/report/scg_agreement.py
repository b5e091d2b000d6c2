"""``python -m grace.report.scg_agreement REPORT_A REPORT_B``: do two SCG reports decide alike?

SCG's decisions should depend on the function and the machine, not on what else ran beside the
profile. Two reports of one workload (two modes of a run, or two runs) that profiled the same
generated code should then choose alike, with medians of the same size. Per generated code
(``code_sha256``; a function compiled many times, as VM's are, is one code), each report's
choice (the most frequent among its functions of that code) and the medians of the first
function of it that was profiled, not taken from the cache; which reports profiled it at all
(modes of one run share its decision cache, so a code one mode profiled first is read from the
cache by the other, which then agrees by construction); how many codes agree among those both
profiled; then how many codes, and how many functions, each report keeps out of graphs.
Diagnostic, from the report files: nothing is kept.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

from grace.report.records import format_rows

NO_GRAPH = "no-graph"


@dataclass
class Code:
    """One generated code's decisions in one report."""

    kernels: int
    choices: Counter = field(default_factory=Counter)
    medians_us: dict[str, float] = field(default_factory=dict)  # of its first profiled function
    profiled: int = 0  # its functions this report profiled (the others: cache, rule or fallback)

    @property
    def choice(self) -> str:
        return self.choices.most_common(1)[0][0]


def by_code(graphs: Sequence[dict[str, Any]]) -> dict[str, Code]:
    """A report's decisions grouped by generated code; functions without a readable code are left out."""
    codes: dict[str, Code] = {}
    for g in graphs:
        sha = g.get("code_sha256")
        if not sha:
            continue
        code = codes.setdefault(sha, Code(kernels=len(g.get("kernels") or ())))
        code.choices[g["choice"]] += 1
        if g.get("source") == "profiled":
            code.profiled += 1
            if not code.medians_us:
                code.medians_us = dict(g.get("medians_us") or {})
    return codes


def _medians(code: Optional[Code]) -> str:
    if code is None or not code.medians_us:
        return "-"
    return " ".join(f"{k} {v:,.0f}" for k, v in sorted(code.medians_us.items()))


def compare(a: dict[str, Code], b: dict[str, Code]) -> list[dict[str, Any]]:
    """One record per code in either report: its choice and medians in each, and whether they agree."""
    records = []
    for sha in sorted(set(a) | set(b), key=lambda s: -max((a.get(s) or b[s]).kernels, (b.get(s) or a[s]).kernels)):
        ca, cb = a.get(sha), b.get(sha)
        records.append({
            "code": sha[:10],
            "kernels": (ca or cb).kernels,  # type: ignore[union-attr]
            "functions": f"{sum(ca.choices.values()) if ca else 0}/{sum(cb.choices.values()) if cb else 0}",
            "first": ca.choice if ca else "-",
            "second": cb.choice if cb else "-",
            "agree": "yes" if ca and cb and ca.choice == cb.choice else ("-" if not (ca and cb) else "NO"),
            "profiled_in": _profiled_in(ca, cb),
            "first_medians_us": _medians(ca),
            "second_medians_us": _medians(cb),
        })
    return records


def _profiled_in(a: Optional[Code], b: Optional[Code]) -> str:
    first, second = bool(a and a.profiled), bool(b and b.profiled)
    return {(True, True): "both", (True, False): "first", (False, True): "second"}.get((first, second), "neither")


def kept_out(codes: dict[str, Code]) -> tuple[int, int]:
    """(codes, functions) the report keeps out of graphs."""
    return (sum(1 for c in codes.values() if c.choice == NO_GRAPH),
            sum(c.choices[NO_GRAPH] for c in codes.values()))


def load(path: Path) -> dict[str, Code]:
    try:
        report = json.loads(path.read_text())
        graphs = report["graphs"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise SystemExit(f"scg_agreement: {path} is no SCG report ({type(e).__name__}: {e})") from e
    return by_code(graphs)


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("first", type=Path,
                    help="an SCG report (results/raw/<experiment>/<run>/scg/<workload>.<mode>.json)")
    ap.add_argument("second", type=Path)
    args = ap.parse_args(argv)
    a, b = load(args.first), load(args.second)
    records = compare(a, b)
    print(format_rows(records))
    both = [r for r in records if r["agree"] != "-"]
    print(f"\n{sum(r['agree'] == 'yes' for r in both)} of {len(both)} codes in both reports decided alike")
    apart = [r for r in both if r["profiled_in"] == "both"]
    print(f"{sum(r['agree'] == 'yes' for r in apart)} of the {len(apart)} that each report profiled itself; the "
          f"other {len(both) - len(apart)} were profiled by one report or neither (a shared cache agrees by construction)")
    for name, codes in ((args.first, a), (args.second, b)):
        n_codes, n_functions = kept_out(codes)
        total = sum(sum(c.choices.values()) for c in codes.values())
        print(f"{name}: {n_codes} of {len(codes)} codes kept out of graphs, {n_functions} of {total} functions")
    return 0


if __name__ == "__main__":
    sys.exit(main())

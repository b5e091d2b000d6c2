"""``python -m grace.report figure10|figure11|scg|baseline|tables23|table2|table3|figure9|figure12|replay-map|headline|memory``: figures and tables from a run's rows.

``figure10``/``figure11`` draw the speedup figures and print the speedups. ``scg`` writes SCG's
decision tables (Table 4), the never-slower comparison and Figure 13 (compile time; pass
``--second-run-id`` for a run that reused the first run's decision cache). ``baseline`` writes
``baseline_pt2.csv`` (stock PT2 on every workload: times, compile times, graphs, skip reasons)
and its figure. ``tables23`` writes Table 2 (share of kernels in CUDA graphs, from rows of a run
made with ``--coverage``) and Table 3 (bytes copied per replay with and without PI), each row
naming its run; ``--also`` adds later runs' rows, which replace the first run's; ``table2`` and
``table3`` write one of them, from the runs of the artifact's scripts of those names. ``figure9``
draws per-iteration time against the number of indirected parameters (``--workloads figure9``).
``replay-map`` splits a steady-state call's host time by layer, beside its device time, from a
run made with ``--layers --gpu-time`` (``replay_map.csv``, ``replay_overhead.csv`` and
``figures/replay_overhead.png``). ``headline`` writes the README's table of a single-GPU run:
PT2-NoCG, PT2-CG and GraCE per workload, GraCE's ratios and geomean (``headline.csv``,
``headline.md``). ``memory`` writes GraCE's device memory against PT2-CG's per workload, a timed
iteration's peak plus the graph pools (``memory.csv``, ``memory.md``).

Exit status 2, with one line on stderr, when there is no run to draw from (or no matplotlib),
so that ``make figures`` before ``make experiments`` says what to do instead of a traceback.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from types import ModuleType
from typing import Sequence

from grace.log import get_logger
from grace.paths import FIGURES_DIR, RESULTS_DIR, TABLES_DIR

FIGURES = ("figure10", "figure11", "scg", "baseline", "tables23", "table2", "table3", "figure9", "figure12",
           "replay-map", "headline", "memory")
# The tables each of tables23, table2 and table3 writes, by file name in --tables-dir.
TABLE_FILES = {"table2": "table2_cgct_coverage.csv", "table3": "table3_pi_copy_debug.csv"}
TABLES_OF = {"tables23": ("table2", "table3"), "table2": ("table2",), "table3": ("table3",)}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m grace.report", description=__doc__.splitlines()[0])
    p.add_argument("figure", choices=FIGURES)
    p.add_argument("--experiment", default="single_gpu",
                   help="results/raw/<experiment>/ (default: %(default)s)")
    p.add_argument("--run-id", default=None, help="default: the run latest.txt names")
    p.add_argument("--results-dir", type=Path, default=RESULTS_DIR,
                   help="holds raw/ (input) and processed/ (csv output); default: %(default)s")
    p.add_argument("--figures-dir", type=Path, default=FIGURES_DIR, help="default: %(default)s")
    p.add_argument("--processed-dir", type=Path, default=None,
                   help="csv output; default: <results-dir>/processed")
    p.add_argument("--tables-dir", type=Path, default=TABLES_DIR, help="scg: default %(default)s")
    p.add_argument("--workloads", default=None,
                   help="baseline: the run's --workloads (a config name or path, or names); listed "
                        "workloads without rows get 'not run' rows")
    p.add_argument("--also", action="append", default=[], metavar="EXPERIMENT/RUN_ID",
                   help="tables23: rows of a further run, read after the first run's, so that its "
                        "rows for a workload and mode replace the first run's (repeatable)")
    p.add_argument("--second-run-id", default=None,
                   help="scg: a run of the same experiment that reused the first run's SCG cache")
    return p.parse_args(argv)


def import_figures() -> ModuleType:
    """grace.report.figures, or a one-line reason (matplotlib missing from this interpreter)."""
    try:
        from grace.report import figures
    except ModuleNotFoundError as e:
        print(f"grace.report: {e.name} is not installed for {sys.executable}; "
              "run `make setup` or set PYTHON to an interpreter that has it", file=sys.stderr)
        raise SystemExit(2) from None
    return figures


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    get_logger("grace.report")  # configures the grace logger (GRACE_LOGS=info to see more)
    figures = import_figures()
    try:
        rows = figures.load_run(args.experiment, args.run_id, args.results_dir)
    except figures.ReportError as e:
        print(f"grace.report: {e}", file=sys.stderr)
        return 2
    if args.figure == "baseline":
        return baseline_report(rows, args)
    if args.figure == "figure9":
        from grace.report import figure9
        from grace.report import records as records_io

        recs = figure9.records(rows)
        if not recs:
            print("grace.report: no micro-ptr-K rows in this run (run the bench with --workloads figure9)",
                  file=sys.stderr)
            return 2
        print(f"wrote {records_io.write_csv((args.processed_dir or args.results_dir / 'processed') / 'figure9.csv', recs)}")
        for path in figure9.draw(recs, args.figures_dir):
            print(f"wrote {path}")
        print(records_io.format_rows(recs))
        return 0
    if args.figure == "figure12":
        from grace.report import figure12
        from grace.report import records as records_io

        recs = figure12.records(rows)
        path = (args.processed_dir or args.results_dir / "processed") / "figure12.csv"
        print(f"wrote {records_io.write_csv(path, [{k: r[k] for k in figure12.COLUMNS} for r in recs])}")
        for out in figure12.draw(recs, args.figures_dir):
            print(f"wrote {out}")
        print(records_io.format_rows(recs))
        return 0
    if args.figure == "replay-map":
        return replay_map_report(rows, args)
    if args.figure == "headline":
        return headline_report(rows, args)
    if args.figure == "memory":
        return memory_report(rows, args)
    if args.figure in TABLES_OF:
        try:
            for spec in args.also:
                experiment, sep, run_id = spec.partition("/")
                if not (sep and experiment and run_id):
                    raise figures.ReportError(f"--also {spec!r}: expected EXPERIMENT/RUN_ID")
                rows = rows + figures.load_run(experiment, run_id, args.results_dir)
        except figures.ReportError as e:
            print(f"grace.report: {e}", file=sys.stderr)
            return 2
        return tables_report(rows, args, TABLES_OF[args.figure])
    if args.figure == "scg":
        second = figures.load_run(args.experiment, args.second_run_id, args.results_dir) if args.second_run_id else None
        return scg_report(rows, second, args)
    draw = figures.figure10 if args.figure == "figure10" else figures.figure11
    modes = (figures.FIG10_MODES if args.figure == "figure10"
             else {figures.PT2_CG: "PT2-CG", **figures.FIG11_MODES})
    for path in draw(rows, args.figures_dir, args.processed_dir or args.results_dir / "processed"):
        print(f"wrote {path}")
    print()
    print(f"speedup over PT2-NoCG ({rows[0].get('experiment', '?')}, run {rows[0].get('run_id', '?')}):")
    if args.figure == "figure10":
        print(figures.speedup_table(rows, modes))
    else:
        print(figures.speedup_table(figures.figure11_rows(rows), modes, common_over=figures.FIG11_MODES))
    return 0


def replay_map_report(rows: list[dict], args: argparse.Namespace) -> int:
    from grace.report import records as records_io
    from grace.report import replay_map, replay_targets

    recs = replay_map.records(rows)
    if not recs:
        print("grace.report: no row of this run has layers (run the bench with --layers --gpu-time: "
              "scripts/run_replay_map.sh)", file=sys.stderr)
        return 2
    processed = args.processed_dir or args.results_dir / "processed"
    print(f"wrote {records_io.write_csv(processed / 'replay_map.csv', recs)}")
    print(f"wrote {records_io.write_csv(processed / 'replay_overhead.csv', replay_map.overhead(recs))}")
    table = processed / "replay_overhead.md"  # the README's host-path table
    table.write_text(replay_map.markdown(recs, str(rows[0].get("run_id", "?"))))
    print(f"wrote {table}")
    for path in replay_map.draw(recs, args.figures_dir):
        print(f"wrote {path}")
    print(records_io.format_rows(recs))
    verdicts = replay_targets.judge(rows)
    print(f"wrote {records_io.write_csv(processed / 'replay_targets.csv', verdicts)}")
    print("the lean replay path's targets (grace.report.replay_targets; over: measured / bound):")
    print(records_io.format_rows(verdicts))
    return 0


def headline_report(rows: list[dict], args: argparse.Namespace) -> int:
    from grace.report import headline

    recs = headline.records(rows)
    if len(recs) < 2:
        print("grace.report: no workload of this run has PT2-CG or GraCE rows "
              "(scripts/run_single_gpu_experiments.sh)", file=sys.stderr)
        return 2
    table = headline.markdown(recs, str(rows[0].get("run_id", "?")), headline.one_gpu_hours(rows))
    return write_table(args, "headline", recs, table)


def memory_report(rows: list[dict], args: argparse.Namespace) -> int:
    from grace.report import memory

    recs = memory.records(rows)
    if not recs:
        print("grace.report: no workload of this run has GraCE and PT2-CG rows with their memory "
              "(scripts/run_single_gpu_experiments.sh on a GPU)", file=sys.stderr)
        return 2
    return write_table(args, "memory", recs, memory.markdown(recs, str(rows[0].get("run_id", "?"))))


def write_table(args: argparse.Namespace, name: str, recs: list[dict], table: str) -> int:
    """``recs`` as ``<name>.csv`` and ``table`` as ``<name>.md`` in the processed directory; the
    table printed."""
    from grace.report import records as records_io

    processed = args.processed_dir or args.results_dir / "processed"
    print(f"wrote {records_io.write_csv(processed / f'{name}.csv', recs)}")
    (processed / f"{name}.md").write_text(table)
    print(f"wrote {processed / f'{name}.md'}")
    print(table)
    return 0


def baseline_report(rows: list[dict], args: argparse.Namespace) -> int:
    from grace.report import baseline
    from grace.report import records as records_io

    processed = args.processed_dir or args.results_dir / "processed"
    planned = []
    if args.workloads:
        from grace.bench.configs import ConfigError, resolve

        try:
            planned = baseline.planned(resolve(args.workloads))
        except ConfigError as e:
            print(f"grace.report: --workloads: {e}", file=sys.stderr)
            return 2
    records = baseline.baseline_records(rows, planned)
    print(f"wrote {records_io.write_csv(processed / 'baseline_pt2.csv', records)}")
    for path in baseline.draw(rows, args.figures_dir):
        print(f"wrote {path}")
    columns = ("workload", "kind", "batch_size", "eager_median_us", "pt2_nocg_median_us",
               "pt2_cg_median_us", "cg_over_nocg", "pt2_nocg_compile_s", "pt2_cg_compile_s",
               "cuda_graphs", "pt2_cg_status")
    print(records_io.format_rows([{k: r[k] for k in columns} for r in records]))
    print(f"geomean PT2-CG over PT2-NoCG: {baseline.geomean_record(rows)}")
    return 0


def scg_report(rows: list[dict], second: list[dict] | None, args: argparse.Namespace) -> int:
    from grace.report import records as records_io
    from grace.report import scg

    processed = args.processed_dir or args.results_dir / "processed"
    outputs = {
        args.tables_dir / "table4_scg.csv": scg.table4(rows),
        args.tables_dir / "scg_decisions.csv": scg.decisions(rows),
        processed / "scg_never_slower.csv": scg.never_slower(rows),
        processed / "figure13.csv": scg.compile_overhead(rows, second),
    }
    for path, records in outputs.items():
        print(f"wrote {records_io.write_csv(path, records)}")
        print(records_io.format_rows(records))
        print()
    compile_records = outputs[processed / "figure13.csv"]
    if compile_records:
        for path in scg.draw_figure13(compile_records, args.figures_dir):
            print(f"wrote {path}")
    return 0


def tables_report(rows: list[dict], args: argparse.Namespace, tables: Sequence[str]) -> int:
    """Tables 2 and/or 3 from the rows, each to its file in ``args.tables_dir``."""
    from grace.report import cgct_pi
    from grace.report import records as records_io

    build = {"table2": cgct_pi.table2, "table3": cgct_pi.table3}
    for table in tables:
        path, records = args.tables_dir / TABLE_FILES[table], build[table](rows)
        if not records:
            print(f"grace.report: no rows for {path.name} in this run "
                  f"({'run the bench with --coverage N' if table == 'table2' else 'no graph used PI'})")
            continue
        print(f"wrote {records_io.write_csv(path, records)}")
        print(records_io.format_rows(records))
        print()
    return 0

if __name__ == "__main__":
    sys.exit(main())

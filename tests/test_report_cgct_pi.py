"""Tables 2 and 3 from synthetic bench rows (the shapes the worker writes)."""

from __future__ import annotations

from pathlib import Path

from grace.report.cgct_pi import table2, table3


def _row(mode: str, **extra: object) -> dict:
    return {"workload": "micro-eos", "mode": mode, "status": "ok", **extra}


def test_table2_takes_coverage_of_graph_modes_only() -> None:
    cov = {"iterations": 3, "kernels": 30, "in_graphs": 27, "unlinked": 0, "share": 0.9}
    rows = [_row("pt2-nocg", coverage=cov), _row("pt2-cg", coverage=cov), _row("grace-cgct", coverage=None)]
    (rec,) = table2(rows)
    assert rec["mode"] == "pt2-cg" and rec["share_in_graphs"] == 0.9 and rec["kernels"] == 30


def test_table3_reports_bytes_before_and_after_and_graphs_with_pi() -> None:
    summary = {"graphs": 2, "graphs_with_pi": 1, "copy_bytes_pt2_cg": 4096, "copy_bytes_grace": 1040,
               "pointers_per_replay": 2}
    graphs = [{"strategy": "ptx", "indirected": [0, 1]},
              {"strategy": "none (its warm-up showed random numbers)", "indirected": []}]
    rows = [_row("pt2-cg", pi=None, peak_replay_mem_bytes=9000, graph_pool_bytes=2 << 20),
            _row("grace-cgct-pi", pi={"summary": summary, "graphs": graphs}, peak_replay_mem_bytes=8000,
                 graph_pool_bytes=1 << 20)]
    (rec,) = table3(rows)
    assert rec == {"workload": "micro-eos", "mode": "grace-cgct-pi", "status": "ok", "graphs": 2,
                   "graphs_with_pi": 1, "pi_strategies": "copies:1 ptx:1", "copy_bytes_pt2_cg": 4096, "copy_bytes_grace": 1040,
                   "pointers_per_replay": 2, "peak_mem_bytes": 8000, "peak_mem_bytes_pt2_cg": 9000,
                   "graph_pool_bytes": 1 << 20, "graph_pool_bytes_pt2_cg": 2 << 20, "run_id": None}


def test_table2_gives_the_compile_time_a_mode_adds_to_pt2_cg_at_its_latest_row() -> None:
    cov = {"iterations": 3, "kernels": 30, "in_graphs": 30, "unlinked": 0, "share": 1.0}
    rows = [_row("pt2-cg", coverage=cov, compile_s=10.0), _row("grace-cgct", coverage=cov, compile_s=99.0),
            _row("grace-cgct", coverage=cov, compile_s=12.5)]  # a retry: the last row counts
    by_mode = {r["mode"]: r for r in table2(rows)}
    assert by_mode["grace-cgct"]["compile_s_over_pt2_cg"] == 2.5
    assert by_mode["pt2-cg"]["compile_s_over_pt2_cg"] == 0.0
    assert len(table2(rows)) == 2


def test_graph_pool_bytes_counts_private_pool_segments_only(monkeypatch) -> None:
    import torch

    from grace import trees

    snapshot = [{"total_size": 2 << 20, "segment_pool_id": (0, 0)},  # the default pool
                {"total_size": 20 << 20, "segment_pool_id": (0, 1)},  # a graph pool
                {"total_size": 4 << 20, "segment_pool_id": (0, 2)}]
    monkeypatch.setattr(torch.cuda, "memory_snapshot", lambda: snapshot)
    assert trees.graph_pool_bytes() == 24 << 20


def _write_run(results: Path, experiment: str, run_id: str, rows: list[dict]) -> None:
    import json

    run = results / "raw" / experiment / run_id
    run.mkdir(parents=True)
    (run / "rows.jsonl").write_text("".join(json.dumps({**r, "run_id": run_id}) + "\n" for r in rows))


def test_tables23_also_reads_later_runs_whose_rows_replace_the_first_runs(tmp_path, capsys) -> None:
    import csv

    from grace.report.__main__ import main

    summary = {"graphs": 1, "graphs_with_pi": 0, "copy_bytes_pt2_cg": 64, "copy_bytes_grace": 64,
               "pointers_per_replay": 0}
    results = tmp_path / "results"
    _write_run(results, "tables23", "first", [
        {**_row("grace-cgct-pi", pi={"summary": summary}), "workload": "EOS"},
        {**_row("grace-cgct-pi-exec", pi={"summary": summary}), "workload": "DR-I"}])
    _write_run(results, "gpu_checks", "later", [
        {**_row("pt2-cg", pi=None, peak_replay_mem_bytes=7), "workload": "EOS"},
        {**_row("pt2-cg", pi=None, peak_replay_mem_bytes=9), "workload": "DR-I"},
        {**_row("grace-cgct-pi-exec", pi={"summary": {**summary, "graphs_with_pi": 1, "copy_bytes_grace": 0}}),
         "workload": "DR-I"}])
    tables = tmp_path / "tables"
    assert main(["tables23", "--experiment", "tables23", "--run-id", "first", "--also", "gpu_checks/later",
                 "--results-dir", str(results), "--tables-dir", str(tables)]) == 0
    with open(tables / "table3_pi_copy_debug.csv") as f:
        by_workload = {r["workload"]: r for r in csv.DictReader(f)}
    assert by_workload["EOS"]["run_id"] == "first" and by_workload["EOS"]["peak_mem_bytes_pt2_cg"] == ""
    assert by_workload["DR-I"]["run_id"] == "later" and by_workload["DR-I"]["copy_bytes_grace"] == "0"
    assert by_workload["DR-I"]["peak_mem_bytes_pt2_cg"] == "9"  # PT2-CG of its own run only
    capsys.readouterr()
    assert main(["tables23", "--experiment", "tables23", "--run-id", "first", "--also", "later",
                 "--results-dir", str(results), "--tables-dir", str(tables)]) == 2
    assert "expected EXPERIMENT/RUN_ID" in capsys.readouterr().err
    assert main(["tables23", "--experiment", "tables23", "--run-id", "first", "--also", "gpu_checks/none",
                 "--results-dir", str(results), "--tables-dir", str(tables)]) == 2


def test_the_artifacts_table2_and_table3_reports_write_their_own_table_only(tmp_path, capsys) -> None:
    from grace.report.__main__ import main

    summary = {"graphs": 1, "graphs_with_pi": 1, "copy_bytes_pt2_cg": 64, "copy_bytes_grace": 0,
               "pointers_per_replay": 1}
    results, tables = tmp_path / "results", tmp_path / "tables"
    _write_run(results, "table3", "r", [{**_row("pt2-cg", pi=None), "workload": "EOS"},
                                        {**_row("grace-cgct-pi", pi={"summary": summary}), "workload": "EOS"}])
    assert main(["table3", "--experiment", "table3", "--run-id", "r",
                 "--results-dir", str(results), "--tables-dir", str(tables)]) == 0
    assert sorted(p.name for p in tables.iterdir()) == ["table3_pi_copy_debug.csv"]
    assert main(["table2", "--experiment", "table3", "--run-id", "r",
                 "--results-dir", str(results), "--tables-dir", str(tables)]) == 0
    assert "no rows for table2_cgct_coverage.csv" in capsys.readouterr().out, "no coverage in a Table 3 run"
    assert sorted(p.name for p in tables.iterdir()) == ["table3_pi_copy_debug.csv"]


def test_release_cached_memory_reports_what_empty_cache_gave_back(monkeypatch) -> None:
    import torch

    from grace import trees

    reserved = [5 << 20]
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device=None: reserved[0])
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: reserved.__setitem__(0, 2 << 20))
    assert trees.release_cached_memory(0) == 3 << 20


def test_the_committed_table3_is_drawn_again_from_the_runs_its_config_lists(tmp_path: Path) -> None:
    """``tables/table3_pi_copy_debug.csv`` is what ``configs/table3_runs.txt``'s runs give, byte
    for byte: no row of it is edited by hand or left from a run the list does not name."""
    import os
    import subprocess

    repo = Path(__file__).resolve().parent.parent
    subprocess.run(["bash", "scripts/generate_table3_pi_copy_debug.sh", "--tables-dir", str(tmp_path),
                    "--processed-dir", str(tmp_path)], cwd=repo, check=True, capture_output=True,
                   env={**os.environ, "RUNS": "configs/table3_runs.txt"})
    drawn = (tmp_path / "table3_pi_copy_debug.csv").read_bytes()
    assert drawn == (repo / "tables" / "table3_pi_copy_debug.csv").read_bytes()


def test_table3_refuses_a_runs_file_that_lists_no_run(tmp_path: Path) -> None:
    import os
    import subprocess

    repo = Path(__file__).resolve().parent.parent
    empty = tmp_path / "runs.txt"
    empty.write_text("# nothing yet\n")
    done = subprocess.run(["bash", "scripts/generate_table3_pi_copy_debug.sh", "--tables-dir", str(tmp_path)],
                          cwd=repo, capture_output=True, text=True, env={**os.environ, "RUNS": str(empty)})
    assert done.returncode == 2 and "lists no run" in done.stderr

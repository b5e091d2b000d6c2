"""grace.run_records: the per-process records PI and SCG keep for the benchmark's rows."""

from __future__ import annotations

import pytest

from grace.run_records import RunRecords


def test_records_come_back_in_order_as_a_copy() -> None:
    log: RunRecords[int] = RunRecords()
    log.add(1)
    log.add(2)
    held = log.all()
    log.add(3)
    assert held == [1, 2] and log.all() == [1, 2, 3] and len(log) == 3
    log.clear()
    assert log.all() == [] and held == [1, 2]


def test_records_made_inside_discarded_are_dropped_even_on_an_error() -> None:
    log: RunRecords[str] = RunRecords()
    log.add("program")
    with log.discarded():
        log.add("profiling tree")
    assert log.all() == ["program"]
    with pytest.raises(RuntimeError), log.discarded():
        log.add("profiling tree")
        raise RuntimeError("a profile failed")
    assert log.all() == ["program"]

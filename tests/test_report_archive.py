"""Raw runs packed into one archive each read back byte for byte (grace.report.archive)."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from grace.report import archive, upstream


def _run(root: Path, name: str = "20990101-u") -> Path:
    run = root / name
    (run / "stock").mkdir(parents=True)
    (run / "stock" / "pytest-00.log").write_text("test_cudagraph_trees.py::CudaGraphTreeTests::test_a PASSED\n")
    (run / "stock" / "notes.bin").write_bytes(b"\x00\xff" * 100)
    (run / "scg" / "scg-cache-00").mkdir(parents=True)
    (run / "scg" / "scg-cache-00" / "d.json").write_bytes(bytes(range(256)))
    return run


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRACE_CACHE_DIR", str(tmp_path / "cache"))


def test_pack_removes_the_folder_and_resolve_reads_the_same_bytes(tmp_path: Path) -> None:
    root = tmp_path / "upstream_cudagraph_trees"
    run = _run(root)
    before = {p.relative_to(run): p.read_bytes() for p in run.rglob("*") if p.is_file()}
    target = archive.pack(run)
    assert target == root / "20990101-u.tar.xz" and target.is_file()
    assert not run.exists()
    found = archive.resolve(root, "20990101-u")
    assert found is not None and found.name == "20990101-u" and not found.is_relative_to(root)
    assert {p.relative_to(found): p.read_bytes() for p in found.rglob("*") if p.is_file()} == before


def test_pack_is_reproducible(tmp_path: Path) -> None:
    first = archive.pack(_run(tmp_path / "a"))
    second = archive.pack(_run(tmp_path / "b"))
    assert first.read_bytes() == second.read_bytes()


def test_resolve_prefers_the_folder_and_knows_a_missing_run(tmp_path: Path) -> None:
    run = _run(tmp_path)
    assert archive.resolve(tmp_path, run.name) == run
    assert archive.resolve(tmp_path, "no-such-run") is None


def test_pack_refuses_an_existing_archive_and_a_link(tmp_path: Path) -> None:
    run = _run(tmp_path)
    archive.archive_path(run).write_bytes(b"")
    with pytest.raises(FileExistsError):
        archive.pack(run)
    archive.archive_path(run).unlink()
    (run / "link").symlink_to(run / "stock" / "notes.bin")
    with pytest.raises(ValueError, match="not plain files"):
        archive.pack(run)
    assert (run / "stock" / "notes.bin").is_file()  # nothing removed


def test_an_archive_reaching_outside_its_run_is_refused(tmp_path: Path) -> None:
    with tarfile.open(tmp_path / "evil.tar.xz", "w:xz") as tar:
        data = b"x"
        info = tarfile.TarInfo("other/escape.txt")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    with pytest.raises(ValueError, match="outside evil/"):
        archive.resolve(tmp_path, "evil")
    assert not (tmp_path / "other").exists()


def test_the_upstream_report_reads_an_archived_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "raw" / upstream.EXPERIMENT
    archive.pack(_run(root))
    assert upstream.main(["--run-id", "20990101-u", "--results-dir", str(tmp_path)]) == 0
    assert "stock,1,0,0,0" in capsys.readouterr().out
    assert (tmp_path / "processed" / "upstream_cudagraph_trees_differ.md").read_text().count("`20990101-u`") == 1


def test_the_command_line_packs_and_reports_a_missing_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _run(tmp_path)
    assert archive.main(["pack", str(run)]) == 0
    assert "MB in" in capsys.readouterr().out
    assert archive.main(["path", str(tmp_path), "nothing"]) == 2
    assert "no run nothing" in capsys.readouterr().err


def test_restore_brings_the_folder_back_byte_for_byte_and_removes_the_archive(tmp_path: Path) -> None:
    run = _run(tmp_path)
    before = {p.relative_to(run): p.read_bytes() for p in run.rglob("*") if p.is_file()}
    archive.pack(run)
    assert archive.restore(run) == run
    assert not archive.archive_path(run).exists()
    assert {p.relative_to(run): p.read_bytes() for p in run.rglob("*") if p.is_file()} == before


def test_restore_refuses_a_run_in_both_forms_or_in_neither(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _run(tmp_path)
    archive.pack(run)
    run.mkdir()
    with pytest.raises(FileExistsError, match="not both"):
        archive.restore(run)
    run.rmdir()
    assert archive.main(["restore", str(tmp_path / "nothing")]) == 1
    assert "no such archive" in capsys.readouterr().err
    assert archive.main(["restore", str(run)]) == 0 and run.is_dir()

"""Finished raw runs kept as one compressed file each, and read back as folders.

A run of PyTorch's CUDA graph trees tests leaves about a thousand small files (per-shard logs,
JUnit files, rechecks, SCG reports and decision caches) under
``results/raw/<experiment>/<run>/``. Kept as folders, a dozen runs outweigh the rest of the
checkout, which must stay small enough to clone quickly and to travel to a GPU machine. A run
no later run resumes is therefore packed into ``<run>.tar.xz`` beside where its folder was:
every byte stays committed, unchanged, and the reports read it as if it were still a folder.

- :func:`pack` writes the archive reproducibly (sorted members, no owners, no times), checks
  that it reads back to the folder's exact bytes, and only then removes the folder.
- :func:`resolve` is what readers call: the folder when it is there, else the archive unpacked
  once into GraCE's cache (``grace.paths.cache_dir()/runs``), keyed by the archive's digest so a
  replaced archive is unpacked again; ``None`` when the run is in neither form.
- :func:`restore` turns an archive back into its folder, for a run that goes on (a sweep resumed
  by a later call appends to its folder).

Archives unpack with the ``data`` filter: no absolute paths, no member outside the run's folder,
no links out of it, no device files.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Sequence

from grace.paths import cache_dir

SUFFIX = ".tar.xz"


def archive_path(run: Path) -> Path:
    """Where the archive of the run folder ``run`` lives."""
    return run.with_name(run.name + SUFFIX)


def _files(run: Path) -> list[Path]:
    return sorted(p for p in run.rglob("*") if p.is_file() and not p.is_symlink())


def _member(run: Path, path: Path) -> tarfile.TarInfo:
    info = tarfile.TarInfo(f"{run.name}/{path.relative_to(run).as_posix()}")
    info.size = path.stat().st_size
    info.mode = 0o644
    info.mtime = 0
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def pack(run: Path) -> Path:
    """Pack the folder ``run`` into its archive, verify it, then remove the folder.

    Only regular files are kept (a run holds no links or empty folders that matter); a run
    holding anything else is refused rather than packed with a loss.
    """
    if not run.is_dir():
        raise FileNotFoundError(f"{run}: no such run folder")
    target = archive_path(run)
    if target.exists():
        raise FileExistsError(f"{target} exists already; remove it or the folder, not both")
    odd = [p for p in run.rglob("*") if not (p.is_dir() or (p.is_file() and not p.is_symlink()))]
    if odd:
        raise ValueError(f"{run}: holds {len(odd)} entries that are not plain files (first {odd[0]}); not packed")
    files = _files(run)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=SUFFIX, dir=run.parent)
    os.close(fd)
    try:
        with tarfile.open(tmp, "w:xz", preset=9, format=tarfile.PAX_FORMAT) as tar:
            for path in files:
                with path.open("rb") as f:
                    tar.addfile(_member(run, path), f)
        _verify(Path(tmp), run, files)
        os.replace(tmp, target)
    except BaseException:
        os.unlink(tmp)
        raise
    shutil.rmtree(run)
    return target


def _verify(archive: Path, run: Path, files: list[Path]) -> None:
    with tarfile.open(archive, "r:xz") as tar:
        members = {m.name: m for m in tar.getmembers()}
        for path in files:
            name = f"{run.name}/{path.relative_to(run).as_posix()}"
            extracted = tar.extractfile(members[name]) if name in members else None
            if extracted is None or extracted.read() != path.read_bytes():
                raise RuntimeError(f"{archive}: {name} does not read back as written; the folder is kept")
        if len(members) != len(files):
            raise RuntimeError(f"{archive}: {len(members)} members for {len(files)} files; the folder is kept")


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:16]


def _extract(archive: Path, run_id: str, into: Path) -> None:
    """Unpack ``archive`` as ``into/run_id``, through a staging folder beside it, so that a
    failed unpack leaves nothing half-written there."""
    into.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".tmp-", dir=into))
    try:
        with tarfile.open(archive, "r:xz") as tar:
            outside = [m.name for m in tar.getmembers() if m.name.split("/", 1)[0] != run_id]
            if outside:
                raise ValueError(f"{archive}: member {outside[0]!r} lies outside {run_id}/")
            tar.extractall(staging, filter="data")
        os.replace(staging / run_id, into / run_id)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def resolve(root: Path, run_id: str) -> Path | None:
    """The folder of run ``run_id`` under ``root``: as committed, or unpacked from its archive."""
    folder = root / run_id
    if folder.is_dir():
        return folder
    archive = archive_path(folder)
    if not archive.is_file():
        return None
    unpacked = cache_dir() / "runs" / root.name / _digest(archive)
    if not (unpacked / run_id).is_dir():
        _extract(archive, run_id, unpacked)
    return unpacked / run_id


def restore(run: Path) -> Path:
    """Unpack the archive of the run folder ``run`` back into that folder and remove the archive."""
    archive = archive_path(run)
    if run.exists():
        raise FileExistsError(f"{run} exists already; remove it or {archive.name}, not both")
    if not archive.is_file():
        raise FileNotFoundError(f"{archive}: no such archive")
    _extract(archive, run.name, run.parent)
    archive.unlink()
    return run


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m grace.report.archive", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    one = sub.add_parser("pack", help="pack finished run folders into <run>.tar.xz and remove the folders")
    one.add_argument("runs", nargs="+", type=Path, metavar="RUN_FOLDER")
    two = sub.add_parser("path", help="print where a run reads from, unpacking its archive if need be")
    two.add_argument("root", type=Path, metavar="EXPERIMENT_FOLDER")
    two.add_argument("run_id")
    three = sub.add_parser("restore", help="unpack <run>.tar.xz back into its folder, for a run that goes on")
    three.add_argument("runs", nargs="+", type=Path, metavar="RUN_FOLDER")
    args = p.parse_args(argv)
    if args.command == "path":
        found = resolve(args.root, args.run_id)
        if found is None:
            print(f"grace.report.archive: no run {args.run_id} under {args.root} (folder or {SUFFIX})", file=sys.stderr)
            return 2
        print(found)
        return 0
    status = 0
    if args.command == "restore":
        for run in args.runs:
            try:
                print(f"{restore(run)}: restored from {archive_path(run).name}")
            except (OSError, ValueError, tarfile.TarError) as e:
                print(f"grace.report.archive: {e}", file=sys.stderr)
                status = 1
        return status
    for run in args.runs:
        try:
            before = sum(p.stat().st_size for p in _files(run)) if run.is_dir() else 0
            target = pack(run)
        except (OSError, ValueError, RuntimeError) as e:
            print(f"grace.report.archive: {e}", file=sys.stderr)
            status = 1
            continue
        print(f"{target}: {before / 1e6:.1f} MB in {target.stat().st_size / 1e6:.2f} MB")
    return status


if __name__ == "__main__":
    raise SystemExit(main())

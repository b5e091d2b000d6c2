"""The core a benchmark's timing threads run on, one per benchmark on a host.

A worker pins the thread that times its samples to one core (``--pin-cpu``), so that samples
do not migrate between cores mid-call. With ``--pin-cpu auto`` two benchmarks started side by
side on one host (one per GPU of a multi-GPU machine, or a smoke test beside a run) must not pick
the same core, or each times its calls while the other's timing thread takes turns on it. Each
benchmark therefore claims its core with an exclusive ``flock`` on a file per core in a
host-wide folder, and holds the lock for its lifetime; the kernel drops it when the process
ends, however it ends, so no claim outlives its benchmark.
"""

from __future__ import annotations

import fcntl
import logging
import os
import tempfile
from pathlib import Path
from typing import IO

log = logging.getLogger(__name__)

LOCK_DIR = Path(tempfile.gettempdir()) / "grace-bench-timing-cores"


class CoreClaim:
    """A core this process times on, and the lock that keeps other benchmarks off it."""

    def __init__(self, core: int, lock: IO[bytes] | None) -> None:
        self.core = core
        self.lock = lock  # open while the claim holds; None where no lock could be taken

    def release(self) -> None:
        if self.lock is not None:
            self.lock.close()
            self.lock = None


def _lock(core: int, lock_dir: Path) -> IO[bytes] | None:
    """``core``'s claim, locked for this process; None where another process holds it."""
    lock = open(lock_dir / f"core{core}.lock", "ab")
    try:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        lock.close()
        return None
    return lock


def _lock_dir(lock_dir: Path | None, core: int) -> Path | None:
    """The host-wide folder of claims, made if need be; None (logged) where it cannot be."""
    lock_dir = lock_dir or LOCK_DIR
    try:
        lock_dir.mkdir(mode=0o777, parents=True, exist_ok=True)
    except OSError as e:
        log.warning("timing core %d taken without a claim (%s): another benchmark may time on it", core, e)
        return None
    return lock_dir


def claim(allowed: list[int], lock_dir: Path | None = None) -> CoreClaim:
    """The last core of ``allowed`` that no other benchmark on this host holds, claimed.

    Where every core is held (more benchmarks than cores), or the folder cannot be written, it
    returns the last core without a lock and logs why: timings may then share a core, and the
    log says so."""
    if not allowed:
        raise ValueError("no core is allowed to this process")
    folder = _lock_dir(lock_dir, allowed[-1])
    if folder is None:
        return CoreClaim(allowed[-1], None)
    for core in reversed(allowed):
        try:
            lock = _lock(core, folder)
        except OSError:
            continue
        if lock is not None:
            return CoreClaim(core, lock)
    log.warning("every allowed core (%d) is held by another benchmark on this host; timing on core %d, shared",
                len(allowed), allowed[-1])
    return CoreClaim(allowed[-1], None)


def hold(core: int, lock_dir: Path | None = None) -> CoreClaim:
    """``core``, as the user named it (``--pin-cpu N``), claimed where no other benchmark holds it,
    so that an ``auto`` benchmark started beside it picks another; where one does, it is taken
    anyway, shared, and the log says so."""
    folder = _lock_dir(lock_dir, core)
    try:
        lock = _lock(core, folder) if folder is not None else None
    except OSError as e:
        log.warning("timing core %d taken without a claim (%s): another benchmark may time on it", core, e)
        return CoreClaim(core, None)
    if lock is None and folder is not None:
        log.warning("timing core %d, as asked, is held by another benchmark on this host: shared", core)
    return CoreClaim(core, lock)


def allowed_cores() -> list[int]:
    """The cores this process may run on, in order (empty where the platform cannot say)."""
    return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []

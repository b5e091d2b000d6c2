"""Where a run's rows go, and what every row says about the machine and the command.

``results/raw/<experiment>/<run_id>/rows.jsonl`` holds one JSON object per (workload, mode);
``attempts.jsonl`` a line when a workload starts and one when its rows are written, so that a
resumed run knows which workloads an earlier call cut (:func:`grace.bench.targets.pending`);
``meta.json`` the run's settings; ``logs/`` each worker's stderr. ``latest.txt`` beside the run
directories names the newest run whose shard(s) finished. Shards of one run share its run_id
and append to the same ``rows.jsonl``.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import os
import platform
import re
import secrets
import shlex
import shutil
import socket
import subprocess
import sys
import time
from functools import cache
from pathlib import Path
from typing import Any

from grace import __version__
from grace.paths import REPO_ROOT, RESULTS_DIR, write_atomic
from grace.versions import installed_version


def new_run_id() -> str:
    return dt.datetime.now().strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(2)


_PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def check_name(what: str, name: str) -> str:
    """``name`` if it is a plain folder name (letters, digits, ``.``, ``_``, ``-``, not starting
    with a dot), which a run's experiment and id must be: a separator would put the run's files
    outside ``results/raw`` (``/x`` at the file system's root), a leading dot hide them."""
    if not _PLAIN_NAME.fullmatch(name):
        raise ValueError(f"{what} {name!r} is not a plain name: letters, digits, '.', '_' and '-', "
                         "not starting with '.' or '-'")
    return name


def run_dir(experiment: str, run_id: str, results: Path = RESULTS_DIR) -> Path:
    path = results / "raw" / check_name("experiment", experiment) / check_name("run id", run_id)
    (path / "logs").mkdir(parents=True, exist_ok=True)
    return path


def append_row(path: Path, row: dict[str, Any]) -> None:
    with open(path / "rows.jsonl", "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.write(json.dumps(row, sort_keys=True) + "\n")


def read_rows(path: Path) -> list[dict[str, Any]]:
    """The rows of a ``rows.jsonl`` file (``path``), blank lines skipped; ValueError where there
    is no such file, or naming the line where one is not a JSON object."""
    if not path.is_file():
        raise ValueError(f"no rows at {path}")
    rows = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}:{number}: not a JSON row ({e.msg})") from None
        if not isinstance(row, dict):
            raise ValueError(f"{path}:{number}: not a JSON object")
        rows.append(row)
    return rows


def note_attempt(path: Path, workload: str, event: str) -> None:
    """Record that ``workload`` ``started`` or ``finished`` (its rows written) in this run. A
    start without its finish is a workload whose runner was killed mid-way (a call's deadline)."""
    with open(path / "attempts.jsonl", "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.write(json.dumps({"workload": workload, "event": event, "pid": os.getpid(), "t": time.time(),
                            "at": dt.datetime.now().isoformat(timespec="seconds")}) + "\n")


@cache
def invocation() -> str:
    """This benchmark process, as ``host:pid:start``. The runner interleaves a workload's modes
    round by round only within one process: rows compare (:func:`measured_together`) only where
    they name the same one."""
    return f"{socket.gethostname()}:{os.getpid()}:{time.time_ns()}"


def measured_together(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether rows ``a`` and ``b`` were timed in one process's interleaved rounds, so that a ratio
    of them (and the pairing of their rounds) means something. Rows that name no process compare
    by command line and GPU: a resumed call's command differs (``--attempts-before``)."""
    return _invocation_of(a) == _invocation_of(b)


def _invocation_of(row: dict[str, Any]) -> Any:
    if row.get("invocation"):
        return row["invocation"]
    return row.get("command"), (row.get("machine") or {}).get("gpu")


def mark_latest(experiment: str, run_id: str, results: Path = RESULTS_DIR) -> None:
    write_atomic(results / "raw" / experiment / "latest.txt", run_id + "\n")


@cache
def machine() -> dict[str, Any]:
    """What the numbers were measured on. Reads nvidia-smi, not torch, to stay import-light."""
    info: dict[str, Any] = {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
    }
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run(
                [smi, "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                capture_output=True, text=True, timeout=20).stdout.strip().splitlines()
            if out:
                name, driver, memory = (s.strip() for s in out[0].split(","))
                info.update(gpu=name, driver=driver, gpu_memory=memory, gpu_count=len(out))
        except (OSError, subprocess.SubprocessError, ValueError):
            pass
    return info


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


@cache
def versions() -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "torch": installed_version("torch"),
        "triton": installed_version("triton"),
        "grace": __version__,
        "grace_commit": _git_commit(),
        "grace_code": code_hash(),
    }


# what a benchmark run executes; a change elsewhere (a run's archive unpacked to resume it) leaves
# the code as committed
CODE_PATHS = ("grace", "patches", "scripts", "configs", "third_party")


def _git_commit() -> str | None:
    """HEAD's short hash, with ``-dirty`` where the code the run executes differs from it."""
    try:
        out = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "-C", str(REPO_ROOT), "status", "--porcelain", "--untracked-files=no",
                                "--", *CODE_PATHS], capture_output=True, text=True, timeout=10).stdout.strip()
        return out.stdout.strip() + ("-dirty" if dirty else "") if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def code_hash(commit: str | None = None) -> str | None:
    """A hash of the code a run executes (the files under ``CODE_PATHS``: their paths, modes and
    contents), as it is on disk, or as ``commit`` has it. Rows of one commit's code carry the
    same hash wherever they ran, also where the checkout's ``HEAD`` is an older commit with the
    newer code on top (``-dirty``), which the commit alone does not tell apart."""
    import hashlib
    import tempfile

    def git(*args: str, env: dict[str, str] | None = None) -> str:
        return subprocess.run(["git", "-C", str(REPO_ROOT), *args], capture_output=True, text=True, timeout=60,
                              check=True, env=env).stdout

    try:
        if commit is not None:
            listing = git("ls-tree", "-r", commit, "--", *CODE_PATHS)  # mode type blob<TAB>path
            entries = [(line.split()[0], line.split()[2], line.split("\t", 1)[1]) for line in listing.splitlines()]
        else:
            with tempfile.TemporaryDirectory() as tmp:  # an index of its own: the checkout's is left as it is
                env = {**os.environ, "GIT_INDEX_FILE": os.path.join(tmp, "index")}
                git("read-tree", "HEAD", env=env)
                present = [path for path in CODE_PATHS if (REPO_ROOT / path).exists()]
                gone = [path for path in CODE_PATHS if path not in present]
                if present:
                    git("add", "-A", "--", *present, env=env)
                if gone:
                    git("rm", "-r", "-q", "--cached", "--ignore-unmatch", "--", *gone, env=env)
                listing = git("ls-files", "--stage", "--", *CODE_PATHS, env=env)  # mode blob stage<TAB>path
            entries = [(line.split()[0], line.split()[1], line.split("\t", 1)[1]) for line in listing.splitlines()]
    except (OSError, subprocess.SubprocessError):
        return None
    return hashlib.sha1("".join(f"{m} {b} {p}\n" for m, b, p in sorted(entries, key=lambda e: e[2])).encode()).hexdigest()[:12]


def command_line() -> str:
    return shlex.join([Path(sys.executable).name, "-m", "grace.bench", *sys.argv[1:]])

"""A pytest plugin that reruns upstream tests which differ from stock, to say why they differ.

Two things make a failing upstream test look worse than it is, and this plugin removes each:

* **A failure keeps its frames alive through tearDown.** pytest's unittest integration stores
  the exception info (traceback, and through it every frame's locals) as soon as the test body
  raises, and unittest runs ``tearDown`` after that. The CUDA graph trees tests assert in
  ``tearDown`` that no block stays alive in any graph pool; a test whose body failed while a
  local held a graph output then also "leaks", whatever the code under test did. Here the
  frames of a failure are cleared as pytest stores it, so ``tearDown`` sees only what the
  compiled code itself still holds. A leak that remains is real.
* **A test that checks stock's generated code stops at the check.** With CGCT on, code a test
  expects (the ``.copy_`` of a CPU scalar) is gone on purpose, and the test's ``FileCheck``
  raises before the assertions on values run. Here ``FileCheck(...).run`` records the mismatch
  instead of raising, so that the rest of the test (values against eager, graph counts,
  tearDown's pool checks) still runs and is judged.

Each test phase's outcome, and every FileCheck mismatch, is appended as a JSON line to the file
named by ``GRACE_UPSTREAM_RECHECK_OUT``. Load it with ``-p grace.report.upstream_recheck``
(``scripts/run_upstream_cudagraph_tests.sh`` does, for the tests that differ from stock).
"""

from __future__ import annotations

import json
import os
import traceback
from types import TracebackType
from typing import Any

OUT_ENV = "GRACE_UPSTREAM_RECHECK_OUT"


def release_frames(exc: BaseException | None, tb: TracebackType | None) -> None:
    """Clear the locals of every finished frame in ``tb`` and in the exceptions chained to
    ``exc``. Frames still executing (the test runner's own) are left as they are."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        traceback.clear_frames(exc.__traceback__ if exc.__traceback__ is not None else tb)
        exc = exc.__cause__ or exc.__context__
    if tb is not None:
        traceback.clear_frames(tb)


class _Recorder:
    """Appends one JSON object per line; the current test's id is set around each test."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self.test: str | None = None

    def write(self, **record: Any) -> None:
        if self.path:
            with open(self.path, "a") as f:
                f.write(json.dumps({"test": self.test, **record}) + "\n")


_recorder = _Recorder(os.environ.get(OUT_ENV))


class SoftFileCheck:
    """``torch.testing.FileCheck`` whose ``run`` records a mismatch instead of raising."""

    def __init__(self) -> None:
        from torch.testing import FileCheck

        self._check = FileCheck()

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._check, name)

        def chained(*args: Any, **kwargs: Any) -> Any:
            out = method(*args, **kwargs)
            return self if out is self._check else out

        return chained

    def run(self, *args: Any, **kwargs: Any) -> None:
        try:
            self._check.run(*args, **kwargs)
        except RuntimeError as e:
            _recorder.write(event="filecheck", message=str(e).splitlines()[0][:300])


def _patch_unittest_excinfo() -> None:
    from _pytest.unittest import TestCaseFunction

    store = TestCaseFunction._addexcinfo

    def addexcinfo(self: Any, rawexcinfo: Any) -> None:
        if isinstance(rawexcinfo, tuple) and len(rawexcinfo) == 3:
            release_frames(rawexcinfo[1], rawexcinfo[2])
        store(self, rawexcinfo)

    TestCaseFunction._addexcinfo = addexcinfo


def pytest_configure(config: Any) -> None:
    _patch_unittest_excinfo()


def pytest_collection_modifyitems(session: Any, config: Any, items: list[Any]) -> None:
    for module in {item.module for item in items if getattr(item, "module", None) is not None}:
        if hasattr(module, "FileCheck"):
            module.FileCheck = SoftFileCheck


def pytest_runtest_setup(item: Any) -> None:
    _recorder.test = item.nodeid.split(".py::", 1)[-1]


def pytest_runtest_logreport(report: Any) -> None:
    message = ""
    if report.failed:
        crash = getattr(report.longrepr, "reprcrash", None)
        message = (crash.message if crash is not None else str(report.longrepr)).splitlines()[0][:300]
    _recorder.test = report.nodeid.split(".py::", 1)[-1]
    _recorder.write(event="phase", when=report.when, outcome=report.outcome, message=message)

"""The supported upstream versions, and the one clear error for any other.

The pins live in ``third_party/pins.toml``. Versions are read from package metadata so the
check works before (and without) importing torch or triton.
"""

from __future__ import annotations

import importlib.metadata
import tomllib
from dataclasses import dataclass
from functools import cache
from typing import Any

from grace.paths import PINS_FILE


class UnsupportedVersionError(RuntimeError):
    """torch or triton is missing or is not the pinned release."""


@dataclass(frozen=True)
class Pins:
    torch: str
    triton: str
    upstream_sha256: dict[str, str]


@cache
def pins() -> Pins:
    with open(PINS_FILE, "rb") as f:
        data: dict[str, Any] = tomllib.load(f)
    return Pins(
        torch=data["torch"]["version"],
        triton=data["triton"]["version"],
        upstream_sha256=dict(data.get("upstream_sha256", {})),
    )


def installed_version(dist: str) -> str | None:
    """The installed distribution's version, or None if it is not installed."""
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def release(version: str) -> str:
    """'2.11.0+cu130' -> '2.11.0': local build tags do not change the Python sources."""
    return version.split("+", 1)[0]


def version_problems() -> list[str]:
    """One line per missing or unsupported package; empty when the install is supported."""
    p = pins()
    problems = []
    for dist, want in (("torch", p.torch), ("triton", p.triton)):
        have = installed_version(dist)
        if have is None:
            problems.append(f"{dist} is not installed; GraCE needs {dist}=={want}")
        elif release(have) != want:
            problems.append(
                f"{dist} {have} is installed; GraCE supports only {dist}=={want} "
                f"(pins: torch=={p.torch}, triton=={p.triton})"
            )
    return problems


def check_versions() -> None:
    """Raise :class:`UnsupportedVersionError` naming the supported pins, or return."""
    problems = version_problems()
    if problems:
        raise UnsupportedVersionError("; ".join(problems))

"""``python -m grace doctor``: what this install is, in a dozen lines.

Versions against the pins, the GPU and driver, whether the autoload hook and the overlay are
in, which patches the overlay holds, which patched modules this process actually loaded, and
which switches are on. Exit status 1 when something would keep GraCE from running.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys

from grace import SWITCHES, __version__
from grace.install import pth_path
from grace.option_values import disabled
from grace.patching import overlay
from grace.versions import installed_version, pins, version_problems


def gpu_summary() -> tuple[bool, str]:
    """(has a usable CUDA GPU, one line naming GPU and driver or why there is none)."""
    smi = shutil.which("nvidia-smi")
    driver = ""
    if smi:
        try:
            out = subprocess.run([smi, "--query-gpu=name,driver_version", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=20)
            first = out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else ""
            driver = f" (nvidia-smi: {first})" if first else ""
        except (OSError, subprocess.SubprocessError):
            pass
    try:
        import torch
    except ImportError:
        return False, "unknown: torch is not importable"
    if not torch.cuda.is_available():
        return False, "no CUDA GPU visible to torch" + (driver or "; nvidia-smi not found")
    name = torch.cuda.get_device_name()
    cap = ".".join(map(str, torch.cuda.get_device_capability()))
    return True, f"{name}, compute capability {cap}, CUDA runtime {torch.version.cuda}{driver}"


def report() -> tuple[list[str], bool]:
    """The doctor's lines, and whether the install is healthy."""
    p = pins()
    healthy = True
    lines = [
        f"grace      {__version__} ({os.path.dirname(os.path.dirname(__file__))})",
        f"python     {platform.python_version()} ({sys.executable})",
        f"torch      {installed_version('torch') or 'not installed'} (pinned {p.torch})",
        f"triton     {installed_version('triton') or 'not installed'} (pinned {p.triton})",
    ]
    versions_wrong = version_problems()
    for problem in versions_wrong:
        healthy = False
        lines.append(f"  ERROR: {problem}")
    has_gpu, gpu = gpu_summary() if not versions_wrong else (False, "not checked")
    lines.append(f"gpu        {gpu}")
    pth = pth_path()
    lines.append(f"autoload   {'installed' if pth.is_file() else 'MISSING (run make setup)'}: {pth}")
    current = overlay.current()
    if current is None:
        healthy = False
        lines.append("patches    none: no overlay (run make setup)")
    else:
        names = current.patches
        lines.append(f"patches    {len(names)} in overlay {current.path}")
        lines.extend(f"  - {name}" for name in names)
    if not versions_wrong:
        try:  # the patched modules import it too
            import grace.config as config
        except ValueError as e:  # a switch's variable that is no switch's value (grace.option_values.switch_text)
            lines.append(f"switches   ERROR: {e}")
            return lines, False
    if disabled(os.environ):
        lines.append(f"active     no: GRACE_DISABLE={os.environ['GRACE_DISABLE']} (stock PyTorch)")
    else:
        lines.extend(_active_lines(current))
    if not versions_wrong:
        on = [s for s in SWITCHES if getattr(config, s)]
        off = [s for s in SWITCHES if not getattr(config, s)]
        lines.append(f"switches   on: {', '.join(on) or '-'}; off: {', '.join(off) or '-'}")
        from grace.trees import hardened

        guard = "on" if config.stale_outputs_raise and hardened() else "off"
        kernels = "on" if config.race_free_kernels else "off"
        from grace.grad_copies import copies_grads

        grads = "copied before the next call" if copies_grads() else "left on the graph's memory (stock)"
        lines.append(f"safety     stale-output guard {guard}; race-free kernel configurations {kernels}; "
                     f"adopted gradients {grads}")
        from grace.mutated_inputs import enabled as mutations_copied

        lines.append("coverage   functions mutating copied inputs: "
                     + ("recorded, mutations copied back" if mutations_copied() else "left without a graph (stock)"))
        from grace.option_values import PRELUDE, problems

        refused = problems()
        lines += [f"  ERROR: {problem}" for problem in refused.values()]
        healthy = healthy and not refused
        if "pi_strategy" not in refused and "pi_table_write" not in refused:
            lines.append(f"pi         strategy {config.pi_strategy}, table write {config.pi_table_write}")
            if config.pi_force_untrusted:
                lines.append("  WARNING: every PI check is reported failed (GRACE_PI_FORCE_UNTRUSTED, a test of PI's "
                             "fallbacks): every graph PI records is captured again stock or retired")
            if config.pi_strategy == PRELUDE:
                line, builds = prelude_line()
                lines.append(line)
                healthy = healthy and builds
    return lines, healthy


def prelude_line(arch: str = "sm_90") -> tuple[str, bool]:
    """Whether PI's strategy (2) can build its prelude here (NVRTC, nvJitLink, the device runtime)."""
    from grace.pi import prelude

    try:
        cubin = prelude.compile_prelude(arch)
    except prelude.PreludeError as e:
        return f"  ERROR: the prelude cannot be built, so graphs keep their copies: {e}", False
    return f"  prelude builds ({len(cubin)} B for {arch}), device runtime {prelude.find_cudadevrt()}", True


def _active_lines(current: overlay.Overlay | None) -> list[str]:
    from grace._autoload import installed

    finder = installed()
    if finder is None:
        return ["active     no: overlay finder not installed in this process"]
    import importlib

    for module in finder.modules:
        importlib.import_module(module)
    lines = [f"active     yes: {len(finder.loaded)} patched module(s) loaded"]
    lines.extend(f"  - {m} <- {path}" for m, path in sorted(finder.loaded.items()))
    lines.extend(f"  ! {m} stock: {why}" for m, why in sorted(finder.refused.items()))
    return lines


def main() -> int:
    lines, healthy = report()
    print("\n".join(lines))
    return 0 if healthy else 1

"""Which Triton configuration Inductor's autotuner picks for each kernel, around a difftest program.

Seed 11908004's wrong ``fc2.bias.grad`` comes and goes between runs of the same program, and
``inplace_reduction_race.py`` finds two of the in-place reduction's four configurations wrong on
every launch. If the autotuner's timing-based choice is what varies, a wrong run is one where it
picked a racy configuration. This runs ``python -m grace.difftest run-one`` with the given
arguments and prints, on stderr, one JSON line per autotuned kernel: the configurations it
benchmarked with their timings, the one it kept, and the configurations GraCE left out
(``grace_layout_races``, with ``grace.config.race_free_kernels`` on).

    TORCHINDUCTOR_COMPILE_THREADS=1 python scripts/probes/autotune_choice.py --seed 11908004 \\
        --device cuda --max-steps 19
"""

import json
import runpy
import sys
from typing import Any

from torch._inductor.runtime.triton_heuristics import CachingAutotuner


def _config(config: Any) -> dict[str, Any]:
    return {**config.kwargs, "num_warps": config.num_warps, "num_stages": config.num_stages}


def _watch() -> None:
    benchmark, autotune = CachingAutotuner.benchmark_all_configs, CachingAutotuner.autotune_to_one_config

    def benchmark_all_configs(self: CachingAutotuner, *args: Any, **kwargs: Any) -> Any:
        timings = benchmark(self, *args, **kwargs)
        self.__dict__["probe_timings"] = [(_config(launcher.config), t) for launcher, t in timings.items()]
        return timings

    def autotune_to_one_config(self: CachingAutotuner, *args: Any, **kwargs: Any) -> Any:
        result = autotune(self, *args, **kwargs)
        left_out = getattr(self, "grace_layout_races", None) or {}
        print("autotune " + json.dumps({
            "kernel": self.fn.__name__,
            "timings_ms": self.__dict__.get("probe_timings"),
            "kept": _config(self.launchers[0].config),
            "left_out": [str(key) for key in left_out],
        }), file=sys.stderr, flush=True)
        return result

    CachingAutotuner.benchmark_all_configs = benchmark_all_configs
    CachingAutotuner.autotune_to_one_config = autotune_to_one_config


if __name__ == "__main__":
    _watch()
    sys.argv = ["grace.difftest", "run-one", *sys.argv[1:]]
    runpy.run_module("grace.difftest", run_name="__main__")

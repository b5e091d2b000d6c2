"""How each worker times its workload, declared once.

The runner's command line (``python -m grace.bench``), its :class:`grace.bench.runner.Settings`,
the command line it starts each worker with (``python -m grace.bench.worker``) and the rows it
writes all take these options from :class:`WorkerOptions`: a new option is one field and one
:data:`FLAGS` entry here.
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class WorkerOptions:
    warmup: int = 5  # warm-up iterations, compilation included
    coverage: int = 0  # iterations profiled after timing for the share of kernels in CUDA graphs
    inner: int = 1  # iterations per timed sample, run back to back and synchronised once
    release_memory: bool = False  # return cached GPU memory between timed chunks
    gpu_time: bool = False  # after each timed sample, one more iteration's device time alone
    gpu_time_every: int = 1  # with gpu_time, only after timed samples whose number is a multiple of this
    check_after: bool = True  # outputs kept and checked after a chunk's samples, not between them
    layers: bool = False  # after the last timed round, one more iteration per sample, its host time by layer
    distinct_inputs: int = 0  # timed samples cycle over this many inputs, warmed up first (0: each its own)
    rewarm_ms: int = 20  # untimed iterations before each round's timed samples, for at least this long
    lead_in_below_us: int = 10_000  # one untimed iteration right before each timed sample shorter than this
    pin_backward: bool = True  # with the timing thread pinned, autograd's CUDA backward thread on its core too

    def __post_init__(self) -> None:
        if min(self.warmup, self.coverage, self.distinct_inputs, self.rewarm_ms, self.lead_in_below_us) < 0:
            raise ValueError(f"warmup, coverage, distinct inputs, rewarm milliseconds and the lead-in's bound must be "
                             f"at least 0; got {self.warmup}, {self.coverage}, {self.distinct_inputs}, "
                             f"{self.rewarm_ms} and {self.lead_in_below_us}")
        if self.inner < 1:
            raise ValueError(f"--inner must be at least 1, not {self.inner}")
        if self.gpu_time_every < 1:
            raise ValueError(f"--gpu-time-every must be at least 1, not {self.gpu_time_every}")
        if self.distinct_inputs == 1:
            # one input over and over would let a replay that reads the previous call's inputs
            # (stale data) pass every check: consecutive samples must differ
            raise ValueError("distinct inputs must be 0 (every sample its own) or at least 2, not 1: with one "
                             "input a replay reading the previous call's data would pass the check")

    def argv(self) -> list[str]:
        """The worker's command-line flags for these options."""
        out: list[str] = []
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            flag = "--" + f.name.replace("_", "-")
            if isinstance(value, bool):
                out += [flag if value else "--no-" + flag[2:]]
            else:
                out += [flag, str(value)]
        return out

    @staticmethod
    def from_args(args: argparse.Namespace) -> WorkerOptions:
        """The options parsed by a parser that :func:`add_arguments` set up."""
        return WorkerOptions(**{f.name: getattr(args, f.name) for f in dataclasses.fields(WorkerOptions)})


# Each option's help: for the runner, where it is chosen, and for the worker, which obeys it.
FLAGS: dict[str, str] = {
    "warmup": "warm-up iterations (include compilation)",
    "coverage": "after timing, profile N iterations per mode for the share of kernels launched by CUDA "
                "graph replays (Table 2)",
    "inner": "each timed sample is the mean of K iterations run back to back on K input samples, "
             "synchronised once; the last one's output is checked (for micro-workloads, where one "
             "iteration is mostly host jitter)",
    "release_memory": "workers return cached GPU memory between their timed chunks (for workloads whose "
                      "modes do not fit on the GPU together)",
    "gpu_time": "after each timed sample, time one more iteration's device work alone (the GPU held behind "
                "a sleeping kernel while the host queues it): the rows' gpu_us, which Figure 9 plots "
                "beside the per-iteration time",
    "gpu_time_every": "with --gpu-time, time the device work only after the timed samples whose number is a multiple "
                      "of this (4: a quarter of them, spread over every round): an iteration's device time varies "
                      "little, and each measurement costs an iteration and the sleep ahead of it",
    "layers": "after the last timed round, one mode after another, time one more iteration per timed sample "
              "with a clock at each layer's entry (Dynamo, AOTAutograd, Inductor's output code, the CUDA graph "
              "tree, the node's replay, PI, the launch), so that no timed sample follows the clock's wrappers: "
              "the rows' layers_us and host_us (grace.bench.layers)",
    "distinct_inputs": "timed samples cycle over this many inputs (at least 2, so that consecutive calls differ "
                       "and stale data shows), each of which the warm-up runs four times first, as TorchBench "
                       "times the same example input over and over (for workloads whose shapes follow their "
                       "data: every new input would record new graphs on the clock); 0: every sample its own",
    "rewarm_ms": "before each round's timed samples, untimed iterations on a warm-up input for at least this "
                 "many milliseconds (and at least one): a worker sleeps while the other modes take their turn, "
                 "and its first iterations after that ran 1.5 to 3 times as long as the rest of the round "
                 "(micro-mlp16 under PT2-CG: 685, 302, 215, 203, 197 us), which decided the median of a "
                 "five-sample round; 0: none",
    "lead_in_below_us": "one untimed iteration right before each timed sample, on an input no timed sample next to "
                        "it uses, while the workload's last timed iteration took less than this many microseconds "
                        "(and before the first): a host-bound call after any pause in the loop (an output copied, "
                        "the next input made, the host idle) ran up to 40%% longer than right after the same call "
                        "(micro-eos under PT2-NoCG: 105 us after an iteration, 130 to 186 us after a pause; "
                        "scripts/probes/round_place_cause.py), where a long iteration pays no such share; 0: never",
    "pin_backward": "with the timing thread pinned (--pin-cpu), pin autograd's thread for the GPU, which runs every "
                    "training step's backward, to the same core: the two threads take turns, never run at once, and "
                    "unpinned the backward ran cold on another core, which cost GraCE's step, with more Python in "
                    "its backward, more than PT2-CG's (micro-mlp16-T: 1,875 against 1,732 us; both pinned, 1,594 "
                    "against 1,605; scripts/probes/backward_thread.py)",
    "check_after": "keep a copy of each timed sample's output and check them all after the chunk's samples are "
                   "timed, so that no eager forward runs between two timed samples: one between them cost "
                   "ALNET's next call 12%% under PT2-CG, caches cold (the copies stay on the device: off for "
                   "workloads whose config line releases memory)",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """One flag per :class:`WorkerOptions` field, with its default and help."""
    defaults = WorkerOptions()
    for f in dataclasses.fields(WorkerOptions):
        flag = "--" + f.name.replace("_", "-")
        default: Any = getattr(defaults, f.name)
        if isinstance(default, bool):
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=default,
                                help=f"{FLAGS[f.name]} (default: {'on' if default else 'off'})")
        else:
            parser.add_argument(flag, type=type(default), default=default, metavar="N" if f.name != "inner" else "K",
                                help=f"{FLAGS[f.name]} (default: {default})")

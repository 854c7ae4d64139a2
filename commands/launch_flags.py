"""How a sweep's runs are launched, as flags: `--launcher serial|local|slurm` and the flags each
launcher reads (`add_launch_flags`), checked together into one `LaunchOptions`
(`launch_options`): a flag the chosen launcher does not read is refused, not ignored."""

from __future__ import annotations

import argparse
import inspect
import time
from pathlib import Path
from typing import Optional, Sequence

from commands.launchers import LaunchOptions, minutes
from commands.slurm import MIN_SLURM_MINUTES
from settings.config import ConfigError
from utils.user_paths import check_home_expanded


def add_launch_flags(parser: argparse.ArgumentParser) -> None:
    """How the runs are launched: in this process, as local jobs, or as a SLURM job array."""
    launch = parser.add_argument_group("launching runs (submitit)")
    launch.add_argument(
        "--launcher",
        choices=["serial", "local", "slurm"],
        default="serial",
        help="serial: one after another in this process (default); local: jobs as processes on "
        "this machine; slurm: a SLURM job array",
    )
    launch.add_argument(
        "--parallel",
        type=int,
        metavar="N",
        help="at most N runs at once (local default: one per GPU slot, see --runs_per_gpu, or 1 "
        "on a CPU-only machine; slurm: the array's parallelism unless --slurm_array_parallelism)",
    )
    launch.add_argument(
        "--gpus_per_run",
        type=int,
        metavar="N",
        choices=[0, 1],
        help="GPUs per run, 0 or 1 (local default: 1 if this machine has a GPU, else 0; slurm default: 0)",
    )
    launch.add_argument(
        "--runs_per_gpu",
        type=int,
        default=1,
        metavar="N",
        help="local: runs sharing each GPU (small models), so up to GPUs x N at once (with --parallel)",
    )
    launch.add_argument(
        "--log_dir",
        metavar="DIR",
        help="submitit's job logs go to DIR/<date-time of the sweep>/ (default: <sweep folder>/submitit)",
    )
    launch.add_argument(
        "--time",
        dest="time_limit",
        help="time limit per job: minutes or [D-]HH:MM:SS (slurm default 1440, at least 5; local "
        "default: none); a SLURM job that reaches it is requeued and resumes (at most 3 times: submitit's limit)",
    )
    slurm = parser.add_argument_group("slurm")
    slurm.add_argument("--partition", help="SLURM partition")
    slurm.add_argument("--cpus_per_run", type=int, metavar="N", help="CPUs per job (default 1)")
    slurm.add_argument("--mem", help="memory per job, e.g. 32G")
    slurm.add_argument("--slurm_array_parallelism", type=int, metavar="N", help="jobs of the array running at once")
    slurm.add_argument(
        "--slurm_setup",
        action="append",
        default=[],
        metavar="LINE",
        help="a shell line run before each job, e.g. 'module load cuda' (repeatable)",
    )


# The launch flags each launcher reads; the others would be ignored without a word
LOCAL_FLAGS = ("--parallel", "--gpus_per_run", "--runs_per_gpu", "--log_dir", "--time")
SLURM_FLAGS = ("--parallel", "--gpus_per_run", "--log_dir", "--time", "--partition", "--cpus_per_run", "--mem")
SLURM_FLAGS += ("--slurm_array_parallelism", "--slurm_setup")
LAUNCHER_FLAGS = {"serial": (), "local": LOCAL_FLAGS, "slurm": SLURM_FLAGS}
SWEEP_LAUNCH_FLAGS = ("--parallel", "--gpus_per_run", "--runs_per_gpu", "--log_dir", "--time", "--partition")
SWEEP_LAUNCH_FLAGS += ("--cpus_per_run", "--mem", "--slurm_array_parallelism", "--slurm_setup")


def check_launcher_uses(launcher: str, given: dict[str, object]) -> None:
    """A launch flag the chosen launcher does not read (--partition with the default serial
    launcher) is refused, not ignored: the user meant another launcher or nothing."""
    ignored = [flag for flag, value in given.items() if value is not None and flag not in LAUNCHER_FLAGS[launcher]]
    if ignored:
        readers = [name for name, flags in LAUNCHER_FLAGS.items() if ignored[0] in flags]
        raise ConfigError(
            f"{ignored[0]} is not read by --launcher {launcher} (only by --launcher {' or '.join(readers)}); "
            f"add the launcher it is meant for, or drop {ignored[0]}"
        )


def launch_options(
    output: Optional[str],
    runs_root: Optional[str],
    launcher: str = "serial",
    parallel: Optional[int] = None,
    gpus_per_run: Optional[int] = None,
    runs_per_gpu: int = 1,
    log_dir: Optional[str] = None,
    time_limit: Optional[str] = None,
    partition: Optional[str] = None,
    cpus_per_run: Optional[int] = None,
    mem: Optional[str] = None,
    slurm_array_parallelism: Optional[int] = None,
    slurm_setup: Sequence[str] = (),
) -> LaunchOptions:
    """The launcher flags, checked, with the sweep's log folder."""
    for flag, value in (("--output", output), ("--runs_root", runs_root), ("--log_dir", log_dir)):
        if value:  # before hours of training, not after
            check_home_expanded(value, flag)
    given = (parallel, gpus_per_run, None if runs_per_gpu == 1 else runs_per_gpu, log_dir, time_limit, partition)
    given += (cpus_per_run, mem, slurm_array_parallelism, list(slurm_setup) or None)
    check_launcher_uses(launcher, dict(zip(SWEEP_LAUNCH_FLAGS, given)))
    for flag, value in (("parallel", parallel), ("runs_per_gpu", runs_per_gpu)):
        if value is not None and value < 1:
            raise ConfigError(f"--{flag} must be at least 1, got {value}")
    if gpus_per_run is not None and not 0 <= gpus_per_run <= 1:
        raise ConfigError(
            f"--gpus_per_run {gpus_per_run}: a sweep's run is one process on 0 or 1 GPU; train one "
            f"run on several GPUs with torchrun (README: Speed and scale)"
        )
    if launcher == "slurm" and time_limit is not None and minutes(time_limit) < MIN_SLURM_MINUTES:
        raise ConfigError(
            f"--time {time_limit}: a SLURM job needs at least {MIN_SLURM_MINUTES} minutes (submitit signals it "
            f"90 s before its limit to save a checkpoint and requeue it; a shorter job fails instead); "
            f"give --time {MIN_SLURM_MINUTES} or more"
        )
    folder = Path(output).parent if output else Path(runs_root or "runs")
    # one log folder per sweep command: a job id (a local job's is a process id) may come again later
    logs = Path(log_dir or folder / "submitit") / time.strftime("%Y%m%d-%H%M%S")
    return LaunchOptions(
        launcher=launcher,
        parallel=parallel,
        log_dir=logs.resolve(),
        gpus_per_run=gpus_per_run,
        runs_per_gpu=runs_per_gpu,
        partition=partition,
        time=time_limit,
        cpus_per_run=cpus_per_run,
        mem=mem,
        slurm_array_parallelism=slurm_array_parallelism,
        slurm_setup=list(slurm_setup),
    )


# launch_options' keyword parameters after output and runs_root: what sweep() takes as `launch`
LAUNCH_FLAGS = tuple(inspect.signature(launch_options).parameters)[2:]

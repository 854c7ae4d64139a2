"""sweep.py's launch flags (commands/launch_flags.py), checked before any work: a flag the chosen
launcher does not read is refused naming the launcher that does; counts at least 1; a run on 0 or 1
GPU; a SLURM job long enough to checkpoint before its limit; a `~` the shell left in a path; one log
folder per sweep command."""

from __future__ import annotations

from pathlib import Path

import pytest

from commands.launch_flags import LAUNCH_FLAGS, launch_options
from settings.config import ConfigError
from utils.errors import WriteError


@pytest.mark.parametrize(
    "flags, says",
    [
        ({"partition": "gpu"}, "--partition is not read by --launcher serial (only by --launcher slurm)"),
        ({"launcher": "local", "mem": "8G"}, "--mem is not read by --launcher local (only by --launcher slurm)"),
        ({"launcher": "slurm", "runs_per_gpu": 4}, "--runs_per_gpu is not read by --launcher slurm"),
        ({"launcher": "local", "parallel": 0}, "--parallel must be at least 1, got 0"),
        ({"launcher": "local", "gpus_per_run": 2}, "--gpus_per_run 2: a sweep's run is one process on 0 or 1 GPU"),
        ({"launcher": "slurm", "time_limit": "0:03:00"}, "--time 0:03:00: a SLURM job needs at least"),
    ],
)
def test_a_flag_that_cannot_work_is_refused_before_any_work(flags: dict, says: str) -> None:
    with pytest.raises(ConfigError) as error:
        launch_options("summary", None, **flags)
    assert says in str(error.value) and "\n" not in str(error.value)


def test_an_unexpanded_tilde_is_refused() -> None:
    with pytest.raises(WriteError, match="--runs_root ~/runs has '~', which the shell did not expand"):
        launch_options(None, "~/runs", launcher="local")


def test_the_options_and_one_log_folder_per_sweep_command(tmp_path: Path) -> None:
    options = launch_options(str(tmp_path / "out" / "summary"), None, launcher="local", parallel=2, runs_per_gpu=3)
    assert (options.launcher, options.parallel, options.runs_per_gpu) == ("local", 2, 3)
    assert options.log_dir.parent == (tmp_path / "out" / "submitit").resolve()  # beside the summary, a folder per run
    assert LAUNCH_FLAGS[:3] == ("launcher", "parallel", "gpus_per_run")  # what sweep() takes as `launch`

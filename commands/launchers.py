"""Where a sweep's runs execute, through submitit: `local` runs each as a process on this machine
(N at a time, each given its own GPUs through CUDA_VISIBLE_DEVICES, several small runs per GPU if
asked); `slurm` (commands/slurm.py) submits them as one SLURM job array. Both wait until every job has ended and return
each job's Outcome; submitit's logs (one stdout/stderr per job) go to the sweep's log folder.

A job that ends without a result (stopped by a signal after its checkpoint, killed, cancelled) is
reported as interrupted: its run is resumed by the next sweep, never taken for finished.

A Ctrl-C is never lost: while the sweep starts a job it waits (ctrl_c_deferred), and a local job
stopped before its handlers were in place reads the stop the sweep left for it
(commands/sweep_job.stop_request)."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Optional, Sequence

from settings.config import ConfigError
from utils.publish import stops_held
from utils.run_log import log

POLL_SECONDS = 2.0
# SLURM's time formats: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S
TIME_LIMIT = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")
NO_LIMIT_MINUTES = 365 * 24 * 60  # a local job without --time: submitit's local timeout, in effect none


@dataclass
class LaunchOptions:
    """The sweep's --launcher settings (sweep.py --help explains each)."""

    launcher: str = "serial"
    parallel: Optional[int] = None  # None: local, every slot; slurm, no cap
    log_dir: Path = Path("runs/submitit")
    gpus_per_run: Optional[int] = None  # None: 1 when this machine has a GPU (local), else 0
    runs_per_gpu: int = 1
    partition: Optional[str] = None
    time: Optional[str] = None  # None: no limit locally, slurm.DEFAULT_SLURM_TIME on SLURM
    cpus_per_run: Optional[int] = None
    mem: Optional[str] = None
    slurm_array_parallelism: Optional[int] = None
    slurm_setup: list[str] = field(default_factory=list)


def minutes(limit: str) -> int:
    """A SLURM time limit (M, M:S, H:M:S, D-H, D-H:M or D-H:M:S) in whole minutes, at least 1."""
    match = TIME_LIMIT.match(limit.strip())
    if not match:
        raise ConfigError(f"--time {limit}: give minutes (e.g. 240), HH:MM:SS or D-HH[:MM[:SS]] (e.g. 1-00:00:00)")
    days, first, second, third = match.groups()
    if days is not None:  # D-H, D-H:M, D-H:M:S
        hours, mins, secs = int(first), int(second or 0), int(third or 0)
    elif third is not None:  # H:M:S
        hours, mins, secs = int(first), int(second), int(third)
    else:  # M or M:S
        hours, mins, secs = 0, int(first), int(second or 0)
    return max(1, int(days or 0) * 1440 + hours * 60 + mins + (secs > 0))


def gpu_slots(gpus: int, gpus_per_run: int, runs_per_gpu: int) -> list[tuple[int, ...]]:
    """The GPU sets jobs may run on at once: each group of `gpus_per_run` GPUs, `runs_per_gpu` times
    (the length study's small models share one GPU several at a time), in turn over the groups so
    that the first jobs spread over every GPU; [()] without GPUs."""
    if gpus_per_run < 1 or gpus < 1:
        return [()]
    if gpus_per_run > gpus:
        raise ConfigError(f"--gpus_per_run {gpus_per_run}: this machine has {gpus} GPU(s)")
    groups = [tuple(range(start, start + gpus_per_run)) for start in range(0, gpus - gpus_per_run + 1, gpus_per_run)]
    return [group for _ in range(runs_per_gpu) for group in groups]


def visible_devices(slot: tuple[int, ...]) -> list[int]:
    """A slot's GPUs as the machine numbers them: the indices count the GPUs this process sees, so
    under CUDA_VISIBLE_DEVICES=2,3 slot (0,) is GPU 2."""
    seen = [d.strip() for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    if not seen:
        return list(slot)
    if not all(d.isdigit() for d in seen):
        raise ConfigError(
            f"CUDA_VISIBLE_DEVICES={os.environ['CUDA_VISIBLE_DEVICES']} names GPUs by UUID: give the "
            f"local launcher their indices (e.g. CUDA_VISIBLE_DEVICES=0,1)"
        )
    return [int(seen[i]) for i in slot]


@contextlib.contextmanager
def ctrl_c_deferred() -> Iterator[None]:
    """Ctrl-C (and SIGTERM) wait until the block ends, then stop the sweep (utils.publish.stops_held),
    and the processes the block starts inherit SIGINT blocked: a terminal's Ctrl-C, sent to the whole
    process group, never kills a local job's controller (which kills its job a second later) or
    sbatch; a local job unblocks it once its own handlers are in place (SweepJob). Blocked, not
    ignored: an ignored SIGINT was discarded, and the sweep went on starting jobs."""
    with stops_held():
        before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            yield
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, before)  # one sent meanwhile: stops_held delivers it


def outcome_of(job, run_dir: str):
    """The Outcome a finished submitit job returned, or one saying how it ended without one."""
    import submitit
    from submitit.core.utils import FailedJobError, UncompletedJobError

    from commands.sweep_job import Outcome

    interrupted = Outcome(
        run_dir,
        "interrupted",
        4,
        f"{run_dir}: its job (id {job.job_id}) ended without a result "
        f"(stopped by a signal, cancelled or killed: see "
        f"{job.paths.stderr}); run the sweep again to resume it",
    )
    # A local job is done once its process has exited, after writing any result: no need for
    # job.result()'s 15 s wait for a pickle (which a SLURM job's shared filesystem may need)
    if isinstance(job, submitit.LocalJob) and not job.paths.result_pickle.exists():
        return interrupted
    try:
        return job.result()
    except FailedJobError as e:  # an exception in the job (FailedJobError is an UncompletedJobError)
        rule = "----------------------"  # submitit puts the trace between two such rules
        text = str(e)
        trace = text.split(rule, 1)[1].rsplit(rule, 1)[0] if text.count(rule) >= 2 else text
        last = next((line.strip() for line in reversed(trace.splitlines()) if line.strip()), "no message")
        if "timed-out too many times" in last:  # submitit requeues a job at most 3 times after its time limit
            return Outcome(
                run_dir,
                "interrupted",
                4,
                f"{run_dir}: its job (id {job.job_id}) reached its time limit a 4th time (submitit requeues a job "
                f"at most 3 times after a time limit); run the sweep again to resume it, or give a longer --time",
            )
        return Outcome(
            run_dir, "failed", 1, f"{run_dir}: its job (id {job.job_id}) failed: {last} (log: {job.paths.stderr})"
        )
    except UncompletedJobError:
        return interrupted


def collect(job, run_dir: str, outcomes: dict, index: int, total: int) -> None:
    """A job has ended: its Outcome into `outcomes[index]`, and one log line."""
    outcomes[index] = outcome_of(job, run_dir)
    log(f"sweep: {run_dir}: {outcomes[index].status} ({len(outcomes)}/{total} ended)")


def run_local(jobs: Sequence, run_dirs: Sequence[str], options: LaunchOptions) -> list:
    """Each job as a process on this machine, at most `parallel` (and one per GPU slot) at a time."""
    import submitit
    import torch

    from commands.sweep_job import stop_request

    gpus = torch.cuda.device_count()
    per_run = options.gpus_per_run if options.gpus_per_run is not None else min(gpus, 1)
    if per_run > 0 and gpus == 0:
        raise ConfigError(
            f"--gpus_per_run {per_run}: this machine has no GPU (CUDA); use --gpus_per_run 0 to run on the CPU"
        )
    slots = gpu_slots(gpus, per_run, options.runs_per_gpu)
    if slots == [()]:  # CPU runs: --parallel of them (each takes training.num_threads threads, or all cores)
        slots = [()] * (options.parallel or 1)
    slots = slots[: options.parallel] if options.parallel else slots
    executor = submitit.LocalExecutor(folder=str(options.log_dir))
    executor.update_parameters(
        timeout_min=minutes(options.time) if options.time else NO_LIMIT_MINUTES, gpus_per_node=per_run
    )
    waiting = list(range(len(jobs)))
    running: dict[int, tuple[object, tuple[int, ...]]] = {}
    outcomes: dict[int, object] = {}
    free = list(slots)
    try:
        while waiting or running:
            while waiting and free:
                index, slot = waiting.pop(0), free.pop(0)
                if slot:
                    executor.update_parameters(visible_gpus=visible_devices(slot))
                # The job's controller never takes Ctrl-C (it would kill its job a second later); the job
                # does once SweepJob turns SIGINT/SIGTERM into a clean stop. Ctrl-C reaches the jobs as
                # SIGTERM through their controllers, below.
                with ctrl_c_deferred():
                    running[index] = (executor.submit(jobs[index]), slot)
                log(
                    f"sweep: started {run_dirs[index]} (job {running[index][0].job_id}"
                    + (f", GPU {','.join(map(str, visible_devices(slot)))})" if slot else ")")
                )
            for index, (job, slot) in list(running.items()):
                if job.done():
                    collect(job, run_dirs[index], outcomes, index, len(jobs))
                    del running[index]
                    free.append(slot)
            time.sleep(POLL_SECONDS if running else 0)
    except KeyboardInterrupt:  # Ctrl-C: each running run checkpoints and stops (resumable), as train.py does
        log(f"sweep: stopping {len(running)} running job(s); each saves a checkpoint (run the sweep again to resume)")
        for job, _ in running.values():
            with contextlib.suppress(OSError):
                stop_request(job.paths).touch()  # first: read by a job whose handlers were not in place
            with contextlib.suppress(OSError):
                os.kill(int(job.job_id), signal.SIGTERM)  # the controller passes it on to its job
        while not all(job.done() for job, _ in running.values()):
            time.sleep(POLL_SECONDS)
        raise
    return [outcomes[i] for i in range(len(jobs))]

"""The SLURM launcher of a sweep (`--launcher slurm`): checks the request with `sbatch --test-only`,
submits the runs as one job array through submitit (a run whose job an earlier client submitted is
waited for, not submitted again: its job id is recorded beside its folder), and follows the jobs
with `squeue` — not `sacct`, which a cluster without accounting leaves empty — until each has left a
result or ended without one (cancelled, failed, timed out, node failure), reported by run."""

from __future__ import annotations

import contextlib
import getpass
import io
import json
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

from commands import launchers
from commands.launchers import LaunchOptions, collect, ctrl_c_deferred, minutes
from settings.config import ConfigError
from utils.errors import EXIT_INTERRUPTED
from utils.files import atomic_write_text
from utils.run_log import log

DEFAULT_SLURM_TIME = "1440"  # minutes a job may run when --time is not given
# squeue's view of a job: its array task id, state, wait status (exit code << 8 | signal), pending reason
SQUEUE_FORMAT = "JobArrayID:40,State:24,exit_code:12,Reason:200"
# The states in which a SLURM job may still run (or be held); in any other it has ended
LIVE_STATES = frozenset(
    {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD", "RESIZING"}
    | {"SUSPENDED", "STOPPED", "SIGNALING", "STAGE_OUT", "SPECIAL_EXIT", "RESV_DEL_HOLD"}
)
# How a job that ended without a result ended: (status, why); FAILED is told by its exit code
ENDED = {
    "CANCELLED": ("interrupted", "was cancelled (scancel)"),
    "TIMEOUT": ("interrupted", "reached its time limit (--time) without being requeued"),
    "NODE_FAIL": ("interrupted", "ended with a node failure"),
    "PREEMPTED": ("interrupted", "was preempted and not requeued"),
    "BOOT_FAIL": ("interrupted", "could not start (its node failed to boot)"),
    "DEADLINE": ("interrupted", "reached its deadline"),
    "OUT_OF_MEMORY": ("failed", "ran out of memory (give it more --mem)"),
    "COMPLETED": ("interrupted", "ended without leaving a result"),
}
# Pending reasons SLURM resolves by itself; any other is said once (the job may never start)
WAITING = frozenset({"None", "(null)", "Priority", "Resources", "JobArrayTaskLimit", "BeginTime", "Dependency"})
# submitit signals a job 90 s before its limit to checkpoint and requeue it; SLURM may send that up to
# a minute early, and the job needs its start-up (Python, data) before it can act on it
MIN_SLURM_MINUTES = 5
RESULT_GRACE_S = 10.0  # a result file may appear on a shared filesystem a moment after its job ended
LISTED_GRACE_S = 30.0  # a job just submitted may not be listed by squeue yet
FLAG_HINTS = {
    "": "check that SLURM takes jobs here (sinfo, sbatch)",
    "--partition": "sinfo lists the partitions",
    "--time": "give at most the partition's time limit (sinfo -o '%P %l')",
    "--mem": "give a size a node has, e.g. 16G (sinfo -o '%P %m' lists each node's memory in MB)",
    "--cpus_per_run": "give at most a node's CPUs (sinfo -o '%P %c')",
    "--gpus_per_run": "pick a partition with GPUs (sinfo -o '%P %G')",
}


@dataclass(frozen=True)
class JobState:
    state: str
    reason: str = "None"
    status: int = 0  # the wait status: exit code << 8 | signal


def parse_squeue(text: str) -> dict[str, JobState]:
    """`squeue -h -r --states=all -O SQUEUE_FORMAT` as {job id (array task: ID_TASK): JobState}."""
    states = {}
    for line in text.splitlines():
        fields = line.split(None, 3)
        if len(fields) >= 3:
            reason = fields[3].strip() if len(fields) > 3 else "None"
            states[fields[0]] = JobState(fields[1].rstrip("+"), reason, int(fields[2]) if fields[2].isdigit() else 0)
    return states


def ended_how(state: Optional[JobState]) -> Optional[tuple[str, str]]:
    """(status, why) of a job that ended without a result, from squeue's state (None: no longer listed);
    None while it may still run. A cluster without accounting gives sacct nothing: squeue it is."""
    if state is None:
        return "interrupted", "is no longer known to SLURM and left no result"
    if state.state in LIVE_STATES:
        return None
    if state.state == "FAILED":
        code, sig = state.status >> 8, state.status & 0x7F
        if sig:
            return "interrupted", f"was killed by signal {sig}"
        if code == EXIT_INTERRUPTED:
            return "interrupted", "was stopped by a signal after a checkpoint"
        return "failed", f"failed with exit code {code}"
    return ENDED.get(state.state, ("interrupted", f"ended as {state.state}"))


def queue_states() -> Optional[dict[str, JobState]]:
    """This user's SLURM jobs (ended ones too, until SLURM forgets them); None when squeue fails."""
    command = ["squeue", "-h", "-r", "--states=all", "-u", getpass.getuser(), "-O", SQUEUE_FORMAT]
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return parse_squeue(proc.stdout) if proc.returncode == 0 else None


def check_slurm_found() -> None:
    if shutil.which("sbatch") is None:
        raise ConfigError(
            "--launcher slurm: SLURM was not found here (no sbatch on PATH); run the sweep on a SLURM "
            "login node, or use a launcher that works here: --launcher local (jobs on this machine) or serial"
        )


def sbatch_refusal(request: list[str]) -> Optional[str]:
    """Why `sbatch --test-only` refuses a job asking for `request` (None: it would take it)."""
    try:
        proc = subprocess.run(
            ["sbatch", "--test-only", "--wrap", "true", *request], capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return str(e)
    if proc.returncode == 0:
        return None
    lines = [line.split("error:", 1)[-1].replace("allocation failure:", "") for line in proc.stderr.splitlines()]
    lines = [line.strip() for line in lines]
    return next((line for line in lines if line), f"sbatch exit code {proc.returncode}")


def check_slurm_request(options: LaunchOptions) -> None:
    """Ask SLURM (sbatch --test-only) whether it takes the jobs as the flags ask; one line naming the
    first flag it refuses, before anything is submitted."""
    asked = [
        ("--partition", options.partition, f"--partition={options.partition}"),
        ("--time", options.time or DEFAULT_SLURM_TIME, f"--time={minutes(options.time or DEFAULT_SLURM_TIME)}"),
        ("--mem", options.mem, f"--mem={options.mem}"),
        ("--cpus_per_run", options.cpus_per_run, f"--cpus-per-task={options.cpus_per_run}"),
        ("--gpus_per_run", options.gpus_per_run, f"--gpus-per-node={options.gpus_per_run}"),
    ]
    asked = [("", "", "")] + [a for a in asked if a[1]]
    if sbatch_refusal([a[2] for a in asked[1:]]) is None:
        return
    for n, (flag, value, _) in enumerate(asked):  # one flag more each time: the first refused is named
        refusal = sbatch_refusal([a[2] for a in asked[1 : n + 1]])
        if refusal:
            named = f"{flag} {value}: " if flag else "--launcher slurm: "
            raise ConfigError(f"{named}SLURM refuses the job ({refusal}); {FLAG_HINTS[flag]}")


def job_record(run_dir: str) -> Path:
    """Where a run's SLURM job is recorded while it may run, so that a second sweep waits for it
    rather than submitting it again: beside the run folder (inside, utils/run_folder.py would take
    a new run folder holding only the record for one that is not the harness's)."""
    folder = Path(run_dir).resolve()
    return folder.parent / f".{folder.name}.slurm_job"


def earlier_job(run_dir: str, states: dict[str, JobState]):
    """(the submitit job, its state) of the run's recorded SLURM job if it may still run, else None."""
    import submitit

    try:
        record = json.loads(job_record(run_dir).read_text(encoding="utf-8"))
        state = states.get(str(record["job_id"]))
        if state is None or state.state not in LIVE_STATES:
            return None
        return submitit.SlurmJob(folder=record["log_dir"], job_id=str(record["job_id"])), state
    except (OSError, ValueError, KeyError, TypeError):  # no record, or not one this harness wrote
        return None


def forget_finished_run(run_dir: str) -> None:
    """A finished run's record is stale: its job ended after leaving the run's result, perhaps while no
    sweep command was watching (a Ctrl-C, then a later call that finds the run scored)."""
    job_record(run_dir).unlink(missing_ok=True)


def forget_job(run_dir: str, job_id: str) -> None:
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        if json.loads(job_record(run_dir).read_text(encoding="utf-8"))["job_id"] == job_id:
            job_record(run_dir).unlink()


def submit_array(jobs: Sequence, run_dirs: Sequence[str], options: LaunchOptions) -> list:
    """The jobs as one SLURM job array, each recorded beside its run folder (job_record)."""
    import submitit
    from submitit.core.utils import FailedJobError

    executor = submitit.SlurmExecutor(folder=str(options.log_dir))
    parameters = dict(
        time=minutes(options.time or DEFAULT_SLURM_TIME),
        cpus_per_task=options.cpus_per_run or 1,
        ntasks_per_node=1,
        nodes=1,
        setup=list(options.slurm_setup),
        job_name="pe-sweep",
    )
    if options.slurm_array_parallelism or options.parallel:
        parameters["array_parallelism"] = options.slurm_array_parallelism or options.parallel
    if options.gpus_per_run:
        parameters["gpus_per_node"] = options.gpus_per_run
    if options.partition:
        parameters["partition"] = options.partition
    if options.mem:
        parameters["mem"] = options.mem
    executor.update_parameters(**parameters)
    # Ctrl-C waits until every job is submitted and recorded: a job submitted but not recorded would
    # be submitted again by the next sweep
    try:
        with ctrl_c_deferred():
            with contextlib.redirect_stderr(io.StringIO()), executor.batch():  # (submitit prints sbatch's refusal)
                submitted = [executor.submit(job) for job in jobs]
            for run_dir, job in zip(run_dirs, submitted):
                record = {"job_id": job.job_id, "log_dir": str(options.log_dir)}
                atomic_write_text(job_record(run_dir), json.dumps(record))
    except FailedJobError as e:
        first = next((line for line in str(e).splitlines() if "error" in line.lower()), str(e).strip()[:300])
        raise ConfigError(f"--launcher slurm: sbatch refused the sweep's jobs ({first.strip()})") from None
    array = submitted[0].job_id.split("_")[0]
    log(f"sweep: submitted {len(submitted)} SLURM job(s) (array {array}); logs in {options.log_dir}")
    return submitted


def ended_outcome(job, run_dir: str, how: tuple[str, str]):
    from commands.sweep_job import Outcome

    status, why = how
    then = "run the sweep again to resume it" if status == "interrupted" else "see its log, then run the sweep again"
    rc = EXIT_INTERRUPTED if status == "interrupted" else 1
    message = f"{run_dir}: its SLURM job {job.job_id} {why} (log: {job.paths.stderr}); {then}"
    return Outcome(run_dir, status, rc, message)


def say_pending(job, state: Optional[JobState], run_dir: str, said: dict) -> None:
    """Once per new reason: a job pending for a reason SLURM does not resolve by itself may never start."""
    if state is None or state.state not in LIVE_STATES - {"RUNNING", "COMPLETING"} or state.reason in WAITING:
        return
    if said.get(job.job_id) != state.reason:
        said[job.job_id] = state.reason
        log(
            f"sweep: {run_dir}: its SLURM job {job.job_id} is {state.state.lower()} ({state.reason}); SLURM may "
            f"never start it as asked: check --partition, --cpus_per_run, --mem, --gpus_per_run against sinfo, "
            f"or scancel {job.job_id}"
        )


def watch_slurm(watched: dict[int, object], run_dirs: Sequence[str]) -> dict[int, object]:
    """Wait until every watched job has ended: by its result file, or by squeue's state when it ended
    without one (cancelled, failed, timed out, node failure, forgotten). submitit's own wait asks sacct,
    which a cluster without accounting answers with nothing (a wait for ever, a warning each time)."""
    outcomes: dict[int, object] = {}
    ended_since: dict[int, float] = {}
    said: dict[str, str] = {}
    started = time.time()
    while len(outcomes) < len(watched):
        states = queue_states()
        for index, job in watched.items():
            if index in outcomes:
                continue
            if job.paths.result_pickle.exists():
                collect(job, run_dirs[index], outcomes, index, len(watched))
            elif states is not None:  # (squeue failed: ask again next time)
                state = states.get(job.job_id)
                how = ended_how(state) if state or time.time() - started > LISTED_GRACE_S else None
                if how is None:
                    ended_since.pop(index, None)
                    say_pending(job, state, run_dirs[index], said)
                    continue
                now = time.time()
                if now - ended_since.setdefault(index, now) < RESULT_GRACE_S:
                    continue
                outcomes[index] = ended_outcome(job, run_dirs[index], how)
                log(f"sweep: {run_dirs[index]}: {outcomes[index].status} ({len(outcomes)}/{len(watched)} ended)")
            if index in outcomes:
                forget_job(run_dirs[index], job.job_id)
        time.sleep(launchers.POLL_SECONDS if len(outcomes) < len(watched) else 0)
    return outcomes


def run_slurm(jobs: Sequence, run_dirs: Sequence[str], options: LaunchOptions) -> list:
    """The jobs as one SLURM job array; requeued on preemption or time limit (SweepJob is
    checkpointable); waits for all to end. A run whose job an earlier sweep submitted and that may
    still run is waited for, not submitted again."""
    check_slurm_found()
    watched: dict[int, object] = {}
    states = queue_states() or {}
    for index, run_dir in enumerate(run_dirs):
        earlier = earlier_job(run_dir, states)
        if earlier:
            watched[index] = earlier[0]
            log(
                f"sweep: {run_dir} is in SLURM job {earlier[0].job_id} ({earlier[1].state.lower()}) of an earlier "
                f"sweep command: waiting for it rather than submitting it again"
            )
    missing = [i for i in range(len(jobs)) if i not in watched]
    if missing:
        check_slurm_request(options)
    try:
        if missing:  # (a Ctrl-C meanwhile stops the sweep once every job is submitted and recorded)
            submitted = submit_array([jobs[i] for i in missing], [run_dirs[i] for i in missing], options)
            watched.update(zip(missing, submitted))
        outcomes = watch_slurm(watched, run_dirs)
    except KeyboardInterrupt:  # the jobs are the cluster's now: they go on
        log(
            "sweep: the SLURM jobs go on without this command (squeue; scancel to stop them, each saves a "
            "checkpoint); run the same command again: it waits for them rather than submitting them again"
        )
        raise
    return [outcomes[i] for i in range(len(jobs))]

r"""Train, test and compare a list of configs in one command: one after another in this process, or as
jobs run side by side on this machine's GPUs or CPUs, or on a SLURM cluster (submitit). Resumable.

Examples:
  python sweep.py configs/demo/sinusoidal.yaml configs/demo/learnable.yaml configs/demo/rope.yaml \
      --output runs/demo/summary                                   # what `make demo` runs
  python sweep.py configs/demo/sinusoidal.yaml configs/demo/rope.yaml --seeds 1 2 3 \
      --output runs/demo/seeds_summary          # runs/demo/<encoding>_seed<N>, one row per config
  python sweep.py configs/length/*.yaml --seeds 1 2 --launcher local --runs_per_gpu 4 \
      --output runs/length/summary              # 4 runs at a time on each GPU of this machine
  python sweep.py configs/iwslt2017/*.yaml --launcher slurm --partition gpu --time 24:00:00 \
      --gpus_per_run 1 --cpus_per_run 8 --mem 64G --output runs/iwslt/summary

With --seeds, every config runs once per seed into <run folder>_seed<N> (run folder: runs/<name>,
or --runs_root/<name>, or the config's own run_dir); without it, once with the config's own seed,
into its own run folder.

Launchers: `serial` (default) trains and tests the runs one after another in this process;
`local` runs each (config, seed) as a submitit job, a process of its own on this machine, at most
--parallel at a time, each with --gpus_per_run GPUs (CUDA_VISIBLE_DEVICES), --runs_per_gpu of them
sharing a GPU; `slurm` submits them as a SLURM job array (--partition, --time, --gpus_per_run,
--cpus_per_run, --mem, --slurm_array_parallelism, --slurm_setup), checked with sbatch --test-only
before anything is submitted. A SLURM job stopped by its time limit or a preemption is requeued and
resumes from the run's last checkpoint (after a time limit at most 3 times, submitit's limit; then
the sweep reports it and the next sweep resumes it). A job cancelled or failed is reported by run,
with how it ended, and the sweep exits non-zero; run it again to submit only what is missing. A
sweep stopped by Ctrl-C leaves its SLURM jobs running: the same command again waits for them
rather than submitting them twice. submitit's logs go to <sweep folder>/submitit/<date-time>/<job
id>_* (sweep folder: the folder of --output, else --runs_root, else runs/).

Under every launcher, a sweep never deletes a run. A run that trained to its end and has
test/scores.json is skipped (tested again where its test is stale: training went on to a better
checkpoint since, artifacts/tested_run.py); one with a last checkpoint is resumed (training continues if it is not
finished, e.g. after a Ctrl-C), then tested; one that kept only best checkpoints is tested as it is;
one that never saved a checkpoint starts again. A run folder holding files that are not the
harness's, or a run of another configuration (its config.yaml differs in experiment keys), is
reported and left alone (exit code 2 once the other runs are done). A training stopped by a signal
is never tested as finished (exit code 4); run the same command again to continue. The summary is
written once every run has ended. Pass --set overrides to every run (e.g. --set
training.max_steps=50 for a smoke test); testing takes only those that may change at test time
(decoding.*, evaluation.*, ...), since the others are in the trained run already. With --family, every
run is also tested on each file pair the family's test_sets declare, into <run>/test_set_<name>/ (a
folder of that name holding another test is refused, never overwritten).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from pathlib import Path
from typing import Optional, Sequence

from commands.cli import EXIT_INTERRUPTED, command_parser, parse_command
from commands.compare import compare
from commands.launch_flags import LAUNCH_FLAGS, add_launch_flags, launch_options
from commands.launchers import LaunchOptions, run_local
from commands.slurm import forget_finished_run, run_slurm
from commands.sweep_job import Outcome, SweepJob, run_one, triage
from commands.sweep_plan import RunPlan, check_variants, declared_file_sets, expand_runs, plan_variants
from utils.run_log import log

ROOT = Path(__file__).resolve().parents[1]  # the project, for the jobs' PYTHONPATH


def build_parser() -> argparse.ArgumentParser:
    parser = command_parser(
        __doc__,
        sets="override applied to every config (repeatable)",
        output="path prefix of the summary (.md, .csv, .json and plots: see compare.py), the sweep's own: "
        "written anew each time the sweep runs",
    )
    parser.add_argument("configs", nargs="+", help="YAML configs to run, in order")
    parser.add_argument(
        "--seeds",
        type=int,
        nargs="+",
        metavar="N",
        help="run every config once per seed, into <run folder>_seed<N> (default: the config's "
        "own seed, into its own run folder)",
    )
    parser.add_argument(
        "--variant",
        nargs="+",
        action="append",
        default=[],
        metavar="NAME KEY=VALUE",
        help="also test every run with these test-time overrides, into <run>/test_<NAME>/ "
        "(repeatable; compare.py shows each as a row of its own), e.g. --variant yarn4 "
        "model.positional.scaling=yarn model.positional.scaling_factor=4; a run whose "
        "encoding does not take a key is not tested with it",
    )
    parser.add_argument(
        "--family",
        metavar="YAML",
        help="the study's declared headline comparisons for the summary's findings (compare.py "
        "--family, e.g. configs/demo/findings/headline.yaml); every run is also tested on each file pair "
        "its test_sets declare, into <run>/test_set_<name>/",
    )
    parser.add_argument(
        "--runs_root",
        metavar="DIR",
        help="put run folders under DIR/<name> instead of runs/<name> (ignored for a config whose run_dir is set)",
    )
    add_launch_flags(parser)
    return parser


def run_serial(runs: list[RunPlan]) -> list[Outcome]:
    """One run after another in this process; the first run that fails or is interrupted stops the sweep."""
    outcomes = []
    for plan in runs:
        outcomes.append(run_one(plan))
        if outcomes[-1].status in ("failed", "interrupted"):
            break
    return outcomes


def run_as_jobs(runs: list[RunPlan], options: LaunchOptions) -> list[Outcome]:
    """The runs that need work as submitit jobs (local or slurm); the others are settled here."""
    outcomes, jobs, run_dirs = [], [], []
    for plan in runs:
        run_dir = str(plan.run_dir)
        action, why = triage(plan.config, plan.cfg)
        if action == "left_alone":
            log(f"sweep: left alone: {why}")
            outcomes.append(Outcome(run_dir, "left_alone", message=why))
        elif action == "finished" and not plan.variants and not plan.test_sets:
            log(f"sweep: {why}: skipped")
            forget_finished_run(run_dir)
            outcomes.append(Outcome(run_dir, "scored"))
        else:
            jobs.append(SweepJob(plan.absolute(), workdir=os.getcwd()))
            run_dirs.append(run_dir)
    if jobs:
        options.log_dir.mkdir(parents=True, exist_ok=True)
        # a job process imports this project's modules (commands.sweep_job, ...) wherever it starts
        before = os.environ.get("PYTHONPATH")
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), before]))
        try:
            ended = (run_local if options.launcher == "local" else run_slurm)(jobs, run_dirs, options)
        finally:
            if before is None:
                os.environ.pop("PYTHONPATH", None)
            else:
                os.environ["PYTHONPATH"] = before
        for outcome, run_dir in zip(ended, run_dirs):
            outcome.run_dir = run_dir  # as this sweep names it (the job had it absolute)
        outcomes += ended
    return outcomes


def main(argv: Optional[list[str]] = None) -> int:
    args = vars(parse_command(build_parser(), argv))
    launch = launch_options(args["output"], args["runs_root"], **{key: args.pop(key) for key in LAUNCH_FLAGS})
    return sweep(**args, launch=launch)


def sweep(
    configs: Sequence[str],
    overrides: Sequence[str] = (),
    seeds: Optional[Sequence[int]] = None,
    variant: Sequence[Sequence[str]] = (),
    family: Optional[str] = None,
    runs_root: Optional[str] = None,
    output: Optional[str] = None,
    launch: Optional[LaunchOptions] = None,
) -> int:
    """Train, test and compare `configs`, as sweep.py does; `launch`: how (default: one after another
    in this process)."""
    variants = check_variants([list(v) for v in variant])
    options = launch or launch_options(output, runs_root)
    runs = expand_runs(list(configs), list(overrides), list(seeds) if seeds else None, runs_root)
    runs = plan_variants(runs, variants)
    if family:
        sets = declared_file_sets(family)
        runs = [dataclasses.replace(r, test_sets=sets) for r in runs]
    try:
        outcomes = run_serial(runs) if options.launcher == "serial" else run_as_jobs(runs, options)
    except KeyboardInterrupt:
        log("sweep: stopped (Ctrl-C); run the same command again to resume")
        return EXIT_INTERRUPTED
    by_run = {o.run_dir: o for o in outcomes}
    order = [str(plan.run_dir) for plan in runs]  # the summary lists runs in sweep order
    return settle([by_run[d] for d in order if d in by_run], len(order), options.launcher == "serial", output, family)


def settle(settled: list[Outcome], planned: int, serial: bool, output: Optional[str], family: Optional[str]) -> int:
    """Report how the runs ended, write the summary once every run is scored, and return the exit code."""
    for outcome in settled:
        if outcome.status in ("failed", "interrupted"):
            log(f"sweep: {outcome.message}")
    failed = [o for o in settled if o.status == "failed"]
    if failed and serial:  # the commands' own exit code, as before
        return failed[0].rc
    interrupted = [o for o in settled if o.status == "interrupted"]
    if interrupted and serial:
        return EXIT_INTERRUPTED
    scored = [o.run_dir for o in settled if o.status == "scored"]
    if scored and len(scored) == planned - sum(o.status == "left_alone" for o in settled):
        rc = compare(scored, output=output, family=family, overwrite=True)  # the sweep's own summary
        if rc:
            return rc
    elif scored:
        log(f"sweep: {planned - len(scored)} run(s) not scored yet: no summary (run the same command again)")
    if failed:
        return max(o.rc for o in failed) or 1
    if interrupted:
        return EXIT_INTERRUPTED
    left_alone = [o.run_dir for o in settled if o.status == "left_alone"]
    if left_alone:
        log(
            f"sweep: {len(left_alone)} run folder(s) left alone: {', '.join(left_alone)}; move them "
            f"away or set run_dir / --runs_root"
        )
        return 2
    return 0

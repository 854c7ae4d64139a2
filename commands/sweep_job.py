"""One run of a sweep: decide what its folder needs (nothing, a resume, a test, a fresh start, or to be
left alone), then train and test it. Every launcher (commands/launchers.py) runs exactly this, so the
guards hold under all of them: a finished run is skipped, an interrupted one resumed from its last
checkpoint and never tested as finished, a folder of another configuration or of the user's left
alone, and nothing deleted. `SweepJob` is the submitit job: checkpointable, so a SLURM job stopped
by a timeout or a preemption is requeued and resumes from the run's last checkpoint."""

from __future__ import annotations

import json
import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

import submitit

from artifacts.tested_run import run_stale_test
from commands.cli import EXIT_INTERRUPTED, describe_failure
from commands.sweep_plan import FileSet, RunPlan, Variant
from commands.test import run_test
from commands.test_request import TestRequest
from commands.train import train
from settings.config import (
    ExperimentConfig,
    Override,
    dump_text,
    flatten,
    is_written_config,
    load_config,
    parse_override,
    to_dict,
)
from settings.key_roles import refused_on_resume, role_of
from settings.schema import INFERENCE, RUNTIME
from study.read.test_sets import held_sides, other_sides
from training.handlers import budget_reached
from utils import run_files
from utils.errors import HarnessError
from utils.publish import clear_orphans, settle_run
from utils.run_folder import RunFolder, RunLock
from utils.run_log import JsonlLogger, log
from utils.stored_files import read_text, stored_exists
from utils.write_points import start_point


@dataclass
class Outcome:
    """How one run of a sweep ended: scored (tested now or before), left_alone (not this sweep's to
    touch), interrupted (stopped by a signal after a checkpoint: resumable) or failed (rc, message)."""

    run_dir: str
    status: str
    rc: int = 0
    message: str = ""


def overrides_for_testing(overrides: Sequence[str | Override], encoding: str) -> list[str | Override]:
    """The overrides that change how test.py decodes and scores (settings/key_roles.py); the others
    (seed, run_dir, model.*, training.*) made the trained run."""
    return [o for o in overrides if role_of(parse_override(o).key, encoding) in (INFERENCE, RUNTIME)]


def compared_with_run(saved: ExperimentConfig, cfg) -> tuple[Optional[str], Optional[str]]:
    """How the run whose config.yaml is `saved` differs from `cfg` ('key: old -> new; ...' each, None
    when it does not): (its experiment keys: another configuration, whatever a resume may make; the
    keys a resume may change (learning rate, budget, cadence, ...), test-time and runtime keys aside:
    a finished run trained otherwise than this sweep asks). One comparison for both."""
    encoding = saved.model.positional.name
    changed, refused, _ = refused_on_resume(flatten(to_dict(saved)), flatten(to_dict(cfg)), encoding)
    training = [
        k
        for k in sorted(changed)
        if k not in refused and k not in ("name", "run_dir") and role_of(k, encoding) not in (INFERENCE, RUNTIME)
    ]

    def listed(keys) -> Optional[str]:
        return "; ".join(f"{k}: {changed[k][0]!r} -> {changed[k][1]!r}" for k in keys) or None

    return listed(refused), listed(training)


def training_finished(run_dir: Path, cfg, saved: ExperimentConfig) -> bool:
    """Whether the run's training (its config.yaml: `saved`) reached its end (its budget or early
    stopping) rather than being stopped by a signal (runs logged before the harness recorded this
    count as finished), and the budget this sweep asks for (max_steps / epochs) is no larger than
    the one it trained to."""
    last = last_end(run_dir)
    trained = saved.training
    if last is None or not last.get("finished", True):
        return False
    wanted = cfg.training
    if (wanted.max_steps, wanted.epochs) == (trained.max_steps, trained.epochs):
        return True  # the budget it trained to (early stopping included)
    return budget_reached(wanted, last["step"], last["epoch"])


def test_changes(run_dir: Path, cfg, folder: str = "test", concat: Optional[Sequence[int]] = None) -> Optional[str]:
    """How the run's <folder>/scores.json (test/, or a variant's test_<name>/) was scored differently
    from what `cfg` asks: the search (decoding.*), the k's of joined inputs (`concat`, default the
    config's), the teacher-forced diagnostic. None when the same."""
    try:
        scores = json.loads(read_text(run_dir / folder / run_files.SCORES) or "")
    except ValueError:
        return "its scores.json does not parse"
    tested = flatten({"decoding": scores.get("decoding") or {}})
    wanted = flatten({"decoding": to_dict(cfg.decoding)})
    found = [
        f"{k}: {tested.get(k)!r} -> {wanted.get(k)!r}"
        for k in sorted(set(tested) | set(wanted))
        if tested.get(k) != wanted.get(k)
    ]
    ks = sorted({row.get("k") for row in scores.get("concat", [])} | set(scores.get("concat_not_scored", [])))
    wanted_ks = sorted(set(cfg.evaluation.concat if concat is None else concat))
    if ks != wanted_ks:
        found.append(f"evaluation.concat: {ks} -> {wanted_ks}")
    if ("teacher_forced" in scores) != bool(cfg.evaluation.teacher_forced):
        found.append(f"evaluation.teacher_forced: {'teacher_forced' in scores} -> {cfg.evaluation.teacher_forced}")
    return "; ".join(found) or None


def last_end(run_dir: Path) -> Optional[dict]:
    """The run's last `end` event in metrics.jsonl (how its newest training ended), if any."""
    try:
        ends = [r for r in JsonlLogger(run_dir / run_files.METRICS).history() if r.get("event") == "end"]
    except (ValueError, OSError):
        return None
    return ends[-1] if ends else None


def triage(config: str, cfg) -> tuple[str, str]:
    """(what the run of `config` (loaded, with the sweep's overrides: `cfg`) needs, why): 'left_alone',
    'finished' (trained to its end and scored), 'test' (kept best checkpoints only: tested as it
    is), 'resume' or 'train'."""
    run_dir = cfg.resolved_run_dir
    folder = RunFolder.inspect(run_dir, is_written_config)
    if folder.state == "foreign":
        return "left_alone", folder.describe_foreign()
    saved, differences, trained_otherwise = None, None, None
    if folder.state != "absent":  # its config.yaml, read once
        try:
            saved = load_config(run_dir / run_files.CONFIG)
            differences, trained_otherwise = compared_with_run(saved, cfg)
        except HarnessError as e:
            differences = f"its config.yaml does not load: {e}"
    if differences:  # compare before skipping: a folder of another experiment is not this run
        return "left_alone", f"{run_dir} holds a run of another configuration than {config} ({differences})"
    if saved and stored_exists(run_dir / "test" / run_files.SCORES) and training_finished(run_dir, cfg, saved):
        if trained_otherwise:  # its scores would pass for this sweep's settings
            return "left_alone", (
                f"{run_dir} finished training with other settings than this sweep's ({trained_otherwise}): "
                f"give this sweep another --runs_root, or start that run over"
            )
        stale = run_stale_test(run_dir, "test", cfg.training.checkpoint_metric)
        if stale:  # trained further after its test (train.py --run): the test is of an earlier best
            return "test", f"{run_dir}: {stale}: tested again"
        tested_otherwise = test_changes(run_dir, cfg)
        if tested_otherwise:
            return "test", f"{run_dir} was scored with other test-time settings ({tested_otherwise}): tested again"
        return "finished", f"{run_dir} is finished (trained to its end, test/scores.json exists)"
    checkpoints = run_dir / "checkpoints"
    if folder.state == "trained" and not any(checkpoints.glob("*.pt")):
        return "left_alone", f"{run_dir} holds results of a run but no checkpoint and no scores"
    if folder.state == "trained" and not any(checkpoints.glob("last_*.pt")):
        return "test", f"{run_dir} kept best checkpoints only: tested as it is, not trained further"
    return ("resume" if folder.state == "trained" else "train"), f"{config} -> {run_dir}"


def finish_own_sets(run_dir: Path) -> None:
    """A sweep writes its runs' test sets (it runs test.py), so before it looks at a run nobody holds,
    it finishes a test set a stopped sweep left half published and removes staging a kill left
    before publishing (utils/publish.py), instead of skipping the run or sending the user to a
    test.py command they never typed."""
    if (
        not run_dir.is_dir()
        or RunLock.holder(run_dir)
        or RunFolder.inspect(run_dir, is_written_config).state == "foreign"
    ):
        return  # (a run in use: its holder finishes its own; a folder of the user's: left alone)
    with RunLock(run_dir, "sweep.py"):
        settle_run(run_dir, "sweep.py")
        for folder in clear_orphans(run_dir):
            log(f"sweep: removed {folder}, which a stopped test left unpublished")


def run_one(plan: RunPlan) -> Outcome:
    """Train (or resume) and test one run of a sweep, then test it once per variant; its config as
    the sweep validated it (`plan.cfg`), never loaded again."""
    config, cfg, run_dir = plan.config, plan.cfg, plan.run_dir
    finish_own_sets(run_dir)
    action, why = triage(config, cfg)
    if action == "left_alone":
        log(f"sweep: left alone: {why}")
        return Outcome(str(run_dir), "left_alone", message=why)
    if action == "finished":
        log(f"sweep: {why}: skipped")
    else:
        if action == "test":
            log(f"sweep: {why}")
        else:
            log(f"sweep: {'resuming' if action == 'resume' else 'training'} {why}")
            rc = train(config=config, cfg=cfg, resume=action == "resume")
            if rc == EXIT_INTERRUPTED:
                return Outcome(
                    str(run_dir),
                    "interrupted",
                    rc,
                    f"{run_dir}: training was stopped by a signal after a checkpoint; run the sweep again to resume it",
                )
            if rc:
                return Outcome(str(run_dir), "failed", rc, f"{run_dir}: training ended with exit code {rc}")
        # Testing takes only the overrides that may change at test time (decoding, evaluation, ...):
        # the rest (seed, run_dir, model.*, training.*) made the run and is in its checkpoint.
        rc = run_test(
            TestRequest(
                run=str(run_dir),
                overrides=overrides_for_testing(plan.overrides, cfg.model.positional.name),
                overwrite=True,
            )
        )  # replaces only <run>/test/
        if rc:
            return Outcome(str(run_dir), "failed", rc, f"{run_dir}: testing ended with exit code {rc}")
    rc = score_variants(run_dir, plan.variants, plan.overrides, cfg)
    if rc:
        return Outcome(str(run_dir), "failed", rc, f"{run_dir}: testing a variant ended with exit code {rc}")
    try:
        rc = score_test_sets(run_dir, plan.test_sets, plan.overrides, cfg)
    except HarnessError as e:  # a folder of that name holding another test: this run alone, the others go on
        log(f"sweep: left alone: {e}")
        return Outcome(str(run_dir), "left_alone", message=str(e))
    if rc:
        return Outcome(str(run_dir), "failed", rc, f"{run_dir}: testing a declared test set ended with exit code {rc}")
    return Outcome(str(run_dir), "scored")


def score_variants(
    run_dir: Path,
    variants: Sequence[Variant],
    overrides: Sequence[str | Override],
    trained_as: Optional[ExperimentConfig] = None,
) -> int:
    """Test a scored run once per variant into <run>/test_<name>/: skipped where that was scored with
    the same test-time settings, tested again where they changed (as the main test is), not tested
    where the run's encoding does not take one of the variant's keys. A variant planned for the run
    (commands/sweep_plan.py) keeps its config where the run was trained as `trained_as` (its config.yaml
    is that config, written); otherwise the run folder's config decides."""
    written = trained_as is not None and read_text(run_dir / run_files.CONFIG) == dump_text(trained_as)
    trained = trained_as if written else None
    for variant in variants:
        name, out = variant.name, run_dir / f"test_{variant.name}"
        try:
            if trained is None:  # the folder's config (read once), as trained
                trained = load_config(run_dir / run_files.CONFIG)
            wanted = [*overrides_for_testing(overrides, trained.model.positional.name), *variant.overrides]
            if written and variant.planned:
                cfg = variant.tested
                if cfg is None:
                    raise HarnessError(variant.why_not)
            else:
                cfg = load_config(raw=to_dict(trained), overrides=wanted)
        except HarnessError as e:
            log(f"sweep: variant {name} does not apply to {run_dir} ({e}): not tested")
            continue
        if stored_exists(out / run_files.SCORES):
            changed = test_changes(run_dir, cfg, out.name)
            stale = run_stale_test(run_dir, out.name, cfg.training.checkpoint_metric)
            if not changed and not stale:
                log(f"sweep: {out} is scored: skipped")
                continue
            log(
                f"sweep: {run_dir}: {stale}: tested again"
                if stale
                else f"sweep: {out} was scored with other test-time settings ({changed}): tested again"
            )
        log(f"sweep: testing {run_dir} as variant {name} ({variant})")
        rc = run_test(TestRequest(run=str(run_dir), overrides=wanted, output=str(out), overwrite=True))
        if rc:
            return rc
    return 0


def score_test_sets(run_dir: Path, sets: Sequence[FileSet], overrides: Sequence[str | Override], cfg) -> int:
    """Test a scored run on each file pair its family declares, into <run>/test_set_<name>/: skipped
    where that set was scored with the same model and test-time settings, tested again where they
    changed. A folder of that name holding anything else (a test.py output of another file, files of
    the user's) is refused in one line, never overwritten."""
    wanted = overrides_for_testing(overrides, cfg.model.positional.name)
    for s in sets:
        out = run_dir / s.folder
        if out.exists():
            held = held_test_set(out)
            if held is None or held_sides(held) != s.sha256:
                other = f"a test of other files ({other_sides(held, s.sha256, (s.src, s.ref))})" if held else None
                what = other or "files that are no test of it"
                raise HarnessError(
                    f"{out} holds {what}, not the declared test set {s.name!r}: move it away, then run the sweep again"
                )
            if not test_changes(run_dir, cfg, out.name, concat=[1]) and not run_stale_test(
                run_dir, out.name, cfg.training.checkpoint_metric
            ):
                log(f"sweep: {out} is scored: skipped")
                continue
        log(f"sweep: testing {run_dir} on the declared test set {s.name} ({s.src})")
        on_set = dict(src=s.src, ref=s.ref, concat=[1], output=str(out), overwrite=True)
        rc = run_test(TestRequest(str(run_dir), overrides=wanted, **on_set))
        if rc:
            return rc
    return 0


def held_test_set(folder: Path) -> Optional[dict]:
    """The `test_set` a test folder's scores.json names (None: no readable scores.json)."""
    try:
        held = json.loads(read_text(folder / run_files.SCORES) or "").get("test_set")
    except (ValueError, AttributeError):
        return None
    return held if isinstance(held, dict) else None


def stop_request(paths) -> Path:
    """The file by which the sweep asks a local job (its submitit JobPaths) to stop, written before
    the job's SIGTERM: the job reads it once its handlers are in place (SweepJob), so a stop sent
    before then still stops it (submitit's handler drops a SIGTERM there, and a controller that has
    not started its job yet passes it to no one)."""
    return paths.folder / f"{paths.job_id}_stop"


def stop_requested() -> bool:
    """Whether the sweep asked this local job to stop (stop_request); False outside a job."""
    try:
        return stop_request(submitit.JobEnvironment().paths).exists()
    except RuntimeError:  # not in a submitit job (called directly)
        return False


def ignore_stop_signals() -> None:
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)


def guarded(run_dir: str, work) -> Outcome:
    """`work()`'s Outcome, under the entry scripts' guard (commands.cli.describe_failure, as main_guard):
    an expected error is one line in the job's log and a failed Outcome naming it; a signal outside
    training (SIGTERM of a requeue or scancel, SIGINT) is one line and the job ends without a result
    (interrupted). Never a traceback in the job's log for what the user can cause."""
    try:
        return work()
    except BaseException as error:  # noqa: BLE001 - what describe_failure does not know is raised again
        if isinstance(error, KeyboardInterrupt):
            ignore_stop_signals()  # SLURM may send SIGTERM twice (the step and the batch script): one line
        failure = describe_failure(error)
        if failure is None:
            raise
    rc, line = failure
    print(line, file=sys.stderr, flush=True)
    if rc == EXIT_INTERRUPTED:
        raise SystemExit(EXIT_INTERRUPTED)  # no result: the run is resumed by the next sweep
    return Outcome(run_dir, "failed", rc, line.removeprefix("error: "))


class SweepJob(submitit.helpers.Checkpointable):
    """One run as a submitit job (a local process or a SLURM job), run in the sweep's working folder.

    A job that a signal stops (SLURM's requeue or preemption sends SIGTERM; a time limit, SIGUSR2
    shortly before it) finishes its training step, saves a checkpoint and exits without a result (or,
    outside training, exits at once), so the sweep never takes it for finished; SLURM runs a requeued
    job again, and it resumes. On SIGUSR2 it then asks submitit to requeue it (submitit's own handler,
    deferred until the checkpoint is saved)."""

    def __init__(self, plan: RunPlan, workdir: str) -> None:
        self.plan, self.workdir = plan, workdir  # (the plan typed and validated by the sweep: it pickles)

    def __call__(self) -> Outcome:
        os.chdir(self.workdir)
        start_point("sweep job")  # (tests stop a job here: submitit drops SIGTERM until `started`)
        requeue = signal.getsignal(signal.SIGUSR2)  # submitit's checkpoint-and-requeue, while training defers it
        outcome = guarded(self.run_dir, self.started)
        if outcome.status == "interrupted":
            ignore_stop_signals()  # the job ends now: a second SIGTERM must not end it with a traceback
            end = last_end(Path(outcome.run_dir)) or {}
            if end.get("stopped_by_signal") == signal.SIGUSR2 and callable(requeue):
                requeue(signal.SIGUSR2, None)  # calls self.checkpoint(), requeues the job and exits
            raise SystemExit(EXIT_INTERRUPTED)  # no result: the job is not over (SLURM reruns a requeued one)
        return outcome

    def started(self) -> Outcome:
        """run_one, once SIGINT / SIGTERM end the job at once, without a result (interrupted), outside
        training (its start-up, testing; while it trains, training's own handlers stop it after a
        checkpoint): submitit's handler would drop SIGTERM, and a local job inherits SIGINT blocked
        (launchers.ctrl_c_deferred). A stop the sweep asked for before (stop_request) ends it here."""
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.default_int_handler)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # a Ctrl-C held since the job started ends it
        if stop_requested():
            raise KeyboardInterrupt
        return run_one(self.plan)

    @property
    def run_dir(self) -> str:
        """The run folder (absolute: RunPlan.absolute)."""
        return str(self.plan.run_dir)

    def __repr__(self) -> str:
        return f"SweepJob({self.plan.config} {' '.join(o.text for o in self.plan.overrides)})"

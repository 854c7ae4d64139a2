#!/usr/bin/env python
"""Train, test and compare a list of configs in one command (sequential and resumable).

Examples:
  python sweep.py configs/demo/sinusoidal.yaml configs/demo/learnable.yaml configs/demo/rope.yaml \
      --output runs/demo/summary                                   # what `make demo` runs
  python sweep.py configs/demo/sinusoidal.yaml configs/demo/rope.yaml --seeds 1 2 3 \
      --output runs/demo/seeds_summary          # runs/demo/<encoding>_seed<N>, one row per config

With --seeds, every config runs once per seed into <run folder>_seed<N> (run folder: runs/<name>,
or --runs_root/<name>, or the config's own run_dir); without it, once with the config's own seed,
into its own run folder, as before.

A sweep never deletes a run. A run that trained to its end and has test/scores.json is skipped;
one with a last checkpoint is resumed (training continues if it is not finished, e.g. after a
Ctrl-C), then tested; one that kept only best checkpoints is tested as it is; one that never
saved a checkpoint starts again. A run folder holding files that are not the harness's, or a run
of another configuration (its config.yaml differs in experiment keys), is reported and left
alone (exit code 2 once the other runs are done). A training stopped by a signal stops the sweep
(exit code 4); run the same command again to continue. Pass --set overrides to every run (e.g. --set
training.max_steps=50 for a smoke test); testing takes only those that may change at test time
(decoding.*, evaluation.*, ...), since the others are in the trained run already.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
from pathlib import Path
from typing import Optional

import compare
import train as train_cmd
from training.run_folder import RunFolder
from utils.cli import main_guard
from utils.config import ConfigError, flatten, load_config, parse_override, to_dict
from utils.config_schema import INFERENCE, RUNTIME
from utils.errors import HarnessError
from utils.key_roles import refused_on_resume, role_of
from utils.runtime import JsonlLogger, log


def _load_test_command():
    """test.py as a module; loaded from its file, since `import test` names Python's own test package."""
    spec = importlib.util.spec_from_file_location("test_command", Path(__file__).with_name("test.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


test_cmd = _load_test_command()


def expand_runs(configs: list[str], overrides: list[str], seeds: Optional[list[int]],
                runs_root: Optional[str]) -> list[tuple[str, list[str]]]:
    """(config, overrides) per run: one per config, or one per config and seed with its own run folder."""
    runs = []
    for config in configs:
        cfg = load_config(config, overrides)
        base = Path(cfg.run_dir) if cfg.run_dir else Path(runs_root or "runs") / cfg.name
        if not seeds:
            runs.append((config, overrides if cfg.run_dir or not runs_root else [*overrides, f"run_dir={base}"]))
            continue
        for seed in seeds:
            runs.append((config, [*overrides, f"seed={seed}", f"run_dir={base}_seed{seed}"]))
    return runs


def test_time_overrides(overrides: list[str], encoding: str) -> list[str]:
    """The overrides that change how test.py decodes and scores (utils/key_roles.py); the others
    (seed, run_dir, model.*, training.*) made the trained run."""
    return [o for o in overrides if role_of(".".join(parse_override(o)[0]), encoding) in (INFERENCE, RUNTIME)]


def other_configuration(run_dir: Path, cfg) -> Optional[str]:
    """The experiment keys in which the run in `run_dir` differs from `cfg` ('key: old -> new; ...'),
    or None when it is this configuration (differences a resume may make, e.g. max_steps, are fine)."""
    try:
        saved = load_config(run_dir / "config.yaml")
    except HarnessError as e:
        return f"its config.yaml does not load: {e}"
    changed, refused, _ = refused_on_resume(flatten(to_dict(saved)), flatten(to_dict(cfg)),
                                            saved.model.positional.name)
    return "; ".join(f"{k}: {changed[k][0]!r} -> {changed[k][1]!r}" for k in refused) or None


def training_finished(run_dir: Path, cfg) -> bool:
    """Whether the run's training reached its end (its budget or early stopping) rather than being
    stopped by a signal (runs logged before the harness recorded this count as finished), and the
    budget this sweep asks for (max_steps / epochs) is no larger than the one it trained to."""
    try:
        ends = [r for r in JsonlLogger(run_dir / "metrics.jsonl").history() if r.get("event") == "end"]
        trained = load_config(run_dir / "config.yaml").training
    except (ValueError, HarnessError):
        return False
    if not ends or not ends[-1].get("finished", True):
        return False
    last, wanted = ends[-1], cfg.training
    if (wanted.max_steps, wanted.epochs) == (trained.max_steps, trained.epochs):
        return True  # the budget it trained to (early stopping included)
    return last["step"] >= wanted.max_steps if wanted.max_steps is not None else last["epoch"] >= wanted.epochs


def check_variants(given: list[list[str]]) -> list[tuple[str, list[str]]]:
    """--variant NAME KEY=VALUE ... as (name, overrides); the name becomes a folder name."""
    variants = []
    for name, *overrides in given:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", name) or "=" in name:
            raise ConfigError(f"--variant {name}: give a name first (letters, digits, _ . -), then KEY=VALUE "
                              f"overrides, e.g. --variant yarn4 model.positional.scaling=yarn")
        if not overrides:
            raise ConfigError(f"--variant {name}: give the test-time overrides after the name (KEY=VALUE ...)")
        for override in overrides:
            parse_override(override)  # one line naming a malformed KEY=VALUE
        variants.append((name, overrides))
    return variants


def test_variants(run_dir: Path, variants: list[tuple[str, list[str]]], overrides: list[str]) -> int:
    """Test a scored run once per variant into <run>/test_<name>/ (skipped where that exists, and
    where the run's encoding does not take one of the variant's keys)."""
    for name, variant in variants:
        out = run_dir / f"test_{name}"
        if (out / "scores.json").is_file():
            log(f"sweep: {out} is scored: skipped")
            continue
        try:
            encoding = load_config(run_dir / "config.yaml", variant).model.positional.name
        except ConfigError as e:
            log(f"sweep: variant {name} does not apply to {run_dir} ({e}): not tested")
            continue
        sets = [x for o in [*test_time_overrides(overrides, encoding), *variant] for x in ("--set", o)]
        log(f"sweep: testing {run_dir} as variant {name} ({' '.join(variant)})")
        rc = test_cmd.main(["--run", str(run_dir), *sets, "--output_dir", str(out), "--overwrite"])
        if rc:
            return rc
    return 0


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("configs", nargs="+", help="YAML configs to run, in order")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override applied to every config (repeatable)")
    parser.add_argument("--output", help="path prefix of the summary (.md, .csv, .json and plots: see compare.py)")
    parser.add_argument("--seeds", type=int, nargs="+", metavar="N",
                        help="run every config once per seed, into <run folder>_seed<N> (default: the config's "
                             "own seed, into its own run folder)")
    parser.add_argument("--variant", nargs="+", action="append", default=[], metavar="NAME KEY=VALUE",
                        help="also test every run with these test-time overrides, into <run>/test_<NAME>/ "
                             "(repeatable; compare.py shows each as a row of its own), e.g. --variant yarn4 "
                             "model.positional.scaling=yarn model.positional.scaling_factor=4; a run whose "
                             "encoding does not take a key is not tested with it")
    parser.add_argument("--runs_root", metavar="DIR",
                        help="put run folders under DIR/<name> instead of runs/<name> (ignored for a config "
                             "whose run_dir is set)")
    args = parser.parse_args(argv)
    variants = check_variants(args.variant)
    run_dirs, left_alone = [], []
    for config, overrides in expand_runs(args.configs, args.overrides, args.seeds, args.runs_root):
        cfg = load_config(config, overrides)
        run_dir = cfg.resolved_run_dir
        sets = [x for o in overrides for x in ("--set", o)]
        folder = RunFolder.inspect(run_dir)
        if folder.state == "foreign":
            log(f"sweep: left alone: {folder.describe_foreign()}")
            left_alone.append(run_dir)
            continue
        differences = other_configuration(run_dir, cfg) if folder.state != "absent" else None
        if differences:  # compare before skipping: a folder of another experiment is not this run
            log(f"sweep: left alone: {run_dir} holds a run of another configuration than {config} "
                f"({differences})")
            left_alone.append(run_dir)
            continue
        if (run_dir / "test" / "scores.json").is_file() and training_finished(run_dir, cfg):
            log(f"sweep: {run_dir} is finished (trained to its end, test/scores.json exists): skipped")
            run_dirs.append(run_dir)
            continue
        checkpoints = run_dir / "checkpoints"
        if folder.state == "trained" and not any(checkpoints.glob("*.pt")):
            log(f"sweep: left alone: {run_dir} holds results of a run but no checkpoint and no scores")
            left_alone.append(run_dir)
            continue
        if folder.state == "trained" and not any(checkpoints.glob("last_*.pt")):
            log(f"sweep: {run_dir} kept best checkpoints only: tested as it is, not trained further")
        else:
            resume = folder.state == "trained"
            log(f"sweep: {'resuming' if resume else 'training'} {config} -> {run_dir}")
            rc = train_cmd.main(["--config", config, *sets, *(["--resume"] if resume else [])])
            if rc:
                return rc
        # Testing takes only the overrides that may change at test time (decoding, evaluation, ...):
        # the rest (seed, run_dir, model.*, training.*) made the run and is in its checkpoint.
        test_sets = [x for o in test_time_overrides(overrides, cfg.model.positional.name) for x in ("--set", o)]
        rc = test_cmd.main(["--run", str(run_dir), *test_sets, "--overwrite"])  # replaces only <run>/test/
        if rc:
            return rc
        run_dirs.append(run_dir)
    for run_dir in run_dirs:
        rc = test_variants(run_dir, variants, args.overrides)
        if rc:
            return rc
    if run_dirs:
        rc = compare.main([str(d) for d in run_dirs] + (["--output", args.output] if args.output else []))
        if rc:
            return rc
    if left_alone:
        log(f"sweep: {len(left_alone)} run folder(s) left alone: {', '.join(map(str, left_alone))}; move them "
            f"away or set run_dir / --runs_root")
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main_guard(main))

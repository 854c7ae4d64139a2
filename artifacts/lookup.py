"""Which model a command means: the lookup of --model_path (a checkpoint file or an export folder),
--run (its best checkpoint) or --config (its run folder's best), with one line naming the flag that
fits when the path is something else, and the run folder a checkpoint belongs to."""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

from artifacts.checkpoint import CheckpointError, checkpoint_step, find_best_checkpoint, read_checkpoint
from artifacts.export import CONFIG, CTRANSLATE2, WEIGHTS, is_export
from artifacts.export_reading import export_facts, reexport_hint
from settings.config import ConfigError, ExperimentConfig, Override, load_config
from utils.run_folder import RunLock, is_run_folder

ROTATION_TRIES = 5  # a training run may rotate its best/last checkpoint between listing and reading


@dataclass(frozen=True)
class ModelSource:
    """A model a command named: its checkpoint file or export folder, the checkpoint's contents
    where they were read already (a run's best: the file may be rotated away before it is loaded),
    and the --config it was found through, as loaded (read once)."""

    path: Path
    checkpoint: Optional[dict] = None
    given_config: Optional[ExperimentConfig] = None


def find_model(
    model_path: Optional[str] = None,
    run: Optional[str] = None,
    config: Optional[str] = None,
    overrides: Sequence[str | Override] = (),
) -> ModelSource:
    """The model a command names: --model_path (a checkpoint or an export folder), or the best
    checkpoint of --run, or of the --config's run folder (for the commands that take --config)."""
    if model_path:
        return ModelSource(checked_model_path(Path(model_path)))
    if run:
        return read_from_run(checked_run(Path(run)))
    if config:
        given = load_config(config, overrides)
        return dataclasses.replace(read_from_run(given.resolved_run_dir), given_config=given)
    raise ConfigError(
        "say which model to use: --model_path <checkpoint.pt>, --run runs/<name>, "
        "or --config <file.yaml> (its run folder's best checkpoint)"
    )


def checked_run(run: Path) -> Path:
    """--run as given, if it is a folder; else which flag fits (an export, a checkpoint) or what a run is."""
    if is_export(run):
        raise CheckpointError(f"--run {run} is an export folder (export.py): use --model_path {run}")
    if run.is_file():
        fix = (
            f"a checkpoint file goes in --model_path {run}"
            if run.suffix == ".pt"
            else "give the run folder (runs/<name>)"
        )
        raise CheckpointError(f"--run {run} is a file, not a run folder: {fix}")
    if not run.is_dir():
        raise CheckpointError(f"--run {run}: no such run folder (a run is runs/<name>, written by train.py)")
    return run


def checked_model_path(path: Path) -> Path:
    """--model_path as given, if it names a checkpoint file or an export folder; else which flag fits."""
    if not path.exists():
        raise CheckpointError(f"--model_path {path}: no such checkpoint file or export folder")
    if path.is_dir() and not is_export(path):
        if is_run_folder(path):
            raise CheckpointError(
                f"--model_path {path} is a run folder: use --run {path} (its best checkpoint), "
                f"or --model_path {path / 'checkpoints'}/<file>.pt"
            )
        weights = f"{CTRANSLATE2}/model.bin" if export_facts(path).get("backend") == "ctranslate2" else WEIGHTS
        missing = [name for name in (weights, CONFIG) if not (path / name).is_file()]
        if len(missing) == 1:
            raise CheckpointError(f"{path / missing[0]} is missing: {reexport_hint(path, export_facts(path))}")
        raise CheckpointError(
            f"--model_path {path} is a folder but not an export (export.py writes {WEIGHTS} and "
            f"{CONFIG}); give a checkpoint .pt, an export folder, or --run for a run folder"
        )
    return path


def read_from_run(run_dir: Path) -> ModelSource:
    """The run's best checkpoint, read now (the loader takes its contents from the `ModelSource`). A
    run that is training rotates its checkpoints: one that vanished between listing and reading is
    listed again, never blamed."""
    for _ in range(ROTATION_TRIES):
        path = None
        try:
            path = find_best_checkpoint(run_dir)
            ckpt = read_checkpoint(path)
        except FileNotFoundError:  # (only the listing raises it) a listed file vanished: list again
            continue
        except CheckpointError:
            if path is None or path.exists():  # no checkpoint at all, or a damaged one: say so
                raise
            continue  # rotated away: list again
        holder = training_holder(run_dir)
        if holder:
            print(
                f"note: run {run_dir} is still training ({holder}): using its checkpoint of step "
                f"{checkpoint_step(path)} ({path.name}); a later one may follow",
                file=sys.stderr,
            )
        return ModelSource(path, ckpt)
    raise CheckpointError(
        f"the checkpoints of {run_dir} were replaced {ROTATION_TRIES} times while being read (the "
        f"run is training and rotating them); run the command again"
    )


def training_holder(run_dir: Path) -> Optional[str]:
    """Who holds the run folder's lock ('PID n: train.py ...'), if train.py does; None otherwise."""
    who = RunLock.holder(run_dir)
    return who if who and "train.py" in who else None


def run_dir_of_checkpoint(path: Path) -> Path:
    """runs/<name>/checkpoints/x.pt -> runs/<name>; a loose checkpoint -> its folder; an export -> itself."""
    path = Path(path).resolve()
    if path.is_dir():
        return path
    return path.parent.parent if path.parent.name == "checkpoints" else path.parent

"""Where a test writes and what is already there (test.py): the output folder of a request (the
run's test/, test_<name>/ for a variant, a file or a checkpoint other than the best, or --output),
the write guard over an earlier test's files, whether that test is this very request's, and the
record of the files a test writes (their rows and sha256, kept in scores.json)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional, Sequence

from artifacts.checkpoint import find_best_checkpoint
from artifacts.lookup import run_dir_of_checkpoint
from commands.test_request import TestRequest
from settings.config import ConfigError, Override, parse_override
from utils import run_files
from utils.errors import WriteError
from utils.files import check_output_folder, check_target, run_folder_above
from utils.run_folder import TEST_OUTPUT_FILES, is_run_folder
from utils.stored_files import ARCHIVED, content_record, stored_exists

OUTPUT_FILES = TEST_OUTPUT_FILES  # what test.py writes into its output folder (and concat/k<K>/)


def backend_variant(overrides: Sequence[str | Override]) -> Optional[str]:
    """The variant folder name of a run tested through another backend (`--set decoding.backend=
    ctranslate2`, with its compute type if one is set): test_ctranslate2/ or test_ctranslate2_int8/,
    a variant row of its own in compare.py beside the run's test/. None without such a --set."""
    settings = test_time_settings(list(overrides))
    if settings.get("decoding.backend") != "ctranslate2":
        return None
    compute_type = settings.get("decoding.compute_type")
    return "ctranslate2" + (f"_{compute_type}" if compute_type else "")


def output_folder(args: TestRequest, ckpt: Path) -> tuple[Path, Optional[Path]]:
    """(the output folder, the run folder holding it if any): never the run folder itself, its
    checkpoints/ or any folder in it but this test's own, never another run's."""
    if args.output:
        out_dir = Path(args.output)
    elif args.src:
        out_dir = run_dir_of_checkpoint(ckpt) / f"test_{Path(args.src).name}"
    elif (other := not_the_best(ckpt)) is not None:  # its scores never pass for the run's own test/
        if args.split != "test":
            raise ConfigError(
                f"--model_path {args.model_path} is not its run's best checkpoint ({other.name} is): give --output "
                f"for a test of the {args.split} split with it"
            )
        out_dir = run_dir_of_checkpoint(ckpt) / f"test_{Path(ckpt).stem}"
    elif args.split == "test" and (variant := backend_variant(args.overrides)):
        out_dir = run_dir_of_checkpoint(ckpt) / f"test_{variant}"
    else:
        out_dir = run_dir_of_checkpoint(ckpt) / args.split
    # Never the run folder itself, its checkpoints/ or any folder in it but this test's own: the
    # split's folder (test/ for the test split) or test_<name>/, and only in the checkpoint's own run
    check_output_folder(out_dir, "--output", own=own_folders(args))
    run = run_folder_above(out_dir)
    if run is not None and run != run_dir_of_checkpoint(ckpt).resolve():
        raise WriteError(
            f"--output {args.output} is inside the run folder {run}, but the model is "
            f"{ckpt}: its scores would pass for that run's; write them elsewhere"
        )
    return out_dir, run


def same_checkpoint(recorded, ckpt: Path, out_dir: Path) -> bool:
    """Whether scores.json's `checkpoint` (recorded as given) names `ckpt`. A test folder inside the
    checkpoint's own run names it by its place in the run (checkpoints/<name>), so that a moved or
    copied run still holds this test; a folder elsewhere may hold another run's test, so there the
    path must match as given."""
    if not isinstance(recorded, str):
        return False
    run = run_dir_of_checkpoint(ckpt).resolve()
    if ckpt.parent.name == "checkpoints" and run in out_dir.resolve().parents:
        return Path(recorded).parent.name == "checkpoints" and Path(recorded).name == ckpt.name
    return recorded == str(ckpt)


def same_test_done(args: TestRequest, cfg, ckpt: Path, test_set: dict, out_dir: Path) -> Optional[dict]:
    """The scores of the test in `out_dir` if it is this very request's (the checkpoint, test set,
    test-time settings and k's it would write), else None."""
    try:
        scores = json.loads((out_dir / run_files.SCORES).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    concat = args.concat if args.concat is not None else cfg.evaluation.concat
    same = (
        isinstance(scores, dict)
        and same_checkpoint(scores.get("checkpoint"), ckpt, out_dir)
        and scores.get("test_set") == test_set
        and scores.get("test_time_overrides") == test_time_settings(args.overrides)
        and [row.get("k") for row in scores.get("concat", [])] == sorted(set(concat))
        and ("teacher_forced" in scores) == bool(cfg.evaluation.teacher_forced)
    )
    return scores if same else None


def not_the_best(ckpt: Path) -> Optional[Path]:
    """The run's best checkpoint when `ckpt` is a checkpoint in a run folder's checkpoints/ and not
    it (a last_*, an averaged_* or an older best_*), else None."""
    ckpt = Path(ckpt)
    run = run_dir_of_checkpoint(ckpt)
    if ckpt.is_dir() or ckpt.parent.name != "checkpoints" or not is_run_folder(run):
        return None
    best = find_best_checkpoint(run)
    return None if best.resolve() == ckpt.resolve() else best


def own_folders(args: TestRequest) -> tuple[str, ...]:
    """The folders of a run test.py may write into: the split's (test/ for the test split) or test_<name>/."""
    return ("test_*",) if args.src else (args.split, "test_*")


def check_outputs(args: TestRequest, out_dir: Path, run: Optional[Path]) -> None:
    """The write guard over every file of the earlier test in `out_dir`: none of a user's replaced
    unasked, never an input, the earlier test's only with --overwrite."""
    own = own_folders(args)
    if (out_dir / "concat").exists() and not args.overwrite and out_dir.name not in own:  # its k-inputs' folder
        raise WriteError(f"{out_dir / 'concat'} exists; pass --overwrite to replace it, or choose another --output")
    # A test of this run that an earlier version left without its scores.json (killed before it): its
    # files in the run's own test folder were never a result, so the same command finishes it
    unfinished = run is not None and out_dir.is_dir() and not stored_exists(out_dir / run_files.SCORES)
    for name in OUTPUT_FILES:  # a folder of the user's: none of its files replaced unasked, never an input
        for stored in (name, *(name + form for form in ARCHIVED)):  # and its archived forms (results/)
            check_target(
                out_dir / stored,
                "--output",
                inputs=[args.src, args.ref],
                overwrite=args.overwrite or unfinished,
                own=tuple(f"{folder}/{stored}" for folder in own),
            )


def output_folders(out_dir: Path) -> list[Path]:
    """A test's folder and its concat/k<K>/ folders: where its OUTPUT_FILES are."""
    return [out_dir, *sorted(out_dir.glob("concat/k*"))]


def earlier_outputs(out_dir: Path) -> list[Path]:
    """The files of the test set in `out_dir` (and its concat/k<K>/), plain and in an archived form
    (utils/stored_files.py: a run copied back from results/): what a new test replaces or drops."""
    names = [*OUTPUT_FILES, *(name + form for name in OUTPUT_FILES for form in ARCHIVED)]
    return [folder / name for folder in output_folders(out_dir) for name in names if (folder / name).is_file()]


def file_records(folder: Path) -> dict[str, dict]:
    """{path relative to the test folder: {"rows", "sha256"}} of every file test.py wrote there."""
    files = sorted(p for p in folder.rglob("*") if p.is_file() and not p.name.startswith("."))
    return {path.relative_to(folder).as_posix(): content_record(path.read_bytes()) for path in files}


def test_time_settings(overrides: Sequence[str | Override]) -> dict:
    """The --set keys this test ran with ({"model.positional.scaling": "yarn", ...}): how the
    trained model was evaluated. compare.py shows a run's test_<name>/ scored so as a variant row."""
    return {o.key: o.value for o in map(parse_override, overrides or [])}

"""Export a trained model to a self-contained folder: weights as safetensors, the resolved config
as JSON, the tokenizer, and a model card with the run's test scores. No pickle anywhere, so the
folder is safe to share and to load.

Examples:
  python export.py --run runs/demo/rope --output exported/rope          # the run's best checkpoint
  python export.py --model_path runs/demo/rope/checkpoints/last_checkpoint_1000.pt --output exported/rope-last
  python inference.py --model_path exported/rope --src_text "Bonjour !"
  python test.py --model_path exported/rope --output exported/rope-scores

An existing --output is replaced only with --overwrite, and only when it is an export of export.py
alone (a folder of yours never is). The model card quotes <run>/test/scores.json when it scored
the exported checkpoint.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Optional

import models.positional_encodings  # noqa: F401 (registers the encodings config validation reads)
from commands.cli import command_parser, parse_command
from training.export import is_own_export, write_export
from training.loading import load_for_inference, resolve_checkpoint, run_dir_of_checkpoint
from utils.errors import HarnessError
from utils.files import check_output_folder
from utils.runtime import log


def build_parser() -> argparse.ArgumentParser:
    return command_parser(
        __doc__,
        run="a run folder: export its best checkpoint",
        model_path=True,
        output="the folder to create",
        output_required=True,
        overwrite="an earlier export at --output (only a folder holding nothing but an export's files)",
    )


def scores_of(ckpt: Path) -> Optional[dict]:
    """The run's test scores, if they were computed with this very checkpoint."""
    path = run_dir_of_checkpoint(ckpt) / "test" / "scores.json"
    if not path.is_file():
        return None
    scores = json.loads(path.read_text(encoding="utf-8"))
    if Path(scores.get("checkpoint", "")).name != ckpt.name:
        log(f"note: {path} scored {scores.get('checkpoint')}, not {ckpt.name}: the model card has no test scores")
        return None
    return scores


def export(output: str, run: Optional[str] = None, model_path: Optional[str] = None, overwrite: bool = False) -> int:
    """Write the model --run or --model_path names into the folder `output`, as export.py does: a
    new folder, or with `overwrite` in place of an earlier export (replaced once the new one is whole)."""
    out = Path(output)
    check_output_folder(out, "--output")  # never inside a run folder, whose files are the harness's own
    if out.exists() and not (overwrite and is_own_export(out)):
        why = (
            "is not an export folder of export.py alone"
            if overwrite
            else "exists; pass --overwrite to replace an export"
        )
        raise HarnessError(f"--output {out} {why}: choose a new --output")
    ckpt = resolve_checkpoint(model_path, run)
    if out.exists() and Path(ckpt).resolve().is_relative_to(out.resolve()):
        raise HarnessError(
            f"--output {out} is the export being read (--model_path {model_path}): choose a new --output"
        )
    cfg, tokenizer, model = load_for_inference(ckpt)
    write_export(cfg, tokenizer, model, out, scores_of(ckpt), str(ckpt), replace=overwrite)
    log(f"exported {ckpt} -> {out} ({', '.join(sorted(p.name for p in out.iterdir()))})")
    return 0


def main(argv: Optional[list[str]] = None) -> int:
    return export(**vars(parse_command(build_parser(), argv)))

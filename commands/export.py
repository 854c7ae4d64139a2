"""Export a trained model to a self-contained folder: weights as safetensors, the resolved config
as JSON, the tokenizer, and a model card with the run's test scores. No pickle anywhere, so the
folder is safe to share and to load.

Examples:
  python export.py --run runs/demo/rope --output exported/rope          # the run's best checkpoint
  python export.py --run runs/demo/rope --format ctranslate2 --output exported/rope-ct2
  python export.py --run runs/demo/rope --format ctranslate2 --set model.positional.scaling=ntk --output e/ntk
  python export.py --model_path runs/demo/rope/checkpoints/last_checkpoint_1000.pt --output exported/rope-last
  python inference.py --model_path exported/rope --src_text "Bonjour !"
  python test.py --model_path exported/rope --output exported/rope-scores

An existing --output is replaced only with --overwrite, and only when it is an export of export.py
alone (a folder of yours never is); an empty folder is filled, a link is followed. The folder and
its files are as readable as any file you make (your umask). The model card says how far the model
trained, how it decodes, and quotes <run>/test/scores.json (with its sacreBLEU signature) when it
scored the exported checkpoint; it holds no absolute path. The folder needs this harness's code to
load (inference.py / test.py --model_path).

--format ctranslate2 writes a CTranslate2 model (ctranslate2/: model.bin, its config and vocabulary,
float32; int8 is chosen on load) beside this harness's config, tokenizer and card, for
inference.py / test.py --model_path (decoding.backend ctranslate2) or ctranslate2.Translator itself.
The encodings it can run exactly: sinusoidal, learnable, SHAPE, CAPE, none (as a position table of
4,096 rows, or the learnable table's size: the longest input and output), RoPE (with linear or ntk
scaling, baked in: give them with --set here), T5 and Shaw biases. ALiBi, xPos, KERPLE, FIRE, YaRN,
randomized positions and positional terms in cross-attention are refused.
"""

from __future__ import annotations

import argparse
import glob
import json
import shutil
from pathlib import Path
from typing import Optional, Sequence

from artifacts.checkpoint import checkpoint_step
from artifacts.export import harness_commit, is_export, is_own_export, number, read_export_facts, write_export
from artifacts.loading import load_model
from artifacts.lookup import find_model, run_dir_of_checkpoint
from commands.cli import command_parser, parse_command, refuse_together
from decoding.ctranslate2_spec import check_convertible
from utils import run_files
from utils.errors import HarnessError
from utils.files import check_output_folder
from utils.metrics import HEADLINE, METRICS
from utils.publish import finish_publishing
from utils.run_log import JsonlLogger, log


def build_parser() -> argparse.ArgumentParser:
    parser = command_parser(
        __doc__,
        run="a run folder: export its best checkpoint",
        model_path=True,
        output="the folder to create (an empty folder is filled; a link is followed)",
        output_required=True,
        overwrite="an earlier export at --output (only a folder holding nothing but an export's files)",
        sets="a test-time key to export with, e.g. --set model.positional.scaling=ntk (a CTranslate2 "
        "export bakes the positional ones in); a key that would change the trained model is refused",
    )
    parser.add_argument(
        "--format",
        choices=("pytorch", "ctranslate2"),
        default="pytorch",
        help="pytorch: safetensors weights for this harness (default); ctranslate2: a CTranslate2 model",
    )
    return parser


def score_keys() -> list[str]:
    """What the card quotes of scores.json: every metric and what says how it was computed, and the test set."""
    return [*(key for m in METRICS for key in (m.name, m.about) if key), "num_sentences", "split", "decoding"]


def scores_of(ckpt: Path) -> Optional[dict]:
    """The run's test scores, if they were computed with this very checkpoint: what the card quotes
    (no paths of this machine). An unreadable scores.json is a note and no scores, never a failure."""
    path = run_dir_of_checkpoint(ckpt) / "test" / run_files.SCORES
    if not path.is_file():
        return None
    try:
        scores = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(scores, dict):
            raise ValueError("not a JSON object")
    except (ValueError, UnicodeDecodeError) as e:
        log(f"note: {path} cannot be read ({e}): the model card has no test scores")
        return None
    if Path(str(scores.get("checkpoint", ""))).name != ckpt.name:
        log(f"note: {path} scored {scores.get('checkpoint')}, not {ckpt.name}: the model card has no test scores")
        return None
    for key in (m.name for m in METRICS):
        if number(scores.get(key), "") is None:
            log(f"note: {path}: {key} is {scores.get(key)!r}, not a number: the model card leaves it out")
    test_set = {k: Path(v).name if k in ("src", "ref") else v for k, v in (scores.get("test_set") or {}).items()}
    rows = [r for r in scores.get("concat") or [] if isinstance(r, dict)]
    concat = [{"k": r.get("k"), HEADLINE: r.get(HEADLINE)} for r in rows]
    return {**{k: scores.get(k) for k in score_keys()}, "test_set": test_set, "concat": concat, "checkpoint": ckpt.name}


def training_budget(ckpt: Path) -> Optional[dict]:
    """How far the exported checkpoint trained (updates and epoch, from its name and the run's
    metrics.jsonl) and whether its run finished: None when the run left no log to tell."""
    run_dir = run_dir_of_checkpoint(ckpt)
    try:
        history = JsonlLogger(run_dir / run_files.METRICS).history()
    except (ValueError, OSError) as e:
        log(f"note: {run_dir / 'metrics.jsonl'} cannot be read ({e}): the model card has no training budget")
        return None
    steps = checkpoint_step(ckpt)
    logged = [r for r in history if r.get("event") in ("train", "valid") and isinstance(r.get("step"), int)]
    if steps is None or not logged:
        return None
    epochs = [r.get("epoch") for r in logged if r["step"] <= steps and isinstance(r.get("epoch"), int)]
    end: dict = {}
    for record in history:  # the last attempt's end, if it ended (a later start means it trains again)
        end = record if record.get("event") == "end" else {} if record.get("event") == "start" else end
    return {
        "steps": steps,
        "epoch": epochs[-1] if epochs else None,
        "finished": bool(end.get("finished")),
        "run_steps": end.get("step"),
    }


def source_name(ckpt: Path) -> str:
    """The checkpoint as `<run name>/checkpoints/<file>` (or its file name): no path of this machine."""
    ckpt = Path(ckpt).resolve()
    run_dir = run_dir_of_checkpoint(ckpt)
    return str(ckpt.relative_to(run_dir.parent)) if ckpt.parent.name == "checkpoints" else ckpt.name


def facts_of(ckpt: Path) -> dict:
    """What the model card says beyond the config. An export exported again keeps its own."""
    if is_export(ckpt):
        return {**read_export_facts(ckpt), "commit": harness_commit()}
    return {
        "exported_from": source_name(ckpt),
        "training": training_budget(ckpt),
        "test_scores": scores_of(ckpt),
        "commit": harness_commit(),
    }


def check_export_target(out: Path, overwrite: bool) -> Path:
    """The folder the export goes to: a link is followed (the link stays, the export is written
    where it points); never a run folder or inside one; an existing folder is replaced only when it
    is an earlier export and --overwrite is given, or filled when it is empty."""
    folder = check_output_folder(out, "--output")  # a dangling link, a file, a run folder: refused there
    if out.is_symlink():
        log(f"note: --output {out} is a link to {folder}: the export is written there (the link stays)")
        out = folder
    for stale in out.parent.glob(f".{glob.escape(out.name)}.*.tmp"):  # an earlier version's staging folders
        if stale.is_dir() and not stale.is_symlink():
            shutil.rmtree(stale)
            log(f"removed {stale}, left by an export.py that was stopped while writing")
    if not out.exists() or (out.is_dir() and not any(out.iterdir())):
        return out
    if not is_own_export(out):
        what = "a folder that is not an export of export.py alone" if out.is_dir() else "a file"
        raise HarnessError(f"--output {out} exists and is {what}: export.py never replaces it; choose a new --output")
    return out  # (without --overwrite: only the same export again passes, write_export checks it)


def without_wu(cfg):
    """A CTranslate2 export's config: GNMT's `wu` length penalty (which CTranslate2 has no form of)
    replaced by `avg` as its default search, with a note (test.py/inference.py --set may change it)."""
    import dataclasses

    if cfg.decoding.strategy != "beam" or cfg.decoding.length_penalty != "wu":
        return cfg
    log(
        "note: CTranslate2 has no GNMT (wu) length penalty: the export decodes with length_penalty avg "
        "(per token) by default; export with --set decoding.length_penalty=none for none"
    )
    return dataclasses.replace(cfg, decoding=dataclasses.replace(cfg.decoding, length_penalty="avg"))


def export(
    output: str,
    run: Optional[str] = None,
    model_path: Optional[str] = None,
    overwrite: bool = False,
    overrides: Sequence[str] = (),
    format: str = "pytorch",
) -> int:
    """Write the model --run or --model_path names into the folder `output`, as export.py does: a
    new folder, or with `overwrite` in place of an earlier export (replaced once the new one is whole);
    `format` pytorch or ctranslate2, with the test-time `overrides` applied."""
    refuse_together(argparse.Namespace(run=run, model_path=model_path), "the model to export", "--run", "--model_path")
    if finish_publishing(Path(output), writer="export.py"):  # one killed while publishing: its export is whole now
        log(f"completed {output}, which an export.py stopped while publishing it had left half published")
    out = check_export_target(Path(output), overwrite)
    source = find_model(model_path, run)  # a --run that is no run, or has no checkpoint: one line
    ckpt = source.path
    if out.exists() and ckpt.resolve().is_relative_to(out.resolve()):
        raise HarnessError(
            f"--output {output} is the export being read (--model_path {model_path}): choose a new --output"
        )
    loaded = load_model(source, overrides)
    cfg, tokenizer, model = loaded.config, loaded.tokenizer, loaded.model
    if format == "ctranslate2":
        check_convertible(cfg)
        cfg = without_wu(cfg)
    earlier = is_own_export(out)
    if not write_export(
        cfg,
        tokenizer,
        model,
        out,
        {**facts_of(ckpt), "metrics": METRICS},
        replace=earlier,
        backend=format,
        again=not overwrite,
    ):
        log(f"{output} already holds this export: unchanged (--overwrite writes it again)")
        return 0
    log(f"exported {ckpt} -> {output} ({', '.join(sorted(p.name for p in out.iterdir()))})")
    return 0


def main(argv: Optional[list[str]] = None) -> int:
    return export(**vars(parse_command(build_parser(), argv)))

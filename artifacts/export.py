"""Exported models: a self-contained folder that other tools can read, loaded without pickle.

    DIR/
      model.safetensors   the weights (safetensors; tied embeddings stored once)
      config.json         the resolved experiment config the model was built from, with a format marker,
                          and what the model card says (training budget, test scores, harness commit)
      tokenizer.json      the joint BPE (or tokenizer/, a pretrained tokenizer's save_pretrained folder)
      README.md           a model card: encoding, size, training data and budget, decoding, test scores
                          with their sacreBLEU signature, how to load it

A CTranslate2 export (`export.py --format ctranslate2`) holds `ctranslate2/` (a CTranslate2 model
folder: model.bin, its config.json and vocabulary, `ctranslate2.Translator` loads it) in place of
model.safetensors; its config.json says `"backend": "ctranslate2"` and what the conversion baked in.

`inference.py --model_path DIR` and `test.py --model_path DIR` load it through `artifacts/loading.py`.
The folder and its files follow the user's umask like any file they make (a shared model is readable
where their files are), and the card holds no absolute path of the machine that wrote it.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import subprocess
from pathlib import Path
from typing import Iterator, Optional, Sequence

from settings.config import to_dict
from utils.errors import HarnessError, WriteError
from utils.files import describe_os_error, user_mode
from utils.metrics import HEADLINE
from utils.publish import OutputSet

EXPORT_FORMAT = "pe-harness-export"
EXPORT_VERSION = 1
WEIGHTS, CONFIG, CARD = "model.safetensors", "config.json", "README.md"
CTRANSLATE2 = "ctranslate2"  # a CTranslate2 export's model folder, in place of WEIGHTS
HARNESS_ROOT = Path(__file__).resolve().parents[1]


def is_export(path: str | Path) -> bool:
    path = Path(path)
    weights = (path / WEIGHTS).is_file() or (path / CTRANSLATE2 / "model.bin").is_file()
    return path.is_dir() and weights and (path / CONFIG).is_file()


def is_own_export(path: str | Path) -> bool:
    """An export folder holding nothing but what write_export writes: the only folder that
    `export.py --overwrite` replaces."""
    own = {WEIGHTS, CTRANSLATE2, CONFIG, CARD, "tokenizer.json", "tokenizer"}
    return is_export(path) and all(entry.name in own for entry in Path(path).iterdir())


def read_export_facts(path: str | Path) -> dict:
    """What an export's config.json says of its model beyond the config (source, training, test
    scores): carried over when an export is exported again."""
    meta = json.loads((Path(path) / CONFIG).read_text(encoding="utf-8"))
    return {key: meta.get(key) for key in ("exported_from", "training", "test_scores")}


def harness_commit() -> Optional[str]:
    """The git commit of this harness's code (with ' + local changes' when the tree differs), or None
    outside a git checkout: the card says which code loads the folder."""
    try:
        git = ["git", "-C", str(HARNESS_ROOT)]
        head = subprocess.run([*git, "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True, timeout=10)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(
            [*git, "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return head.stdout.strip() + (" + local changes" if dirty.stdout.strip() else "")


def write_export(
    cfg,
    tokenizer,
    model,
    out_dir: Path,
    facts: dict,
    replace: bool = False,
    backend: str = "pytorch",
    again=False,
    writer: str = "export.py",
) -> bool:
    """Write the folder beside `out_dir` and publish it whole (utils/publish.py): a failed or killed
    export leaves nothing of itself, and an error names the file at `out_dir` (never the staging
    folder). With `replace`, the files of an export already at `out_dir` go only as the new one's
    are published; with `again` too (no --overwrite), only when this export differs from it, else
    refused. Returns whether it published (False: `out_dir` already holds this very export). `facts`: exported_from
    (a path relative to the run's parent), training (`training_budget`), test_scores, commit,
    and for a CTranslate2 export `source` (the checkpoint's size and time, to tell a stale copy);
    `metrics` (the card's order and format of test_scores' metrics; not stored in config.json).
    `backend`: pytorch (safetensors) or ctranslate2 (decoding/ctranslate2_spec.py); `writer`: the command
    writing it, named in a refusal (utils/publish.OutputSet)."""
    out_dir = Path(out_dir)
    staging = None
    try:
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        with OutputSet(out_dir, writer) as outputs:  # a kill leaves the earlier export or this one (utils/publish.py)
            staging = outputs.staged_folder()
            fill_export(cfg, tokenizer, model, staging, facts, backend)
            follow_umask(staging)  # mkdtemp and safetensors make them private (0700, 0600)
            earlier = [p for p in out_dir.rglob("*") if p.is_file() or p.is_symlink()] if replace else []
            if again and earlier:  # without --overwrite: the same export again is done, another is refused
                if same_export(staging, out_dir):
                    return False
                raise HarnessError(
                    f"--output {out_dir} is an earlier export: pass --overwrite to replace it, or choose a new --output"
                )
            outputs.publish(drops=earlier)
    except BaseException as e:
        failure = write_failure(e, staging, out_dir)
        if failure is None:
            raise
        kept = f"; the export at {out_dir} is unchanged" if replace and out_dir.exists() else ""
        raise WriteError(str(failure) + kept) from None
    return True


def same_export(a: Path, b: Path) -> bool:
    """Whether two export folders hold the same files, byte for byte (exports are reproducible:
    `save_weights`)."""
    files = [sorted(str(p.relative_to(f)) for p in f.rglob("*") if p.is_file()) for f in (a, b)]
    return files[0] == files[1] and all((a / n).read_bytes() == (b / n).read_bytes() for n in files[0])


def fill_export(cfg, tokenizer, model, staging: Path, facts: dict, backend: str = "pytorch") -> None:
    config = {
        "format": EXPORT_FORMAT,
        "format_version": EXPORT_VERSION,
        **{key: facts.get(key) for key in ("exported_from", "training", "test_scores", "commit")},
        "config": to_dict(cfg),
    }
    if backend == "ctranslate2":
        from decoding.ctranslate2_spec import position_rows, save_model

        with naming_file(staging / CTRANSLATE2):
            save_model(cfg, tokenizer, model, staging / CTRANSLATE2)
        config["backend"] = config["config"]["decoding"]["backend"] = "ctranslate2"
        config["ctranslate2"] = {
            "folder": CTRANSLATE2,
            "position_rows": position_rows(cfg, model),
            "training_length": {
                "source": int(model.encoder_pe.training_length),
                "target": int(model.decoder_pe.training_length),
            },
            "source": facts.get("source"),
        }
    else:
        save_weights(model, staging / WEIGHTS)
    with naming_file(staging / "tokenizer.json"):
        tokenizer.save(staging)
    config["files"] = export_file_hashes(staging)  # what belongs together: a swapped file is named on load
    config[CONFIG_RECORD] = config_digest(config)  # config.json itself: an edited model or decoding is named too
    with naming_file(staging / CONFIG):
        (staging / CONFIG).write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    params = sum(p.numel() for p in model.parameters())
    with naming_file(staging / CARD):
        (staging / CARD).write_text(model_card(cfg, params, facts, config.get("ctranslate2")), encoding="utf-8")


def save_weights(model, path: Path) -> None:
    """The model's weights as safetensors, byte for byte the same for the same weights: tied
    tensors stored once under the name safetensors' `load_model` looks for, and one metadata key
    (safetensors writes its metadata map in a random order, so its `save_model`, which records the
    tied names there, differs from process to process)."""
    from safetensors.torch import _remove_duplicate_names, save_file

    state = model.state_dict()
    for removed in _remove_duplicate_names(state).values():
        for name in removed:
            del state[name]
    save_file({k: v.contiguous() for k, v in state.items()}, str(path), metadata={"format": EXPORT_FORMAT})


CONFIG_RECORD = "config_sha256"  # (a key of its own: a harness before it reads `files` as paths only)


def config_digest(meta: dict) -> str:
    """sha256 of what config.json says, but its records of hashes: the model and data config, the
    backend and what a CTranslate2 conversion baked in, the facts the card states. The JSON is read
    back as written (its numbers round-trip), so the digest of the file read is that of the dict
    written."""
    import hashlib

    said = {key: value for key, value in meta.items() if key not in ("files", CONFIG_RECORD)}
    return hashlib.sha256(json.dumps(said, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


def export_file_hashes(folder: Path) -> dict[str, str]:
    """{relative path: sha256} of an export's files but its config.json and model card: the weights,
    the tokenizer, a CTranslate2 model and vocabularies (checked on load: `check_export_files`)."""
    from utils.files import file_sha256

    return {
        str(p.relative_to(folder)): file_sha256(p)
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.relative_to(folder).parts[0] not in (CONFIG, CARD)
    }


@contextlib.contextmanager
def naming_file(path: Path) -> Iterator[None]:
    """A failed write() (a full disk) is an OSError without a file name: give it the file's."""
    try:
        yield
    except OSError as e:
        e.filename = e.filename or str(path)
        raise


def write_failure(e: BaseException, staging: Optional[Path], out_dir: Path) -> Optional[WriteError]:
    """A failed write as one line naming the file at `out_dir` (the staging folder is internal):
    an OSError, the tokenizer's WriteError, or any SafetensorError (safetensors' own error while
    writing the weights, e.g. a full disk). None for anything else (raised as it is)."""

    def shown(name: Optional[str]) -> Path:
        if staging is None or not name:
            return out_dir
        path = Path(name)
        if path.is_relative_to(staging):
            return out_dir / path.relative_to(staging)
        internal = path.parent == out_dir.parent and path.name.startswith(f".{out_dir.name}.")
        return out_dir if internal else path  # (the folder the earlier export moves aside into)

    if isinstance(e, WriteError):
        return WriteError(str(e).replace(str(staging), str(out_dir)) if staging else str(e))
    if isinstance(e, OSError):
        return WriteError(describe_os_error(e, shown(e.filename)))
    from safetensors import SafetensorError

    if isinstance(e, SafetensorError):  # only save_model raises it: the weights file failed, whatever it says
        reason = (str(e).splitlines() or [""])[0][:300] or type(e).__name__
        return WriteError(f"cannot write {out_dir / WEIGHTS}: {reason}; nothing partial was left")
    return None


def follow_umask(folder: Path) -> None:
    """Give `folder` and everything in it the modes a new folder / file of the user's gets."""
    for path in [folder, *folder.rglob("*")]:
        os.chmod(path, user_mode(folder=path.is_dir()))


def number(value, spec: str) -> Optional[str]:
    """`value` formatted with `spec`, or None when it is not a finite number (a hand-edited or
    foreign scores.json): the card leaves such a score out rather than failing."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return format(value, spec)


def describe_decoding(decoding: dict) -> str:
    """The search as configured: greedy has no beam; beam search names its width and length penalty."""
    if decoding.get("strategy") == "greedy":
        return "greedy search"
    penalty = decoding.get("length_penalty")
    words = f"beam search, beam {decoding.get('beam_size')}, length penalty {penalty}"
    return words + (f", alpha {decoding.get('alpha')}" if penalty == "wu" else "")


def describe_training(cfg, training: Optional[dict]) -> str:
    t = cfg.training
    budget = f"budget {t.epochs} epochs" + (f" or {t.max_steps:,} updates" if t.max_steps else "")
    if not training or training.get("steps") is None:
        return f"not recorded ({budget})"
    words = f"{training['steps']:,} updates" + (f", epoch {training['epoch']}" if training.get("epoch") else "")
    run_steps = training.get("run_steps")
    if training.get("finished"):
        words += f"; the run finished after {run_steps:,} updates" if run_steps else "; the run finished"
    else:
        words += "; the run had not finished its budget when exported"
    return f"{words} ({budget}, training.update_freq {t.update_freq})"


def model_card(cfg, params: int, facts: dict, ctranslate2: Optional[dict] = None) -> str:
    m, d = cfg.model, cfg.data
    options = ", ".join(f"{k}={v}" for k, v in m.positional.options.items()) or "no options"
    corpus = {
        "tatoeba": f"Tatoeba (`{Path(d.path).name}`)",
        "iwslt2017": f"IWSLT 2017 ({d.hf_name}, {d.hf_config})",
        "parallel_text": "parallel text files (config.json: data)",
    }[d.source]
    tokenizer = cfg.tokenizer.type + (
        f" ({cfg.tokenizer.name})" if cfg.tokenizer.name else f", vocabulary {cfg.tokenizer.vocab_size}"
    )
    lines = [
        f"# {cfg.name}: {d.src_lang} → {d.tgt_lang} Transformer, positional encoding `{m.positional.name}`",
        "",
        f"Exported from `{facts.get('exported_from')}` by the pe-harness's `export.py`.",
        "",
        "| | |",
        "|---|---|",
        f"| positional encoding | `{m.positional.name}` ({options}) |",
        f"| model | {m.num_encoder_layers}+{m.num_decoder_layers} layers, d_model {m.d_model}, "
        f"{m.num_heads} heads, FFN {m.ffn_dim}, {'pre' if m.norm_first else 'post'}-norm, {params:,} parameters |",
        f"| tokenizer | {tokenizer} |",
        f"| training data | {corpus} |",
        f"| training | {describe_training(cfg, facts.get('training'))} |",
        f"| decoding (config.json, inference.py's default) | {describe_decoding(to_dict(cfg.decoding))} |",
        f"| seed | {cfg.seed} |",
        "",
        *score_lines(facts.get("test_scores"), facts.get("metrics") or ()),
        *(ctranslate2_lines(ctranslate2) if ctranslate2 else loading_lines(facts.get("commit"))),
    ]
    return "\n".join(lines)


def score_lines(scores: Optional[dict], metrics: Sequence) -> list[str]:
    """The card's test scores: each of `metrics` (utils/metrics.py's registry, which the caller
    passes: its name, label, digits and `about` key) the run's scores.json holds, and sacreBLEU per k."""
    if not scores:
        return ["No test scores: the run had none for this checkpoint (`test.py --run ...` writes them).", ""]
    where = scores.get("test_set") or {"split": scores.get("split")}
    sentences = number(scores.get("num_sentences"), ",") or "?"
    search = describe_decoding(scores.get("decoding") or {})
    lines = ["## Test scores", "", f"On {sentences} sentences of {json.dumps(where)} ({search}):", ""]
    for i, metric in enumerate(metrics):  # the first, the headline, in bold
        value = number(scores.get(metric.name), f".{metric.digits}f")
        shown = f"**{value}**" if i == 0 else value
        detail = f" (`{scores[metric.about]}`)" if metric.about and scores.get(metric.about) else ""
        missing = f"- {metric.name}: left out (not a number in the run's scores.json)"
        lines.append(f"- {metric.label} {shown}{detail}" if value else missing)
    lines.append("")
    concat = [row for row in scores.get("concat") or [] if isinstance(row, dict)]
    for row in concat:
        bleu = number(row.get(HEADLINE), ".2f") or "not a number"
        lines.append(f"- k={row.get('k')} joined pairs: sacreBLEU {bleu}")
    return lines + ([""] if concat else [])


HARNESS_COMMANDS = [  # how the card says to use the folder with this harness
    "```bash",
    'python inference.py --model_path THIS_FOLDER --src_text "Bonjour !"',
    "python test.py --model_path THIS_FOLDER --output scores/",
    "```",
    "",
]


def loading_lines(commit: Optional[str]) -> list[str]:
    code = f"commit `{commit}`" if commit else "its version that wrote this folder"
    return [
        "## How to load",
        "",
        "This folder needs the code of the pe-harness (the project this model was trained with, "
        f"{code}): `config.json` describes the harness's own Transformer, which no other library builds. "
        "From a checkout of it:",
        "",
        *HARNESS_COMMANDS,
        "`model.safetensors` holds the weights (tied embeddings once), `config.json` the resolved config "
        "(`config.model` builds the network) and what this card says, the tokenizer file(s) the vocabulary.",
        "",
    ]


def ctranslate2_lines(facts: dict) -> list[str]:
    rows = facts.get("position_rows")
    limit = f"Inputs and outputs up to {rows} tokens (its position table)." if rows else "No length limit of its own."
    return [
        "## How to load",
        "",
        "`ctranslate2/` is a CTranslate2 model folder (float32; pick int8 with `compute_type` on load). "
        "It takes the source as the tokenizer here encodes it, without an added BOS or EOS. " + limit,
        "",
        "```python",
        "import ctranslate2",
        "",
        'translator = ctranslate2.Translator("THIS_FOLDER/ctranslate2", compute_type="int8")',
        "```",
        "",
        "With the pe-harness (same searches, scores and files as its PyTorch decoder):",
        "",
        *HARNESS_COMMANDS,
    ]

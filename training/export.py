"""Exported models: a self-contained folder that other tools can read, loaded without pickle.

    DIR/
      model.safetensors   the weights (safetensors; tied embeddings stored once)
      config.json         the resolved experiment config the model was built from, with a format marker
      tokenizer.json      the joint BPE (or tokenizer/, a pretrained tokenizer's save_pretrained folder)
      README.md           a model card: encoding, size, training data, test scores and sacreBLEU signature

`inference.py --model_path DIR` and `test.py --model_path DIR` load it through `training/loading.py`.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Optional

from utils.config import to_dict

EXPORT_FORMAT = "pe-harness-export"
EXPORT_VERSION = 1
WEIGHTS, CONFIG, CARD = "model.safetensors", "config.json", "README.md"


def is_export(path: str | Path) -> bool:
    path = Path(path)
    return path.is_dir() and (path / WEIGHTS).is_file() and (path / CONFIG).is_file()


def is_own_export(path: str | Path) -> bool:
    """An export folder holding nothing but what write_export writes: the only folder that
    `export.py --overwrite` replaces."""
    own = {WEIGHTS, CONFIG, CARD, "tokenizer.json", "tokenizer"}
    return is_export(path) and all(entry.name in own for entry in Path(path).iterdir())


def write_export(
    cfg, tokenizer, model, out_dir: Path, scores: Optional[dict], source: str, replace: bool = False
) -> Path:
    """Write the folder next to `out_dir` and rename it into place: a failed export leaves nothing.
    With `replace`, an export already at `out_dir` is swapped out only once the new one is complete."""
    from safetensors.torch import save_model

    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        save_model(model, str(staging / WEIGHTS), metadata={"format": EXPORT_FORMAT})
        config = {
            "format": EXPORT_FORMAT,
            "format_version": EXPORT_VERSION,
            "exported_from": source,
            "config": to_dict(cfg),
        }
        (staging / CONFIG).write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
        tokenizer.save(staging)
        params = sum(p.numel() for p in model.parameters())
        (staging / CARD).write_text(model_card(cfg, params, scores, source), encoding="utf-8")
        swap_into_place(staging, out_dir, replace)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return out_dir


def swap_into_place(staging: Path, out_dir: Path, replace: bool) -> None:
    """Rename the complete `staging` folder to `out_dir`; with `replace`, the folder there first
    moves aside and is deleted only after the rename (put back if it fails)."""
    if not (replace and out_dir.exists()):
        os.replace(staging, out_dir)  # fails if out_dir appeared meanwhile (not empty): nothing replaced
        return
    old = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.old.", dir=out_dir.parent))
    os.replace(out_dir, old / out_dir.name)
    try:
        os.replace(staging, out_dir)
    except BaseException:
        os.replace(old / out_dir.name, out_dir)  # the earlier export back (if this fails too, it stays in `old`)
        old.rmdir()
        raise
    shutil.rmtree(old)


def model_card(cfg, params: int, scores: Optional[dict], source: str) -> str:
    m, d = cfg.model, cfg.data
    options = ", ".join(f"{k}={v}" for k, v in m.positional.options.items()) or "no options"
    corpus = {
        "tatoeba": f"Tatoeba ({d.path})",
        "iwslt2017": f"IWSLT 2017 ({d.hf_name}, {d.hf_config})",
        "parallel_text": "parallel text files (config.json: data)",
    }[d.source]
    lines = [
        f"# {cfg.name}: {d.src_lang} → {d.tgt_lang} Transformer, positional encoding `{m.positional.name}`",
        "",
        f"Exported from `{source}` by this harness's `export.py`.",
        "",
        "| | |",
        "|---|---|",
        f"| positional encoding | `{m.positional.name}` ({options}) |",
        f"| model | {m.num_encoder_layers}+{m.num_decoder_layers} layers, d_model {m.d_model}, "
        f"{m.num_heads} heads, FFN {m.ffn_dim}, {'pre' if m.norm_first else 'post'}-norm, {params:,} parameters |",
        f"| tokenizer | {cfg.tokenizer.type}"
        + (f" ({cfg.tokenizer.name})" if cfg.tokenizer.name else f", vocabulary {cfg.tokenizer.vocab_size}")
        + " |",
        f"| training data | {corpus} |",
        f"| seed | {cfg.seed} |",
        "",
    ]
    if scores:
        where = scores.get("test_set") or {"split": scores.get("split")}
        lines += [
            "## Test scores",
            "",
            f"On {scores['num_sentences']:,} sentences of {json.dumps(where)} "
            f"({scores['decoding']['strategy']} search, beam {scores['decoding']['beam_size']}):",
            "",
            f"- sacreBLEU **{scores['sacrebleu']:.2f}** (`{scores['sacrebleu_signature']}`)",
            f"- chrF {scores['chrf']:.2f} (`{scores.get('chrf_signature', '')}`)",
            f"- nltk BLEU-4 {scores['nltk_bleu4']:.4f} ({scores.get('nltk_tokenization', '')})",
            "",
        ]
        for row in scores.get("concat") or []:
            lines.append(f"- k={row['k']} joined pairs: sacreBLEU {row['sacrebleu']:.2f}")
        if scores.get("concat"):
            lines.append("")
    else:
        lines += ["No test scores: the run had none for this checkpoint (`test.py --run ...` writes them).", ""]
    lines += [
        "## Use",
        "",
        "```bash",
        'python inference.py --model_path THIS_FOLDER --src_text "Bonjour !"',
        "python test.py --model_path THIS_FOLDER --output scores/",
        "```",
        "",
        "`model.safetensors` holds the weights (tied embeddings once), `config.json` the resolved config "
        "(`config.model` builds the network), the tokenizer file(s) the vocabulary.",
        "",
    ]
    return "\n".join(lines)

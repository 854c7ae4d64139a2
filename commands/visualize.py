"""Plots of positional encodings and attention, written as PNG files.

Subcommands:
  pe-heatmap     positions x dimensions of an additive encoding: sinusoidal (computed), or the
                 trained table of a learnable model (--model_path / --run)
  pe-mds         2-D classical MDS projection of the learned position vectors, coloured by position
  pe-similarity  similarity of position i to all others against distance: dot products of
                 sinusoidal encodings; RoPE's rotated q.k for a constant vector; the bias per head
                 of ALiBi (computed) or of a trained T5/Shaw model
  attention      attention maps of a trained model for one sentence pair: encoder self-attention,
                 decoder self-attention and cross-attention, one grid (layers x heads) each

Examples:
  python visualize.py pe-heatmap --encoding sinusoidal --output plots/sinusoidal.png
  python visualize.py pe-heatmap --run runs/demo/learnable --output plots/learnable.png
  python visualize.py pe-similarity --encoding rope --output plots/rope_similarity.png
  python visualize.py attention --run runs/demo/rope --src_text "Je t'aime." --output plots/attention
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import matplotlib

import models.positional_encodings  # noqa: F401 (registers the encodings config validation reads)

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402

from commands.cli import RUN_HELP, add_command_flags, deprecated_flag, parse_command  # noqa: E402
from evaluation.figures import sentence_attention_figures, table_figure  # noqa: E402
from models.positional_encodings import (
    alibi_slopes,
    apply_rotary,
    rope_tables,  # noqa: E402
    sinusoidal_table,
)
from utils.config import ConfigError  # noqa: E402
from utils.files import atomic_output, check_target  # noqa: E402


@dataclass
class PlotRequest:
    """One plot: what visualize.py's flags say (the subcommand, the model, the output)."""

    command: str
    output: str
    run: Optional[str] = None
    model_path: Optional[str] = None
    overwrite: bool = False
    encoding: str = "sinusoidal"
    positions: int = 100
    position: int = 50
    d_model: int = 128
    heads: int = 8
    stack: str = "encoder"
    src_text: Optional[str] = None
    tgt_text: Optional[str] = None


def _load(args: PlotRequest):
    """The model --model_path or --run names (the shared lookup and loader of every command)."""
    from training.loading import load_for_inference, resolve_checkpoint

    if not (args.model_path or args.run):
        raise ConfigError(
            "this plot needs a trained model: --model_path <checkpoint.pt or export folder> or --run <run folder>"
        )
    return load_for_inference(resolve_checkpoint(args.model_path, args.run))


def _save(fig, out: str, overwrite: bool) -> None:
    # never into a run folder, never over an existing file unless --overwrite
    check_target(out, "--output", overwrite=overwrite)
    with atomic_output(out, "wb", encoding=None) as f:  # whole or not at all, in the format its name says
        fig.savefig(f, dpi=110, bbox_inches="tight", format=Path(out).suffix.lstrip(".").lower() or "png")
    plt.close(fig)
    print(f"wrote {out}")


def position_table(args: PlotRequest) -> tuple[torch.Tensor, str]:
    """[positions, d_model] of the chosen additive encoding."""
    if args.model_path or args.run:
        _, _, model = _load(args)
        pe = model.encoder_pe if args.stack == "encoder" else model.decoder_pe
        if not hasattr(pe, "table"):
            raise ConfigError(
                f"the model's encoding is {pe.registry_name}: it has no learned table "
                f"(use --encoding sinusoidal for the computed one)"
            )
        n = min(args.positions, pe.max_positions)
        return pe.table.weight[:n].detach(), f"learnable ({args.stack})"
    if args.encoding != "sinusoidal":
        raise ConfigError("without a model only --encoding sinusoidal can be computed: give --model_path or --run")
    return sinusoidal_table(torch.arange(args.positions), args.d_model), "sinusoidal"


def cmd_pe_heatmap(args: PlotRequest) -> None:
    table, title = position_table(args)
    _save(table_figure(table, f"{title} positional encoding", "dimension", "position"), args.output, args.overwrite)


def classical_mds(x: torch.Tensor, dims: int = 2) -> torch.Tensor:
    """Torgerson MDS: embed points so that Euclidean distances are preserved as well as possible."""
    d2 = torch.cdist(x.double(), x.double()) ** 2  # [n, n]
    n = d2.size(0)
    centering = torch.eye(n, dtype=torch.double) - 1.0 / n
    gram = -0.5 * centering @ d2 @ centering
    values, vectors = torch.linalg.eigh(gram)  # ascending
    values, vectors = values.flip(0)[:dims], vectors.flip(1)[:, :dims]
    return (vectors * values.clamp(min=0).sqrt()).float()  # [n, dims]


def cmd_pe_mds(args: PlotRequest) -> None:
    table, title = position_table(args)
    coords = classical_mds(table)
    fig, ax = plt.subplots(figsize=(6, 5))
    sc = ax.scatter(coords[:, 0], coords[:, 1], c=range(len(coords)), cmap="viridis", s=12)
    fig.colorbar(sc, ax=ax, label="position")
    ax.set(title=f"MDS of {title} position vectors", xlabel="MDS 1", ylabel="MDS 2")
    _save(fig, args.output, args.overwrite)


def similarity_curves(args: PlotRequest) -> tuple[torch.Tensor, dict[str, torch.Tensor], str]:
    """Distances j - i and one curve per label (heads for the bias families)."""
    n, i = args.positions, args.position
    positions = torch.arange(n)
    rel = positions - i
    if args.model_path or args.run:
        _, _, model = _load(args)
        pe = model.encoder_pe
        name = pe.registry_name
        if hasattr(pe, "relative_bias"):
            bias = pe.self_attention(torch.tensor([i]), positions).bias[:, 0]  # [heads, n]
            return rel, {f"head {h}": bias[h].detach() for h in range(bias.size(0))}, f"trained {name} bias"
        if hasattr(pe, "table"):
            table = pe.table.weight[:n].detach()
            return rel, {"dot product": table @ table[i]}, "trained learnable"
        if hasattr(pe, "rot_dim"):  # rope (its scaling included), xpos (its decay included)
            tables = pe.self_attention(positions, positions)
            ones = torch.ones(1, 1, n, pe.head_dim)
            q = apply_rotary(ones, *tables.rotary_q, tables.rotary_layout)[0, 0]  # [n, head_dim]
            k = apply_rotary(ones, *tables.rotary_k, tables.rotary_layout)[0, 0]
            return rel, {"q·k (q = k = 1)": k @ q[i]}, f"trained {name}"
        args.encoding = name
    if args.encoding in ("sinusoidal", "shape", "cape"):
        table = sinusoidal_table(positions, args.d_model)
        return rel, {"PE(i)·PE(j)": table @ table[i]}, "sinusoidal"
    if args.encoding == "rope":
        head_dim = args.d_model // args.heads
        ones = torch.ones(1, 1, n, head_dim)
        cos, sin = rope_tables(positions, head_dim, 10000.0, "half")
        rotated = apply_rotary(ones, cos, sin, "half")[0, 0]  # [n, head_dim]
        return rel, {"RoPE q·k (q = k = 1)": rotated @ rotated[i]}, "rope"
    if args.encoding == "alibi":
        slopes = alibi_slopes(args.heads)
        return rel, {f"head {h}": -slopes[h] * rel.abs() for h in range(args.heads)}, "alibi"
    raise ConfigError(f"--encoding {args.encoding} needs a trained model (--model_path / --run)")


def cmd_pe_similarity(args: PlotRequest) -> None:
    rel, curves, title = similarity_curves(args)
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for label, values in curves.items():
        ax.plot(rel.numpy(), values.numpy(), label=label, linewidth=1.2)
    ax.set(
        xlabel=f"relative position j − i (i = {args.position})",
        ylabel="similarity / bias",
        title=f"{title}: position {args.position} against all others",
    )
    ax.legend(fontsize=7, ncol=2)
    _save(fig, args.output, args.overwrite)


def cmd_attention(args: PlotRequest) -> None:
    cfg, tokenizer, model = _load(args)
    if not tokenizer.encode_src(args.src_text):
        raise ConfigError("--src_text is empty: give a French sentence")
    out_dir = Path(args.output)
    for kind, fig in sentence_attention_figures(model, tokenizer, args.src_text, args.tgt_text).items():
        fig.suptitle(f"{kind} ({cfg.model.positional.name})")
        _save(fig, str(out_dir / f"{kind.replace(' ', '_').replace('-', '_')}.png"), args.overwrite)


PLOTS = {
    "pe-heatmap": cmd_pe_heatmap,
    "pe-mds": cmd_pe_mds,
    "pe-similarity": cmd_pe_similarity,
    "attention": cmd_attention,
}


def visualize(request: PlotRequest) -> int:
    """Write the plot `request` asks for (PNG files), as visualize.py does."""
    if request.position >= request.positions:
        raise ConfigError("--position must be smaller than --positions")
    PLOTS[request.command](request)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p, needs_out: str) -> None:
        add_command_flags(
            p,
            run=RUN_HELP,
            model_path=True,
            output=f"output PNG (default {needs_out})",
            output_default=needs_out,
            overwrite="the PNG files of an earlier plot",
        )

    for name, help_text in (
        ("pe-heatmap", "positions x dimensions heatmap"),
        ("pe-mds", "2-D MDS of position vectors"),
        ("pe-similarity", "similarity against distance"),
    ):
        p = sub.add_parser(name, help=help_text)
        common(p, f"plots/{name}.png")
        p.add_argument(
            "--encoding",
            default="sinusoidal",
            choices=["sinusoidal", "shape", "rope", "alibi"],
            help="computed encoding when no model is given",
        )
        p.add_argument("--positions", type=int, default=100, help="number of positions")
        p.add_argument("--position", type=int, default=50, help="reference position i (pe-similarity)")
        p.add_argument("--d_model", type=int, default=128)
        p.add_argument("--heads", type=int, default=8)
        p.add_argument("--stack", choices=["encoder", "decoder"], default="encoder")
    p = sub.add_parser("attention", help="attention maps for a sentence pair")
    common(p, "plots/attention")  # a folder: one PNG per attention kind
    p.add_argument("--src_text", metavar="SENTENCE", help="the French sentence (required)")
    p.add_argument("--tgt_text", metavar="SENTENCE", help="its English translation (default: the model's greedy one)")
    deprecated_flag(p, "--src", "--src_text", "src_text")
    deprecated_flag(p, "--tgt", "--tgt_text", "tgt_text")
    return parser


def main(argv: Optional[list[str]] = None) -> int:
    parser = build_parser()
    args = parse_command(parser, argv)
    if args.command == "attention" and args.src_text is None:
        parser.error("attention: --src_text is required")
    return visualize(PlotRequest(**vars(args)))

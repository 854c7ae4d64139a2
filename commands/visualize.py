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
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402

from commands.cli import (  # noqa: E402
    RUN_HELP,
    UsageError,
    add_command_flags,
    deprecated_flag,
    one_value_per_flag,
    parse_command,
    refuse_together,
)
from evaluation.figures import sentence_attention_figures, table_figure  # noqa: E402
from models.positional_encodings import (  # noqa: E402
    POSITIONAL_ENCODINGS,  # noqa: E402
    PositionalEncoding,
    build_positional_encoding,
)
from settings.config import ConfigError, PositionalConfig  # noqa: E402
from utils.files import atomic_output, check_target  # noqa: E402

# Beyond these a plot is unreadable and its tables need more memory than a plot is worth
# (pe-mds holds a positions x positions distance matrix)
MAX_POSITIONS, MAX_D_MODEL, MAX_HEADS = 4096, 8192, 64
MAX_ATTENTION_TOKENS = 200  # per sentence: one row and column of each map per subword token


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
    position: Optional[int] = None  # pe-similarity's reference position (None: the middle one)
    d_model: int = 128
    heads: int = 8
    stack: str = "encoder"
    src_text: Optional[str] = None
    tgt_text: Optional[str] = None


def _load(args: PlotRequest):
    """The model --model_path or --run names (the shared lookup and loader of every command)."""
    from artifacts.loading import load_model
    from artifacts.lookup import find_model

    if not (args.model_path or args.run):
        raise ConfigError(
            "this plot needs a trained model: --model_path <checkpoint.pt or export folder> or --run <run folder>"
        )
    return load_model(find_model(args.model_path, args.run))


def plot_format(out: str) -> str:
    """The file format `out`'s extension names (none: PNG); one line listing those matplotlib writes
    when it cannot write it (checked before any work)."""
    from matplotlib.backend_bases import FigureCanvasBase

    suffix = Path(out).suffix.lstrip(".").lower() or "png"
    formats = FigureCanvasBase.get_supported_filetypes()
    if suffix not in formats:
        raise ConfigError(
            f"--output {out}: matplotlib cannot write .{suffix} files; name the plot with one of "
            f"{', '.join('.' + f for f in sorted(formats))} (e.g. .png)"
        )
    return suffix


def _save(fig, out: str, overwrite: bool) -> None:
    # never into a run folder, never over an existing file unless --overwrite
    check_target(out, "--output", overwrite=overwrite)
    with atomic_output(out, "wb", encoding=None) as f:  # whole or not at all, in the format its name says
        fig.savefig(f, dpi=110, bbox_inches="tight", format=plot_format(out))
    plt.close(fig)
    print(f"wrote {out}")


def fit_to_table(args: PlotRequest, rows: int) -> None:
    """Plot no more positions than a learned table holds: --positions, or (with a note) its rows."""
    if args.positions > rows:
        print(
            f"note: the model's learned position table has {rows} rows: plotting positions "
            f"0-{rows - 1}, not --positions {args.positions}",
            file=sys.stderr,
        )
        args.positions = rows
    if args.position is not None:
        check_range("--position", args.position, 0, args.positions - 1, " (a position the table holds)")


def plotted_encoding(args: PlotRequest) -> tuple[PositionalEncoding, str]:
    """The encoding a pe-* plot shows, and its name for the title: a trained model's (--model_path or
    --run, its --stack) or, without one, --encoding computed at --d_model / --heads (one with learned
    parameters needs a trained model). The plots ask it for its picture; they never ask its name."""
    if args.model_path or args.run:
        model = _load(args).model
        pe = model.encoder_pe if args.stack == "encoder" else model.decoder_pe
        if pe.max_positions is not None:
            fit_to_table(args, pe.max_positions)
        return pe, f"trained {pe.registry_name} ({args.stack})"
    pe = build_positional_encoding(PositionalConfig(name=args.encoding), args.d_model, args.heads, causal=False)
    if any(True for _ in pe.parameters()):
        raise ConfigError(
            f"--encoding {args.encoding} has learned parameters: plot a trained model of it (--model_path or --run)"
        )
    return pe, args.encoding


def position_table(args: PlotRequest) -> tuple[torch.Tensor, str]:
    """[positions, d_model]: what the chosen encoding adds to the embeddings at each position."""
    pe, title = plotted_encoding(args)
    table = pe.position_vectors(args.positions)
    if table is None:
        where = f"{args.model_path or args.run}: the model's encoding" if args.model_path or args.run else "--encoding"
        raise ConfigError(
            f"{where} {pe.registry_name} adds no vector per position: {args.command} plots additive "
            f"encodings (a learnable model's table, or --encoding sinusoidal computed)"
        )
    return table, title


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
    """Distances j - i and one curve per label (heads for the bias families), from the encoding's own
    `similarity` hook."""
    pe, title = plotted_encoding(args)
    if args.position is None:
        args.position = args.positions // 2
    curves = pe.similarity(args.position, args.positions)
    if curves is None:
        raise ConfigError(f"{title}: this encoding gives attention no positional signal to plot (pe-similarity)")
    return torch.arange(args.positions) - args.position, curves, title


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


def check_attention_lengths(args: PlotRequest, tokenizer, model) -> None:
    """A sentence the maps can show: some tokens, at most MAX_ATTENTION_TOKENS (one row and column
    each) and no more than a learned position table holds."""
    table = model.max_positions or MAX_ATTENTION_TOKENS
    limit = min(MAX_ATTENTION_TOKENS, table)
    why = "one row and column per token" if limit == MAX_ATTENTION_TOKENS else f"the model's {table} positions"
    for flag, tokens in (
        ("--src_text", tokenizer.encode_src(args.src_text)),
        ("--tgt_text", tokenizer.encode_tgt(args.tgt_text) if args.tgt_text is not None else []),
    ):
        if flag == "--src_text" and not tokens:
            raise ConfigError(f"--src_text {args.src_text!r} has no tokens: give a French sentence")
        if len(tokens) + 1 > limit:  # (+1: the decoder's <s>, the encoder's end of sentence)
            raise ConfigError(
                f"{flag} has {len(tokens)} subword tokens; attention maps show at most {limit - 1} "
                f"({why}): give a shorter sentence"
            )


def cmd_attention(args: PlotRequest) -> None:
    loaded = _load(args)
    cfg, tokenizer, model = loaded.config, loaded.tokenizer, loaded.model
    check_attention_lengths(args, tokenizer, model)
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


def check_range(flag: str, value: int, lowest: int, highest: int, why: str = "") -> None:
    if not lowest <= value <= highest:
        raise ConfigError(f"{flag} {value}: give a whole number from {lowest} to {highest}{why}")


def check_request(args: PlotRequest) -> None:
    """Values a plot cannot be drawn from, refused in one line naming the flag before any work."""
    refuse_together(args, "the model to plot", "--run", "--model_path")
    if not args.output.strip():
        raise ConfigError("--output is empty: give the plot's file name (a folder for attention), e.g. plots/x.png")
    if args.command == "attention":
        for flag, text in (("--src_text", args.src_text), ("--tgt_text", args.tgt_text)):
            if text is not None and not text.strip():
                raise ConfigError(f"{flag} is {'empty' if not text else 'only spaces'}: give a sentence")
        return
    plot_format(args.output)
    check_range("--positions", args.positions, 2 if args.command == "pe-mds" else 1, MAX_POSITIONS)
    if args.position is not None:
        check_range("--position", args.position, 0, args.positions - 1, " (a position below --positions)")
    if args.model_path or args.run:  # the model's own sizes and encoding are plotted
        return
    check_range("--d_model", args.d_model, 2, MAX_D_MODEL)
    check_range("--heads", args.heads, 1, min(MAX_HEADS, args.d_model))
    if args.d_model % args.heads:
        raise ConfigError(
            f"--d_model {args.d_model} is not a multiple of --heads {args.heads}: each head takes a share"
        )
    encoding = POSITIONAL_ENCODINGS[args.encoding]
    try:  # the encoding's own conditions on the head size (e.g. RoPE rotates pairs of dimensions)
        encoding.Options().check(head_dim=args.d_model // args.heads, max_len=args.positions)
    except ValueError as e:
        raise ConfigError(
            f"--encoding {args.encoding} with --d_model {args.d_model} / --heads {args.heads}: {e}"
        ) from None


def visualize(request: PlotRequest) -> int:
    """Write the plot `request` asks for (PNG files), as visualize.py does."""
    check_request(request)
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
        p = one_value_per_flag(sub.add_parser(name, help=help_text))
        common(p, f"plots/{name}.png")
        p.add_argument(
            "--encoding",
            choices=sorted(POSITIONAL_ENCODINGS),
            help="computed encoding when no model is given (default: sinusoidal; those with learned "
            "parameters need --run or --model_path)",
        )
        p.add_argument("--positions", type=int, default=100, help="number of positions")
        p.add_argument("--position", type=int, help="reference position i (pe-similarity; default: the middle one)")
        p.add_argument("--d_model", type=int, help="width of the computed encoding (default: 128)")
        p.add_argument("--heads", type=int, help="heads of the computed encoding (default: 8)")
        p.add_argument("--stack", choices=["encoder", "decoder"], default="encoder")
    p = one_value_per_flag(sub.add_parser("attention", help="attention maps for a sentence pair"))
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
    computed = [f"--{k}" for k in ("encoding", "d_model", "heads") if getattr(args, k, None) is not None]
    if computed and (args.run or args.model_path):
        model_flag = "--run" if args.run else "--model_path"
        verb = "is" if len(computed) == 1 else "are"
        raise UsageError(
            f"{' and '.join(computed)} {verb} for a computed encoding, but {model_flag} names a trained model, "
            f"whose own encoding and sizes are plotted: drop one of them"
        )
    return visualize(PlotRequest(**{k: v for k, v in vars(args).items() if v is not None}))

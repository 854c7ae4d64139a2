"""Figures of a model, shared by visualize.py (PNG files) and TensorBoard (images during training):
attention maps for one sentence pair, and heatmaps of position tables.

Matplotlib runs headless (Agg); callers save or log the returned figures and close them.
"""

from __future__ import annotations

from typing import Optional

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402

KINDS = ("encoder self-attention", "decoder self-attention", "cross-attention")


@torch.no_grad()
def attention_maps(model, src: torch.Tensor, tgt_in: torch.Tensor) -> dict[str, list[torch.Tensor]]:
    """Softmax attention of every layer, by kind: each `[heads, q_len, k_len]` (batch of one)."""
    captured: dict[str, list] = {"encoder self-attention": [], "decoder self-attention": [], "cross-attention": []}
    hooks = []

    def capture(kind):
        def hook(module, args, kwargs):
            captured[kind].append((module, args, kwargs))

        return hook

    for layer in model.encoder_layers:
        hooks.append(layer.self_attn.register_forward_pre_hook(capture("encoder self-attention"), with_kwargs=True))
    for layer in model.decoder_layers:
        hooks.append(layer.self_attn.register_forward_pre_hook(capture("decoder self-attention"), with_kwargs=True))
        hooks.append(layer.cross_attn.register_forward_pre_hook(capture("cross-attention"), with_kwargs=True))
    try:
        model.decode(tgt_in, model.encode(src))
    finally:
        for h in hooks:
            h.remove()
    maps: dict[str, list[torch.Tensor]] = {}
    for kind, calls in captured.items():
        maps[kind] = []
        for module, args, kwargs in calls:
            x = args[0]
            memory = args[1] if len(args) > 1 else kwargs.get("memory")
            mask = kwargs.get("attn_mask")
            if kwargs.get("is_causal") and mask is None:
                mask = torch.ones(x.size(1), x.size(1), dtype=torch.bool, device=x.device).tril()
            weights = module.attention_weights(x, memory, mask, kwargs.get("attn_positions"))
            maps[kind].append(weights[0])
    return maps


def attention_figure(layers: list[torch.Tensor], rows: list[str], cols: list[str]):
    """One grid (layers x heads) of `[heads, q_len, k_len]` maps, labelled with the tokens."""
    heads = layers[0].size(0)
    fig, grid = plt.subplots(len(layers), heads, figsize=(2.6 * heads, 2.6 * len(layers)), squeeze=False)
    for li, weights in enumerate(layers):
        for h in range(heads):
            ax = grid[li][h]
            ax.imshow(weights[h].float().numpy(), cmap="viridis", vmin=0.0, vmax=1.0)
            ax.set_xticks(range(len(cols)), cols, rotation=90, fontsize=5)
            ax.set_yticks(range(len(rows)), rows, fontsize=5)
            ax.set_title(f"layer {li + 1} head {h + 1}", fontsize=7)
    return fig


@torch.no_grad()
def sentence_attention_figures(model, tokenizer, src_text: str, tgt_text: Optional[str] = None) -> dict:
    """{kind: figure} for one sentence and its translation (`tgt_text`, or the model's greedy output)."""
    from decoding.search import greedy_search
    from decoding.step import CachedDecoder

    device = next(model.parameters()).device
    src_ids = tokenizer.encode_src(src_text)
    src = torch.tensor([src_ids], device=device)
    if tgt_text is not None:
        tgt_ids = tokenizer.encode_tgt(tgt_text)
    else:
        found = greedy_search(CachedDecoder(model), src, tokenizer.bos_id, tokenizer.eos_id, tokenizer.pad_id)
        tgt_ids = found[0].tokens
    maps = attention_maps(model, src, torch.tensor([[tokenizer.bos_id, *tgt_ids]], device=device))
    src_labels = tokenizer.tokens(src_ids, "src")
    tgt_labels = ["<s>", *tokenizer.tokens(tgt_ids)]
    labels = {
        "encoder self-attention": (src_labels, src_labels),
        "decoder self-attention": (tgt_labels, tgt_labels),
        "cross-attention": (tgt_labels, src_labels),
    }
    return {kind: attention_figure([w.cpu() for w in layers], *labels[kind]) for kind, layers in maps.items()}


def table_figure(table: torch.Tensor, title: str, xlabel: str, ylabel: str):
    """Heatmap of a 2-D table (positions x dimensions, buckets x heads, ...)."""
    fig, ax = plt.subplots(figsize=(10, 5))
    im = ax.imshow(table.detach().float().cpu().numpy(), aspect="auto", cmap="RdBu_r", interpolation="nearest")
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
    fig.colorbar(im, ax=ax)
    return fig

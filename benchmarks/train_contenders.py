"""The contenders benchmarks/train.py times, each as a model and a step on one batch: our model
(train.py's own step, or the step as it was when issue 33 opened), Hugging Face Marian and
`nn.Transformer` with embeddings, all of the same size, on the same batches (`make_batches`: random
ids with the shipped corpus' lengths). How they are timed is benchmarks/train.py's."""

from __future__ import annotations

import gzip
import itertools
import math
import random
from pathlib import Path

PAD, BOS, EOS = 0, 2, 3  # the benchmark vocabulary's special ids


def build(case: str, sizes: dict, device: str = "cpu"):
    """A model and `step_loss(src, tgt_in, tgt_out) -> loss` for each contender."""
    import torch
    import torch.nn.functional as F

    vocab = sizes["vocab"]
    torch.manual_seed(0)

    def ce(logits, tgt_out):
        return F.cross_entropy(logits.reshape(-1, vocab).float(), tgt_out.reshape(-1), ignore_index=PAD)

    if case.startswith("ours"):
        model = ours(case, sizes).to(device)
        return model, lambda s, ti, to: ce(model(s, ti), to)
    if case == "hf_marian":
        model = marian(sizes).to(device)
        return model, lambda s, ti, to: ce(
            model(input_ids=s, attention_mask=s.ne(PAD), decoder_input_ids=ti).logits, to
        )
    if case == "nn_transformer":
        model = plain_transformer(sizes).to(device)
        return model, lambda s, ti, to: ce(model(s, ti), to)
    raise ValueError(case)


def ours(case: str, sizes: dict):
    """This project's model (sinusoidal for ours_legacy, else the encoding the case names)."""
    from models.build import build_model
    from settings.config import ModelConfig, PositionalConfig

    d, h, n, ffn, vocab = (sizes[k] for k in ("d_model", "num_heads", "layers", "ffn_dim", "vocab"))
    name = "sinusoidal" if case == "ours_legacy" else case.split("_")[1]
    cfg = ModelConfig(
        d_model=d,
        num_heads=h,
        num_encoder_layers=n,
        num_decoder_layers=n,
        ffn_dim=ffn,
        positional=PositionalConfig(name=name),
    )
    return build_model(cfg, vocab, vocab, PAD)


def marian(sizes: dict):
    """Hugging Face Marian of the same size (post-norm, ReLU, scaled embeddings, as ours)."""
    from transformers import MarianConfig, MarianMTModel

    d, h, n, ffn, vocab = (sizes[k] for k in ("d_model", "num_heads", "layers", "ffn_dim", "vocab"))
    cfg = MarianConfig(
        vocab_size=vocab,
        d_model=d,
        encoder_layers=n,
        decoder_layers=n,
        encoder_attention_heads=h,
        decoder_attention_heads=h,
        encoder_ffn_dim=ffn,
        decoder_ffn_dim=ffn,
        max_position_embeddings=512,
        pad_token_id=PAD,
        eos_token_id=EOS,
        decoder_start_token_id=BOS,
        activation_function="relu",
        scale_embedding=True,
        dropout=0.1,
        attention_dropout=0.0,
        activation_dropout=0.1,
    )
    return MarianMTModel(cfg)


def plain_transformer(sizes: dict):
    """nn.Transformer with embeddings, sinusoidal positions and a tied output layer."""
    import torch

    from models.positional_encodings import sinusoidal_table

    d, h, n, ffn, vocab = (sizes[k] for k in ("d_model", "num_heads", "layers", "ffn_dim", "vocab"))

    class Plain(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(vocab, d, padding_idx=PAD)
            self.core = torch.nn.Transformer(d, h, n, n, ffn, dropout=0.1, batch_first=True)

        def forward(self, src, tgt_in):
            def emb(x):
                pos = sinusoidal_table(torch.arange(x.size(1), device=x.device), d)
                return self.embed(x) * math.sqrt(d) + pos.to(x.device)

            causal = torch.nn.Transformer.generate_square_subsequent_mask(tgt_in.size(1), device=tgt_in.device)
            out = self.core(
                emb(src),
                emb(tgt_in),
                tgt_mask=causal,
                src_key_padding_mask=src.eq(PAD),
                memory_key_padding_mask=src.eq(PAD),
                tgt_is_causal=True,
            )
            return out @ self.embed.weight.t()

    return Plain()


def harness_step(
    model, device: str, precision: str, tokens_of: dict, compiled: bool = False, cuda_graphs: bool = False
):
    """One update as train.py makes it: create_trainer's step (no value read back from the device,
    training/step_stats.py) on the model's TokenLoss (compiled with training.compile's settings
    if `compiled`) with
    build_optimizer's Adam (fused where the device has it); no clipping, as the other contenders
    do not clip. Batch token counts come from the host, as the collator gives them."""
    from types import SimpleNamespace

    import torch

    from training.engine import TokenLoss, compile_for_training, create_trainer
    from training.schedules import build_optimizer
    from training.step_stats import StepStats

    optimizer = build_optimizer(
        model, SimpleNamespace(optimizer="adam", lr=1e-4, betas=(0.9, 0.98), eps=1e-8, weight_decay=0.0)
    )
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0)
    loss = TokenLoss(model, PAD, precision=precision)
    trainer = create_trainer(
        compile_for_training(loss, cuda_graphs) if compiled else loss,
        optimizer,
        scheduler,
        StepStats(device, 100),
        pad_id=PAD,
        device=torch.device(device),
        cuda_graphs=cuda_graphs,
    )

    def step(batch) -> None:
        src, tgt_in, tgt_out, *packing = batch  # a packed batch carries its Packing (training.pack_length)
        collated = {"src": src, "tgt_in": tgt_in, "tgt_out": tgt_out, "ntokens": tokens_of[id(batch)]}
        trainer._process_function(trainer, [{**collated, **({"packing": packing[0]} if packing else {})}])

    return step


def legacy_step(model, device: str, precision: str):
    """The training step as it was when issue 33 opened (training/engine.py at 276cc80^, kept here
    to measure against): the token count read from the device copy, the non-finite check, the loss
    and the gradient norm each read into Python (4 host syncs per step), and torch's default
    (unfused) Adam."""
    import torch

    from training.engine import sequence_loss
    from utils.runtime import autocast

    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-8)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0)

    def step(batch) -> None:
        model.train()
        src, tgt_in, tgt_out = (t.to(device, non_blocking=True) for t in batch)
        ntokens = int(tgt_out.ne(PAD).sum())
        with autocast(precision, torch.device(device)):
            logits = model(src, tgt_in)
        loss_sum = sequence_loss(logits, tgt_out, PAD)
        if not torch.isfinite(loss_sum):
            raise FloatingPointError(f"loss is {loss_sum.item()}")
        (loss_sum / ntokens).backward()
        float(loss_sum.detach())
        float(torch.nn.utils.get_total_norm([p.grad for p in model.parameters() if p.grad is not None]))
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        scheduler.step()

    return step


CORPUS = Path(__file__).resolve().parents[1] / "data" / "corpora" / "tatoeba-fr-en" / "fra-eng.tsv.gz"


def make_batches(max_tokens: int, count: int, vocab: int, seed: int = 0, multiple: int = 1, pack: int = 0):
    """`count` token-budget batches of random ids with the corpus' length distribution; with
    `multiple`, cut and padded as training.pad_to_multiple does (few batch shapes); with `pack`,
    packed into rows of that many tokens as training.pack_length does (src, tgt_in, tgt_out, packing)."""
    import torch

    from data.packing import PackingCollator
    from data.pipeline import EpochBatchSampler, round_up

    rng = random.Random(seed)
    with gzip.open(CORPUS, "rt", encoding="utf-8") as f:
        pairs = [line.rstrip("\n").split("\t")[:2] for line in f]
    sample = rng.sample(pairs, 20000)
    tgt_lens = [max(1, round(1.3 * len(en.split()))) for en, _ in sample]
    src_lens = [max(1, round(1.3 * len(fr.split()))) for _, fr in sample]
    sampler = EpochBatchSampler(
        src_lens,
        tgt_lens,
        max_tokens=max_tokens,
        shuffle=True,
        seed=seed,
        pad_to_multiple=multiple,
        pack_length=pack or None,
    )
    g = torch.Generator().manual_seed(seed)
    order, batches = [], []
    for epoch in itertools.count():  # as many epochs of the sample as `count` batches take (32k-token batches)
        sampler.set_epoch(epoch)
        order += list(sampler)
        if len(order) >= count:
            break
    if pack:
        collate = PackingCollator(PAD, BOS, EOS, pack)
        for idx in order[:count]:

            def ids(n: int) -> list[int]:
                return torch.randint(4, vocab, (n,), generator=g).tolist()

            b = collate([(ids(src_lens[i]), ids(tgt_lens[i])) for i in idx])
            batches.append((b["src"], b["tgt_in"], b["tgt_out"], b["packing"]))
        return batches
    for idx in order[:count]:
        s_len, longest_tgt = round_up(max(src_lens[i] for i in idx), multiple), max(tgt_lens[i] for i in idx)
        t_len = (round_up(longest_tgt + 1, multiple) if multiple > 1 else longest_tgt) + 1  # decoder length + 1
        src = torch.full((len(idx), s_len), PAD, dtype=torch.long)
        tgt = torch.full((len(idx), t_len), PAD, dtype=torch.long)
        for r, i in enumerate(idx):
            src[r, : src_lens[i]] = torch.randint(4, vocab, (src_lens[i],), generator=g)
            tgt[r, : tgt_lens[i] + 1] = torch.randint(4, vocab, (tgt_lens[i] + 1,), generator=g)
        tgt_in, tgt_out = tgt.clone(), tgt.clone()
        tgt_in[:, 0] = BOS
        batches.append((src, tgt_in[:, :-1], tgt_out[:, 1:]))
    return batches

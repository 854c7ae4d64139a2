"""Packed rows (models/packing.py, data/packing.py): every pair of a packed batch gets what it gets in
a row of its own -- logits, loss and gradients -- for every positional encoding, in training mode
(randomized draws included) and at evaluation."""

from __future__ import annotations

import pytest
import torch
from helpers import BOS, EOS, PAD, VOCAB, encoding_cases, give_bias_tables_a_signal, tiny_model

from data.packing import PackingCollator, next_fit_rows
from data.pipeline import Collator
from models.packing import Packing, within_pairs
from training.engine import sequence_loss


def pairs(seed: int, count: int = 7) -> list[tuple[list[int], list[int]]]:
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, 9, (count, 2), generator=g).tolist()
    return [
        (torch.randint(4, VOCAB, (s,), generator=g).tolist(), torch.randint(4, VOCAB, (t,), generator=g).tolist())
        for s, t in lengths
    ]


def cases():
    extra = [pytest.param(n, {"cross_attention": True}, id=f"{n}-cross") for n in ("alibi", "t5_bias", "shaw")]
    return encoding_cases() + extra


def packed_and_alone(items, length: int = 20):
    """The packed batch of `items` and the same pairs unpacked, in the packed batch's pair order
    (row by row, as the collator numbers them)."""
    rows = next_fit_rows([len(s) for s, _ in items], [len(t) + 1 for _, t in items], length)
    ordered = [items[n] for row in rows for n in row]
    return PackingCollator(PAD, BOS, EOS, length)(items), Collator(PAD, BOS, EOS)(ordered)


@pytest.mark.parametrize("name, options", cases())
@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
def test_a_packed_pair_gets_what_it_gets_in_a_row_of_its_own(name, options, training):
    """Logits at every real target token, the summed loss and every gradient are the unpacked
    batch's (fp32), with the randomized encodings' training draws made per pair."""
    model = tiny_model(name, seed=4, **options)
    give_bias_tables_a_signal(model, seed=4)
    model.train(training)
    items = pairs(seed=5)
    packed, alone = packed_and_alone(items)
    p = Packing.on(packed["packing"], "cpu")
    assert packed["src"].size(0) < alone["src"].size(0)  # several pairs share rows
    torch.manual_seed(11)
    packed_logits = model(packed["src"], packed["tgt_in"], p)
    packed_loss = sequence_loss(packed_logits, packed["tgt_out"], PAD)
    packed_grads = torch.autograd.grad(
        packed_loss, [w for w in model.parameters() if w.requires_grad], allow_unused=True
    )
    torch.manual_seed(11)
    alone_logits = model(alone["src"], alone["tgt_in"])
    alone_loss = sequence_loss(alone_logits, alone["tgt_out"], PAD)
    alone_grads = torch.autograd.grad(alone_loss, [w for w in model.parameters() if w.requires_grad], allow_unused=True)
    for pair in range(p.pairs):
        rows, cols = torch.nonzero(p.tgt_pair.eq(pair), as_tuple=True)
        got = packed_logits[rows, cols]  # [tokens of the pair, vocab]
        want = alone_logits[pair, : got.size(0)]
        torch.testing.assert_close(got, want, atol=2e-5, rtol=0, msg=lambda m, pair=pair: f"pair {pair}: {m}")
    torch.testing.assert_close(packed_loss, alone_loss, atol=1e-4, rtol=1e-6)
    for a, b in zip(packed_grads, alone_grads):
        if a is not None or b is not None:
            torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)
    assert packed["ntokens"] == alone["ntokens"]


def test_a_token_sees_its_own_pair_and_padding_sees_everything():
    q = torch.tensor([[0, 0, 1, 1, 1, -1]])
    allowed = within_pairs(q, q, causal=True)[0, 0]
    assert allowed[4].tolist() == [False, False, True, True, True, False]  # its pair, up to itself
    assert allowed[1].tolist() == [True, True, False, False, False, False]
    assert allowed[5].all()  # padding: never a row of nothing
    cross = within_pairs(q, torch.tensor([[1, 1, 0, -1]]), causal=False)[0, 0]
    assert cross[0].tolist() == [False, False, True, False] and cross[3].tolist() == [True, True, False, False]

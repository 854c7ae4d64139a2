"""Greedy and beam search (decoding/search.py) on the real model and on hand-built ones: beam 1 is
greedy, batches equal single sentences, n-best scores rescore, the length penalty ranks."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest
import torch
from helpers import BOS, EOS, PAD, mixed_batch, tiny_model, trim

from decoding.hypotheses import Hypothesis, length_penalty
from decoding.search import CHECK_EVERY, beam_search, greedy_search
from decoding.step import CachedDecoder
from models.positional_encodings import POSITIONAL_ENCODINGS
from models.transformer import Seq2SeqTransformer


def rescore(model, src_row: torch.Tensor, tokens: list[int]) -> float:
    """Sum of teacher-forced log-probabilities of `tokens` + EOS given one source sentence."""
    tgt_in = torch.tensor([[BOS] + tokens])
    target = torch.tensor([tokens + [EOS]])
    with torch.no_grad():
        logp = torch.log_softmax(model.decode(tgt_in, model.encode(trim(src_row))).double(), dim=-1)
    return float(logp.gather(-1, target[..., None]).sum())


# ---------------------------------------------------------------------------- greedy / beam on the real model


@pytest.mark.parametrize("name", sorted(POSITIONAL_ENCODINGS))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_beam_size_one_equals_greedy(name, seed):
    model = tiny_model(name, seed=seed)
    src = mixed_batch([6, 2, 9, 4], seed=10 + seed)
    greedy = greedy_search(CachedDecoder(model), src, BOS, EOS, PAD, max_len_a=1, max_len_b=5)
    beam = beam_search(CachedDecoder(model), src, BOS, EOS, PAD, beam_size=1, max_len_a=1, max_len_b=5, penalty="none")
    assert len(greedy) == len(beam) == 4
    assert any(h.tokens for h in greedy)  # not a degenerate all-empty comparison
    for i, (g_hyp, b_hyps) in enumerate(zip(greedy, beam)):
        assert len(b_hyps) == 1
        assert b_hyps[0].tokens == g_hyp.tokens, f"sentence {i}"
        assert b_hyps[0].score == pytest.approx(g_hyp.score, abs=1e-4)
        limit = int(src[i].ne(PAD).sum()) * 1 + 5
        assert len(g_hyp.tokens) + 1 <= limit  # EOS included in the length cap
        assert not {PAD, BOS, EOS} & set(g_hyp.tokens)
        assert g_hyp.score == pytest.approx(rescore(model, src[i], g_hyp.tokens), abs=1e-4)


@pytest.mark.parametrize("name", sorted(POSITIONAL_ENCODINGS))
def test_beam_search_batch_equals_each_sentence_alone(name):
    model = CachedDecoder(tiny_model(name, seed=7))
    src = mixed_batch([3, 8, 5, 1], seed=7)
    kwargs = dict(beam_size=3, max_len_a=1, max_len_b=5, penalty="wu", alpha=0.6, nbest=3)
    batched = beam_search(model, src, BOS, EOS, PAD, **kwargs)
    assert len(batched) == 4
    for i in range(4):
        alone = beam_search(model, trim(src[i]), BOS, EOS, PAD, **kwargs)[0]
        assert [h.tokens for h in batched[i]] == [h.tokens for h in alone], f"sentence {i}"
        for b, a in zip(batched[i], alone):
            assert b.score == pytest.approx(a.score, abs=1e-4)
            assert b.normalized_score == pytest.approx(a.normalized_score, abs=1e-4)


@pytest.mark.parametrize("penalty, alpha", [("none", 0.0), ("avg", 0.0), ("wu", 0.6), ("wu", 1.5)])
def test_nbest_sorted_and_raw_scores_match_teacher_forced_rescoring(penalty, alpha):
    model = tiny_model("sinusoidal", seed=8)
    src = mixed_batch([4, 7], seed=8)
    results = beam_search(
        CachedDecoder(model),
        src,
        BOS,
        EOS,
        PAD,
        beam_size=4,
        max_len_a=1,
        max_len_b=5,
        penalty=penalty,
        alpha=alpha,
        nbest=4,
    )
    assert len(results) == 2
    for i, hyps in enumerate(results):
        assert len(hyps) == 4
        assert all(isinstance(h, Hypothesis) for h in hyps)
        normalized = [h.normalized_score for h in hyps]
        assert normalized == sorted(normalized, reverse=True)
        assert len({tuple(h.tokens) for h in hyps}) == 4  # distinct hypotheses
        for h in hyps:
            assert not {PAD, BOS, EOS} & set(h.tokens)
            assert h.score == pytest.approx(rescore(model, src[i], h.tokens), abs=1e-4)
            assert h.normalized_score == pytest.approx(
                length_penalty(h.score, len(h.tokens) + 1, penalty, alpha), abs=1e-5
            )


def test_beam_search_rejects_bad_nbest():
    model = CachedDecoder(tiny_model("none"))
    with pytest.raises(ValueError, match="nbest"):
        beam_search(model, mixed_batch([3], seed=0), BOS, EOS, PAD, beam_size=2, nbest=3)


# ---------------------------------------------------------------------------- hand-built model

A, B, C = 4, 5, 6  # ordinary target tokens of the fake model; vocabulary size 7
FAKE_VOCAB = 7

# Next-token distributions, by the last token, for two "sentences" (picked by the first source token).
# Tokens not listed (pad, unk, bos) have probability 0, i.e. logit -inf.
GREEDY_TRAP = {
    BOS: {A: 0.5, B: 0.4, EOS: 0.1},
    A: {A: 0.25, B: 0.15, EOS: 0.6},
    B: {A: 0.06, B: 0.04, EOS: 0.9},
    C: {A: 0.3, B: 0.3, EOS: 0.4},  # never reached
}
AVG_FLIP = {
    BOS: {A: 0.65, EOS: 0.30, B: 0.05},
    A: {B: 0.5, C: 0.45, EOS: 0.05},
    B: {EOS: 0.4, A: 0.35, C: 0.25},
    C: {A: 0.45, EOS: 0.3, B: 0.25},
}
TABLES = {11: GREEDY_TRAP, 12: AVG_FLIP}
UNIFORM = {A: 0.25, B: 0.25, C: 0.25, EOS: 0.25}  # after pad (finished greedy rows)


@dataclass
class FakeEncoderOutput:
    src_mask: torch.Tensor  # [batch, src_len] bool
    table: torch.Tensor  # [batch] which transition table

    def index_select(self, index: torch.Tensor) -> "FakeEncoderOutput":
        return FakeEncoderOutput(self.src_mask.index_select(0, index), self.table.index_select(0, index))


class TransitionModel:
    """A model whose next-token log-probabilities are a fixed table lookup on the last token.

    Its cache stores every row's token history; `decode_step` checks it against `offset` and the
    current rows, so wrong cache reordering or offsets in the search fail loudly.
    """

    def __init__(self) -> None:
        self.calls = 0
        self.rows: list[int] = []  # rows decoded by each call

    def encode(self, src: torch.Tensor) -> FakeEncoderOutput:
        return FakeEncoderOutput(src.ne(PAD), src[:, 0].clone())

    def new_cache(self, capacity=None) -> dict:
        return {}

    @staticmethod
    def reorder_cache(cache: dict, index: torch.Tensor, memory_index=None, groups=None) -> None:
        cache["history"] = cache["history"].index_select(0, index)

    @classmethod
    def reorder_beams(cls, cache: dict, parents: torch.Tensor) -> None:
        sentences, beams = parents.shape
        cls.reorder_cache(cache, (torch.arange(sentences)[:, None] * beams + parents).view(-1))

    def decode_step(self, tokens: torch.Tensor, enc: FakeEncoderOutput, cache: dict, offset: int) -> torch.Tensor:
        self.calls += 1
        rows = tokens.size(0)
        self.rows.append(rows)
        group = rows // enc.src_mask.size(0)  # beams share their sentence's encoder row
        assert tokens.shape == (rows, 1) and rows == group * enc.src_mask.size(0)
        history = cache.get("history", torch.empty(rows, 0, dtype=torch.long))
        assert history.shape == (rows, offset)
        if offset == 0:
            assert torch.all(tokens == BOS)
        cache["history"] = torch.cat([history, tokens], dim=1)
        logits = torch.full((rows, FAKE_VOCAB), float("-inf"), dtype=torch.float64)
        for r in range(rows):
            dist = TABLES[int(enc.table[r // group])].get(int(tokens[r, 0]), UNIFORM)
            for tok, p in dist.items():
                logits[r, tok] = math.log(p)
        return logits


TRAP_SRC = torch.tensor([[11, 20, 21]])
FLIP_SRC = torch.tensor([[12, 20, 21]])

# GREEDY_TRAP, beam 2 (scores are products of probabilities; the search keeps their logs):
#   step 0 from BOS: A .5, B .4, EOS .1 -> top 2 = A, B (no EOS among them): beams [A] .5, [B] .4
#   step 1: [B]+EOS .4*.9 = .36, [A]+EOS .5*.6 = .30, [A,A] .125, [A,B] .075, [B,A] .024, [B,B] .016
#           -> top 2 are both EOS: finished [B] (.36) and [A] (.30); 2 = beam finished, done.
#   greedy: A (.5) then EOS (.6): [A] with .30 -- beam 2 finds the better [B] (.36).
#   length (EOS included) is 2 for both, so "avg" keeps the order: log(.36)/2, log(.30)/2.
TRAP_BEAM = [([B], math.log(0.4) + math.log(0.9)), ([A], math.log(0.5) + math.log(0.6))]
TRAP_GREEDY = ([A], math.log(0.5) + math.log(0.6))

# AVG_FLIP, beam 2:
#   step 0 from BOS: A .65, EOS .30, B .05 -> EOS is in the top 2: finished [] (.30, length 1);
#           the best 2 non-EOS continue: [A] .65, [B] .05
#   step 1: [A,B] .325, [A,C] .2925, [A]+EOS .0325, [B]+EOS .02, [B,A] .0175, [B,C] .0125
#           -> top 2 = [A,B], [A,C] (no EOS): both continue
#   step 2: [A,C,A] .2925*.45 = .131625, [A,B]+EOS .325*.4 = .13, [A,B,A] .11375, [A,C]+EOS .08775, ...
#           -> top 2 = [A,C,A] (continues), [A,B]+EOS (finished, .13, length 3); 2 finished, done.
#   none: [] (log .30 = -1.204) beats [A,B] (log .13 = -2.040).
#   avg:  [A,B] (log(.13)/3 = -0.680) beats [] (log(.30)/1 = -1.204).
#   greedy: A (.65), B (.5), EOS (.4): [A,B] with .13.
FLIP_EMPTY = ([], math.log(0.30))
FLIP_AB = ([A, B], math.log(0.65) + math.log(0.5) + math.log(0.4))
FLIP_GREEDY = FLIP_AB


def assert_hyps(hyps, expected, penalty):
    assert [h.tokens for h in hyps] == [tokens for tokens, _ in expected]
    for h, (tokens, score) in zip(hyps, expected):
        assert h.score == pytest.approx(score, abs=1e-6)
        assert h.normalized_score == pytest.approx(length_penalty(score, len(tokens) + 1, penalty, 1.0), abs=1e-6)


@pytest.mark.parametrize("penalty", ["none", "avg"])
def test_beam_search_hand_computed_greedy_trap(penalty):
    model = TransitionModel()
    hyps = beam_search(
        model, TRAP_SRC, BOS, EOS, PAD, beam_size=2, max_len_a=0, max_len_b=10, penalty=penalty, nbest=2
    )[0]
    assert_hyps(hyps, TRAP_BEAM, penalty)
    if penalty == "avg":
        assert hyps[0].normalized_score == pytest.approx((math.log(0.4) + math.log(0.9)) / 2, abs=1e-6)
    assert model.calls == 2  # 2 hypotheses finished at step 1: done (a CPU checks every step)

    greedy = greedy_search(TransitionModel(), TRAP_SRC, BOS, EOS, PAD, max_len_a=0, max_len_b=10)[0]
    assert (greedy.tokens, pytest.approx(greedy.score, abs=1e-6)) == (TRAP_GREEDY[0], TRAP_GREEDY[1])
    assert hyps[0].score > greedy.score + 0.1  # beam 2 beats greedy
    beam1 = beam_search(
        TransitionModel(), TRAP_SRC, BOS, EOS, PAD, beam_size=1, max_len_a=0, max_len_b=10, penalty=penalty
    )[0]
    assert beam1[0].tokens == greedy.tokens and beam1[0].score == pytest.approx(greedy.score, abs=1e-6)


@pytest.mark.parametrize("penalty, expected", [("none", [FLIP_EMPTY, FLIP_AB]), ("avg", [FLIP_AB, FLIP_EMPTY])])
def test_beam_search_hand_computed_length_penalty_reorders(penalty, expected):
    model = TransitionModel()
    hyps = beam_search(
        model, FLIP_SRC, BOS, EOS, PAD, beam_size=2, max_len_a=0, max_len_b=10, penalty=penalty, nbest=2
    )[0]
    assert_hyps(hyps, expected, penalty)
    assert model.calls == 3
    best = beam_search(
        TransitionModel(), FLIP_SRC, BOS, EOS, PAD, beam_size=2, max_len_a=0, max_len_b=10, penalty=penalty, nbest=1
    )[0]
    assert [h.tokens for h in best] == [expected[0][0]]
    greedy = greedy_search(TransitionModel(), FLIP_SRC, BOS, EOS, PAD, max_len_a=0, max_len_b=10)[0]
    assert greedy.tokens == FLIP_GREEDY[0] and greedy.score == pytest.approx(FLIP_GREEDY[1], abs=1e-6)


@pytest.mark.parametrize("check_every", [1, CHECK_EVERY])
def test_beam_search_hand_computed_batch_finished_sentences(check_every):
    """Three sentences in one batch: two are done at step 1, the other at step 2. Checking every
    step (a CPU), done sentences leave at once; every CHECK_EVERY steps (an accelerator), their
    beams are dead (-inf) and add nothing until the check that ends the search."""
    src = torch.cat([TRAP_SRC, FLIP_SRC, TRAP_SRC])
    model = TransitionModel()
    results = beam_search(
        model,
        src,
        BOS,
        EOS,
        PAD,
        beam_size=2,
        max_len_a=0,
        max_len_b=10,
        penalty="none",
        nbest=2,
        check_every=check_every,
    )
    assert len(results) == 3
    assert_hyps(results[0], TRAP_BEAM, "none")
    assert_hyps(results[1], [FLIP_EMPTY, FLIP_AB], "none")
    assert_hyps(results[2], TRAP_BEAM, "none")
    # The first step decodes one row per sentence (its beams are all BOS), then one per beam; the
    # batch keeps its shape between checks
    assert model.rows == ([3, 6, 2] if check_every == 1 else [3] + [6] * (CHECK_EVERY - 1))


def test_beam_search_hand_computed_length_limit():
    """max_len_b=1: only EOS may be produced at the first (and last) step."""
    hyps = beam_search(
        TransitionModel(), TRAP_SRC, BOS, EOS, PAD, beam_size=2, max_len_a=0, max_len_b=1, penalty="none", nbest=1
    )[0]
    assert_hyps(hyps, [([], math.log(0.1))], "none")
    # max_len_b=2: [A] and [B] must end at step 1 -> same as the unlimited search here.
    hyps = beam_search(
        TransitionModel(), FLIP_SRC, BOS, EOS, PAD, beam_size=2, max_len_a=0, max_len_b=2, penalty="none", nbest=2
    )[0]
    # AVG_FLIP capped at 2 tokens: finished [] (.30) at step 0; at step 1 only EOS is allowed:
    # [A]+EOS .65*.05 = .0325 and [B]+EOS .05*.4 = .02 -> the second best is [A] (.0325).
    assert_hyps(hyps, [FLIP_EMPTY, ([A], math.log(0.65) + math.log(0.05))], "none")


# AVG_FLIP with a beam wider than the number of allowed non-EOS continuations at step 0 (A and B
# only). A finished (EOS) candidate must never continue as a live beam; the spare beams are dead.
#   beam 3, step 0: top 3 = A .65, EOS .30, B .05 -> finished [] (.30); live [A] .65, [B] .05, (dead)
#   step 1: [A,B] .325, [A,C] .2925, [A]+EOS .0325, [B]+EOS .02, [B,A] .0175, [B,C] .0125
#           top 3 = [A,B], [A,C], [A]+EOS -> finished [A] (.0325); live [A,B], [A,C], [B,A]
#   step 2: [A,C,A] .131625, [A,B]+EOS .13, [A,B,A] .11375, [A,C]+EOS .08775, ...
#           top 3 = [A,C,A], [A,B]+EOS, [A,B,A] -> finished [A,B] (.13); 3 finished, done.
#   beam 4: step 1 finishes [A] (.0325) and [B] (.02) (both in the top 4); live [A,B], [A,C], [B,A], [B,C];
#           step 2 top 4 = [A,C,A], [A,B]+EOS, [A,B,A], [A,C]+EOS -> finished [A,B] (.13): 4 finished, done.
FLIP_A = ([A], math.log(0.65) + math.log(0.05))
FLIP_B = ([B], math.log(0.05) + math.log(0.4))


@pytest.mark.parametrize(
    "beam, expected", [(3, [FLIP_EMPTY, FLIP_AB, FLIP_A]), (4, [FLIP_EMPTY, FLIP_AB, FLIP_A, FLIP_B])]
)
def test_beam_search_never_continues_a_finished_hypothesis(beam, expected):
    hyps = beam_search(
        TransitionModel(), FLIP_SRC, BOS, EOS, PAD, beam_size=beam, max_len_a=0, max_len_b=6, penalty="none", nbest=beam
    )[0]
    for h in hyps:
        assert EOS not in h.tokens, f"hypothesis continued after EOS: {h}"
    assert_hyps(hyps, expected, "none")


# ------------------------------------------------------ without the cache, constraints, the frozen search


def tiny(name: str, seed: int = 0) -> Seq2SeqTransformer:
    """`tiny_model` with its learned position tables drawn from N(0, 1), so that they matter."""
    model = tiny_model(name, seed, vocab=40)
    for n, p in model.named_parameters():
        if "table" in n:
            torch.nn.init.normal_(p)
    return model.eval()


def test_min_len_forces_the_output_length() -> None:
    model = CachedDecoder(tiny("sinusoidal"))
    src = torch.randint(4, 40, (4, 5))
    for hyps in (
        greedy_search(model, src, 2, 3, 0, max_len_a=0.0, max_len_b=9, min_len=9),
        [h[0] for h in beam_search(model, src, 2, 3, 0, beam_size=3, max_len_a=0.0, max_len_b=9, min_len=9)],
    ):
        assert all(len(h.tokens) == 8 for h in hyps)  # 8 tokens + EOS = 9


def test_no_repeat_ngram_blocks_repeats() -> None:
    model = CachedDecoder(tiny("none", seed=3))
    src = torch.randint(4, 40, (4, 5))
    free = greedy_search(model, src, 2, 3, 0, max_len_a=0.0, max_len_b=30, min_len=30)
    blocked = greedy_search(model, src, 2, 3, 0, max_len_a=0.0, max_len_b=30, min_len=30, no_repeat_ngram=2)

    def has_repeat(tokens: list[int]) -> bool:
        grams = list(zip([2, *tokens], tokens))
        return len(grams) != len(set(grams))

    assert any(has_repeat(h.tokens) for h in free)  # the constraint has something to do
    assert not any(has_repeat(h.tokens) for h in blocked)
    beams = beam_search(
        model, src, 2, 3, 0, beam_size=3, max_len_a=0.0, max_len_b=30, min_len=30, no_repeat_ngram=2, nbest=3
    )
    assert not any(has_repeat(h.tokens) for hs in beams for h in hs)


@pytest.mark.parametrize("name", ["sinusoidal", "rope", "t5_bias", "learnable"])
@pytest.mark.parametrize(
    "options",
    [
        dict(beam_size=4, nbest=4, penalty="wu", alpha=0.6),
        dict(beam_size=3, nbest=2, penalty="avg", min_len=4, check_every=8),
        dict(beam_size=3, nbest=3, penalty="none", no_repeat_ngram=2),
    ],
    ids=["beam4-nbest4", "beam3-min-len-check8", "beam3-no-repeat"],
)
def test_beam_search_equals_the_frozen_search_before_the_history(name: str, options: dict) -> None:
    """The hypotheses read back from the beam history (tokens and parent pointers, backtracked once)
    are those of the search that copied every prefix each step (benchmarks/legacy_search.py, frozen):
    same tokens, same scores, same order, for every sentence of a mixed batch."""
    from benchmarks.legacy_search import beam_search as frozen_beam_search

    model = tiny(name, seed=5)
    src = torch.randint(4, 40, (6, 7), generator=torch.Generator().manual_seed(5))
    src[1, 3:], src[4, 5:] = 0, 0
    kw = dict(max_len_a=1.5, max_len_b=3, **options)
    ours = beam_search(CachedDecoder(model), src, 2, 3, 0, **kw)
    frozen = frozen_beam_search(
        CachedDecoder(model), src, 2, 3, 0, **{k: v for k, v in kw.items() if k != "check_every"}
    )
    assert sum(len(h.tokens) for hs in ours for h in hs) > 20  # not a comparison of empty outputs
    assert [[h.tokens for h in hs] for hs in ours] == [[h.tokens for h in hs] for hs in frozen]
    flat = [h.score for hs in ours for h in hs]
    assert flat == pytest.approx([h.score for hs in frozen for h in hs], abs=1e-5)

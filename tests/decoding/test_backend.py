"""The harness's decoding backend (decoding/backend.py: HarnessDecoder): its search is the searches'
own, its teacher-forced figures are the model's forward, and what it says of the model (positions,
training lengths) is the model's."""

from __future__ import annotations

import dataclasses

import torch
from helpers import BOS, EOS, PAD, UNK, tiny_model

from decoding.backend import HarnessDecoder, token_figures
from decoding.search import beam_search
from decoding.step import CachedDecoder
from settings.config import DecodingConfig


class Ids:
    pad_id, unk_id, bos_id, eos_id = PAD, UNK, BOS, EOS


SOURCES = [[5, 9, 7, 11], [6, 8], [12, 13, 14, 15, 16, 17]]


def test_its_search_is_the_searches_own_on_padded_sources() -> None:
    model = tiny_model("rope", seed=2).eval()
    settings = dataclasses.replace(DecodingConfig(), strategy="beam", beam_size=3, nbest=2, max_len_b=6)
    found = HarnessDecoder(model).search(SOURCES, Ids(), settings, "cpu")
    src = torch.full((3, 6), PAD)
    for row, ids in enumerate(SOURCES):
        src[row, : len(ids)] = torch.tensor(ids)
    direct = beam_search(
        CachedDecoder(model), src, BOS, EOS, PAD, beam_size=3, nbest=2, max_len_a=settings.max_len_a,
        max_len_b=6, penalty=settings.length_penalty, alpha=settings.alpha,
    )  # fmt: skip
    assert [[h.tokens for h in hs] for hs in found] == [[h.tokens for h in hs] for hs in direct]
    assert sum(len(h.tokens) for hs in found for h in hs) > 0


def test_its_teacher_forced_figures_are_the_models_forward() -> None:
    model = tiny_model("t5_bias", seed=3).eval()
    outputs = [[20, 21, EOS], [22, EOS], [23, 24, 25, 26, EOS]]
    nll, correct, p_eos, nll_no_eos, correct_no_eos = HarnessDecoder(model).token_scores(
        SOURCES, outputs, Ids(), DecodingConfig(), "cpu"
    )
    src = torch.nn.utils.rnn.pad_sequence([torch.tensor(s) for s in SOURCES], batch_first=True, padding_value=PAD)
    tgt_out = torch.nn.utils.rnn.pad_sequence([torch.tensor(o) for o in outputs], batch_first=True, padding_value=PAD)
    tgt_in = torch.nn.utils.rnn.pad_sequence(
        [torch.tensor([BOS, *o[:-1]]) for o in outputs], batch_first=True, padding_value=PAD
    )
    with torch.no_grad():
        logp = model(src, tgt_in).log_softmax(-1)
    torch.testing.assert_close(nll, -logp.gather(-1, tgt_out[..., None])[..., 0])
    torch.testing.assert_close(p_eos, logp[..., EOS].exp())
    not_eos = tgt_out.ne(EOS)  # renormalised without EOS: NLL + log(1 - p(EOS)) where the target is not EOS
    torch.testing.assert_close(nll_no_eos[not_eos], (nll + torch.log1p(-p_eos))[not_eos], atol=1e-5, rtol=1e-5)
    assert (nll_no_eos[~not_eos] == 0).all() and correct.dtype == correct_no_eos.dtype == torch.bool


def test_token_figures_by_hand() -> None:
    """Vocabulary of 3 (EOS = 2): logits ln(1), ln(2), ln(1) give p = 1/4, 1/2, 1/4."""
    logits = torch.log(torch.tensor([[[1.0, 2.0, 1.0], [1.0, 2.0, 1.0]]]))
    nll, correct, p_eos, nll_no_eos, correct_no_eos = token_figures(logits, torch.tensor([[0, 2]]), eos=2)
    torch.testing.assert_close(nll, torch.tensor([[-torch.log(torch.tensor(0.25)), -torch.log(torch.tensor(0.25))]]))
    torch.testing.assert_close(p_eos, torch.tensor([[0.25, 0.25]]))
    torch.testing.assert_close(nll_no_eos, torch.tensor([[torch.log(torch.tensor(3.0)), 0.0]]))  # p = 1/3 without EOS
    assert correct.tolist() == [[False, False]] and correct_no_eos.tolist() == [[False, False]]


def test_what_it_says_of_the_model_is_the_models() -> None:
    learnable = HarnessDecoder(tiny_model("learnable", max_positions=40))
    assert learnable.max_positions == 40 and learnable.position_limits == (40, 40)
    rope = tiny_model("rope")
    rope.encoder_pe.training_length.fill_(12)
    rope.decoder_pe.training_length.fill_(15)
    decoder = HarnessDecoder(rope)
    assert decoder.max_positions is None and decoder.training_lengths == (12, 15)
    assert decoder.name == "pytorch" and decoder.unavailable is None and decoder.to("cpu") is decoder


def test_decoding_cuda_graphs_searches_through_the_fixed_shape_step(monkeypatch) -> None:
    """decoding.cuda_graphs picks the fixed-shape step (on a CPU without graphs), which finds the
    cached step's hypotheses."""
    import decoding.fixed_shape as fixed_shape

    model = tiny_model("alibi", seed=4).eval()
    settings = dataclasses.replace(DecodingConfig(), beam_size=3, nbest=2, max_len_b=6)
    made = []
    monkeypatch.setattr(
        fixed_shape.FixedShapeDecoder, "new_cache", _recording(fixed_shape.FixedShapeDecoder.new_cache, made)
    )
    default = HarnessDecoder(model).search(SOURCES, Ids(), settings, "cpu")
    assert not made
    graphs = HarnessDecoder(model).search(SOURCES, Ids(), dataclasses.replace(settings, cuda_graphs=True), "cpu")
    assert len(made) == 1
    assert [[h.tokens for h in hs] for hs in graphs] == [[h.tokens for h in hs] for hs in default]


def _recording(method, calls: list):
    def wrapped(self, *args, **kwargs):
        calls.append(self)
        return method(self, *args, **kwargs)

    return wrapped

"""Decoding backends: what test.py, inference.py, validation BLEU and the teacher-forced diagnostic ask
of a trained model, behind one interface (`DecodingBackend`), so that no caller asks which one it has.

Two implement it: `HarnessDecoder`, the harness's own search (decoding/search.py) over a
`Seq2SeqTransformer` with its key/value cache (decoding/step.py), and `CTranslate2Model`
(decoding/ctranslate2_backend.py), a converted model decoded by CTranslate2. A new backend is one
class with these members; artifacts/loading.py's `load_for_decoding` picks it from
`decoding.backend`.
"""

from __future__ import annotations

from typing import Optional, Protocol

import torch
from torch import Tensor
from torch.nn.utils.rnn import pad_sequence

from decoding.fixed_shape import FixedShapeDecoder
from decoding.hypotheses import Hypothesis
from decoding.search import beam_search, greedy_search
from decoding.step import CachedDecoder
from settings.schema import DecodingConfig
from utils.runtime import autocast


class DecodingBackend(Protocol):
    """A trained model as the decoding commands use it."""

    name: str  # decoding.backend's value
    unavailable: Optional[str]  # what the teacher-forced diagnostic cannot have from it (None: nothing)

    @property
    def max_positions(self) -> Optional[int]:
        """The longest input or output it represents (a position table's rows), or None."""

    @property
    def training_lengths(self) -> tuple[int, int]:
        """(source, target) lengths of its training sentences, in tokens (0: not recorded)."""

    @property
    def position_limits(self) -> tuple[Optional[int], Optional[int]]:
        """The longest (source, decoder input) it takes in teacher forcing, or None."""

    def to(self, device) -> "DecodingBackend":
        """Itself, on `device`."""

    def search(self, sources: list[list[int]], tokenizer, settings: DecodingConfig, device) -> list[list[Hypothesis]]:
        """The configured search of each source (token ids): its n-best hypotheses, best first."""

    def token_scores(
        self, sources: list[list[int]], outputs: list[list[int]], tokenizer, settings: DecodingConfig, device
    ) -> tuple[Tensor, ...]:
        """Teacher-forced per-token figures `[batch, T]` of each output (reference + EOS) given its
        source: (NLL, argmax correct, p(EOS), NLL with EOS renormalised out, argmax correct without
        EOS); what it cannot compute is NaN."""


def pad(rows: list[list[int]], pad_id: int, device) -> Tensor:
    """Right-padded `[len(rows), longest]` token ids on `device`."""
    return pad_sequence([torch.tensor(r, dtype=torch.long) for r in rows], batch_first=True, padding_value=pad_id).to(
        device
    )


def token_figures(logits: Tensor, tgt_out: Tensor, eos: int) -> tuple[Tensor, ...]:
    """Per target token from the logits: (NLL, argmax correct, p(EOS), NLL with EOS renormalised out,
    argmax correct without EOS). Renormalised from the logits: log(1 - p(EOS)) = logsumexp over the
    other tokens, exact even where p(EOS) rounds to 1."""
    logits = logits.float()
    logp = logits.log_softmax(-1)
    y = tgt_out.unsqueeze(-1)
    nll = -logp.gather(-1, y).squeeze(-1)
    correct = logits.argmax(-1).eq(tgt_out)
    p_eos = logp[..., eos].exp()
    del logp
    logits[..., eos] = float("-inf")
    nll_no_eos = torch.where(tgt_out.ne(eos), logits.logsumexp(-1) - logits.gather(-1, y).squeeze(-1), 0.0)
    return nll, correct, p_eos, nll_no_eos, logits.argmax(-1).eq(tgt_out)


class HarnessDecoder:
    """The harness's search over a trained `Seq2SeqTransformer`: greedy or beam search, decoded step by
    step with the key/value cache (`CachedDecoder`), under the settings' precision."""

    name = "pytorch"
    unavailable = None

    def __init__(self, model) -> None:
        self.model = model

    @property
    def max_positions(self) -> Optional[int]:
        return self.model.max_positions

    @property
    def training_lengths(self) -> tuple[int, int]:
        return int(self.model.encoder_pe.training_length), int(self.model.decoder_pe.training_length)

    @property
    def position_limits(self) -> tuple[Optional[int], Optional[int]]:
        return self.max_positions, self.model.decoder_pe.max_positions

    def to(self, device) -> "HarnessDecoder":
        self.model.to(device)
        return self

    @torch.no_grad()
    def search(self, sources: list[list[int]], tokenizer, settings: DecodingConfig, device) -> list[list[Hypothesis]]:
        self.model.eval()
        src = pad(sources, tokenizer.pad_id, device)  # [batch, src_len]
        common = dict(
            max_len_a=settings.max_len_a,
            max_len_b=settings.max_len_b,
            max_len_cap=self.max_positions,
            min_len=settings.min_len,
            no_repeat_ngram=settings.no_repeat_ngram,
        )
        ids = (tokenizer.bos_id, tokenizer.eos_id, tokenizer.pad_id)
        # decoding.cuda_graphs: the fixed-shape step (captured as CUDA graphs on a GPU)
        searched = FixedShapeDecoder(self.model, True) if settings.cuda_graphs else CachedDecoder(self.model)
        with autocast(settings.precision, device):
            if settings.strategy == "greedy":
                return [[h] for h in greedy_search(searched, src, *ids, **common)]
            return beam_search(
                searched,
                src,
                *ids,
                beam_size=settings.beam_size,
                penalty=settings.length_penalty,
                alpha=settings.alpha,
                nbest=settings.nbest,
                **common,
            )

    @torch.no_grad()
    def token_scores(
        self, sources: list[list[int]], outputs: list[list[int]], tokenizer, settings: DecodingConfig, device
    ) -> tuple[Tensor, ...]:
        self.model.eval()
        src = pad(sources, tokenizer.pad_id, device)
        tgt_in = pad([[tokenizer.bos_id, *out[:-1]] for out in outputs], tokenizer.pad_id, device)
        tgt_out = pad(outputs, tokenizer.pad_id, device)
        with autocast(settings.precision, device):
            return token_figures(self.model(src, tgt_in), tgt_out, tokenizer.eos_id)  # logits [batch, T, vocab]

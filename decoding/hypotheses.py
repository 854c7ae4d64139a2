"""What the searches find and keep: a `Hypothesis`, the length penalty that ranks finished ones, and
beam search's record of its beams (`BeamHistory`: each step's tokens and parent beams, backtracked
once at the end) and of its finished hypotheses (`FinishedHypotheses`), both on the device."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass
class Hypothesis:
    tokens: list[int]  # without BOS and EOS
    score: float  # sum of log-probabilities (EOS included)
    normalized_score: float  # score after the length penalty (used for ranking)


def length_penalty(score: Tensor | float, length: int, kind: str, alpha: float) -> Tensor | float:
    """Length-normalised score. `wu`: GNMT's ((5 + len) / 6) ** alpha; `avg`: per token; `none`."""
    if kind == "none":
        return score
    if kind == "avg":
        return score / length
    if kind == "wu":
        return score / (((5.0 + length) / 6.0) ** alpha)
    raise ValueError(f"unknown length penalty {kind!r}; valid: none, avg, wu")


class BeamHistory:
    """What every beam of every sentence took at each step: its token and the beam it continued
    (`[batch, steps, beam]` each, written in place, nothing per step grows with the length); a
    hypothesis' tokens are read by following the parents back, once, at the end."""

    def __init__(self, batch: int, beam: int, steps: int, device: torch.device) -> None:
        self.tokens = torch.zeros(batch, max(steps, 1), beam, dtype=torch.long, device=device)
        self.parents = torch.zeros_like(self.tokens)

    def record(self, active: Tensor, step: int, next_beam: Tensor, next_tok: Tensor) -> None:
        """Step `step` of the sentences `active` `[n]`: beam j took `next_tok[:, j]` after beam `next_beam[:, j]`."""
        self.tokens[active, step] = next_tok
        self.parents[active, step] = next_beam

    def backtrack(self, beam: Tensor, length: Tensor) -> Tensor:
        """The tokens `[batch, slots, max(length)]` of the prefixes that end, after `length` `[batch, slots]`
        steps, in beam `beam` `[batch, slots]` of each sentence (zeros past each length)."""
        width = int(length.max()) if length.numel() else 0
        out = torch.zeros(*beam.shape, width, dtype=torch.long, device=beam.device)
        for t in range(width - 1, -1, -1):
            inside = length.gt(t)  # [batch, slots]: step t belongs to the prefix
            out[:, :, t] = torch.where(inside, self.tokens[:, t].gather(1, beam), 0)
            beam = torch.where(inside, self.parents[:, t].gather(1, beam), beam)
        return out


class FinishedHypotheses:
    """The finished hypotheses of a beam search, kept on the device: up to `beam` per sentence, each
    as the beam it ended (its tokens stay in the `BeamHistory`), its length, raw and length-penalised
    score; read back once, at the end."""

    def __init__(self, batch: int, beam: int, device: torch.device) -> None:
        self.beam = beam
        self.count = torch.zeros(batch, dtype=torch.long, device=device)  # [batch]
        # slot `beam` of every sentence is a trash slot: candidates that are not kept are written there
        self.parent = torch.zeros(batch, beam + 1, dtype=torch.long, device=device)
        self.length = torch.zeros(batch, beam + 1, dtype=torch.long, device=device)
        self.score = torch.zeros(batch, beam + 1, device=device)
        self.normalized = torch.full((batch, beam + 1), float("-inf"), dtype=torch.float64, device=device)

    def add(
        self,
        active: Tensor,
        top: tuple[Tensor, Tensor, Tensor],
        done: Tensor,
        eos: int,
        step: int,
        penalty: str,
        alpha: float,
    ) -> None:
        """Keep the EOS candidates among the top `beam` of each active sentence that is not done, in
        rank order, while it has fewer than `beam`. active: sentence ids `[n]`; top:
        `_top_candidates`' `[n, 2 * beam]` each (the beam a candidate extends: its prefix of `step` tokens)."""
        top_scores, top_beam, top_tok = top
        k = self.beam
        n = active.numel()
        is_eos = top_tok[:, :k].eq(eos) & top_scores[:, :k].isfinite() & ~done[:, None]  # [n, beam]
        rank = self.count[active, None] + is_eos.long().cumsum(1) - 1  # the slot each would take
        slot = torch.where(is_eos & rank.lt(k), rank, k)  # [n, beam]
        sentence = active[:, None].expand(n, k)
        self.parent[sentence, slot] = top_beam[:, :k]
        self.length[sentence, slot] = step
        raw = top_scores[:, :k]
        self.score[sentence, slot] = raw
        self.normalized[sentence, slot] = length_penalty(raw.double(), step + 1, penalty, alpha)
        self.count.index_add_(0, active, (slot < k).long().sum(1))

    def best(self, nbest: int, history: BeamHistory) -> list[list[Hypothesis]]:
        """Per sentence its `nbest` finished hypotheses, best first (ties in the order they finished)."""
        k = self.beam
        order = self.normalized[:, :k].argsort(dim=1, descending=True, stable=True)[:, :nbest]  # [batch, nbest]
        length = self.length.gather(1, order)
        tokens = history.backtrack(self.parent.gather(1, order), length).tolist()
        counts, lengths = self.count.tolist(), length.tolist()
        scores, normalized = self.score.gather(1, order).tolist(), self.normalized.gather(1, order).tolist()
        return [
            [
                Hypothesis(tokens[b][j][: lengths[b][j]], scores[b][j], normalized[b][j])
                for j in range(min(nbest, counts[b]))
            ]
            for b in range(len(counts))
        ]

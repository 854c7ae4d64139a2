"""Randomized positions (Ruoss et al. 2023), an option of the sinusoidal, learnable and RoPE encodings.

A sequence of n tokens sits at a sorted random subset of n positions of 0..max_position-1 instead
of at 0..n-1, so that training already shows the encoding positions far beyond its lengths.
Training draws a fresh subset per sequence and forward, of the sequence's own length (its
padding follows the draw). Inference draws too, as the reference does
(google-deepmind/randomized_positional_encodings), but once per sequence and seeded: the draw
depends only on how many positions it must cover, so it does not depend on the batch, and a
decoder's cached steps see the same positions as a full forward. A decoder's output length is not
known in advance, so its draw covers the default search limit: its positions are up to ~1.5x
denser than a training target's (the reference knows its output lengths).
"""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

INFERENCE_SEED = 20230101  # any fixed number: inference positions are reproducible


def inference_cover(source_lengths: Tensor, decoder: bool) -> Tensor:
    """How many positions a sequence's inference draw covers: the source's length in the encoder;
    in the decoder 1.5 x source + 11, the default search limit (1.5 x source + 10 tokens) after BOS.
    Positions past the cover (a source's padding, a longer output) follow its last one at steps of
    1, up to max_position - 1."""
    return source_lengths * 3 // 2 + 11 if decoder else source_lengths


class RandomizedPositions:
    """Mixin for a `PositionalEncoding` with `RandomizedOptions`: overrides `positions()` when on."""

    randomized: bool = False
    max_position: int = 1024

    def init_randomized(self, randomized: bool, max_position: int) -> None:
        if max_position < 1:
            raise ValueError(f"randomized positions need max_position >= 1, got {max_position}")
        self.randomized, self.max_position = randomized, max_position
        self._draws: dict[tuple[int, str], Tensor] = {}

    def positions(
        self,
        count: int,
        batch: int,
        training: bool,
        device: torch.device,
        source_lengths: Optional[Tensor] = None,
        lengths: Optional[Tensor] = None,
    ) -> Tensor:
        if not self.randomized:
            return super().positions(count, batch, training, device, source_lengths, lengths)
        if training:
            if count > self.max_position:
                raise ValueError(
                    f"a training sequence of {count} tokens needs model.positional.max_position "
                    f">= {count} (randomized positions draw them from 0..max_position-1)"
                )
            return self.training_draw(count, batch, device, lengths)
        if source_lengths is None:  # one draw for every row
            return self.seeded_positions(count, count, device)  # [count]
        covers = inference_cover(source_lengths, self.causal).clamp(1, self.max_position)  # [batch]
        out = torch.empty(covers.numel(), count, dtype=torch.long, device=device)
        for cover in covers.unique().tolist():
            out[covers == cover] = self.seeded_positions(cover, count, device)
        return out  # [batch, count]

    def training_draw(self, count: int, batch: int, device: torch.device, lengths: Optional[Tensor]) -> Tensor:
        """`[batch, count]`: each row a sorted uniform draw of its own length (`lengths`, its real
        tokens; all `count` without), its padding continuing after it at steps of 1."""
        top = self.max_position
        lengths = torch.full((batch,), count, device=device) if lengths is None else lengths.to(device)
        ranks = torch.rand(batch, top, device=device).argsort(dim=-1).argsort(dim=-1)  # a random order
        chosen = ranks < lengths[:, None]  # [batch, top]: each row's own number of positions
        index = torch.arange(top, device=device)
        drawn = torch.where(chosen, index, index + top).sort(dim=-1).values[:, :count]  # chosen first, ascending
        return self.steps_after(drawn, lengths)  # [batch, count]

    def seeded_positions(self, cover: int, count: int, device: torch.device) -> Tensor:
        """`[count]` positions: the seeded sorted draw of `cover` positions, then steps of 1 past it
        (at most max_position - 1)."""
        cover = min(cover, self.max_position)
        key = (cover, str(device))
        if key not in self._draws:
            g = torch.Generator().manual_seed(INFERENCE_SEED + cover)
            draw = torch.randperm(self.max_position, generator=g)[:cover].sort().values
            self._draws[key] = draw.to(device)
        draw = self._draws[key]
        index = torch.arange(count, device=device)
        return self.steps_after(draw[index.clamp(max=cover - 1)], torch.tensor(cover, device=device))

    def steps_after(self, drawn: Tensor, lengths: Tensor) -> Tensor:
        """`drawn` `[..., count]` whose first `lengths` (`[...]`) entries are a draw: the entries past
        it follow its last position at steps of 1, up to max_position - 1."""
        step = torch.arange(drawn.size(-1), device=drawn.device)
        last = drawn.gather(-1, (lengths.clamp(min=1) - 1).clamp(max=drawn.size(-1) - 1)[..., None])
        after = (last + step - lengths[..., None] + 1).clamp(max=self.max_position - 1)
        return torch.where(step < lengths[..., None], drawn, after)

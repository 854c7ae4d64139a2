"""Key/value cache for incremental decoding, in which beams never move.

Self-attention keys and values of each decoder layer live in buffers laid out
`[sentences, heads, capacity, groups, head_dim]`: the `groups` rows of a sentence (its beams)
each own a slot, and the keys of a new position are written in place into the slot of the row
that produced them. Beam search reorders its hypotheses every step. Copying every layer's cache
to follow them (`index_select` over `[rows, heads, len, head_dim]`, then `cat` to append) moves
the whole cache twice per step. Instead this cache keeps an *ancestry* map — for each
hypothesis and position, the slot that holds its token — and self-attention reads all slots
of the sentence at once, through a mask that lets each hypothesis see only its own ancestors.
Reordering beams moves a `[sentences, groups, capacity, groups]` bool map; the keys stay put.
Only sentences that leave the batch cost an `index_select` of the buffers.

With one row per sentence (greedy search, plain batches) there is one slot per row and no map.
"""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from decoding.attend import StepPlan, rows_per_memory_row


def own_slots(groups: int, device: torch.device) -> Tensor:
    """Ancestry of rows whose tokens sit in their own slots: `[groups, 1, groups]` (row g -> slot g, any position)."""
    return torch.eye(groups, dtype=torch.bool, device=device)[:, None, :]


class SelfAttentionCache:
    """One decoder layer's self-attention keys and values: views into its `DecoderCache`'s storage."""

    def __init__(self, owner: "DecoderCache", layer: int) -> None:
        self.owner = owner
        self.layer = layer

    def append(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Store this call's keys/values `[rows, heads, new, head_dim]` at the positions the owner
        reserved; return every cached key/value of each sentence, `[sentences, heads, len * groups, head_dim]`
        (key axis ordered position-major, slot-minor, as `DecoderCache.self_attention_mask` expects)."""
        if k.requires_grad or v.requires_grad:
            raise RuntimeError(
                "the decoder cache is for inference (keys are written in place): "
                "decode under torch.no_grad() or torch.inference_mode()"
            )
        owner = self.owner
        owner.ensure_storage(k)
        sentences, groups, start, end = owner.sentences, owner.groups, owner.start, owner.length
        _, heads, new, head_dim = k.shape
        buf_k, buf_v = owner.kv[self.layer, 0], owner.kv[self.layer, 1]
        for buf, new_kv in ((buf_k, k), (buf_v, v)):
            buf[:, :, start:end] = new_kv.view(sentences, groups, heads, new, head_dim).permute(0, 2, 3, 1, 4)
        return buf_k[:, :, :end].flatten(2, 3), buf_v[:, :, :end].flatten(2, 3)

    @property
    def keys(self) -> Optional[Tensor]:
        """The cached keys per row, `[rows, heads, len, head_dim]` (a gathered copy: for tests and inspection)."""
        return None if self.owner.kv is None else self.owner.gather_rows(self.owner.kv[self.layer, 0])


class DecoderCache:
    """Per-layer caches of a decoder: `cache[i]` is `{"self": SelfAttentionCache, "cross": {"k", "v"}}`.

    `capacity` (positions) preallocates the self-attention buffers; they grow (doubling) past it.
    All layers' keys and values are one allocation, `kv` `[layers, 2, sentences, heads, capacity,
    groups, head_dim]`: one block the allocator returns whole when the search ends.
    """

    def __init__(self, num_layers: int, capacity: Optional[int] = None, plan: Optional[StepPlan] = None) -> None:
        self.num_layers = num_layers
        self.plan = plan or StepPlan()  # how this search's steps attend (decoding.attend)
        self.cross: list[dict[str, Tensor]] = [{} for _ in range(num_layers)]  # per layer {"k", "v"}
        self.kv: Optional[Tensor] = None
        self.capacity = int(capacity) if capacity else 0
        self.length = 0  # positions held
        self.start = 0  # first position written by the current decode call
        self.sentences = 0
        self.groups = 0  # rows per sentence; 0 until the first call
        self.ancestry: Optional[Tensor] = None  # [sentences, groups, capacity, groups] bool, when groups > 1

    def __getitem__(self, i: int) -> dict:
        if not -self.num_layers <= i < self.num_layers:
            raise IndexError(f"layer {i} of a {self.num_layers}-layer cache")
        # Made on access, not stored: a stored back-reference would make the cache a reference
        # cycle, kept alive (with its buffers) until the garbage collector happens to run.
        return {"self": SelfAttentionCache(self, i % self.num_layers), "cross": self.cross[i]}

    def __len__(self) -> int:
        return self.num_layers

    def extend(self, rows: int, memory_rows: int, new: int, offset: int, device: torch.device) -> None:
        """Reserve `new` positions for a decode call over `rows` rows whose memory has `memory_rows`."""
        if offset != self.length:
            raise ValueError(
                f"decoding at offset {offset}, but the cache holds {self.length} positions: "
                f"pass offset={self.length} (the number of tokens already decoded into this cache)"
            )
        groups = rows_per_memory_row(rows, memory_rows)
        if self.groups == 0:
            self.sentences, self.groups = memory_rows, groups
        elif (memory_rows, groups) != (self.sentences, self.groups):
            raise ValueError(
                f"the cache holds {self.sentences} sentences x {self.groups} rows, but this call has "
                f"{memory_rows} x {groups}: use reorder_cache() when rows are dropped or reordered"
            )
        self.start, self.length = self.length, self.length + new
        if self.length > self.capacity:
            self.capacity = max(self.length, 2 * self.capacity)
        if groups > 1:
            if self.ancestry is None:
                self.ancestry = torch.zeros(memory_rows, groups, self.capacity, groups, dtype=torch.bool, device=device)
            elif self.ancestry.size(2) < self.capacity:
                self.ancestry = self.grown(self.ancestry, dim=2)
            self.ancestry[:, :, self.start : self.length] = own_slots(
                groups, device
            )  # row g's new tokens sit in slot g

    def ensure_storage(self, k: Tensor) -> None:
        """Allocate (or grow to the capacity) the key/value storage, shaped after keys `k`
        `[rows, heads, new, head_dim]`."""
        if self.kv is None:
            _, heads, _, head_dim = k.shape
            self.kv = self.allocate(
                k, (self.num_layers, 2, self.sentences, heads, self.capacity, self.groups, head_dim)
            )
        elif self.kv.size(4) < self.capacity:
            self.kv = self.grown(self.kv, dim=4)

    @staticmethod
    def allocate(like: Tensor, shape: tuple[int, ...]) -> Tensor:
        """New key/value storage: uninitialised, since attention reads only the positions held."""
        return like.new_empty(shape)

    def grown(self, buf: Tensor, dim: int) -> Tensor:
        """`buf` with its position axis `dim` enlarged to the capacity, the held positions copied."""
        shape = list(buf.shape)
        shape[dim] = self.capacity
        out = buf.new_zeros(shape) if buf.dtype == torch.bool else self.allocate(buf, shape)
        out.narrow(dim, 0, self.start).copy_(buf.narrow(dim, 0, self.start))
        return out

    def self_attention_mask(self, causal: Optional[Tensor], bias: Optional[Tensor], whole: bool = False) -> Tensor:
        """Mask for the folded self-attention of `groups > 1` rows per sentence: queries
        `[sentences, heads, groups * new, ...]` (row-major) against keys `[..., len * groups]`
        (position-major). causal: bool `[new, len]` or None; bias: float `[(rows,) heads, new, len]` or None.
        whole: the keys span the whole capacity (a fixed-shape step, decoding/fixed_shape.py), not
        just the positions held; the ancestry map is False past those, so they stay masked.
        Returns bool (True = attend) `[sentences, 1, groups * new, len * groups]`, or a float mask with
        `heads` when there is a bias."""
        sentences, groups = self.sentences, self.groups
        length = self.capacity if whole else self.length
        new = self.length - self.start
        allowed = self.ancestry[:, None, :, None, :length, :]  # [S, 1, G, 1, len, G]
        if causal is not None:
            allowed = allowed & causal[:, :, None]  # [S, 1, G, new, len, G]
        allowed = allowed.expand(sentences, 1, groups, new, length, groups)
        allowed = allowed.reshape(sentences, 1, groups * new, length * groups)
        if bias is None:
            return allowed
        heads = bias.size(-3)
        if bias.dim() == 3:
            bias = bias[None, :, None]  # [1, heads, 1, new, len]
        else:  # one bias per row
            bias = bias.view(sentences, groups, heads, new, length).transpose(1, 2)  # [S, heads, G, new, len]
        bias = bias[..., None].expand(sentences, heads, groups, new, length, groups)
        return bias.reshape(sentences, heads, groups * new, length * groups).masked_fill(~allowed, float("-inf"))

    def ancestor_keys(self) -> Tensor:
        """For a decode call of one new position with `groups > 1` rows per sentence: the keys each
        row may attend to, as indices into the folded key axis of `SelfAttentionCache.append`
        (position-major, slot-minor), int32 `[sentences, groups, length]`: at every position the
        slot that holds the row's ancestor (or its own new token). `attend(key_index=...)` then
        reads one key per position instead of masking `groups - 1` of every `groups`."""
        if self.ancestry is None or self.length - self.start != 1:
            raise ValueError("ancestor_keys() is for decode calls of one new position with several rows per sentence")
        slot = self.ancestor_slots()  # [S, G, len]
        base = torch.arange(0, self.length * self.groups, self.groups, device=slot.device)  # [len]
        return (slot + base).to(torch.int32)

    def ancestor_slots(self) -> Tensor:
        """Per row and held position, the slot holding the row's token there: `[sentences, groups, length]`
        (the one True per position of the ancestry map)."""
        return self.ancestry[:, :, : self.length].to(torch.uint8).argmax(-1)

    def reorder(self, index: Tensor, memory_index: Optional[Tensor] = None, groups: Optional[int] = None) -> None:
        """Rows follow `index` (into the current rows). With several rows per sentence (beams),
        `index` must keep each sentence's rows together: `groups` consecutive entries from one
        sentence. The cross-attention cache follows `memory_index` if given (pass `index` again
        when there is one row per sentence) and is left as it is otherwise.

        `groups` changes the number of rows per sentence from then on (default: unchanged), e.g.
        from one row per sentence after a beam search's first step, when its beams were all alike,
        to `beam` rows: each new row then gets its own slot, holding a copy of its source row's keys."""
        if memory_index is not None:
            for layer in self.cross:
                for key in layer:
                    layer[key] = layer[key].index_select(0, memory_index)
        if self.groups == 0:  # nothing cached yet: the next call sets the grouping
            return
        new_groups = self.groups if groups is None else groups
        sentences, parents = self._split(index, new_groups)
        moved = sentences.numel() != self.sentences or not torch.equal(
            sentences, torch.arange(self.sentences, device=sentences.device)
        )
        if moved and memory_index is None and (self.groups > 1 or new_groups > 1):
            raise ValueError("reorder index moves rows across sentences: pass memory_index too")
        if new_groups != self.groups:
            self._regroup(index, sentences, new_groups)
            return
        if moved:
            if self.kv is not None:  # copy only the positions held: the rest of the block stays untouched
                kept = self.allocate(self.kv, self.kv.shape[:2] + (sentences.numel(),) + self.kv.shape[3:])
                kept[:, :, :, :, : self.length] = self.kv[:, :, :, :, : self.length].index_select(2, sentences)
                self.kv = kept
            if self.ancestry is not None:
                self.ancestry = self.ancestry.index_select(0, sentences.to(self.ancestry.device))
            self.sentences = sentences.numel()
        self.reorder_beams(parents)

    def reorder_beams(self, parents: Tensor) -> None:
        """Each sentence's rows continue the rows `parents` `[sentences, groups]` of the same
        sentence: only the ancestry map moves, and nothing is checked by reading it back (the shape
        keeps every row in its sentence)."""
        if self.ancestry is not None:
            parents = parents.to(self.ancestry.device)
            self.ancestry = self.ancestry.gather(1, parents[:, :, None, None].expand_as(self.ancestry))

    def _split(self, index: Tensor, groups: int) -> tuple[Tensor, Tensor]:
        """A reorder index into `groups` rows per sentence: the current sentence of each new
        group `[new_sentences]` and the current slot each new row comes from `[new_sentences, groups]`."""
        if groups < 1 or index.numel() % groups:
            raise ValueError(f"reorder index of {index.numel()} rows does not fill groups of {groups}")
        sentence_of = (index // self.groups).view(-1, groups)  # [new_sentences, groups]
        if groups > 1 and not sentence_of.eq(sentence_of[:, :1]).all():
            raise ValueError(
                "reorder index mixes sentences inside a group of beams: each group of "
                f"{groups} rows must come from one sentence"
            )
        return sentence_of[:, 0], (index % self.groups).view(-1, groups)

    def _regroup(self, index: Tensor, sentences: Tensor, groups: int) -> None:
        """`reorder` to `groups` rows per sentence: a new block in which each new row's history
        (its source row's keys along its ancestry) sits in the row's own slot."""
        if self.kv is not None:
            layers, kinds, _, heads, _, old_groups, head_dim = self.kv.shape
            held = self.kv[:, :, :, :, : self.length]  # [layers, 2, S, heads, len, G, head_dim]
            held = held.permute(2, 0, 1, 3, 4, 5, 6).reshape(
                self.sentences, layers * kinds * heads, self.length, old_groups, head_dim
            )
            rows = self.gather_rows(held).index_select(0, index)  # [new_rows, layers * 2 * heads, len, head_dim]
            rows = rows.view(sentences.numel(), groups, layers, kinds, heads, self.length, head_dim)
            self.kv = self.allocate(self.kv, (layers, kinds, sentences.numel(), heads, self.capacity, groups, head_dim))
            self.kv[:, :, :, :, : self.length] = rows.permute(2, 3, 0, 4, 5, 1, 6)
        self.sentences, self.groups = sentences.numel(), groups
        self.ancestry = None
        if groups > 1:  # every row's history is in its own slot
            device = index.device
            self.ancestry = torch.zeros(self.sentences, groups, self.capacity, groups, dtype=torch.bool, device=device)
            self.ancestry[:, :, : self.length] = own_slots(groups, device)

    def gather_rows(self, buf: Tensor) -> Tensor:
        """Per-row view of a slot buffer: `[rows, heads, len, head_dim]`, each row's keys along its ancestry."""
        sentences, heads, _, groups, head_dim = buf.shape
        held = buf[:, :, : self.length]  # [S, heads, len, G, head_dim]
        if groups == 1:
            return held.squeeze(3)
        slot = self.ancestor_slots().to(buf.device)  # [S, G, len]
        index = slot[:, None, :, :, None, None].expand(sentences, heads, groups, self.length, 1, head_dim)
        per_row = held[:, :, None].expand(sentences, heads, groups, self.length, groups, head_dim)
        out = per_row.gather(4, index).squeeze(4)  # [S, heads, G, len, head_dim]
        return out.transpose(1, 2).reshape(sentences * groups, heads, self.length, head_dim)

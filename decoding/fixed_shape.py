"""The decoding step at fixed shapes, and its CUDA-graph replay (`decoding.cuda_graphs`).

`CachedDecoder` (decoding/step.py) attends over the positions held so far, so the key axis grows by
one every step and each step launches its kernels one by one. `FixedShapeDecoder` decodes one token
per call at shapes that do not change while a batch keeps its rows: self-attention reads the whole
preallocated cache (`FixedShapeCache`, zero-filled) under a mask of the positions held, and the
step's position is a device tensor (`cache.offset`) that selects the query's position, writes the
new keys and limits the mask. Nothing in the step reads a host number or allocates by length, so on
a GPU the step is captured once per cache layout (`cache.version`: it changes when a beam search
regroups its rows or sentences leave) as a CUDA graph and replayed: one launch per step.

The layers are the model's own wiring (`decoding.step.decoder_layer`, i.e. `DecoderLayer.run_sublayers`);
only where keys are written and which are visible differs. Hypotheses equal the cached search's
(tests/decoding/test_fixed_shape.py, on a CPU without graphs; on a GPU with them: the `gpu` tests).
The searches keep a batch's shapes longer for it: sentences leave a beam search only when at most
half remain (`prefers_fixed_shapes`), so a batch is captured a few times, not at every check.
"""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from decoding.attend import StepPlan, rows_per_memory_row
from decoding.cache import DecoderCache, SelfAttentionCache
from decoding.linear import linear
from decoding.step import CachedDecoder, StepMasks, decoder_layer
from models.transformer import EncoderOutput, Seq2SeqTransformer, merge_mask


class FixedShapeSelfAttention(SelfAttentionCache):
    """One layer's self-attention keys in a `FixedShapeCache`: written at the device offset, read whole."""

    def append(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Store this call's keys/values `[rows, heads, 1, head_dim]` at position `owner.offset`; return
        the sentence's whole buffer `[sentences, heads, capacity * groups, head_dim]` (positions not
        yet held are zeros, masked: `FixedShapeCache.visible`, or for beams the ancestry map)."""
        owner = self.owner
        owner.ensure_storage(k)
        sentences, groups = owner.sentences, owner.groups
        _, heads, new, head_dim = k.shape
        buf_k, buf_v = owner.kv[self.layer, 0], owner.kv[self.layer, 1]
        for buf, new_kv in ((buf_k, k), (buf_v, v)):
            buf.index_copy_(
                2, owner.offset, new_kv.view(sentences, groups, heads, new, head_dim).permute(0, 2, 3, 1, 4)
            )
        return buf_k.flatten(2, 3), buf_v.flatten(2, 3)


class FixedShapeCache(DecoderCache):
    """A `DecoderCache` of fixed capacity whose step offset is a device tensor (`offset`), whose
    storage is zero-filled (attention reads all of it: masked garbage could be NaN) and whose
    beam ancestry moves in place. `version` counts the layouts: it changes whenever the storage is
    reallocated (rows regrouped, sentences leaving), i.e. whenever a captured step would be stale."""

    def __init__(self, num_layers: int, capacity: int, plan: StepPlan, device: torch.device) -> None:
        super().__init__(num_layers, capacity, plan)
        self.offset = torch.zeros(1, dtype=torch.long, device=device)
        self.version = 0

    def __getitem__(self, i: int) -> dict:
        layer = super().__getitem__(i)
        layer["self"] = FixedShapeSelfAttention(self, layer["self"].layer)
        return layer

    @staticmethod
    def allocate(like: Tensor, shape: tuple[int, ...]) -> Tensor:
        return like.new_zeros(shape)

    def extend(self, rows: int, memory_rows: int, new: int, offset: int, device: torch.device) -> None:
        if new != 1 or offset >= self.capacity:
            raise ValueError(
                f"a fixed-shape step decodes one token within the capacity ({self.capacity}); got {new} at {offset}"
            )
        super().extend(rows, memory_rows, new, offset, device)
        self.offset.fill_(offset)  # a device write, no read back

    def visible(self) -> Tensor:
        """Bool `[capacity]`: the positions held, the new one included."""
        return torch.arange(self.capacity, device=self.offset.device).le(self.offset)

    def reorder(self, index: Tensor, memory_index: Optional[Tensor] = None, groups: Optional[int] = None) -> None:
        super().reorder(index, memory_index, groups)
        self.version += 1

    def reorder_beams(self, parents: Tensor) -> None:
        if self.ancestry is not None:  # in place: a captured step reads this storage
            parents = parents.to(self.ancestry.device)
            self.ancestry.copy_(self.ancestry.gather(1, parents[:, :, None, None].expand_as(self.ancestry)))


class Layout:
    """What the step computes once per cache layout (`cache.version`), encoder output and row count:
    every cache position's position, how many calls it has served and, with CUDA graphs, the
    captured step with its static input and output."""

    def __init__(self, cache: FixedShapeCache, enc: EncoderOutput, rows: int, k_positions: Tensor) -> None:
        self.cache, self.version, self.enc, self.rows = cache, cache.version, enc, rows
        self.k_positions = k_positions  # [(rows,) capacity]
        self.calls = 0
        self.graph: Optional[torch.cuda.CUDAGraph] = None
        self.tokens: Optional[Tensor] = None
        self.logits: Optional[Tensor] = None

    def serves(self, cache: FixedShapeCache, enc: EncoderOutput, rows: int) -> bool:
        """Whether a call on `cache`, `enc` and `rows` rows is this layout's (the same objects, held here)."""
        return self.cache is cache and self.version == cache.version and self.enc is enc and self.rows == rows


class FixedShapeDecoder(CachedDecoder):
    """`CachedDecoder` at fixed shapes (see the module docstring): one token per call; with
    `cuda_graphs` on a CUDA device each cache layout's step is captured at its second call and
    replayed from then on (the first runs eagerly, which also fills the cross-attention cache)."""

    prefers_fixed_shapes = True  # the searches keep rows of finished sentences (masked) longer

    def __init__(self, model: Seq2SeqTransformer, cuda_graphs: bool = False) -> None:
        super().__init__(model)
        self.cuda_graphs = cuda_graphs and model.output_proj.weight.device.type == "cuda"
        self._layout: Optional[Layout] = None  # the current one (a new one releases the old graph)
        self._pool = None

    def new_cache(self, capacity: Optional[int] = None) -> FixedShapeCache:
        if not capacity:
            raise ValueError("a fixed-shape step needs the cache's capacity (the search's length limit)")
        model = self.model
        # No CPU shortcuts (per-head masks, ancestor indices): one attention over the whole cache.
        return FixedShapeCache(len(model.decoder_layers), capacity, StepPlan(), model.tgt_embed.weight.device)

    def decode(self, tgt: Tensor, enc: EncoderOutput, cache: FixedShapeCache, offset: int = 0) -> Tensor:
        """Logits `[batch, 1, vocab]` for one new token `tgt` `[batch, 1]` at position `offset`."""
        batch = tgt.size(0)
        cache.extend(batch, enc.memory.size(0), tgt.size(1), offset, tgt.device)
        layout = self._layout_of(tgt, enc, cache)
        layout.calls += 1
        if not self.cuda_graphs or layout.calls == 1:  # a layout's first call also fills the cross cache
            return self._step(tgt, enc, cache, layout.k_positions)
        return self._replay(tgt, enc, cache, layout)

    def _layout_of(self, tgt: Tensor, enc: EncoderOutput, cache: FixedShapeCache) -> Layout:
        """The current layout, or a new one with every cache position's position `[(batch,) capacity]`
        (computed eagerly: an encoding may size its positions on the host)."""
        batch = tgt.size(0)
        if self._layout is None or not self._layout.serves(cache, enc, batch):
            groups = rows_per_memory_row(batch, enc.memory.size(0))
            source_lengths = enc.lengths if groups == 1 else enc.lengths.repeat_interleave(groups)
            pe = self.model.decoder_pe
            k_positions = pe.positions(cache.capacity, batch, self.model.training, tgt.device, source_lengths)
            self._layout = Layout(cache, enc, batch, k_positions)
        return self._layout

    def _step(self, tgt: Tensor, enc: EncoderOutput, cache: FixedShapeCache, k_positions: Tensor) -> Tensor:
        """The step itself: every shape fixed by the cache's layout, the position read from `cache.offset`."""
        model = self.model
        positions = k_positions.index_select(-1, cache.offset)  # [(batch,) 1]
        x = model.tgt_embed(tgt) * model.embed_scale  # [batch, 1, d_model]
        x = model.dropout(model.decoder_pe.add_to_embeddings(x, positions))
        self_pos = model.decoder_pe.self_attention(positions, k_positions)
        bias = self_pos.bias if self_pos is not None else None
        if cache.groups > 1:  # beams: rows of a sentence share its cache, each sees its ancestors' keys
            self_mask = cache.self_attention_mask(None, bias, whole=True)
        else:  # [capacity]: the positions held
            self_mask = merge_mask(cache.visible()[None, None, None, :], bias)
        cross_pos = model.decoder_pe.cross_attention(positions, enc.positions)
        cross_mask = merge_mask(enc.src_mask[:, None, None, :], cross_pos.bias if cross_pos is not None else None)
        masks = StepMasks(self_mask, None, self_pos, cross_mask, cross_pos)
        for i, layer in enumerate(model.decoder_layers):
            x = decoder_layer(layer, x, enc.memory, masks, cache[i])
        x = model.decoder_norm(x)
        return linear(x, model.output_proj.weight, model.output_proj.bias)  # [batch, 1, vocab]

    def _replay(self, tgt: Tensor, enc: EncoderOutput, cache: FixedShapeCache, layout: Layout) -> Tensor:
        """The step through the layout's CUDA graph: captured at the layout's second call, replayed
        after. A captured step writes the new keys at `cache.offset`: capturing repeats the call's
        own writes, so it changes nothing."""
        if layout.graph is None:
            layout.tokens = tgt.clone()
            if self._pool is None:
                self._pool = torch.cuda.graph_pool_handle()
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with _uncached_autocast(), torch.cuda.stream(side):  # warm-up off the capturing stream
                self._step(layout.tokens, enc, cache, layout.k_positions)
            torch.cuda.current_stream().wait_stream(side)
            layout.graph = torch.cuda.CUDAGraph()
            with _uncached_autocast(), torch.cuda.graph(layout.graph, pool=self._pool):
                layout.logits = self._step(layout.tokens, enc, cache, layout.k_positions)
        layout.tokens.copy_(tgt)
        layout.graph.replay()
        return layout.logits


def _uncached_autocast():
    """The active CUDA autocast with its weight-cast cache off: a captured graph must cast the
    weights itself, not read a cached copy that is freed when the autocast region ends."""
    return torch.autocast(
        "cuda", dtype=torch.get_autocast_dtype("cuda"), enabled=torch.is_autocast_enabled("cuda"), cache_enabled=False
    )

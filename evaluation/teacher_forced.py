"""The teacher-forced length diagnostic: how well a model predicts the *reference* at each target
position, on the test set (k = 1) and on the length protocol's inputs of k joined pairs. No search
is involved, so unlike BLEU on joined inputs it does not measure when the model stops.

Definitions (scores.json["teacher_forced"]["definition"] says the same in short):
- Every input is scored as training scores a pair (data/pipeline.py Collator): tgt_in = BOS +
  reference ids, tgt_out = reference ids + EOS, logits = model(src, tgt_in) in eval mode, no grad.
  Target position t is the decoder input position (0 = BOS) whose output predicts tgt_out[t].
- Per token: NLL = -log p(tgt_out[t]); correct = (argmax = tgt_out[t]).
- EOS renormalised out (the *_no_eos figures): for targets y that are not EOS,
  NLL_no_eos = -log p(y) + log(1 - p(EOS)) (EOS's mass removed, the rest renormalised) and
  correct_no_eos = (argmax over every token but EOS = y); EOS targets are left out of them.
- Joined inputs (k >= 2) are the BLEU protocol's groups (evaluation/test_set.py: protocol_groups):
  source = the members' source ids concatenated, target = their reference ids concatenated + EOS
  (as data/concat.py ConcatPairDataset joins training pairs). The first target token of each member
  after the first (a sentence boundary, where a single-sentence model wants to stop) is a boundary
  position: left out of the buckets and of the training-length summaries, reported on its own
  (tokens, mean p(EOS), mean NLL).
- Buckets [b_i, b_i+1) of t (evaluation.position_buckets, the last open-ended). Beyond training:
  t >= the decoder's training_length (model.decoder_pe.training_length, the longest decoder input
  seen in training; 0 = not recorded, and then no beyond/within split).
- Sources longer than the model can represent are truncated as translation does (the backend's
  `max_positions`), decoder inputs likewise; both counted. An input with an empty source is left out
  (translation gives it an empty hypothesis without running the model) and counted.
"""

from __future__ import annotations

import math
import time
from typing import Optional, Sequence

import torch
from torch import Tensor

from data.pipeline import cut_by_token_budget, pad_batch
from decoding.backend import DecodingBackend
from evaluation.test_set import protocol_groups
from settings.config import ConfigError
from utils.metrics import bucket_label
from utils.run_files import TEACHER_FORCED_BEYOND, TEACHER_FORCED_PAIRS, TSV_HEADERS

DEFINITION = (
    "teacher forcing (tgt_in = BOS + reference, tgt_out = reference + EOS); position t = decoder input "
    "position (0 = BOS) predicting tgt_out[t]; nll = -log p(tgt_out[t]), accuracy = argmax match; "
    "*_no_eos: non-EOS targets only, nll - log(1 - p(EOS)) and argmax over tokens but EOS; joined "
    "inputs: members' ids concatenated + EOS, the first token of each later member is a boundary "
    "(left out of buckets and summaries, reported apart); beyond training: t >= the decoder's "
    "training_length"
)
BEYOND_FILE = TEACHER_FORCED_BEYOND  # per input: k, input, tokens and summed NLL beyond training
BEYOND_HEADER = TSV_HEADERS[BEYOND_FILE]
# per test pair and k: the sums of its target tokens after its first (EOS excluded), the same tokens
# at k = 1 and inside a joined input, for compare.py's degradation (a pair's NLL joined minus alone)
PAIRS_FILE = TEACHER_FORCED_PAIRS
PAIRS_HEADER = TSV_HEADERS[PAIRS_FILE]
PAIR_STATS = 5  # summed per pair: tokens, nll, nll_no_eos, beyond tokens, beyond nll_no_eos
STATS = 6  # summed per cell: tokens, nll, correct, tokens_no_eos, nll_no_eos, correct_no_eos


def check_position_buckets(edges: Sequence[int]) -> None:
    """One line when evaluation.position_buckets cannot bucket every target position."""
    if not edges or edges[0] != 0 or any(b <= a for a, b in zip(edges, edges[1:])):
        raise ConfigError(
            f"evaluation.position_buckets must be increasing bucket edges starting at 0 "
            f"(target position 0 predicts the first token), got {list(edges)}"
        )


class JoinedInputs:
    """Token ids of the inputs of one k: sources, decoder outputs (reference + EOS, cut to the
    decoder's limit) and each output's boundary positions, plus the counts of what was cut or left out."""

    def __init__(
        self,
        src_ids: list[list[int]],
        tgt_ids: list[list[int]],
        groups: list[list[int]],
        eos: int,
        limits: tuple[Optional[int], Optional[int]],
    ) -> None:
        src_limit, tgt_limit = limits
        self.src, self.out, self.boundaries, self.source_lengths = [], [], [], []
        self.members: list[list[tuple[int, int, int]]] = []  # per input: (pair, start position, tokens)
        self.truncated_sources = self.truncated_targets = self.empty_sources = 0
        for group in groups:
            src = [t for i in group for t in src_ids[i]]
            if not src:
                self.empty_sources += 1
                continue
            out, starts, members = [], [], []
            for i in group:
                if tgt_ids[i] and out:  # a later member's first token: the model's cue to stop was here
                    starts.append(len(out))
                members.append((i, len(out), len(tgt_ids[i])))
                out += tgt_ids[i]
            out.append(eos)
            self.source_lengths.append(len(src))
            if src_limit is not None and len(src) > src_limit:
                src, self.truncated_sources = src[:src_limit], self.truncated_sources + 1
            if tgt_limit is not None and len(out) > tgt_limit:  # BOS + reference: as many positions as out
                out, self.truncated_targets = out[:tgt_limit], self.truncated_targets + 1
            self.src.append(src)
            self.out.append(out)
            self.boundaries.append([t for t in starts if t < len(out)])
            self.members.append(members)

    def __len__(self) -> int:
        return len(self.src)


class PositionSums:
    """Per-token statistics summed on the device per (row group, position bucket, beyond training)
    cell, plus the boundary tokens' count, p(EOS) and NLL; read back once, at the end."""

    def __init__(
        self, row_groups: int, edges: Sequence[int], training_length: int, device, inputs: int, pairs: int = 0
    ) -> None:
        device = torch.device(device)
        self.dtype = torch.float32 if device.type == "mps" else torch.float64  # no float64 on MPS
        self.shape = (row_groups, len(edges), 2)
        self.trash = row_groups * len(edges) * 2  # padding and boundary positions land here
        self.cells = torch.zeros(self.trash + 1, STATS, dtype=self.dtype, device=device)
        self.boundary = torch.zeros(3, dtype=self.dtype, device=device)
        self.edges = torch.tensor(list(edges), device=device)
        self.training_length = training_length
        # per input: NLL (EOS renormalised out) summed beyond the training length, and its tokens
        self.per_input = torch.zeros(inputs, 2, dtype=self.dtype, device=device)
        # per test pair (+ one trash row): its tokens after the first, EOS excluded (PAIRS_FILE)
        self.per_pair = torch.zeros(pairs + 1, PAIR_STATS, dtype=self.dtype, device=device)

    def add(
        self,
        scores: tuple[torch.Tensor, ...],
        tgt_out: torch.Tensor,
        valid: torch.Tensor,
        boundary: torch.Tensor,
        row_group: torch.Tensor,
        eos: int,
        input_index: torch.Tensor,
        pair: Optional[torch.Tensor] = None,
    ) -> None:
        """scores: `DecodingBackend.token_scores`' five `[batch, T]` tensors (NaN where a backend cannot give one);
        tgt_out/valid/boundary `[batch, T]`, row_group and input_index `[batch]`; pair `[batch, T]`:
        the test pair a position's token belongs to (-1: none, its first token, EOS)."""
        nll, correct, p_eos, nll_no_eos, correct_no_eos = scores
        not_eos = tgt_out.ne(eos)
        keep = valid & ~boundary
        keep_no_eos = keep & not_eos
        values = torch.stack(
            [
                keep.float(),
                torch.where(keep, nll, 0.0),
                torch.where(keep, correct.float(), 0.0),
                keep_no_eos.float(),
                torch.where(keep_no_eos, nll_no_eos, 0.0),
                torch.where(keep_no_eos, correct_no_eos.float(), 0.0),
            ],
            -1,
        )  # [batch, T, STATS]
        t = torch.arange(tgt_out.size(1), device=tgt_out.device)
        bucket = torch.bucketize(t, self.edges, right=True) - 1  # [T]
        beyond = (t >= self.training_length) if self.training_length > 0 else torch.zeros_like(t, dtype=torch.bool)
        cell = (row_group[:, None] * self.shape[1] + bucket[None, :]) * 2 + beyond[None, :].long()
        cell = torch.where(keep, cell, self.trash)
        self.cells.index_add_(0, cell.flatten(), values.flatten(0, 1).to(self.dtype))
        far = keep_no_eos & beyond[None, :]
        self.per_input.index_add_(
            0,
            input_index,
            torch.stack([torch.where(far, nll_no_eos, 0.0).sum(-1), far.float().sum(-1)], -1).to(self.dtype),
        )
        if pair is not None:
            self.add_pairs(pair, valid, beyond, nll, nll_no_eos)
        at = boundary & valid
        self.boundary += torch.stack(
            [at.float().sum(), torch.where(at, p_eos, 0.0).sum(), torch.where(at, nll, 0.0).sum()]
        ).to(self.dtype)

    def add_pairs(self, pair: Tensor, valid: Tensor, beyond: Tensor, nll: Tensor, nll_no_eos: Tensor) -> None:
        """Each test pair's sums (PAIRS_FILE): its tokens, NLL with and without EOS, and beyond training."""
        mine = valid & pair.ge(0)
        far_mine = mine & beyond[None, :]
        rows = torch.where(mine, pair, self.per_pair.size(0) - 1).flatten()
        stats = [
            mine.float(),
            torch.where(mine, nll, 0.0),
            torch.where(mine, nll_no_eos, 0.0),
            far_mine.float(),
            torch.where(far_mine, nll_no_eos, 0.0),
        ]
        self.per_pair.index_add_(0, rows, torch.stack(stats, -1).flatten(0, 1).to(self.dtype))

    def read(self) -> tuple[torch.Tensor, list[float], torch.Tensor, torch.Tensor]:
        """The sums `[row groups, buckets, 2, STATS]` (on the CPU), the boundary's [tokens, p_eos, nll],
        each input's [NLL, tokens] beyond the training length `[inputs, 2]` and each pair's `[pairs, PAIR_STATS]`."""
        return (
            self.cells[:-1].view(*self.shape, STATS).cpu(),
            self.boundary.cpu().tolist(),
            self.per_input.cpu(),
            self.per_pair[:-1].cpu(),
        )


def _mean(total: float, count: float) -> Optional[float]:
    """None for no tokens, or for a figure the backend cannot give (summed NaN)."""
    return round(total / count, 6) if count and not math.isnan(total) else None


def summary(sums) -> dict:
    """tokens, nll, accuracy and the EOS-renormalised figures of summed statistics (a vector of STATS)."""
    tokens, nll, correct, tokens_no_eos, nll_no_eos, correct_no_eos = (float(x) for x in sums)
    return {
        "tokens": int(tokens),
        "nll": _mean(nll, tokens),
        "accuracy": _mean(correct, tokens),
        "tokens_no_eos": int(tokens_no_eos),
        "nll_no_eos": _mean(nll_no_eos, tokens_no_eos),
        "accuracy_no_eos": _mean(correct_no_eos, tokens_no_eos),
    }


def entry(
    cells: torch.Tensor,
    edges: Sequence[int],
    training_length: int,
    counts: dict,
    boundary: Optional[list[float]] = None,
) -> dict:
    """One protocol entry from its sums `[buckets, 2, STATS]`: per position bucket ([from, to), empty
    ones at the end left out), the boundary tokens (joined inputs) and beyond/within the decoder's
    training length (None when it is not recorded)."""
    per_bucket = cells.sum(1)
    used = [i for i in range(len(edges)) if per_bucket[i, 0] > 0]
    out = {
        **counts,
        "buckets": [
            {"bucket": bucket_label(lo, hi), "from": lo, "to": hi, **summary(per_bucket[i])}
            for i, (lo, hi) in enumerate(zip(edges, [*edges[1:], None]))
            if used and i <= used[-1]
        ],
    }
    if boundary is not None:
        out["boundary"] = {
            "tokens": int(boundary[0]),
            "p_eos": _mean(boundary[1], boundary[0]),
            "nll": _mean(boundary[2], boundary[0]),
        }
    split = training_length > 0
    out["beyond_training"] = summary(cells[:, 1].sum(0)) if split else None
    out["within_training"] = summary(cells[:, 0].sum(0)) if split else None
    return out


def score_inputs(
    decoder: DecodingBackend,
    inputs: JoinedInputs,
    row_group: list[int],
    row_groups: int,
    tokenizer,
    cfg,
    device,
    training_length: int,
    progress=None,
    num_pairs: int = 0,
) -> tuple[torch.Tensor, list[float], torch.Tensor, torch.Tensor]:
    """Teacher-force every input in batches of `decoding.max_tokens` (length-sorted); the sums per
    (row group, position bucket, beyond training), the boundary sums, the per-input sums beyond
    training and the per-pair sums (PositionSums.read)."""
    sums = PositionSums(row_groups, cfg.evaluation.position_buckets, training_length, device, len(inputs), num_pairs)
    order = sorted(range(len(inputs)), key=lambda i: (len(inputs.out[i]), len(inputs.src[i])))
    sizes = [max(len(s), len(o)) for s, o in zip(inputs.src, inputs.out)]
    batches = cut_by_token_budget(order, sizes, cfg.decoding.max_tokens)
    eos = tokenizer.eos_id
    for batch in progress(batches) if progress is not None else batches:
        outs = [inputs.out[i] for i in batch]
        tgt_out = pad_batch(outs, tokenizer.pad_id)
        valid = torch.arange(tgt_out.size(1))[None, :] < torch.tensor([len(o) for o in outs])[:, None]
        boundary = torch.zeros_like(valid)
        pair = torch.full(valid.shape, -1, dtype=torch.long)
        for row, i in enumerate(batch):
            boundary[row, inputs.boundaries[i]] = True
            for index, start, length in inputs.members[i]:  # its tokens after the first (EOS is after them)
                pair[row, start + 1 : start + length] = index
        scores = decoder.token_scores([inputs.src[i] for i in batch], outs, tokenizer, cfg.decoding, device)
        sums.add(
            scores,
            tgt_out.to(device),
            valid.to(device),
            boundary.to(device),
            torch.tensor([row_group[i] for i in batch], device=device),
            eos,
            torch.tensor(batch, device=device),
            pair.to(device),
        )
    return sums.read()


def _source_bucket(length: int, edges: Sequence[int]) -> int:
    """Index of a source length's bucket (as metrics.score_by_length buckets it), len(edges) if none."""
    return next(
        (
            i
            for i, (lo, hi) in enumerate(zip(edges, [*edges[1:], None]))
            if length >= lo and (hi is None or length < hi)
        ),
        len(edges),
    )


def input_counts(inputs: "JoinedInputs") -> dict:
    """What one k's inputs hold, and what was cut or left out of them."""
    return {
        "inputs": len(inputs),
        "target_tokens": sum(len(o) for o in inputs.out),
        "truncated_sources": inputs.truncated_sources,
        "truncated_targets": inputs.truncated_targets,
        "empty_sources": inputs.empty_sources,
    }


def beyond_lines(k: int, per_input: Tensor) -> list[str]:
    """BEYOND_FILE's lines of one k: each input's NLL and tokens beyond training (inputs with any)."""
    return [f"{k}\t{i}\t{int(tokens)}\t{nll:.6f}" for i, (nll, tokens) in enumerate(per_input.tolist()) if tokens]


def pair_lines(k: int, inputs: "JoinedInputs", per_pair: Tensor) -> list[str]:
    """PAIRS_FILE's lines of one k: each scored test pair's sums alone and inside its input."""
    starts = {index: start for members in inputs.members for index, start, _ in members}
    return [
        f"{k}\t{i}\t{starts[i]}\t{int(row[0])}\t{row[1]:.6f}\t{row[2]:.6f}\t{int(row[3])}\t{row[4]:.6f}"
        for i, row in enumerate(per_pair.tolist())
        if row[0]
    ]


def source_length_entries(
    cells: Tensor, row_group: list[int], inputs: "JoinedInputs", source_edges, edges, length: int
) -> list[dict]:
    """k = 1 per source-length bucket: its entry, its inputs and target tokens."""
    out = []
    for b, (lo, hi) in enumerate(zip(source_edges, [*source_edges[1:], None])):
        tokens = sum(len(o) for o, g in zip(inputs.out, row_group) if g == b)
        counts = {"inputs": row_group.count(b), "target_tokens": tokens}
        out.append({"bucket": bucket_label(lo, hi), **entry(cells[b], edges, length, counts)})
    return out


@torch.no_grad()
def teacher_forced_scores(
    decoder: DecodingBackend,
    tokenizer,
    pairs: list[tuple[str, str]],
    documents: Optional[list[str]],
    cfg,
    device,
    concat: Sequence[int] = (),
) -> tuple[dict, Optional[str], Optional[str]]:
    """scores.json's "teacher_forced": per k (1 and every k of `concat`) and, for k = 1, per
    source-length bucket; the text of BEYOND_FILE: every input's NLL (EOS renormalised out) and
    tokens beyond the decoder's training length; and the text of PAIRS_FILE: every test pair's sums
    per k (its tokens after the first, EOS excluded: the same tokens alone and joined), for compare.py."""
    from tqdm import tqdm

    from data.readers import normalize_text

    edges = cfg.evaluation.position_buckets
    check_position_buckets(edges)
    start = time.time()
    lengths, limits = decoder.training_lengths, decoder.position_limits
    src_ids = tokenizer.encode_src_batch([normalize_text(s) for s, _ in pairs])  # as translate.py encodes them
    tgt_ids = tokenizer.encode_tgt_batch([normalize_text(t) for _, t in pairs])
    source_edges = cfg.evaluation.length_buckets
    report: dict = {
        "definition": DEFINITION,
        "training_length": {"source": lengths[0], "target": lengths[1]},
        "position_buckets": list(edges),
        "k": {},
    }
    beyond_rows, pair_rows = [], []
    for k in sorted({1, *concat}):
        inputs = JoinedInputs(
            src_ids, tgt_ids, protocol_groups(len(pairs), k, documents, cfg), tokenizer.eos_id, limits
        )
        # k = 1: one row group per source-length bucket (+ one for lengths outside them); else one
        row_group = [_source_bucket(n, source_edges) for n in inputs.source_lengths] if k == 1 else [0] * len(inputs)
        row_groups = len(source_edges) + 1 if k == 1 else 1
        progress = lambda b, k=k: tqdm(b, desc=f"teacher forcing k={k}", unit="batch", mininterval=5)
        cells, boundary, per_input, per_pair = score_inputs(
            decoder, inputs, row_group, row_groups, tokenizer, cfg, device, lengths[1], progress, len(pairs)
        )
        report["k"][str(k)] = entry(cells.sum(0), edges, lengths[1], input_counts(inputs), boundary if k > 1 else None)
        beyond_rows += beyond_lines(k, per_input)
        pair_rows += pair_lines(k, inputs, per_pair)
        if k == 1:
            report["by_source_length"] = source_length_entries(
                cells, row_group, inputs, source_edges, edges, lengths[1]
            )
    report["seconds"] = round(time.time() - start, 2)
    if decoder.unavailable:  # the per-input and per-pair files hold EOS-renormalised sums only
        report["unavailable"] = decoder.unavailable
        return report, None, None
    return (
        report,
        "".join(f"{line}\n" for line in [BEYOND_HEADER, *beyond_rows]),
        "".join(f"{line}\n" for line in [PAIRS_HEADER, *pair_rows]),
    )

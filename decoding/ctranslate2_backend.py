"""Decoding through CTranslate2: a converted model (decoding/ctranslate2_spec.py) searched with
`Translator.translate_batch` and scored with `Translator.score_batch`, under this harness's
decoding settings.

The settings map as follows; what has no exact CTranslate2 form is refused, never approximated:
- greedy = beam size 1; beam size and n-best (`num_hypotheses`) as they are: the best hypothesis
  agrees (docs/CTRANSLATE2.md), the n-best below it less often, since the searches
  stop a sentence by different rules (here: once `beam` hypotheses finished; there: its patience);
- no-repeat n-gram for greedy search; with beam search refused (CTranslate2 bans the repeats
  before the softmax, the harness after it, which ranks beams otherwise);
- length penalty `avg` = `length_penalty=1` (score / length), `none` = 0; GNMT's `wu` has no form
  in CTranslate2 (it divides by length^alpha only): refused, asking for avg or none;
- the output limit is per sentence here (`max_len_a * src_len + max_len_b`, EOS included) and per
  call there: each call holds sentences of one limit L, decoded with `max_decoding_length = L - 1`
  (where this harness forces EOS at step L, CTranslate2 stops: the same tokens);
- `min_len` (no EOS before that many tokens, EOS counted) = `min_decoding_length = min_len - 1`
  for greedy search; with beam search it is refused: CTranslate2 takes EOS out before the
  softmax (the other tokens' probabilities grow), the harness after it, which ranks beams otherwise;
- the tokens the harness never emits (pad, BOS) are `suppress_sequences`: CTranslate2 also takes
  them out before the softmax, which changes scores by the mass a model puts on them (none to
  speak of once trained: the test sets' hypotheses agree, README "Decoding with CTranslate2");
- sources go in as this harness encodes them (no BOS/EOS added), never truncated by CTranslate2
  (`max_input_length=0`); a source longer than a position table is cut by translate.py as for a
  learnable table.
Where a hypothesis meets the limit the searches differ: the harness forces EOS and scores it,
CTranslate2 stops (the same tokens for greedy search; beams may rank otherwise). Greedy scores
with `min_len` or `no_repeat_ngram` differ (renormalised there), their tokens do not.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import torch

from decoding.hypotheses import Hypothesis
from decoding.search import output_limits
from utils.errors import HarnessError

COMPUTE_TYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}  # decoding.precision's equivalent


class BackendError(HarnessError):
    """A decoding setting or device CTranslate2 cannot honour: one line naming the key and what works."""


class CTranslate2Model:
    """A CTranslate2 model folder with what translate.py and the teacher-forced diagnostic read of
    a model: `max_positions` (a position table's rows, None for rotary and relative ones), the
    training lengths, and `to(device)` / `eval()` as a PyTorch model has them."""

    name = "ctranslate2"
    # what the teacher-forced diagnostic cannot have from it (scores.json: teacher_forced.unavailable)
    unavailable = (
        "decoding.backend ctranslate2 gives each reference token's NLL only (score_batch): accuracy, "
        "p(EOS), the EOS-renormalised figures and the per-pair degradation file need the whole "
        "distribution (null here)"
    )

    def __init__(self, folder: Path, facts: dict, in_memory: bool = False) -> None:
        """`in_memory`: read the model files now (CTranslate2 then loads them from memory), so that
        a conversion written into the same folder later cannot change this model."""
        self.folder = Path(folder)
        self.files = {p.name: p.read_bytes() for p in self.folder.iterdir() if p.is_file()} if in_memory else None
        self.max_positions: Optional[int] = facts.get("position_rows")
        lengths = facts.get("training_length") or {}
        self.training_lengths = (int(lengths.get("source") or 0), int(lengths.get("target") or 0))
        self.device = torch.device("cpu")
        self._translators: dict[str, object] = {}
        source, target = read_vocabularies(self.folder)
        self.source_tokens, self.target_tokens = source, target
        self.target_ids = {token: i for i, token in enumerate(target)}

    @property
    def position_limits(self) -> tuple[Optional[int], Optional[int]]:
        """score_batch appends EOS itself: an output cut to the table leaves it a position."""
        rows = self.max_positions
        return rows, (rows - 1 if rows else None)

    def to(self, device) -> "CTranslate2Model":
        device = torch.device(device)
        if device.type not in ("cpu", "cuda"):
            raise BackendError(
                f"decoding.backend ctranslate2 runs on cpu or cuda, not {device.type}: pass --device cpu"
            )
        self.device = device
        return self

    def eval(self) -> "CTranslate2Model":
        return self

    def translator(self, settings):
        """The `ctranslate2.Translator` for the settings' compute type on this device (one per type),
        with as many threads as PyTorch uses."""
        import ctranslate2

        compute_type = settings.compute_type or COMPUTE_TYPES[settings.precision]
        if compute_type not in self._translators:
            supported = sorted(ctranslate2.get_supported_compute_types(self.device.type))
            if compute_type not in supported:
                key = "decoding.compute_type" if settings.compute_type else f"decoding.precision {settings.precision}"
                raise BackendError(
                    f"{key} needs compute type {compute_type}, which CTranslate2 does not support on "
                    f"{self.device.type} here: --set decoding.compute_type= one of {', '.join(supported)}"
                )
            try:
                self._translators[compute_type] = ctranslate2.Translator(
                    str(self.folder),
                    device=self.device.type,
                    device_index=self.device.index or 0,
                    compute_type=compute_type,
                    inter_threads=1,
                    intra_threads=torch.get_num_threads() if self.device.type == "cpu" else 0,
                    files=self.files,
                )
            except (RuntimeError, ValueError) as e:  # no CUDA libraries, a damaged model.bin, ...
                reason = (str(e).splitlines() or [type(e).__name__])[0][:300]
                raise BackendError(
                    f"CTranslate2 cannot load {self.folder} on {self.device}: {reason} (--device cpu runs it "
                    f"on the CPU; a damaged folder: export it again)"
                ) from None
        return self._translators[compute_type]

    def search(self, sources: list[list[int]], tokenizer, settings, device=None) -> list[list[Hypothesis]]:
        """The configured search of each source (ids as the tokenizer encodes them): its n-best
        hypotheses, best first, as `decoding.search` returns them (on the device of `to`)."""
        check_settings(settings)
        greedy = settings.strategy == "greedy"
        limits = output_limits(
            torch.tensor([len(s) for s in sources]), settings.max_len_a, settings.max_len_b, self.max_positions
        )
        banned = sorted({tokenizer.pad_id, tokenizer.bos_id} - {tokenizer.eos_id})
        options = dict(
            beam_size=1 if greedy else settings.beam_size,
            num_hypotheses=1 if greedy else settings.nbest,
            length_penalty=1.0 if settings.length_penalty == "avg" and not greedy else 0.0,
            no_repeat_ngram_size=settings.no_repeat_ngram,
            suppress_sequences=[[self.target_tokens[i]] for i in banned],
            max_input_length=0,
            return_scores=True,
        )
        translator = self.translator(settings)
        per_token = options["length_penalty"] == 1.0
        found: list[list[Hypothesis]] = [[] for _ in sources]
        limits = limits.tolist()
        for limit in sorted(set(limits)):
            rows = [i for i, n in enumerate(limits) if n == limit]
            batch = [[self.source_tokens[t] for t in sources[i]] for i in rows]
            if limit <= 1:  # only EOS fits: an empty hypothesis scored with p(EOS), as the harness's search
                results = translator.score_batch(batch, [[] for _ in rows], max_input_length=0)
                for i, result in zip(rows, results):
                    found[i] = [Hypothesis([], result.log_probs[0], result.log_probs[0])]
                continue
            shortest = min(max(settings.min_len - 1, 0), limit - 1)  # the limit wins, as in the harness's search
            results = translator.translate_batch(
                batch, max_decoding_length=limit - 1, min_decoding_length=shortest, **options
            )
            for i, result in zip(rows, results):
                found[i] = [
                    self.hypothesis(tokens, score, per_token, limit)
                    for tokens, score in zip(result.hypotheses, result.scores)
                ]
        return found

    def hypothesis(self, tokens: list[str], normalized: float, per_token: bool, limit: int) -> Hypothesis:
        """CTranslate2 returns the length-normalised score (`avg`: per token, EOS counted as here; a
        hypothesis stopped at the limit has no EOS)."""
        length = len(tokens) + (len(tokens) < limit - 1)
        score = normalized * length if per_token else normalized
        return Hypothesis([self.target_ids[t] for t in tokens], score, normalized)

    def token_log_probs(
        self, sources: list[list[int]], outputs: list[list[int]], eos: int, settings
    ) -> list[list[float]]:
        """log p of each output token (reference + EOS, as teacher forcing scores it) given its
        source: CTranslate2's `score_batch`, which appends EOS itself."""
        translator = self.translator(settings)
        targets = [out[:-1] if out and out[-1] == eos else out for out in outputs]
        results = translator.score_batch(
            [[self.source_tokens[t] for t in s] for s in sources],
            [[self.target_tokens[t] for t in tgt] for tgt in targets],
            max_input_length=0,
        )
        # an output cut before its EOS (a position table's limit) gets one log-probability too many
        return [list(r.log_probs[: len(out)]) for r, out in zip(results, outputs)]

    def token_scores(self, sources, outputs, tokenizer, settings, device) -> tuple[torch.Tensor, ...]:
        """The teacher-forced diagnostic's per-token figures (`DecodingBackend.token_scores`) `[batch, T]`:
        the NLL of each reference token from `score_batch`, nothing else (no distribution: accuracy,
        p(EOS) and the EOS-renormalised figures are NaN)."""
        log_probs = self.token_log_probs(sources, outputs, tokenizer.eos_id, settings)
        nll = torch.zeros(len(outputs), max(len(o) for o in outputs))
        for row, values in enumerate(log_probs):
            nll[row, : len(values)] = -torch.tensor(values)
        nll = nll.to(device)
        missing = torch.full_like(nll, float("nan"))
        return nll, missing, missing, missing, missing


def check_settings(settings) -> None:
    """The decoding settings CTranslate2 has no exact form of: one line saying what to set."""
    if settings.strategy == "beam" and settings.length_penalty == "wu":
        raise BackendError(
            "decoding.length_penalty wu (GNMT's ((5 + len) / 6) ** alpha) has no CTranslate2 form "
            "(it divides by length ** alpha only): --set decoding.length_penalty=avg (or none; "
            "export.py --set decoding.length_penalty=avg makes it an export's default)"
        )
    if settings.strategy == "beam" and settings.no_repeat_ngram > 0:
        raise BackendError(
            f"decoding.no_repeat_ngram {settings.no_repeat_ngram} with beam search has no exact CTranslate2 "
            f"form (it bans the repeats before the softmax, which re-ranks beams; greedy search maps "
            f"exactly): --set decoding.no_repeat_ngram=0, or decoding.strategy=greedy"
        )
    if settings.strategy == "beam" and settings.min_len > 1:
        raise BackendError(
            f"decoding.min_len {settings.min_len} with beam search has no exact CTranslate2 form (it "
            f"renormalises the early steps without EOS, which re-ranks beams; greedy search maps "
            f"exactly): --set decoding.min_len=0, or decoding.strategy=greedy"
        )


def read_vocabularies(folder: Path) -> tuple[list[str], list[str]]:
    """The source and target token lists of a CTranslate2 model folder (shared or one each)."""

    def read(name: str) -> Optional[list[str]]:
        path = folder / f"{name}_vocabulary.json"
        if not path.is_file():
            return None
        try:
            tokens = json.loads(path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as e:
            raise BackendError(f"{path} is damaged (not a JSON list of tokens: {e}): export it again") from None
        if not isinstance(tokens, list) or not all(isinstance(t, str) for t in tokens):
            raise BackendError(f"{path} is damaged (not a JSON list of tokens): export it again")
        return tokens

    shared = read("shared")
    source, target = (shared, shared) if shared is not None else (read("source"), read("target"))
    if source is None or target is None:
        raise BackendError(f"{folder} holds no CTranslate2 vocabulary (shared_vocabulary.json): export it again")
    return source, target

#!/usr/bin/env python
"""Decoding speed and memory: this project's cached search vs no cache vs Hugging Face generate().

All contenders decode the same random source sentences with equal-sized models (6+6 layers,
d_model 512, 8 heads, FFN 2048, the same vocabulary size, random weights) and the same
forced output length (EOS forbidden before it, so the work is equal):

  ours greedy / beam-5, with the key/value cache   (decoding/search.py over decoding/step.py's CachedDecoder)
  ours greedy / beam-5, without the cache           (FullPrefixDecoder: the model's plain decode() of the whole
                                                     prefix each step, as the report did)
  MarianMTModel.generate(), greedy / num_beams=5    (transformers)
  CTranslate2 greedy / beam 5, float32 and int8     (ctranslate2 Translator.translate_batch on the same
                                                     random-weight model, converted in the case's process
                                                     by decoding/ctranslate2_spec.py before the timing)

Each case runs in a fresh process so that its peak memory (resident set, or CUDA peak
allocation on a GPU) is its own; every case runs with the same thread count (PyTorch's threads,
OMP_NUM_THREADS for both OpenMP runtimes, CTranslate2's intra_threads). Prints a table and writes
benchmarks/results/decode.json with `greedy_cached_over_uncached`, `beam5_over_hf_generate`,
`ct2_beam5_int8_over_hf_generate`, ... (ratios of sentences/second, RATIOS below).

  python benchmarks/decode.py            # full: 32 sentences, 50-token outputs, 3 repeats
  python benchmarks/decode.py --quick    # under 2 minutes on a 2-core CPU: 8 sentences, 1 repeat
  python benchmarks/decode.py --quick --rounds 3   # every case in 3 fresh processes, medians
  python benchmarks/decode.py --device cuda --sentences 2000 --max_tokens 30000 --cases ours_beam5_cached hf_beam5
      # a test set's worth, in token-budget batches (sorted by length, as test.py cuts them), the same
      # batches for both contenders
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from common import MODEL_SIZES, SIZE_HELP, add_rounds_flag, environment, ratio_spread, run_rounds, write_results  # noqa: E402

PAD, BOS, EOS = 0, 2, 3
CASES = [
    "ours_greedy_cached",
    "ours_greedy_uncached",
    "hf_greedy",
    "ours_beam5_cached",
    "ours_beam5_uncached",
    "hf_beam5",
    "ct2_greedy_float32",
    "ct2_greedy_int8",
    "ct2_beam5_float32",
    "ct2_beam5_int8",
    "ours_greedy_legacy",  # the search before issue 47 (benchmarks/legacy_search.py), cached step alike
    "ours_beam5_legacy",
]
# CTranslate2 has only score / length**alpha; the harness's beam case uses GNMT's penalty with alpha 0.6
# (decoding.search.beam_search's default), so CTranslate2 gets alpha 0.6. With the output length forced,
# every finished hypothesis has the same length and the normalisation changes no choice.
CT2_LENGTH_PENALTY = 0.6


def make_sources(num: int, vocab: int, seed: int = 0):
    """Random token ids, source lengths 10..30 (the demo corpus' range), right-padded."""
    import torch

    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(10, 31, (num,), generator=g)
    src = torch.full((num, int(lengths.max())), PAD, dtype=torch.long)
    for i, n in enumerate(lengths.tolist()):
        src[i, :n] = torch.randint(4, vocab, (n,), generator=g)
    return src


def token_budget_batches(src, max_tokens: int | None, beam: int) -> list:
    """The sources cut as test.py cuts a test set (evaluation/translate.py: make_batches): sorted by
    length, batch * longest * beam <= max_tokens; one batch of everything without a budget."""
    from evaluation.translate import make_batches

    if not max_tokens:
        return [src]
    lengths = src.ne(PAD).sum(1).tolist()
    return [src[rows][:, : max(lengths[i] for i in rows)] for rows in make_batches(lengths, max_tokens, beam)]


def build_ours(device: str, sizes: dict):
    import torch

    from models.positional_encodings import SinusoidalPositionalEncoding
    from models.transformer import Seq2SeqTransformer

    torch.manual_seed(0)
    d, h, vocab = sizes["d_model"], sizes["num_heads"], sizes["vocab"]
    return (
        Seq2SeqTransformer(
            vocab,
            vocab,
            PAD,
            SinusoidalPositionalEncoding(d, h, False),
            SinusoidalPositionalEncoding(d, h, True),
            d_model=d,
            num_heads=h,
            num_encoder_layers=sizes["layers"],
            num_decoder_layers=sizes["layers"],
            ffn_dim=sizes["ffn_dim"],
            dropout=0.1,
        )
        .to(device)
        .eval()
    )


def build_marian(device: str, sizes: dict):
    import torch
    from transformers import MarianConfig, MarianMTModel

    torch.manual_seed(0)
    cfg = MarianConfig(
        vocab_size=sizes["vocab"],
        d_model=sizes["d_model"],
        encoder_layers=sizes["layers"],
        decoder_layers=sizes["layers"],
        encoder_attention_heads=sizes["num_heads"],
        decoder_attention_heads=sizes["num_heads"],
        encoder_ffn_dim=sizes["ffn_dim"],
        decoder_ffn_dim=sizes["ffn_dim"],
        max_position_embeddings=512,
        pad_token_id=PAD,
        eos_token_id=EOS,
        decoder_start_token_id=BOS,
        forced_eos_token_id=None,
        scale_embedding=True,
        activation_function="relu",
    )
    return MarianMTModel(cfg).to(device).eval()


def run_case(
    case: str, num: int, out_len: int, repeats: int, threads: int, device: str, size: str, max_tokens: int | None, queue
) -> None:
    """One contender in its own process: time `repeats` decodes, report throughput and peak memory."""
    os.environ["OMP_NUM_THREADS"] = str(threads)  # before torch and ctranslate2 load their OpenMP runtimes
    import torch

    torch.set_num_threads(threads)  # CTranslate2's intra_threads is torch.get_num_threads() (ctranslate2_backend)
    if device == "cuda":  # as inference.py does, for both contenders (both attend through SDPA)
        from utils.runtime import skip_cudnn_attention

        skip_cudnn_attention()
    sizes = MODEL_SIZES[size]
    beam = 5 if "beam" in case else 1
    batches = [b.to(device) for b in token_budget_batches(make_sources(num, sizes["vocab"]), max_tokens, beam)]
    extra = {}
    if case.startswith("ct2"):
        compute_type = case.rsplit("_", 1)[1]
        decode = ct2_decoder(batches, device, sizes, beam, out_len, compute_type)
        extra = {"compute_type": compute_type, "length_penalty": CT2_LENGTH_PENALTY if beam > 1 else None}
    elif case.startswith("hf"):
        decode = marian_decoder(batches, device, sizes, beam, out_len)
    else:
        decode = our_decoder(
            batches, device, sizes, beam, out_len, uncached="uncached" in case, legacy="legacy" in case
        )
    times, tokens = time_decodes(decode, repeats, device)
    seconds = statistics.median(times)
    memory_kind = "cuda_max_allocated" if device == "cuda" else "process_max_rss"
    if case.startswith("ct2") and device == "cuda":  # CTranslate2 allocates outside torch's allocator
        peak, memory_kind = None, "not_measured"
    elif device == "cuda":
        peak = torch.cuda.max_memory_allocated() / 2**20
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    queue.put(
        {
            "case": case,
            "beam": beam,
            "sentences": num,
            "batches": len(batches),
            "output_tokens": tokens,
            "seconds": seconds,
            "sentences_per_sec": num / seconds,
            "tokens_per_sec": tokens / seconds,
            "peak_memory_mb": peak,
            "memory_kind": memory_kind,
            **extra,
        }
    )


def marian_decoder(batches: list, device: str, sizes: dict, beam: int, out_len: int):
    """Hugging Face `generate()` over the batches, forced to `out_len` new tokens; returns the tokens made."""
    model = build_marian(device, sizes)

    def decode() -> int:
        tokens = 0
        for src in batches:
            out = model.generate(
                input_ids=src,
                attention_mask=src.ne(PAD),
                num_beams=beam,
                do_sample=False,
                max_new_tokens=out_len,
                min_new_tokens=out_len,
                length_penalty=1.0,
                early_stopping=False,
            )
            tokens += out[:, 1:].ne(PAD).sum().item()  # generated tokens (the start token excluded)
        return tokens

    return decode


def our_decoder(batches: list, device: str, sizes: dict, beam: int, out_len: int, uncached: bool, legacy: bool = False):
    """This project's greedy or beam search over the batches (the cached step, or the plain forward on
    the whole prefix; `legacy`: the search before issue 47), forced to `out_len` tokens; returns the
    tokens made (EOS included)."""
    from decoding.full_prefix import FullPrefixDecoder
    from decoding.search import beam_search, greedy_search
    from decoding.step import CachedDecoder

    if legacy:
        from legacy_search import beam_search, greedy_search

    model = build_ours(device, sizes)
    runner = FullPrefixDecoder(model) if uncached else CachedDecoder(model)
    kw = dict(max_len_a=0.0, max_len_b=out_len, min_len=out_len)

    def decode() -> int:
        tokens = 0
        for src in batches:
            if beam == 1:
                hyps = greedy_search(runner, src, BOS, EOS, PAD, **kw)
            else:
                hyps = [h[0] for h in beam_search(runner, src, BOS, EOS, PAD, beam_size=beam, **kw)]
            tokens += sum(len(h.tokens) + 1 for h in hyps)  # + EOS
        return tokens

    return decode


class TokenNames:
    """The tokenizer that decoding/ctranslate2_spec.save_model asks of: id i is the string "t<i>"."""

    pad_id, unk_id, bos_id, eos_id = PAD, 1, BOS, EOS

    def tokens(self, ids, side: str = "tgt") -> list[str]:
        return [f"t{i}" for i in ids]


def ct2_config(sizes: dict):
    """The experiment config of build_ours' model, as save_model reads it (post-norm, ReLU, sinusoidal)."""
    import models.positional_encodings  # noqa: F401  (registers the encodings that the config names)
    from utils.config import load_config

    model = dict(
        d_model=sizes["d_model"],
        num_heads=sizes["num_heads"],
        num_encoder_layers=sizes["layers"],
        num_decoder_layers=sizes["layers"],
        ffn_dim=sizes["ffn_dim"],
        dropout=0.1,
        norm_first=False,
        activation="relu",
        positional={"name": "sinusoidal"},
    )
    return load_config(raw={"name": "decode_benchmark", "model": model})


def ct2_decoder(batches: list, device: str, sizes: dict, beam: int, out_len: int, compute_type: str):
    """CTranslate2's `translate_batch` over the batches, on build_ours' model converted here (before
    any timing; the PyTorch copy is then freed and the peak-memory mark reset), forced to `out_len`
    tokens (EOS impossible before: min = max decoding length); returns the tokens made."""
    import gc
    import shutil
    import tempfile

    from decoding.ctranslate2_backend import CTranslate2Model
    from decoding.ctranslate2_spec import save_model
    from utils.config_schema import DecodingConfig

    folder = Path(tempfile.mkdtemp(prefix="decode_ct2_"))
    try:
        model = build_ours("cpu", sizes)
        save_model(ct2_config(sizes), TokenNames(), model, folder)
        del model
        ct2 = CTranslate2Model(folder, {}).to(device)
        translator = ct2.translator(DecodingConfig(compute_type=compute_type))  # loads the folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    gc.collect()
    reset_peak_rss()
    sources = [[ct2.source_tokens[t] for t in row[row.ne(PAD)].tolist()] for src in batches for row in src]
    sizes_of = [len(src) for src in batches]
    banned = [[ct2.target_tokens[PAD]], [ct2.target_tokens[BOS]]]  # as the harness's search bans them
    options = dict(
        beam_size=beam,
        num_hypotheses=1,
        length_penalty=CT2_LENGTH_PENALTY if beam > 1 else 0.0,
        min_decoding_length=out_len,
        max_decoding_length=out_len,
        max_input_length=0,
        suppress_sequences=banned,
    )

    def decode() -> int:
        tokens, start = 0, 0
        for n in sizes_of:
            for result in translator.translate_batch(sources[start : start + n], **options):
                made = len(result.hypotheses[0])
                if made != out_len:  # unequal work would make the comparison meaningless
                    raise RuntimeError(f"CTranslate2 made {made} tokens, not the forced {out_len}")
                tokens += made
            start += n
        return tokens

    return decode


def reset_peak_rss() -> None:
    """Reset this process' peak resident set (Linux: /proc/self/clear_refs), so that a CTranslate2
    case's peak is its decoding's, not the conversion's; elsewhere the peak keeps the conversion."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


def time_decodes(decode, repeats: int, device: str) -> tuple[list[float], int]:
    """(seconds of each of `repeats` timed decodes after one warm-up, the tokens of one decode)."""
    import torch

    with torch.inference_mode():
        decode()  # warm-up
        if device == "cuda":
            torch.cuda.reset_peak_memory_stats()
            torch.cuda.synchronize()
        times, tokens = [], 0
        for _ in range(repeats):
            start = time.perf_counter()
            tokens = decode()
            if device == "cuda":
                torch.cuda.synchronize()
            times.append(time.perf_counter() - start)
    return times, tokens


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small version (< 2 min on 2 CPU cores)")
    parser.add_argument("--sentences", type=int, help="sentences per decode (default 32, quick 8)")
    parser.add_argument("--out_len", type=int, default=50, help="forced output length in tokens")
    parser.add_argument(
        "--max_tokens",
        type=int,
        metavar="N",
        help="decode in batches sorted by length with batch x longest source x beam <= N, the "
        "same batches for every contender of a beam size (as test.py cuts a test set with "
        "decoding.max_tokens; default: one batch)",
    )
    parser.add_argument("--repeats", type=int, help="timed repeats per case (median; default 3, quick 1)")
    add_rounds_flag(parser)
    parser.add_argument(
        "--cases",
        nargs="+",
        choices=CASES,
        metavar="CASE",
        help="run only these cases, in this order (default: all; ratios need both of their cases). "
        "E.g. --cases ours_beam5_cached hf_beam5 skips the slow uncached ones. "
        f"Cases: {', '.join(CASES)}",
    )
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: all cores)")
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    parser.add_argument("--size", default="report", choices=sorted(MODEL_SIZES), help=SIZE_HELP)
    parser.add_argument(
        "--output", default=None, help="JSON file (default benchmarks/results/decode.json, decode_cuda.json on cuda)"
    )
    return parser


def print_table(results: list[dict], ratios: dict, spreads: dict, header: str, rounds: int) -> None:
    print(f"\n{header}\n")
    print("| case | beam | sentences/s | target tokens/s | peak memory (MB) |")
    print("|---|---|---|---|---|")
    for r in results:
        peak = "-" if r["peak_memory_mb"] is None else f"{r['peak_memory_mb']:.0f}"
        print(f"| {r['case']} | {r['beam']} | {r['sentences_per_sec']:.2f} | {r['tokens_per_sec']:.0f} | {peak} |")
    print()
    for k, v in ratios.items():
        per_round = ", ".join(f"{x:.2f}" for x in spreads[k]["per_round"])
        print(f"{k}: {v:.2f}x" + (f"   (per round: {per_round})" if rounds > 1 else ""))


# Each ratio: the first case's sentences/s over the second's, in the same run
RATIOS = {
    "greedy_cached_over_uncached": ("ours_greedy_cached", "ours_greedy_uncached"),
    "beam5_cached_over_uncached": ("ours_beam5_cached", "ours_beam5_uncached"),
    "beam5_over_hf_generate": ("ours_beam5_cached", "hf_beam5"),
    "greedy_over_hf_generate": ("ours_greedy_cached", "hf_greedy"),
    "beam5_over_legacy": ("ours_beam5_cached", "ours_beam5_legacy"),  # issue 47: >= 0.97 on a CPU
    "greedy_over_legacy": ("ours_greedy_cached", "ours_greedy_legacy"),
    **{
        f"ct2_{search}_{kind}_over_{peer}": (f"ct2_{search}_{kind}", peer_case)
        for search in ("beam5", "greedy")
        for kind in ("int8", "float32")
        for peer, peer_case in (("hf_generate", f"hf_{search}"), ("ours", f"ours_{search}_cached"))
    },
}


def main(argv=None) -> int:
    parser = make_parser()
    args = parser.parse_args(argv)
    import torch

    device = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    if device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA device is visible to torch (install a CUDA build of torch)")
    args.output = args.output or str(
        ROOT / "benchmarks" / "results" / ("decode_cuda.json" if device == "cuda" else "decode.json")
    )
    num = args.sentences or (8 if args.quick else 32)
    repeats = args.repeats or (1 if args.quick else 3)
    threads = args.threads or torch.get_num_threads()
    cases = list(dict.fromkeys(args.cases)) if args.cases else list(CASES)  # in the order given, as train.py
    by = run_rounds(
        cases,
        run_case,
        (num, args.out_len, repeats, threads, device, args.size, args.max_tokens),
        args.rounds,
        "sentences_per_sec",
        "sent/s",
    )
    results = [by[c] for c in cases if c in by]
    spreads = {
        name: ratio_spread(by, a, b, "sentences_per_sec") for name, (a, b) in RATIOS.items() if a in by and b in by
    }
    ratios = {name: sp["ratio"] for name, sp in spreads.items()}
    batching = (
        f"{results[0]['batches']} token-budget batches"
        if args.max_tokens and results
        else "token-budget batches"
        if args.max_tokens
        else "one batch"
    )
    print_table(
        results,
        ratios,
        spreads,
        f"Decoding {num} sentences ({batching}), {args.out_len} output tokens each, {device} ({threads} threads)",
        args.rounds,
    )
    settings = {
        "cases": cases,
        "sentences": num,
        "max_tokens": args.max_tokens,
        "out_len": args.out_len,
        "repeats": repeats,
        "rounds": args.rounds,
        "threads": threads,
        "quick": args.quick,
        "size": args.size,
        **MODEL_SIZES[args.size],
        **environment(device),
    }
    return write_results(args.output, settings, results, ratios, spreads, requested=cases)


if __name__ == "__main__":
    raise SystemExit(main())

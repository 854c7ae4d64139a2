"""The contenders of benchmarks/decode.py, each built and run the same way: this project's search
(cached, uncached, or the search before issue 47), Hugging Face `MarianMTModel.generate()`, and
CTranslate2 on the same random-weight model converted. Each `*_decoder(batches, ...)` returns a
`decode()` that decodes every batch with the output length forced and returns the tokens made."""

from __future__ import annotations

from pathlib import Path

PAD, BOS, EOS = 0, 2, 3


# CTranslate2 has only score / length**alpha; the harness's beam case uses GNMT's penalty with alpha 0.6
# (decoding.search.beam_search's default), so CTranslate2 gets alpha 0.6. With the output length forced,
# every finished hypothesis has the same length and the normalisation changes no choice.
CT2_LENGTH_PENALTY = 0.6


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


def our_decoder(
    batches: list,
    device: str,
    sizes: dict,
    beam: int,
    out_len: int,
    uncached: bool,
    legacy: bool = False,
    graphed: bool = False,
):
    """This project's greedy or beam search over the batches (the cached step, or the plain forward on
    the whole prefix; `legacy`: the search before issue 47; `graphed`: the fixed-shape step of
    decoding.cuda_graphs), forced to `out_len` tokens; returns the tokens made (EOS included)."""
    from decoding.fixed_shape import FixedShapeDecoder
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
            # graphed: a decoder per batch (its graphs), as decoding/backend.py makes one per search
            searched = FixedShapeDecoder(model, cuda_graphs=True) if graphed else runner
            if beam == 1:
                hyps = greedy_search(searched, src, BOS, EOS, PAD, **kw)
            else:
                hyps = [h[0] for h in beam_search(searched, src, BOS, EOS, PAD, beam_size=beam, **kw)]
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
    from settings.config import load_config

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
    from settings.schema import DecodingConfig

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

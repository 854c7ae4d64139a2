"""Each plot command writes a PNG that decodes and is not blank, for each encoding family."""

from __future__ import annotations

from pathlib import Path

import pytest

from commands import visualize


def assert_real_png(path: Path) -> None:
    import matplotlib.image as mpimg

    assert path.is_file() and path.stat().st_size > 1000
    image = mpimg.imread(path)
    assert image.ndim == 3 and image.shape[0] > 50 and image.shape[1] > 50
    assert float(image[..., :3].std()) > 0.01  # not one colour


@pytest.mark.parametrize("command", ["pe-heatmap", "pe-mds", "pe-similarity"])
def test_computed_encoding_plots(command: str, tmp_path: Path) -> None:
    encodings = ["sinusoidal"] if command != "pe-similarity" else ["sinusoidal", "rope", "alibi"]
    for encoding in encodings:
        out = tmp_path / f"{command}-{encoding}.png"
        assert (
            visualize.main(
                [command, "--encoding", encoding, "--positions", "64", "--position", "20", "--output", str(out)]
            )
            == 0
        )
        assert_real_png(out)


def test_classical_mds_recovers_a_line() -> None:
    import torch

    points = torch.zeros(10, 5)
    points[:, 2] = torch.arange(10.0)
    coords = visualize.classical_mds(points)
    distances = torch.cdist(coords, coords)
    assert torch.allclose(distances, torch.cdist(points, points), atol=1e-4)


def test_attention_maps_of_a_trained_model(trained_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "attention"
    assert (
        visualize.main(
            [
                "attention",
                "--run",
                str(trained_run),
                "--src_text",
                "Je t'aime beaucoup.",
                "--tgt_text",
                "I love you very much.",
                "--output",
                str(out),
            ]
        )
        == 0
    )
    for name in ("encoder_self_attention", "decoder_self_attention", "cross_attention"):
        assert_real_png(out / f"{name}.png")
    # similarity plot from the trained model's own encoding (rope -> computed rotary curve)
    sim = tmp_path / "sim.png"
    assert (
        visualize.main(
            ["pe-similarity", "--run", str(trained_run), "--positions", "30", "--position", "10", "--output", str(sim)]
        )
        == 0
    )
    assert_real_png(sim)


def plot(*args: str) -> None:
    assert visualize.main(list(args)) == 0, args


@pytest.mark.slow
def test_plots_of_trained_learned_encodings(trained_family_runs: dict[str, Path], tmp_path: Path) -> None:
    learnable = str(trained_family_runs["learnable"])
    for command in ("pe-heatmap", "pe-mds", "pe-similarity"):
        out = tmp_path / f"learnable-{command}.png"
        plot(command, "--run", learnable, "--positions", "40", "--position", "10", "--output", str(out))
        assert_real_png(out)
    for name in ("t5_bias", "fire", "xpos"):  # a learned bias; the trained model's own hooks
        out = tmp_path / f"{name}-similarity.png"
        run = str(trained_family_runs[name])
        plot("pe-similarity", "--run", run, "--positions", "40", "--position", "10", "--output", str(out))
        assert_real_png(out)
    attention = tmp_path / "t5-attention"
    plot(
        "attention", "--run", str(trained_family_runs["t5_bias"]), "--src_text", "Bonjour !", "--output", str(attention)
    )
    assert_real_png(attention / "encoder_self_attention.png")


def test_every_computed_encoding_draws_its_own_picture_or_says_why_not(tmp_path: Path) -> None:
    """pe-similarity asks the encoding (its `similarity` hook): every registered encoding without
    learned parameters plots, one with them asks for a trained model, NoPE says it has no signal."""
    from helpers import one_error_line
    from in_process import run_in_process

    from models.positional_encodings import POSITIONAL_ENCODINGS, build_positional_encoding
    from settings.config import PositionalConfig

    for name in sorted(POSITIONAL_ENCODINGS):
        pe = build_positional_encoding(PositionalConfig(name=name), 64, 4, causal=False)
        out = tmp_path / f"{name}.png"
        args = ["pe-similarity", "--encoding", name, "--d_model", "64", "--heads", "4", "--output", str(out)]
        learned = any(True for _ in pe.parameters())
        if learned or pe.similarity(3, 10) is None:
            message = one_error_line(run_in_process(["visualize.py", *args]))
            assert ("learned parameters" in message) if learned else ("no positional signal" in message), message
            assert not out.exists()
        else:
            assert visualize.main(args) == 0, name
            assert_real_png(out)


def test_the_pictures_are_the_encodings_formulas() -> None:
    """The hooks against the formulas: ALiBi's encoder bias is -slope * |j - i| per head; RoPE's q·k of
    all-ones vectors is sum over pairs of 2 cos((j - i) theta_k); the sinusoidal dot product depends on
    j - i alone."""
    import torch

    from models.positional_encodings import alibi_slopes, build_positional_encoding, rope_inv_freq
    from settings.config import PositionalConfig

    alibi = build_positional_encoding(PositionalConfig(name="alibi"), 64, 4, causal=False)
    rel = torch.arange(12) - 5
    curves = alibi.similarity(5, 12)
    for h, slope in enumerate(alibi_slopes(4)):
        torch.testing.assert_close(curves[f"head {h}"], -slope * rel.abs().float())
    rope = build_positional_encoding(PositionalConfig(name="rope"), 64, 4, causal=False)
    (qk,) = rope.similarity(5, 12).values()
    angles = rel[:, None].float() * rope_inv_freq(16, 10000.0)  # [12, 8 pairs]
    torch.testing.assert_close(qk, 2 * angles.cos().sum(-1), atol=1e-4, rtol=1e-5)
    sinusoidal = build_positional_encoding(PositionalConfig(name="sinusoidal"), 64, 4, causal=False)
    (a,) = sinusoidal.similarity(5, 12).values()
    (b,) = sinusoidal.similarity(6, 13).values()
    torch.testing.assert_close(a, b[1:], atol=1e-4, rtol=1e-5)  # a function of j - i

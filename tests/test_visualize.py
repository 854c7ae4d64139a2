"""Each plot command writes a PNG that decodes and is not blank, for each encoding family."""

from __future__ import annotations

from pathlib import Path

import pytest

import visualize
from test_end_to_end import trained_run  # noqa: F401  (fixture: a tiny trained rope run)


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
        assert visualize.main([command, "--encoding", encoding, "--positions", "64", "--position", "20",
                               "--out", str(out)]) == 0
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
    assert visualize.main(["attention", "--run", str(trained_run), "--src", "Je t'aime beaucoup.",
                           "--tgt", "I love you very much.", "--out", str(out)]) == 0
    for name in ("encoder_self_attention", "decoder_self_attention", "cross_attention"):
        assert_real_png(out / f"{name}.png")
    # similarity plot from the trained model's own encoding (rope -> computed rotary curve)
    sim = tmp_path / "sim.png"
    assert visualize.main(["pe-similarity", "--run", str(trained_run), "--positions", "30", "--position", "10",
                           "--out", str(sim)]) == 0
    assert_real_png(sim)


def test_attention_rows_are_distributions(trained_run: Path) -> None:
    import torch

    from utils.checkpoint import find_best_checkpoint, load_for_inference

    _, tok, model = load_for_inference(find_best_checkpoint(trained_run))
    src = torch.tensor([tok.encode_src("Bonjour à tous.")])
    tgt = torch.tensor([[tok.bos_id, *tok.encode_tgt("Hello everyone.")]])
    maps = visualize.attention_maps(model, src, tgt)
    for kind, layers in maps.items():
        for weights in layers:
            assert torch.allclose(weights.sum(-1), torch.ones(weights.shape[:-1]), atol=1e-5), kind
    dec = maps["decoder self-attention"][0]
    assert torch.all(dec.triu(1) == 0)  # causal: no weight on future positions

"""The CTranslate2 model spec (decoding/ctranslate2_spec.py): every mapped encoding, exported and converted
through export.py, gives the PyTorch model's log-probabilities step by step; what cannot map is refused
in one line. The models: the tiny trained run's tokenizer and config with each encoding swapped in,
random weights (learned bias tables drawn too), pre- and post-norm."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch
from ctranslate2_models import pytorch_export, random_pairs
from helpers import one_error_line
from in_process import run_in_process as run

TOLERANCE = 1e-4  # |log p| difference; float32 in both (measured: about 1.5e-6)


MAPPED = [
    pytest.param("sinusoidal", {}, True, id="sinusoidal"),
    pytest.param("sinusoidal", {}, False, id="sinusoidal-post-norm"),
    pytest.param("learnable", {"max_positions": 64}, True, id="learnable"),
    pytest.param("shape", {"max_shift": 7}, True, id="shape"),
    pytest.param("cape", {}, True, id="cape"),
    pytest.param("none", {}, True, id="none"),
    pytest.param("rope", {}, True, id="rope"),
    pytest.param("rope", {}, False, id="rope-post-norm"),
    pytest.param("rope", {"layout": "interleaved", "fraction": 0.5}, True, id="rope-interleaved-half"),
    pytest.param("rope", {"scaling": "linear", "scaling_factor": 3.0}, True, id="rope-linear"),
    pytest.param("rope", {"scaling": "ntk", "scaling_factor": 3.0}, True, id="rope-ntk"),
    pytest.param("t5_bias", {"num_buckets": 16, "max_distance": 20}, True, id="t5_bias"),
    pytest.param("shaw", {"clip_distance": 5}, True, id="shaw"),
    pytest.param("shaw", {"clip_distance": 5}, False, id="shaw-post-norm"),
]


@pytest.mark.parametrize("name,options,norm_first", MAPPED)
def test_exported_model_gives_the_same_log_probabilities(trained, tmp_path: Path, name, options, norm_first) -> None:
    from artifacts.loading import load_for_decoding

    model = pytorch_export(trained, tmp_path / "pytorch", name, options, norm_first)
    proc = run(
        ["export.py", "--model_path", str(tmp_path / "pytorch"), "--format", "ctranslate2"]
        + ["--output", str(tmp_path / "ct2")]
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert sorted(p.name for p in (tmp_path / "ct2").iterdir()) == [
        "README.md",
        "config.json",
        "ctranslate2",
        "tokenizer.json",
    ]
    loaded = load_for_decoding(tmp_path / "ct2")
    cfg, tokenizer, converted = loaded.config, loaded.tokenizer, loaded.decoder
    assert converted.name == "ctranslate2" and loaded.backend == "ctranslate2" and cfg.decoding.backend == "ctranslate2"
    sources, targets = random_pairs(tokenizer.tgt_vocab_size)
    eos = tokenizer.eos_id
    theirs = converted.token_log_probs(sources, [t + [eos] for t in targets], eos, cfg.decoding)
    for src, tgt, logp in zip(sources, targets, theirs):
        with torch.no_grad():
            logits = model(torch.tensor([src]), torch.tensor([[tokenizer.bos_id, *tgt]]))[0]  # [T, vocab]
        ours = logits.log_softmax(-1)[torch.arange(len(tgt) + 1), torch.tensor([*tgt, eos])]
        assert len(logp) == len(tgt) + 1
        assert (ours - torch.tensor(logp)).abs().max().item() < TOLERANCE, (name, options)


@pytest.mark.parametrize(
    "name,options,sets,says",
    [
        ("alibi", {}, [], "alibi cannot be exported to CTranslate2"),
        ("kerple", {}, [], "kerple cannot be exported"),
        ("xpos", {}, [], "xpos cannot be exported"),
        ("fire", {}, [], "fire cannot be exported"),
        ("rope", {}, ["model.positional.scaling=yarn"], "no YaRN scaling"),
        ("rope", {"cross_attention": True}, [], "no positional term in cross-attention"),
        ("sinusoidal", {"randomized": True, "max_position": 256}, [], "randomized positions"),
    ],
)
def test_what_cannot_map_is_refused_in_one_line(trained, tmp_path: Path, name, options, sets, says) -> None:
    pytorch_export(trained, tmp_path / "pytorch", name, options, True)
    if "yarn" in str(sets):  # yarn needs a recorded training length
        _record_training_length(tmp_path / "pytorch")
    args = ["export.py", "--model_path", str(tmp_path / "pytorch"), "--format", "ctranslate2"]
    proc = run([*args, "--output", str(tmp_path / "ct2"), *[x for s in sets for x in ("--set", s)]])
    assert proc.returncode == 2, proc.stderr[-2000:]
    line = one_error_line(proc)
    assert says in line and "CTranslate2 runs sinusoidal, learnable, shape, cape, none, rope, t5_bias, shaw" in line
    assert not (tmp_path / "ct2").exists()


def _record_training_length(folder: Path) -> None:
    from safetensors.torch import load_file, save_file

    weights = load_file(str(folder / "model.safetensors"))
    for key in weights:
        if key.endswith("training_length"):
            weights[key] = torch.tensor(20)
    save_file(weights, str(folder / "model.safetensors"), metadata={"format": "pe-harness-export"})
    config = json.loads((folder / "config.json").read_text())  # recorded as export.py records its files
    config["files"]["model.safetensors"] = hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest()
    (folder / "config.json").write_text(json.dumps(config, indent=2))

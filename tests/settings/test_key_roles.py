"""Each config key declares its role once (settings/schema.py); what a resume, test.py and
inference.py may change, how compare.py groups runs, the HParams columns and inference.py's flags
all follow from it. A test-time --set that would score another model than the one trained is
refused through every entry point, in one line, before anything is written."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from helpers import one_error_line
from in_process import run_in_process as run

from models.positional_encodings import POSITIONAL_ENCODINGS
from settings.key_roles import changeable_keys, flag_settings, hparam_keys, may_change, option_role, schema_roles
from settings.schema import ROLES


def test_every_key_has_a_role() -> None:
    roles = schema_roles()
    assert len(roles) > 80
    assert {k: r for k, r in roles.items() if r not in ROLES} == {}
    for name, cls in POSITIONAL_ENCODINGS.items():
        for f in dataclasses.fields(cls.Options):
            assert option_role(name, f.name) in ROLES, (name, f.name)


def test_roles_decide_resume_and_test_time() -> None:
    resume, test_time = changeable_keys("resume"), changeable_keys("test", "shape")
    for key in ("training.max_steps", "training.lr", "training.device", "decoding.*", "evaluation.*", "run_dir"):
        assert key in resume, key
    assert "decoding.*" in test_time and "evaluation.*" in test_time and "data.cache_dir" in test_time
    assert "model.positional.inference_shift" in test_time  # SHAPE's declared inference-time option
    for key in (
        "model.d_model",
        "model.positional.name",
        "tokenizer.vocab_size",
        "data.split_seed",
        "seed",
        "training.max_steps",
        "training.batch_size",
    ):
        assert not may_change(key, "test", "shape"), key
    assert not may_change("model.positional.max_shift", "test", "shape")
    assert not may_change("model.positional.theta", "resume", "rope")
    assert "model.d_model" in hparam_keys() and "decoding.beam_size" not in hparam_keys()
    assert [k for k, _, _ in flag_settings()] and all(k.startswith("decoding.") for k, _, _ in flag_settings())


@pytest.mark.parametrize(
    "override, key",
    [
        ("model.positional.name=sinusoidal", "model.positional.name"),  # the fixture run is RoPE
        ("model.d_model=64", "model.d_model"),
        ("model.positional.theta=500.0", "model.positional.theta"),
        ("tokenizer.vocab_size=900", "tokenizer.vocab_size"),
        ("data.split_seed=99", "data.split_seed"),
        ("training.max_steps=9", "training.max_steps"),
    ],
)
def test_test_py_refuses_a_set_that_changes_the_trained_model(
    trained_run: Path, tmp_path: Path, override: str, key: str
) -> None:
    out = tmp_path / "out"
    message = one_error_line(run(["test.py", "--run", str(trained_run), "--set", override, "--output", str(out)]))
    assert f"{key}=" in message and "At test time only" in message, message
    assert not out.exists()


def test_inference_py_refuses_a_set_that_changes_the_trained_model(trained_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.en"
    message = one_error_line(
        run(
            [
                "inference.py",
                "--run",
                str(trained_run),
                "--src_text",
                "Bonjour !",
                "--set",
                "model.positional.name=sinusoidal",
                "--output",
                str(out),
            ]
        )
    )
    assert "model.positional.name=" in message and "'rope'" in message, message
    assert not out.exists()


def test_test_time_keys_and_trained_values_are_accepted(trained_run: Path, tmp_path: Path) -> None:
    proc = run(
        [
            "inference.py",
            "--run",
            str(trained_run),
            "--src_text",
            "Bonjour !",
            "--set",
            "decoding.beam_size=2",
            "--set",
            "model.positional.name=rope",
            "--set",
            "data.max_len=128",  # the trained values
            "--set",
            "decoding={beam_size: 2, strategy: beam}",
        ]
    )  # a section of test-time keys (the same beam_size: two values in two forms are refused, issue 67)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert len(proc.stdout.splitlines()) == 1


def test_a_config_beside_a_checkpoint_must_describe_its_model_and_data(trained_run: Path, tmp_path: Path) -> None:
    import yaml

    ckpt = next((trained_run / "checkpoints").glob("best_*.pt"))
    config = yaml.safe_load((trained_run / "config.yaml").read_text())
    config["data"]["split_seed"] = 99
    other = tmp_path / "other.yaml"
    other.write_text(yaml.safe_dump(config))
    message = one_error_line(
        run(["inference.py", "--config", str(other), "--model_path", str(ckpt), "--src_text", "Bonjour !"])
    )
    assert "data.split_seed: checkpoint=1 config=99" in message, message
    # its training settings do not matter for testing; its decoding settings win
    config["data"]["split_seed"] = 1
    config["training"]["max_steps"] = 12345
    config["decoding"]["beam_size"] = 1
    other.write_text(yaml.safe_dump(config))
    proc = run(["inference.py", "--config", str(other), "--model_path", str(ckpt), "--src_text", "Bonjour !"])
    assert proc.returncode == 0, proc.stderr[-2000:]

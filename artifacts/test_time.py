"""The config a trained model is tested under: its own, with only the keys that cannot change the trained
model (decoding, evaluation, ...: their roles in settings/key_roles.py) taken from --set or from a
--config given beside it; anything else is refused in one line naming the key."""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Sequence

from artifacts.checkpoint import CheckpointError
from settings.config import ExperimentConfig, Override, flatten, load_config, parse_override, to_dict
from settings.key_roles import changeable_keys, changes, may_change, role_of
from settings.schema import EXPERIMENT


def test_time_config(saved: dict, overrides: Sequence[str | Override], checkpoint: str) -> ExperimentConfig:
    """The config a checkpoint trained with `saved` (its config as stored) is tested under: `saved` with
    `overrides` applied, validated once. The overrides may change only how the trained model is
    decoded and scored (the keys' roles: settings/key_roles.py): anything else would score another
    model, or other data, under this model's name: CheckpointError naming the key. An override equal
    to the trained value is fine."""
    overrides = [parse_override(o) for o in overrides]  # (an Override is kept as it is: parsed once)
    refuse_trained_keys(saved, overrides, checkpoint)
    return load_config(raw=saved, overrides=overrides)


def refuse_trained_keys(saved: dict, overrides: Sequence[Override], checkpoint: str) -> None:
    """CheckpointError naming each override that would change what the model was trained with (test
    time may change only how it is decoded and scored), without validating the config: sweep.py
    checks a --variant so before any training."""
    trained = flatten(saved)
    encoding = trained.get("model.positional.name")
    asked = {key: value for override in overrides for key, value in override.leaves().items()}
    refused = [
        (key, trained.get(key), value)
        for key, value in asked.items()
        if not may_change(key, "test", encoding) and value != trained.get(key)
    ]
    if refused:
        raise CheckpointError("--set " + test_time_refusal(refused, encoding, checkpoint))


def test_time_refusal(refused: list[tuple[str, object, object]], encoding: Optional[str], checkpoint: str) -> str:
    """One line saying why testing a checkpoint with these changes [(key, trained value, asked
    value)] would score another model or other data than the one trained, and what may change."""
    why = []
    for key, was, now in refused:
        role = role_of(key, encoding)
        what = (
            "a training setting: it has no effect on a trained model"
            if role == "training"
            else "the seed the model was trained with"
            if role == "seed"
            else "part of what the model was trained with"
        )
        why.append(f"{key}={now!r} ({checkpoint} has {key}={was!r}; {what})")
    return (
        f"refused: {'; '.join(why)}. At test time only how the trained model is decoded and scored may "
        f"change: {', '.join(changeable_keys('test', encoding))}. To score another model, train it (or pick its "
        "run with --run)"
    )


def check_model_matches(given: ExperimentConfig, config_path: str, ckpt_cfg: ExperimentConfig, ckpt_path: Path):
    """A --config given beside a checkpoint (`given`, loaded from `config_path`) must describe the model
    it holds and the data it was trained on; the config's test-time settings (decoding, evaluation,
    ...) win, its training settings and seed do not matter for testing and are left as the
    checkpoint has them."""
    trained, wanted = flatten(to_dict(ckpt_cfg)), flatten(to_dict(given))
    encoding = ckpt_cfg.model.positional.name
    diff = changes(trained, wanted)
    refused = [k for k in diff if role_of(k, encoding) == EXPERIMENT]
    if refused:
        details = "; ".join(f"{k}: checkpoint={diff[k][0]!r} config={diff[k][1]!r}" for k in refused)
        raise CheckpointError(
            f"{ckpt_path} was trained with a different model or data than {config_path}: {details}. "
            f"Drop --config (the checkpoint carries its own) or pick the matching config."
        )
    raw = to_dict(ckpt_cfg)
    for key, (_, value) in diff.items():
        if may_change(key, "test", encoding):
            *sections, last = key.split(".")
            node = raw
            for part in sections:
                node = node[part]
            node[last] = value
    return load_config(raw=raw)

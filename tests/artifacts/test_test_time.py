"""The config a trained model is tested under (artifacts/test_time.py): its own, with only the keys
that cannot change the trained model taken from --set or from a --config given beside it; anything
else refused in one line naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from artifacts.checkpoint import CheckpointError
from artifacts.test_time import check_model_matches
from artifacts.test_time import test_time_config as config_for_a_test
from settings.config import load_config, to_dict

DEMO = Path(__file__).resolve().parents[2] / "configs" / "demo" / "rope.yaml"


def saved() -> dict:
    return to_dict(load_config(DEMO))


def test_decoding_keys_may_change_and_the_trained_value_again_is_fine() -> None:
    cfg = config_for_a_test(saved(), ["decoding.beam_size=2", "decoding.length_penalty=avg"], "best.pt")
    assert (cfg.decoding.beam_size, cfg.decoding.length_penalty) == (2, "avg")
    same = config_for_a_test(saved(), [f"model.d_model={saved()['model']['d_model']}"], "best.pt")
    assert to_dict(same) == saved()


@pytest.mark.parametrize(
    "override, says",
    [
        ("model.d_model=64", "part of what the model was trained with"),
        ("training.lr=0.5", "a training setting"),
        ("seed=99", "the seed the model was trained with"),
    ],
)
def test_what_would_score_another_model_is_refused_naming_the_key(override: str, says: str) -> None:
    with pytest.raises(CheckpointError) as refused:
        config_for_a_test(saved(), [override], "runs/x/checkpoints/best.pt")
    message = str(refused.value)
    key = override.split("=")[0]
    assert message.startswith("--set refused: ") and f"{key}=" in message and says in message
    assert "runs/x/checkpoints/best.pt has" in message and "\n" not in message


def test_a_config_beside_the_model_gives_its_test_time_keys_only(tmp_path: Path) -> None:
    trained = load_config(DEMO)
    given = tmp_path / "given.yaml"
    given.write_text(
        yaml.safe_dump({"base": str(DEMO), "decoding": {"beam_size": 3}, "training": {"lr": 0.5}, "seed": 42})
    )
    cfg = check_model_matches(load_config(given), str(given), trained, Path("best.pt"))
    assert cfg.decoding.beam_size == 3 and cfg.training.lr == trained.training.lr and cfg.seed == trained.seed
    other = tmp_path / "other.yaml"
    other.write_text(yaml.safe_dump({"base": str(DEMO), "model": {"d_model": 64}}))
    with pytest.raises(CheckpointError, match=r"different model or data than .*model.d_model: checkpoint=128"):
        check_model_matches(load_config(other), str(other), trained, Path("best.pt"))

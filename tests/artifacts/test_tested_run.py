"""What a test recorded of the model it scored, held against the run's other records
(artifacts/tested_run.py): the validation record a run's best checkpoint was chosen by, a test left
stale by more training (judged from metrics.jsonl alone, as for an archived run without
checkpoints), and the experiment keys an edited config.yaml states otherwise than what was trained.
Through the commands: tests/guarantees/test_result_labels.py."""

from __future__ import annotations

from artifacts.tested_run import best_validation, recorded_model, stale_test, untrained_changes

BEST_AT_6 = {"checkpoint": "runs/r/checkpoints/best_checkpoint_6_valid_loss=-5.0.pt"}


def valid(step: int, loss: float) -> dict:
    return {"event": "valid", "step": step, "valid_loss": loss}


def test_the_best_validation_record_by_the_checkpoint_metric() -> None:
    records = [
        {"step": 100, "valid_loss": 3.0, "valid_bleu": 10.0},
        {"step": 200, "valid_loss": 2.5, "valid_bleu": 9.0},
        {"step": 300, "valid_loss": float("nan"), "valid_bleu": None},
    ]
    assert best_validation(records, "valid_loss")["step"] == 200  # lower is better
    assert best_validation(records, "valid_bleu")["step"] == 100  # higher is better
    assert best_validation([], "valid_loss") is None
    assert best_validation([{"step": 5, "valid_bleu": None}], "valid_bleu")["step"] == 5  # none scored: the last


def test_a_test_is_stale_once_a_later_validation_is_better() -> None:
    trained_further = [valid(3, 5.5), valid(6, 5.0), valid(9, 4.0), {"event": "end", "step": 60}]
    why = stale_test(BEST_AT_6, trained_further, "valid_loss", "test")
    assert why == (
        "test/ scored the checkpoint of step 6 (best_checkpoint_6_valid_loss=-5.0.pt), but training went on "
        "to step 60 and its best checkpoint is now the one of step 9 (by valid_loss)"
    )
    assert stale_test(BEST_AT_6, trained_further, "valid_loss", "test_beam1") is not None  # a variant too
    # still the best (a later validation worse, or equal): current
    assert stale_test(BEST_AT_6, [valid(3, 5.5), valid(6, 5.0), valid(9, 5.2)], "valid_loss", "test") is None
    assert stale_test(BEST_AT_6, [valid(6, 5.0), valid(9, 5.0)], "valid_loss", "test") is None
    # tested at its last checkpoint (no finite score yet): stale once training went on
    last = {"checkpoint": "r/checkpoints/last_checkpoint_6.pt"}
    assert stale_test(last, [valid(6, float("nan")), valid(9, float("nan"))], "valid_loss", "test") is not None
    assert stale_test(last, [valid(6, float("nan"))], "valid_loss", "test") is None


def test_a_checkpoint_chosen_by_name_is_never_stale() -> None:
    further = [valid(6, 5.0), valid(9, 4.0)]
    assert stale_test(BEST_AT_6, further, "valid_loss", "test_best_checkpoint_6_valid_loss=-5.0") is None
    for checkpoint in ("r/checkpoints/averaged_last3.pt", "exports/rope", None):
        assert stale_test({"checkpoint": checkpoint}, further, "valid_loss", "test") is None


def test_what_config_yaml_says_against_what_was_trained() -> None:
    scores = {
        "positional": "sinusoidal",
        "model": {"d_model": 32, "dropout": 0.1, "positional": {"name": "sinusoidal"}},
    }
    trained = recorded_model(scores)
    assert untrained_changes(trained, {"model": {"d_model": 32, "positional": {"name": "sinusoidal"}}}) == []
    assert untrained_changes(trained, {"model": {"d_model": 32, "positional": {"name": "none"}}}) == [
        ("model.positional.name", "sinusoidal", "none")
    ]
    assert untrained_changes(trained, {"model": {"d_model": 64}}) == [("model.d_model", 32, 64)]
    assert untrained_changes(recorded_model({"positional": "rope"}), {"model": {"positional": {"name": "none"}}}) == [
        ("model.positional.name", "rope", "none")
    ]  # an older test records the encoding's name only
    assert untrained_changes(recorded_model({}), {"model": {"d_model": 64}}) == []  # nothing recorded

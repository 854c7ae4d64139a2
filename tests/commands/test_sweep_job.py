"""One run of a sweep (commands/sweep_job.py): it is tested with the overrides that may change at test
time only (decoding, evaluation, the device, an encoding's inference keys); the rest made the run."""

from __future__ import annotations

from commands.sweep_job import overrides_for_testing


def test_sweep_tests_with_the_test_time_overrides_only() -> None:
    overrides = [
        "seed=3",
        "run_dir=runs/x",
        "model.d_model=64",
        "training.max_steps=5",
        "data.max_train_pairs=100",
        "decoding.beam_size=2",
        "evaluation.concat=[1, 2]",
        "training.device=cpu",
    ]
    assert overrides_for_testing(overrides, "rope") == [
        "decoding.beam_size=2",
        "evaluation.concat=[1, 2]",
        "training.device=cpu",
    ]
    assert overrides_for_testing(["model.positional.inference_shift=0"], "shape") == [
        "model.positional.inference_shift=0"
    ]

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


def test_a_variant_is_tested_again_when_its_settings_change(trained_run, tmp_path, capsys) -> None:
    """Issue 67: `--variant v decoding.beam_size=1`, then the same sweep with beam_size=3, said "test_v is
    scored: skipped" and kept the beam-1 row; the variant's recorded settings are now compared with
    the requested ones, as the main test's are."""
    import json

    from helpers import copy_of

    from commands.sweep_job import score_variants
    from commands.sweep_plan import check_variants
    from utils.stored_files import read_text

    run = copy_of(trained_run, tmp_path / "run")
    sets = ["decoding.max_len_b=5"]  # (test-time keys: what the sweep passes its variants)

    def beam_of_variant() -> int:
        return json.loads(read_text(run / "test_v" / "scores.json"))["decoding"]["beam_size"]

    assert score_variants(run, check_variants([["v", "decoding.beam_size=1"]]), sets) == 0
    assert beam_of_variant() == 1
    capsys.readouterr()
    assert score_variants(run, check_variants([["v", "decoding.beam_size=1"]]), sets) == 0  # the same: skipped
    assert f"{run / 'test_v'} is scored: skipped" in capsys.readouterr().out
    assert score_variants(run, check_variants([["v", "decoding.beam_size=3"]]), sets) == 0
    assert (
        "was scored with other test-time settings (decoding.beam_size: 1 -> 3): tested again" in capsys.readouterr().out
    )
    assert beam_of_variant() == 3

"""A sweep's runs typed once (commands/sweep_plan.py): each config validated once, its seeds and run
folders typed updates of it, each variant planned for each run; a job carries its run as planned.
(The validations of a whole sweep are counted in tests/commands/test_sweep.py.)"""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
from helpers import ROOT, tiny_overrides, validations_by_command

from commands.sweep_plan import check_variants, expand_runs, plan_variants
from settings.config import ConfigError

DEMO = str(ROOT / "configs/demo/rope.yaml")


def test_each_config_is_validated_once_for_all_its_seeds(tmp_path: Path, monkeypatch) -> None:
    counted = validations_by_command(monkeypatch)
    runs = expand_runs([DEMO], ["training.max_steps=7"], [1, 2, 3], str(tmp_path))
    assert counted == {"sweep": 1}
    assert [(r.cfg.seed, r.run_dir) for r in runs] == [(s, tmp_path / f"demo/rope_seed{s}") for s in (1, 2, 3)]
    assert [o.text for o in runs[0].overrides] == [
        "training.max_steps=7",
        "seed=1",
        f"run_dir={tmp_path}/demo/rope_seed1",
    ]
    assert {r.cfg.training.max_steps for r in runs} == {7}
    with pytest.raises(ConfigError, match=r"^--set seed=-1: seed must be at least 0, got -1$"):
        expand_runs([DEMO], [], [-1], None)


def test_a_variant_is_planned_once_for_each_run(monkeypatch) -> None:
    (run,) = expand_runs([DEMO], [], None, None)
    counted = validations_by_command(monkeypatch)
    (planned,) = plan_variants(
        [run], check_variants([["b1", "decoding.beam_size=1"], ["off", "model.positional.nope=1"]])
    )
    assert counted == {"sweep": 2}
    greedy, off = planned.variants
    assert greedy.tested.decoding.beam_size == 1 and greedy.tested.model == run.cfg.model
    assert off.tested is None and "nope" in off.why_not  # not a key of this encoding: not tested there
    with pytest.raises(ConfigError, match=r"^--variant wide: --set refused: model.d_model=64"):
        plan_variants([run], check_variants([["wide", "model.d_model=64"]]))
    assert pickle.loads(pickle.dumps(planned)) == planned  # as submitit pickles a job


def test_a_job_runs_the_config_its_sweep_validated(tmp_path: Path) -> None:
    """A job carries its run typed (commands/sweep_plan.py: RunPlan, pickled as submitit pickles it):
    a config file edited, even broken, while the job waits (a SLURM queue, --parallel) is never read
    by it; it runs what the sweep checked. The next sweep reads the edited file."""
    from commands.sweep_job import SweepJob, run_one
    from settings.config import dump_config, load_config

    config = tmp_path / "rope.yaml"
    dump_config(load_config(ROOT / "configs/demo/rope.yaml"), config)
    sets = tiny_overrides(tmp_path / "run", tmp_path / "cache", steps=2)[1::2]
    (plan,) = expand_runs([str(config)], sets, None, None)
    job = pickle.loads(pickle.dumps(SweepJob(plan.absolute(), workdir=str(tmp_path))))
    config.write_text("model: [not, a, section\n", encoding="utf-8")
    assert run_one(job.plan).status == "scored"
    assert load_config(tmp_path / "run" / "config.yaml") == plan.absolute().cfg

"""Which runs the study runner trains now (tools/study_plan.py): a study's configurations, a fixed
plan's missing seeds, a sequential plan's next look for the comparisons still open, nothing once it
stopped."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

from tests.helpers import ROOT, run
from tests.in_process import run_in_process

COMMIT = "f" * 40


def plan(study: str, results: Path, at_most=None) -> list[tuple[str, str, str]]:
    """What `tools/study_plan.py STUDY COMMIT --results RESULTS [--at_most N]` prints, line by line."""
    from tools.study_plan import main

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main([study, COMMIT, "--results", str(results), *(["--at_most", str(at_most)] if at_most else [])]) == 0
    return [tuple(line.split()) for line in printed.getvalue().splitlines()]


def archive(results: Path, *runs: str, commit: str = COMMIT) -> None:
    for name in runs:
        (results / name).mkdir(parents=True)
        (results / name / "provenance.json").write_text(json.dumps({"code": {"commit": commit}}))


def summary(results: Path, reached: int, stopped: bool, open_configs: tuple[str, ...]) -> None:
    rows = [{"config": f"demo_confirm/{c}", "look": {"decided": c not in open_configs}} for c in ("learnable", "rope")]
    findings = {
        "baseline": "demo_confirm/sinusoidal",
        "sequential": {"looks": [8, 12, 16, 20], "reached": reached, "stopped": stopped},
        "tables": [{"rows": rows}],
    }
    (results / "summary_findings.json").write_text(json.dumps(findings))


def test_a_fixed_plan_trains_every_missing_seed_of_its_configurations(tmp_path: Path) -> None:
    results = tmp_path / "length"
    archive(results, "sinusoidal", "rope_seed1")
    archive(results, "alibi", commit="0" * 40)  # trained from another commit: not this study's
    units = plan("length", results)
    configs = sorted({c for c, _, _ in units})
    # the family's baseline and the configurations its entries name (not every config of the folder)
    assert configs == ["alibi", "learnable", "rope", "sinusoidal", "sinusoidal_concat", "t5_bias"]
    assert units[0] == ("alibi", "1234", "alibi")  # seed-major, the baseline first within a seed
    assert units[5] == ("sinusoidal", "1", "sinusoidal_seed1")
    assert ("sinusoidal", "1234", "sinusoidal") not in units and ("rope", "1", "rope_seed1") not in units
    assert ("alibi", "1234", "alibi") in units and len(units) == 6 * 12 - 2
    # a folder whose entries name none: every config that is no other's base (configs/demo/base.yaml)
    assert sorted({c for c, _, _ in plan("demo", tmp_path / "demo")}) == ["learnable", "rope", "sinusoidal"]


def test_a_sequential_plan_trains_its_next_look_for_the_comparisons_still_open(tmp_path: Path) -> None:
    results = tmp_path / "demo_confirm"
    results.mkdir()
    first = plan("demo_confirm", results)  # no summary yet: the first look, every configuration
    assert len(first) == 8 * 3 and first[:3] == [(c, "101", c) for c in ("sinusoidal", "learnable", "rope")]
    summary(results, reached=1, stopped=False, open_configs=("rope",))  # learnable decided at look 1
    archive(results, *(f"{c}_seed{s}" for s in range(102, 109) for c in ("sinusoidal", "learnable", "rope")))
    archive(results, "sinusoidal", "learnable", "rope")
    units = plan("demo_confirm", results)
    assert [(c, s) for c, s, _ in units] == [(c, str(s)) for s in range(109, 113) for c in ("sinusoidal", "rope")]
    summary(results, reached=2, stopped=True, open_configs=())
    assert plan("demo_confirm", results) == []  # stopped: nothing more


def test_a_study_without_a_family_is_one_line() -> None:
    proc = run([str(ROOT / "tools" / "study_plan.py"), "no_such_study", COMMIT])
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "configs/no_such_study/findings/headline.yaml" in proc.stderr


def test_a_gpu_wave_is_whole_seeds(tmp_path: Path) -> None:
    results = tmp_path / "demo_confirm"
    results.mkdir()
    seeds = [seed for _, seed, _ in plan("demo_confirm", results, at_most=7)]
    assert seeds == ["101"] * 3 + ["102"] * 3  # a third seed would make 9 runs
    assert len(plan("demo_confirm", results, at_most=2)) == 3  # the first seed whole in any case


def test_a_summary_of_another_plan_is_one_line(tmp_path: Path) -> None:
    """Never a traceback: a summary of a longer plan (more looks than the family's), a summary that is
    not JSON, and every run of a look archived with no summary that reaches it (a deleted one) are one
    line naming the summary and the compare.py command that computes it again."""
    results = tmp_path / "demo_confirm"
    results.mkdir()
    summary(results, reached=4, stopped=False, open_configs=("rope",))
    findings = json.loads((results / "summary_findings.json").read_text())
    findings["sequential"]["looks"] = [8, 12, 16, 20, 24]  # a plan of five looks, reached its fourth
    (results / "summary_findings.json").write_text(json.dumps(findings))
    script = str(ROOT / "tools" / "study_plan.py")
    for broken in (None, "{not json"):
        if broken:
            (results / "summary_findings.json").write_text(broken)
        proc = run_in_process([script, "demo_confirm", COMMIT, "--results", str(results)])
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert "summary_findings.json" in proc.stderr and "compare.py 'results/demo_confirm/*'" in proc.stderr
        assert broken or "computed for the looks [8, 12, 16, 20, 24], the family declares [8, 12, 16, 20]" in (
            proc.stderr
        )
    (results / "summary_findings.json").unlink()  # deleted after the first look was archived
    archive(results, *(f"{c}_seed{s}" for s in range(102, 109) for c in ("sinusoidal", "learnable", "rope")))
    archive(results, "sinusoidal", "learnable", "rope")
    proc = run_in_process([script, "demo_confirm", COMMIT, "--results", str(results)])
    assert proc.returncode == 2 and proc.stdout == "" and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "does not reach it" in proc.stderr and "compare.py" in proc.stderr


def test_a_family_without_a_baseline_names_its_entries_configurations() -> None:
    """A family that declares no baseline (compare.py then takes its default) and names configurations:
    those, never a crash on the missing baseline."""
    from study.read.family import Family, HeadlineEntry
    from tools.study_plan import configurations

    family = Family(headline=(HeadlineEntry(table="test", configs=("demo/rope", "demo/learnable")),), rule="beyond_tie")
    assert configurations("demo", family) == ["learnable", "rope"]

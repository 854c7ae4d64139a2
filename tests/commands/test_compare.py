"""compare.py over real run folders: two demo configs x two seeds trained and tested by sweep.py,
as submitit jobs on this machine, two at a time (--launcher local --parallel 2).

The runs are tiny (a few training steps on a few hundred pairs), so their scores mean nothing;
what is checked is that the table reports exactly the runs' own numbers, groups seeds into one
row per configuration, writes agreeing Markdown/CSV/JSON files and real plots, and that the
paired bootstrap test behaves (a system against itself is not significant).
"""

from __future__ import annotations

import csv
import json
import shutil
import statistics
from pathlib import Path

import pytest
from helpers import ROOT, read_jsonl, rewrite_test_output, tiny_overrides, with_sets

from commands import compare
from commands.cli import main_guard
from study.judge.wording import format_p
from study.read import run_groups, run_records

CONFIGS = {"demo/sinusoidal": "configs/demo/sinusoidal.yaml", "demo/rope": "configs/demo/rope.yaml"}
SEEDS = (1, 2)
SCORE_KEYS = ("sacrebleu", "chrf", "nltk_bleu4")
# RoPE scaled at test time, no retraining: only the rope runs take the keys
VARIANT = ["--variant", "ntk3", "model.positional.scaling=ntk", "model.positional.scaling_factor=3"]


def sweep_overrides(cache_dir: Path) -> list[str]:
    """The end-to-end test's tiny settings, minus run_dir (sweep derives one folder per seed)."""
    sets = [
        x for v in tiny_overrides(Path("unused"), cache_dir)[1::2] if not v.startswith("run_dir=") for x in ("--set", v)
    ]
    # the length protocol, through sweep -> test -> compare; 20 test pairs, so that k = 2 has the 10
    # inputs a bootstrap test needs (study/stats/seed_test.py: MIN_SENTENCES)
    return with_sets(sets, "evaluation.concat=[1,2]", "data.test_size=20")


@pytest.fixture(scope="module")
def swept(tmp_path_factory) -> Path:
    """sweep.py in this process (tests/in_process.py); its four jobs are processes of their own, as
    always with the local launcher, which looks at them every 0.1 s here instead of 2 s."""
    from in_process import run_in_process

    from commands import launchers

    base = tmp_path_factory.mktemp("sweep")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(launchers, "POLL_SECONDS", 0.1)
        proc = run_in_process(
            [
                "sweep.py",
                *CONFIGS.values(),
                "--seeds",
                *map(str, SEEDS),
                "--runs_root",
                str(base / "runs"),
                *sweep_overrides(base / "cache"),
                "--output",
                str(base / "summary"),
                *VARIANT,
                "--launcher",
                "local",
                "--parallel",
                "2",
            ]
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (base / "stdout.txt").write_text(proc.stdout)
    return base


def run_dir(base: Path, name: str, seed: int) -> Path:
    return base / "runs" / f"{name}_seed{seed}"


def scores_of(base: Path, name: str) -> list[dict]:
    return [json.loads((run_dir(base, name, s) / "test" / "scores.json").read_text()) for s in SEEDS]


def plain_groups(report: dict) -> dict[str, dict]:
    """The summary's configurations by label, without the variants (a run tested again with
    test-time settings: test_a_variant_is_each_rope_run_tested_again_and_a_row_of_its_own)."""
    return {g["label"]: g for g in report["groups"] if "[" not in g["label"]}


def md_row(markdown: str, label: str) -> dict[str, str]:
    lines = markdown.splitlines()
    main = next(i for i, line in enumerate(lines) if line.startswith("| config | encoding |"))  # the main table
    header = [c.strip() for c in lines[main].strip("|").split("|")]
    row = next(line for line in lines[main:] if line.startswith(f"| {label} |"))
    return dict(zip(header, (c.strip() for c in row.strip("|").split("|"))))


@pytest.mark.slow
def test_sweep_trains_each_config_once_per_seed(swept: Path) -> None:
    for name in CONFIGS:
        for seed in SEEDS:
            folder = run_dir(swept, name, seed)
            assert (folder / "test" / "scores.json").is_file(), folder
            cfg = (folder / "config.yaml").read_text()
            assert f"seed: {seed}\n" in cfg and f"run_dir: {folder}" in cfg


@pytest.mark.slow
def test_the_local_launcher_runs_two_jobs_at_a_time(swept: Path) -> None:
    """Four runs as four submitit jobs (their logs under the sweep's folder), the second started
    before the first ended, never more than two at once."""
    events = [
        line.split("sweep: ", 1)[1]
        for line in (swept / "stdout.txt").read_text().splitlines()
        if "sweep: " in line and ("started" in line or "ended)" in line)
    ]
    running, most = 0, 0
    for event in events:
        running += 1 if event.startswith("started") else -1
        most = max(most, running)
    assert sum(e.startswith("started") for e in events) == 4 and most == 2, events
    assert len(list((swept / "submitit").glob("*/*_log.out"))) == 4  # one folder per sweep command
    assert len(list((swept / "submitit").glob("*/*_result.pkl"))) == 4


@pytest.mark.slow
def test_one_row_per_config_holds_the_runs_own_numbers(swept: Path) -> None:
    report = json.loads((swept / "summary.json").read_text())
    groups = plain_groups(report)
    assert set(groups) == set(CONFIGS)
    markdown = (swept / "summary.md").read_text()
    assert markdown.split("\n\n")[0] in (swept / "stdout.txt").read_text()  # the terminal shows the same table
    for name, g in groups.items():
        assert g["n"] == 2 and g["seeds"] == list(SEEDS)
        assert g["runs"] == [str(run_dir(swept, name, s)) for s in SEEDS]
        scores = scores_of(swept, name)
        row = md_row(markdown, name)
        assert row["seeds"] == "2"
        for key in SCORE_KEYS:
            values = [s[key] for s in scores]
            mean, std = statistics.mean(values), statistics.stdev(values)
            assert g["mean"][key] == pytest.approx(mean) and g["std"][key] == pytest.approx(std)
            assert [r[key] for r in g["per_run"]] == values
        bleu = [s["sacrebleu"] for s in scores]
        assert row["test sacreBLEU"] == f"{statistics.mean(bleu):.2f} ± {statistics.stdev(bleu):.2f}"
        speeds = [
            statistics.mean(
                r["tokens_per_sec"]
                for r in read_jsonl(run_dir(swept, name, s) / "metrics.jsonl")
                if r["event"] == "train"
            )
            for s in SEEDS
        ]
        assert g["mean"]["tokens_per_sec"] == pytest.approx(statistics.mean(speeds))
        assert g["std"]["tokens_per_sec"] == pytest.approx(statistics.stdev(speeds))
        buckets = g["by_source_length"]
        assert [b["bucket"] for b in buckets] == [b["bucket"] for b in scores[0]["by_source_length"]]
    # sinusoidal is the default baseline; the other row carries a p-value in (0, 1]
    assert report["baseline"] == "demo/sinusoidal" and groups["demo/sinusoidal"]["p_value"] is None
    assert 0.0 < groups["demo/rope"]["p_value"] <= 1.0
    assert md_row(markdown, "demo/sinusoidal")["p vs baseline"] == "baseline"
    assert md_row(markdown, "demo/rope")["p vs baseline"] == format_p(groups["demo/rope"]["p_value"])
    # same-seed comparison against the baseline, from the runs' own scores
    wins = sum(
        r["sacrebleu"] > b["sacrebleu"]
        for r, b in zip(scores_of(swept, "demo/rope"), scores_of(swept, "demo/sinusoidal"))
    )
    assert groups["demo/rope"]["seeds_above"] == [wins, len(SEEDS)]
    assert md_row(markdown, "demo/rope")["seeds above baseline"] == f"{wins}/{len(SEEDS)}"
    assert md_row(markdown, "demo/sinusoidal")["seeds above baseline"] == "baseline"
    assert "Test sacreBLEU by source length" in markdown
    # test.py's teacher-forced diagnostic (on by default) reaches the table: tests/evaluation/test_teacher_forced.py
    assert (
        "TF NLL beyond training" in next(x for x in markdown.splitlines() if x.startswith("| config | encoding |"))
        and "Teacher-forced NLL by target position" in markdown
    )


@pytest.mark.slow
def test_per_k_table_holds_the_runs_own_numbers(swept: Path) -> None:
    report = json.loads((swept / "summary.json").read_text())
    groups = plain_groups(report)
    markdown = (swept / "summary.md").read_text()
    assert "Length extrapolation" in markdown and "| k=1 | k=2 |" in markdown
    per_seed = {name: [{c["k"]: c for c in s["concat"]} for s in scores_of(swept, name)] for name in CONFIGS}
    section = markdown.split("Length extrapolation")[1].split("\n\n")[1]  # the per-k BLEU table
    for name, g in groups.items():
        for k in (1, 2):
            bleu = [s[k]["sacrebleu"] for s in per_seed[name]]
            ratio = [s[k]["length_ratio"] for s in per_seed[name]]
            stats = g["concat"][str(k)]  # JSON keys are strings
            assert stats["bleu"] == pytest.approx(statistics.mean(bleu))
            assert stats["bleu_std"] == pytest.approx(statistics.stdev(bleu))
            assert stats["ratio"] == pytest.approx(statistics.mean(ratio))
            assert md_row(section, name)[f"k={k}"] == f"{statistics.mean(bleu):.2f} ± {statistics.stdev(bleu):.2f}"
        # k = 1 is the sentence-level test set, in test order: the same corpus score
        assert [s[1]["sacrebleu"] for s in per_seed[name]] == [s["sacrebleu"] for s in scores_of(swept, name)]
    for k in (1, 2):
        rope = groups["demo/rope"]["concat"][str(k)]
        wins = sum(
            r[k]["sacrebleu"] > b[k]["sacrebleu"] for r, b in zip(per_seed["demo/rope"], per_seed["demo/sinusoidal"])
        )
        assert rope["seeds_above"] == [wins, len(SEEDS)] and 0.0 < rope["p_value"] <= 1.0
        assert groups["demo/sinusoidal"]["concat"][str(k)]["p_value"] is None


def test_seeds_above_baseline_pairs_runs_by_seed() -> None:
    from study.records import Configuration, RunRecord, frozen_map

    def group(label, *runs):
        return Configuration(
            tuple(RunRecord(run=label, seed=s, scores=frozen_map({"sacrebleu": b})) for s, b in runs), label
        )

    baseline = group("base", (1, 20.0), (2, 25.0), (3, 30.0))
    better_on_shared = group("better", (2, 26.0), (3, 29.0), (4, 99.0))  # seed 4 has no partner: not counted
    tie = group("tie", (1, 20.0))  # a tie is not "above"
    unpaired = group("unpaired", (7, 50.0))
    unscored = group("unscored", (1, None))
    groups = [baseline, better_on_shared, tie, unpaired, unscored]
    base, better_on_shared, tie, unpaired, unscored = run_groups.add_seed_wins(groups, baseline)
    assert better_on_shared.seeds_above == (1, 2)
    assert tie.seeds_above == (0, 1)
    assert unpaired.seeds_above is None and unscored.seeds_above is None
    assert base is baseline and base.seeds_above is None and groups[1].seeds_above is None  # inputs unchanged


@pytest.mark.slow
def test_csv_and_json_agree(swept: Path) -> None:
    report = json.loads((swept / "summary.json").read_text())
    with open(swept / "summary.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["label"] for r in rows] == [g["label"] for g in report["groups"]]
    for r, g in zip(rows, report["groups"]):
        assert int(r["n"]) == g["n"] and r["runs"].split(";") == g["runs"]
        for key in ("sacrebleu", "chrf", "nltk_bleu4", "valid_loss", "params", "tokens_per_sec"):
            assert float(r[key]) == pytest.approx(g["mean"][key]), key
            assert float(r[f"{key}_std"]) == pytest.approx(g["std"][key]), key
        assert (r["p_value"] == "") == (g["p_value"] is None)
        if g["seeds_above"] is not None:
            assert [int(r["seeds_above"]), int(r["seeds_compared"])] == g["seeds_above"]
        if g["p_value"] is not None:
            assert float(r["p_value"]) == pytest.approx(g["p_value"])
        for k in (1, 2):  # the per-k columns of the length protocol
            assert float(r[f"k{k}_bleu"]) == pytest.approx(g["concat"][str(k)]["bleu"])
            assert float(r[f"k{k}_ratio"]) == pytest.approx(g["concat"][str(k)]["ratio"])


@pytest.mark.slow
def test_plots_are_real_images(swept: Path) -> None:
    import matplotlib.image as mpimg

    for suffix in (
        "_bleu.png",
        "_length_buckets.png",
        "_concat.png",
        "_degradation.png",
        "_teacher_forced.png",
        "_curves.png",
    ):
        pixels = mpimg.imread(swept / f"summary{suffix}")
        assert pixels.ndim == 3 and pixels.shape[0] > 100 and pixels.shape[1] > 100, suffix
        assert pixels[..., :3].std() > 0.01, f"{suffix} is blank"


@pytest.mark.slow
def test_bootstrap_of_a_system_against_itself_is_not_significant(swept: Path) -> None:
    from study.stats.significance import paired_bootstrap_seeds, sentence_stats

    test_dir = run_dir(swept, "demo/rope", 1) / "test"
    hyps = (test_dir / "hypotheses.txt").read_text().splitlines()
    refs = (test_dir / "references.txt").read_text().splitlines()
    stats = sentence_stats(hyps, refs)
    assert paired_bootstrap_seeds([stats], [stats], 1000).p_value == 1.0
    # and the test can tell: the references themselves are far better than a 6-step model
    assert paired_bootstrap_seeds([sentence_stats(refs, refs)], [stats], 1000).p_value < 0.05


@pytest.mark.slow
def test_findings_give_one_p_per_comparison(swept: Path) -> None:
    """The findings file holds every seed's p and one test over the seeds; the main table and the
    k = 1 column print that one p (k = 1 is the test set), the k = 2 column the findings' k = 2 p."""
    findings = json.loads((swept / "summary_findings.json").read_text())
    report = json.loads((swept / "summary.json").read_text())
    assert findings["baseline"] == "demo/sinusoidal" and findings["n_samples"] == 10000
    tables = {t["name"]: t for t in findings["tables"]}
    assert set(tables) == {"degradation", "test", "concat", "buckets", "teacher_forced"}
    (pooled,) = [
        r
        for r in tables["degradation"]["rows"]
        if r["config"] == "demo/rope" and r["compared_on"] == "degradation, all k"
    ]
    assert pooled["seeds"] == [1, 2] and pooled["lower_is_better"] and pooled["num_sentences"] >= 10
    (nll,) = [r for r in tables["teacher_forced"]["rows"] if r["config"] == "demo/rope"]
    assert nll["seeds"] == [1, 2] and nll["lower_is_better"] and nll["num_sentences"] >= 1  # inputs with tokens there
    assert len(nll["per_seed"]) == 2 or nll["finding"].startswith("not tested")  # the tiny test set: few such inputs
    (test_row,) = [r for r in tables["test"]["rows"] if r["config"] == "demo/rope"]
    assert test_row["config"] == "demo/rope" and test_row["seeds"] == [1, 2]
    assert [s["seed"] for s in test_row["per_seed"]] == [1, 2] and all(s["p_value"] for s in test_row["per_seed"])
    rope = next(g for g in report["groups"] if g["label"] == "demo/rope")
    assert rope["p_value"] == test_row["p_value"] == rope["concat"]["1"]["p_value"]
    (k2,) = [r for r in tables["concat"]["rows"] if r["config"] == "demo/rope"]
    assert k2["compared_on"] == "k=2" and rope["concat"]["2"]["p_value"] == k2["p_value"]
    assert test_row["finding"] in (swept / "summary_findings.md").read_text()
    assert test_row["p_value"] == test_row["seed_test"]["p_value"] and 0 < test_row["p_value"] <= 1
    # no family declared (a sweep without --family): no Holm, no direction, every row descriptive
    rows = [r for t in tables.values() for r in t["rows"]]
    assert all(r["p_holm"] is None and not r["declared"] for r in rows)
    assert not any(r["finding"].startswith(("ahead", "behind")) for r in rows)
    tested = [r for r in rows if r.get("seed_test") and r["seed_test"]["se"] is not None]
    assert tested and all(r["detectable"] >= 0 for r in tested)  # every tested row: its own detectable effect
    # a bucket too small to resample is reported as not tested, never as significant
    small = [r for r in tables["buckets"]["rows"] if r["num_sentences"] < 10]
    assert small and all(r["p_value"] is None and r["finding"].startswith("not tested") for r in small)


@pytest.mark.slow
def test_a_declared_family_gets_holm_and_its_sentences(swept: Path, tmp_path: Path) -> None:
    """--family: the declared rows alone are Holm-corrected (over the family), the others stay
    undeclared; compare.py writes the result sentences from the findings."""
    family = tmp_path / "headline.yaml"
    family.write_text("headline:\n  - {table: test, compared_on: test set}\n  - {table: concat, compared_on: k=2}\n")
    runs = [str(run_dir(swept, n, s)) for n in CONFIGS for s in SEEDS]
    assert compare.main([*runs, "--family", str(family), "--output", str(tmp_path / "fam")]) == 0
    findings = json.loads((tmp_path / "fam_findings.json").read_text())
    declared = [r for t in findings["tables"] for r in t["rows"] if r["declared"]]
    assert findings["family_size"] == len(declared) == 4  # 2 configurations x 2 comparisons
    assert {r["compared_on"] for r in declared} == {"test set", "k=2"}
    assert all(r["rule"] == "seed_veto" and r["p_holm"] >= r["p_rule"] for r in declared)  # (a file naming no rule)
    assert min(r["p_holm"] for r in declared) == pytest.approx(min(1.0, 4 * min(r["p_rule"] for r in declared)))
    report = json.loads((tmp_path / "fam.json").read_text())
    rope = next(g for g in report["groups"] if g["label"] == "demo/rope")
    assert (
        rope["degradation"]["all k"]["n"] == 2 and "degradation" in (tmp_path / "fam.csv").read_text().splitlines()[0]
    )
    assert (tmp_path / "fam.md").read_text().startswith("Degradation: a test pair's")  # the first table
    headline = (tmp_path / "fam_headline.md").read_text()
    assert f"Declared family `{family}`: 4 comparisons" in headline and "| `demo/rope` | k=2 (BLEU) |" in headline


@pytest.mark.slow
def test_a_family_entry_that_matches_no_row_or_a_list_as_a_key_is_one_line(swept: Path, tmp_path: Path, capsys) -> None:
    """Issue 67: an entry compared on `test sett` (or with a non-breaking space) dropped out of the
    family silently ("1 comparisons"); a list used as a key was a traceback. Both: one line, exit 2."""
    runs = [str(run_dir(swept, n, s)) for n in CONFIGS for s in SEEDS]
    family = tmp_path / "typo.yaml"
    for label in ("test sett", "test\u00a0set"):
        family.write_text(
            f"headline:\n  - {{table: test, compared_on: {label}}}\n  - {{table: concat, compared_on: k=2}}\n"
        )
        capsys.readouterr()
        assert main_guard(compare.main, [*runs, "--family", str(family), "--bootstrap_samples", "20"]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"error: {family}: headline[0].compared_on {label!r} is no row of the test table")
        assert "'test set'" in err and len(err.splitlines()) == 1
    family.write_text("headline:\n  - {table: test}\n[a, b]: 1\n")
    assert main_guard(compare.main, [*runs, "--family", str(family), "--bootstrap_samples", "20"]) == 2
    err = capsys.readouterr().err.strip()
    assert "a list is used as a key on line 3" in err and len(err.splitlines()) == 1


def test_a_second_compare_into_one_output_set_refuses_in_one_line(swept: Path, tmp_path: Path, capsys) -> None:
    """One writer per output set (issue 67: two compare.py into one --output mixed their files): while
    a compare.py holds the set's lock, another refuses in one line naming it and writes nothing."""
    import multiprocessing

    from utils.publish import SetLock

    runs = [str(run_dir(swept, n, s)) for n in CONFIGS for s in SEEDS]
    prefix = tmp_path / "out" / "summary"
    context = multiprocessing.get_context("fork")
    held, done = context.Event(), context.Event()

    def first_writer() -> None:  # another process holds the set, as a compare.py writing it would
        with SetLock(prefix, "compare.py A --output out/summary"):
            held.set()
            done.wait(60)

    child = context.Process(target=first_writer)
    child.start()
    try:
        assert held.wait(30)
        capsys.readouterr()
        assert main_guard(compare.main, [*runs, "--no_significance", "--output", str(prefix)]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"error: {prefix} is being written by another process (PID {child.pid}: compare.py A")
        assert len(err.splitlines()) == 1 and not list(prefix.parent.glob("summary*"))
    finally:
        done.set()
        child.join()
    assert main_guard(compare.main, [*runs, "--no_significance", "--output", str(prefix)]) == 0  # released: written


@pytest.mark.slow
def test_baseline_option_and_refusal_on_different_references(swept: Path, tmp_path: Path, capsys) -> None:
    runs = [str(run_dir(swept, n, s)) for n in CONFIGS for s in SEEDS]
    assert compare.main([*runs, "--baseline", "rope", "--output", str(tmp_path / "by_rope")]) == 0
    report = json.loads((tmp_path / "by_rope.json").read_text())
    groups = {g["label"]: g for g in report["groups"]}
    assert report["baseline"] == "demo/rope" and groups["demo/rope"]["is_baseline"]
    assert groups["demo/sinusoidal"]["p_value"] is not None
    assert main_guard(compare.main, [*runs, "--baseline", "alibi"]) == 2
    assert "matches no configuration" in capsys.readouterr().err

    other = tmp_path / "other_test_set"
    shutil.copytree(run_dir(swept, "demo/rope", 2), other)
    refs = (other / "test" / "references.txt").read_text().splitlines()
    rewrite_test_output(other / "test" / "references.txt", "\n".join(["A different sentence.", *refs[1:]]) + "\n")
    assert main_guard(compare.main, [runs[0], str(other)]) == 2
    assert "references differ" in capsys.readouterr().err
    # the same check for the joined inputs of the length protocol (e.g. another concat_seed)
    other_k = tmp_path / "other_concat_order"
    shutil.copytree(run_dir(swept, "demo/rope", 2), other_k)
    k2 = other_k / "test" / "concat" / "k2" / "references.txt"
    rewrite_test_output(k2, "\n".join(reversed(k2.read_text().splitlines())) + "\n")
    assert main_guard(compare.main, [runs[0], str(other_k)]) == 2
    assert "k=2 references differ" in capsys.readouterr().err


def test_seed_suffixes_are_dropped_from_labels() -> None:
    for name in ("demo/rope_seed2", "demo/rope-s2", "demo/rope/seed2", "demo/rope_seed_12", "demo/rope"):
        assert run_records.config_label(name) == "demo/rope", name


def test_runtime_settings_do_not_split_a_configuration() -> None:
    base = {
        "seed": 1,
        "name": "a",
        "run_dir": "x",
        "model": {"d_model": 8},
        "training": {"lr": 1.0, "num_threads": 2, "device": "cpu"},
        "data": {"cache_dir": "c", "max_len": 5},
    }
    other_machine = {
        **base,
        "seed": 2,
        "training": {"lr": 1.0, "num_threads": 16, "device": "cuda"},
        "data": {"cache_dir": "/tmp/c", "max_len": 5},
    }
    other_lr = {**base, "training": {**base["training"], "lr": 2.0}}
    assert run_records.experiment_settings(base) == run_records.experiment_settings(other_machine)
    assert run_records.experiment_settings(base) != run_records.experiment_settings(other_lr)


@pytest.mark.slow
def test_a_variant_is_each_rope_run_tested_again_and_a_row_of_its_own(swept: Path) -> None:
    """sweep.py --variant tests every run whose encoding takes the keys into <run>/test_<name>/,
    recording the settings; compare.py makes those a configuration of their own, with the
    variant's own numbers, beside the run's plain row."""
    for seed in SEEDS:
        assert not (run_dir(swept, "demo/sinusoidal", seed) / "test_ntk3").exists()  # sinusoidal takes no scaling
        scores = json.loads((run_dir(swept, "demo/rope", seed) / "test_ntk3" / "scores.json").read_text())
        assert {
            k: scores["test_time_overrides"][k] for k in ("model.positional.scaling", "model.positional.scaling_factor")
        } == {"model.positional.scaling": "ntk", "model.positional.scaling_factor": 3}
    report = json.loads((swept / "summary.json").read_text())
    groups = {g["label"]: g for g in report["groups"]}
    label = "demo/rope [scaling=ntk, scaling_factor=3]"
    assert set(groups) == {"demo/sinusoidal", "demo/rope", label}
    variant = [json.loads((run_dir(swept, "demo/rope", s) / "test_ntk3" / "scores.json").read_text()) for s in SEEDS]
    assert groups[label]["n"] == 2
    assert groups[label]["mean"]["sacrebleu"] == pytest.approx(sum(v["sacrebleu"] for v in variant) / 2)
    plain = scores_of(swept, "demo/rope")
    assert groups["demo/rope"]["mean"]["sacrebleu"] == pytest.approx(sum(v["sacrebleu"] for v in plain) / 2)
    nll = [v["teacher_forced"]["k"]["1"]["buckets"][0]["nll"] for v in variant]
    assert nll != [v["teacher_forced"]["k"]["1"]["buckets"][0]["nll"] for v in plain]  # really scaled
    assert md_row((swept / "summary.md").read_text(), label)["seeds"] == "2"


def test_plots_tell_joined_pair_randomized_and_scaled_runs_apart() -> None:
    """Plot styles: one colour per encoding; joined-pair, randomized-position and scaled-at-inference
    configurations each get a line style and marker of their own (never a plain run's, nor each
    other's), scaled variants of one encoding distinct colours; one panel per kind."""
    from settings.config import from_raw
    from study.pages.comparison_plots import group_styles, panels_by_kind
    from study.records import Configuration, RunRecord

    def group(encoding, prob=0.0, randomized=False, variant=False):
        positional = {"name": "rope", "randomized": randomized}
        cfg = from_raw({"data": {"train_concat": {"prob": prob}}, "model": {"positional": positional}})
        return Configuration((RunRecord(run="r", config=cfg),), encoding, encoding, variant=variant)

    groups = [
        group("alibi"),
        group("alibi", prob=0.25),
        group("rope"),
        group("rope", randomized=True),
        group("rope", variant=True),
        group("rope", variant=True),
        group("xpos", prob=0.25),
    ]
    alibi, alibi_concat, rope, rope_randomized, linear, yarn, xpos_concat = group_styles(groups)
    assert alibi_concat.color == alibi.color and alibi.color != rope.color
    kinds = {(st.linestyle, st.marker) for st in (alibi, alibi_concat, rope_randomized, linear)}
    assert len(kinds) == 4 and rope_randomized.color == rope.color
    assert linear.color != yarn.color and xpos_concat.linestyle == alibi_concat.linestyle
    assert [k for k, _ in panels_by_kind(groups)] == [
        "single sentences",
        "joined pairs",
        "randomized positions",
        "scaled at inference",
    ]
    many = group_styles([group(f"e{i:02d}") for i in range(15)])
    assert len({str(st.color) for st in many}) == 15


def test_train_minutes_sum_every_session_of_a_resumed_run() -> None:
    """A run resumed after a kill: the killed session left no `end` record, so its time is counted
    from its `start` to its last record; each finished session by its own train_seconds."""
    from study.read.run_files_read import log_lines
    from study.read.run_stats import training_minutes

    records = [
        {"event": "start", "time": 100.0},
        {"event": "train", "time": 400.0},  # killed: 300 s
        {"event": "start", "time": 1000.0},
        {"event": "train", "time": 1100.0},
        {"event": "end", "time": 1130.0, "train_seconds": 120.0, "total_train_seconds": 120.0},
    ]
    assert training_minutes(log_lines(records)) == pytest.approx((300.0 + 120.0) / 60)
    assert training_minutes(log_lines(records[2:])) == pytest.approx(2.0)
    assert training_minutes(log_lines([{"event": "start", "time": 5.0}])) is None


@pytest.mark.slow
def test_an_earlier_summary_and_its_plots_are_replaced_only_with_overwrite(swept: Path, tmp_path: Path, capsys) -> None:
    """--overwrite means what it means for every command: replace what this command wrote before,
    and only that (a file of the prefix it did not write, or one edited since, is the user's). The
    same call again (after a kill, say) finds its outputs unchanged; another call needs --overwrite."""
    runs = [str(run_dir(swept, n, s)) for n in CONFIGS for s in SEEDS]
    prefix = tmp_path / "again"
    assert main_guard(compare.main, [*runs, "--no_significance", "--output", str(prefix)]) == 0
    before = (tmp_path / "again.md").read_bytes()
    capsys.readouterr()
    assert main_guard(compare.main, [*runs, "--no_significance", "--output", str(prefix)]) == 0  # the same call
    assert "already hold this comparison: unchanged" in capsys.readouterr().out
    assert main_guard(compare.main, [*runs[:-1], "--no_significance", "--output", str(prefix)]) == 2  # another
    assert "differ from this call's; pass --overwrite" in capsys.readouterr().err
    assert (tmp_path / "again.md").read_bytes() == before
    assert main_guard(compare.main, [*runs, "--no_significance", "--output", str(prefix), "--overwrite"]) == 0
    assert (tmp_path / "again.md").read_bytes() == before
    (tmp_path / "again.md").write_text("my notes\n")
    assert main_guard(compare.main, [*runs, "--no_significance", "--output", str(prefix), "--overwrite"]) == 2
    assert "was edited since compare.py wrote it" in capsys.readouterr().err
    assert (tmp_path / "again.md").read_text() == "my notes\n"
    for path in tmp_path.glob("again*"):
        path.unlink()
    (tmp_path / "again_bleu.png").write_bytes(b"a picture of mine")  # a plot's name alone is guarded too
    assert main_guard(compare.main, [*runs, "--no_significance", "--output", str(prefix)]) == 2
    assert main_guard(compare.main, [*runs, "--no_significance", "--output", str(prefix), "--overwrite"]) == 2
    assert "move it away or choose another --output" in capsys.readouterr().err  # not compare.py's as it wrote it
    assert (tmp_path / "again_bleu.png").read_bytes() == b"a picture of mine"


def test_a_baseline_that_contradicts_the_declared_family_is_refused() -> None:
    """--baseline rope with a family that declares sinusoidal would word the page as declared against
    another baseline: refused in one line; the declared one itself is taken."""
    from in_process import run_in_process

    runs = [str(ROOT / "results" / "demo" / name) for name in ("sinusoidal", "rope")]
    family = ["--family", "configs/demo/findings/headline.yaml", "--no_significance"]
    refused = run_in_process(["compare.py", *runs, *family, "--baseline", "rope"])
    assert refused.returncode == 2 and "contradicts the family's declared baseline sinusoidal" in refused.stderr
    assert run_in_process(["compare.py", *runs, *family, "--baseline", "sinusoidal"]).returncode == 0


def test_each_runs_config_is_read_once(swept: Path, monkeypatch) -> None:
    """Issue 68: compare.py loaded a run's config.yaml twice, and once more per variant (its settings as
    text read back as YAML); it reads it once and applies a variant's typed settings to it."""
    import settings.config as config

    read = []
    real = config.read_yaml
    monkeypatch.setattr(config, "read_yaml", lambda path, *a: read.append(Path(path).parent.name) or real(path, *a))
    rows = run_records.read_runs([str(swept / "runs" / "demo" / "*")])
    assert sorted(read) == sorted({Path(r.run).name for r in rows}) and len(read) == 4
    assert sum(r.variant for r in rows) == 2  # the rope runs' test_ntk3/, read with no second read of their config


@pytest.mark.slow
def test_a_cell_holding_a_pipe_stays_one_cell_in_every_table(tmp_path: Path) -> None:
    """Issue 75: a run named `demo/ro|pe` shifted every later cell of its row in summary.md (20 fields
    under a 19-column header). Every table is rendered by utils/markdown.py, which escapes `|` (and
    turns a line break into <br>): each row of each written page has its header's columns."""
    import re

    from in_process import run_in_process

    from utils.markdown import table_row

    for name in ("rope", "sinusoidal", "test_sets"):
        shutil.copytree(ROOT / "results" / "demo" / name, tmp_path / name)
    config = tmp_path / "rope" / "config.yaml"
    config.write_text(config.read_text().replace("name: demo/rope\n", 'name: "demo/ro|pe"\n'))
    runs = [str(tmp_path / "rope"), str(tmp_path / "sinusoidal")]
    proc = run_in_process(["compare.py", *runs, "--bootstrap_samples", "20", "--output", str(tmp_path / "out")])
    assert proc.returncode == 0, proc.stderr[-2000:]
    pages = sorted(tmp_path.glob("out*.md"))
    for page in pages:
        for table in re.findall(r"(?:^\|.*\n?)+", page.read_text(), flags=re.M):
            widths = {len(re.findall(r"(?<!\\)\|", line)) for line in table.splitlines()}
            assert len(widths) == 1, (page.name, table)
    assert len(pages) >= 3 and "demo/ro\\|pe" in (tmp_path / "out.md").read_text()
    assert table_row(["a|b", "c\nd"]) == "| a\\|b | c<br>d |"

"""The study runner (tools/study_runs.sh with tools/study_plan.py) on a tiny sequential study in a
copy of the project: it trains look by look from one frozen commit, tests each run on its own split
and on the file pair its family declares, archives and commits each run, stops when the plan says so,
and a kill at any moment followed by the same command ends with the same runs and the same summary as
a runner never stopped. The summary compares each configuration on both sets and words the declared
comparison across them (issue 78)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import ROOT, tiny_overrides
from utils.stored_files import read_text

STUDY = "tiny_seq"
FAMILY = """baseline: sinusoidal
rule: beyond_tie
headline:
  - table: test
    compared_on: test set
seeds: [5, 3, 1]
looks: [2, 3]
equivalence: {sacreBLEU: 1.0, NLL: 0.1}
device: cpu
precision: fp32
test_sets:
  - name: own
  - {name: twin, src: data/test_sets/twin/twin.fr, ref: data/test_sets/twin/twin.en, sha256: {SIDES}}
"""
SIDES = (("src", "fr"), ("ref", "en"))
# the same commit (hash) in every copy: fixed names and dates
GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
}


def project_copy(where: Path, cache: Path) -> tuple[Path, str]:
    """A git repository holding this project's files (not its archive) and the tiny study, committed."""
    import yaml

    repo = where / "repo"
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    for name in listed:
        if not name.startswith("results/") and (ROOT / name).is_file():
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, repo / name)
    (repo / ".venv").symlink_to(Path(sys.prefix))  # the environment running the tests
    folder = repo / "configs" / STUDY
    (folder / "findings").mkdir(parents=True)
    pair = repo / "data" / "test_sets" / "twin"  # a declared file pair of 12 sentences (a row needs 10)
    pair.mkdir(parents=True)
    (pair / "twin.fr").write_text("".join(f"Le chat mange {i} pommes .\n" for i in range(12)))
    (pair / "twin.en").write_text("".join(f"The cat eats {i} apples .\n" for i in range(12)))
    sides = {side: hashlib.sha256((pair / f"twin.{lang}").read_bytes()).hexdigest() for side, lang in SIDES}
    family = FAMILY.replace("{SIDES}", "{" + ", ".join(f"{k}: {v}" for k, v in sides.items()) + "}")
    (folder / "findings" / "headline.yaml").write_text(family)
    tiny = {}  # tests/helpers.tiny_overrides as a config (the runner passes no --set but its thread count)
    for flag in tiny_overrides(Path("unused"), cache, steps=4)[1::2]:  # (each follows a --set)
        key, value = flag.split("=", 1)
        *sections, leaf = key.split(".")
        if sections:  # (run_dir: the sweep's own, runs/<name>_seed<N>)
            tiny.setdefault(sections[0], {})[leaf] = yaml.safe_load(value)
    for encoding in ("sinusoidal", "rope"):
        config = {"base": f"../demo/{encoding}.yaml", "name": f"{STUDY}/{encoding}", "seed": 5, **tiny}
        (folder / f"{encoding}.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    env = {**os.environ, **GIT_ENV}
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "tiny study"]):
        subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
    return repo, commit


def runner(repo: Path, commit: str) -> subprocess.Popen:
    return subprocess.Popen(
        ["bash", "tools/study_runs.sh", STUDY, commit, "1", "tomorrow"],
        cwd=repo,
        env={**os.environ, **GIT_ENV},
        start_new_session=True,  # its own process group: the kill reaches the runs it started
    )


def outcome(repo: Path) -> tuple[list[str], dict, str, str]:
    """(the archived runs git holds, each run's test BLEU, the summary's findings JSON, what is left
    uncommitted under the study's archive)."""
    files = subprocess.run(
        ["git", "ls-files", f"results/{STUDY}"], cwd=repo, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    runs = sorted({f.split("/")[2] for f in files if f.endswith("/provenance.json")})
    # (read in this process: `tools/archive.py cat` per run and look cost 40 s of the test in starts)
    scores = {run: read_text(repo / "results" / STUDY / run / "test" / "scores.json") for run in runs}
    bleu = {run: json.loads(text)["sacrebleu"] for run, text in scores.items()}
    findings = (repo / "results" / STUDY / "summary_findings.json").read_text()
    dirty = subprocess.run(
        ["git", "status", "--porcelain", f"results/{STUDY}"], cwd=repo, capture_output=True, text=True
    ).stdout
    return runs, bleu, findings, dirty


@pytest.mark.slow
def test_a_killed_runner_ends_with_the_same_runs_and_summary(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    reference, commit = project_copy(tmp_path / "whole", cache)
    assert runner(reference, commit).wait(timeout=600) == 0
    runs, bleu, findings, dirty = outcome(reference)
    plan = json.loads(findings)["sequential"]
    looked = plan["looks"][plan["taken"] - 1]
    seeds = [5, 3, 1][:looked]  # the declared order, up to the look the plan stopped at
    assert plan["stopped"] and runs == sorted(
        f"{c}{'' if s == 5 else f'_seed{s}'}" for c in ("rope", "sinusoidal") for s in seeds
    )
    assert dirty == ""  # every run and the summary committed
    # each run tested on the declared pair too, compared there, and the declared comparison read across both
    assert all((reference / "results" / STUDY / run / "test_set_twin").is_dir() for run in runs)
    rows = {r["compared_on"]: r for t in json.loads(findings)["tables"] if t["name"] == "test" for r in t["rows"]}
    assert set(rows) == {"test set", "test set twin"} and rows["test set twin"]["seeds"] == rows["test set"]["seeds"]
    assert [s["name"] for s in rows["test set"]["sets"]] == ["own", "twin"] and rows["test set"]["declared"]
    log = (tmp_path / "whole" / f"study_{STUDY}.log").read_text()
    assert "nothing left to train (the plan is complete or stopped)" in log
    # each commit names the commit whose code computed its summary: the one it was made on
    made = subprocess.run(["git", "log", "--format=%P %s", f"{commit}..HEAD"], cwd=reference, capture_output=True)
    for parent, message in (line.split(" ", 1) for line in made.stdout.decode().splitlines()):
        assert message.startswith("archive ") and message.endswith(f"; summary computed at {parent}"), message

    killed, same = project_copy(tmp_path / "killed", cache)
    assert same == commit
    first = runner(killed, commit)
    # kill it once the second run has started (one run archived, one in training)
    log = tmp_path / "killed" / f"study_{STUDY}.log"
    deadline = time.time() + 300
    while time.time() < deadline and (not log.exists() or log.read_text().count(": start ") < 2):
        time.sleep(0.5)
    time.sleep(2)
    os.killpg(first.pid, signal.SIGTERM)
    first.wait(timeout=120)
    while time.time() < deadline + 120:  # until the runs it started have stopped too: they hold the
        try:  # study's lock while they train, so a runner started beside them is refused
            os.killpg(first.pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.2)
    assert runner(killed, commit).wait(timeout=600) == 0
    assert outcome(killed) == (runs, bleu, findings, "")
    # stopped after archiving its last run but before committing it: the next start commits it
    subprocess.run(["git", "reset", "-q", "--mixed", "HEAD~1"], cwd=killed, check=True)
    assert outcome(killed)[3] != ""
    assert runner(killed, commit).wait(timeout=600) == 0
    assert outcome(killed) == (runs, bleu, findings, "")
    # a summary deleted: computed again (not read as "no look yet", every run of the first look in: done)
    (killed / "results" / STUDY / "summary_findings.json").unlink()
    assert runner(killed, commit).wait(timeout=600) == 0
    assert outcome(killed) == (runs, bleu, findings, "")

"""The study pages say only what the numbers show (issue 54's faults, each checked on the committed
findings and pages): every unadjusted p a result sentence prints is labelled and stands beside its
Holm-adjusted p; one minimum-n rule for every tested row; joined-pair rows inside their joined
training range are marked so (never worded as extrapolation); the length page prints the
within-configuration correlation of NLL alone and degradation instead of asserting there is none."""

from __future__ import annotations

import json
import re
from pathlib import Path

from study.stats.seed_test import MIN_SENTENCES

ROOT = Path(__file__).resolve().parents[2]
FINDINGS = sorted(ROOT.glob("results/**/*_findings.json"))
HEADLINES = sorted(ROOT.glob("results/**/*_headline.md"))


def test_every_printed_p_is_labelled_unadjusted_beside_its_holm_p():
    """In the full sentences (the top of each _findings.md) every unadjusted p says what it tests and
    stands beside the Holm p of the family's rule; the headline tables print only Holm p, in a column
    so named."""
    sentences = sorted(ROOT.glob("results/**/*_findings.md"))
    assert sentences and HEADLINES
    printed = 0
    for path in sentences:
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.startswith("- `"):
                continue
            for m in re.finditer(r", p (<?\d[\d.]*)", line):
                printed += 1
                rest = line[m.end() :]
                labels = ("Holm ", "not declared)", "decided look by look against its boundary")  # (sequential)
                assert any(rest.startswith(f" (against no difference, unadjusted; {label}") for label in labels), (
                    f"{path.relative_to(ROOT)}: p {m[1]} is not labelled: {line[:120]}"
                )
    assert printed, "the full sentences print p-values"
    for path in HEADLINES:
        text = path.read_text(encoding="utf-8")
        assert ", p " not in text, f"{path.relative_to(ROOT)}: an unlabelled p in the table"


def test_one_minimum_n_rule_for_every_row():
    rows = 0
    for path in FINDINGS:
        for table in json.loads(path.read_text(encoding="utf-8"))["tables"]:
            for r in table["rows"]:
                rows += 1
                tested = r.get("mean_difference") is not None
                assert tested == (r["num_sentences"] >= MIN_SENTENCES), (path.name, r["config"], r["compared_on"])
    assert rows


def test_joined_pair_rows_inside_their_range_are_marked_not_extrapolation():
    marked = 0
    for path in FINDINGS:
        for table in json.loads(path.read_text(encoding="utf-8"))["tables"]:
            for r in table["rows"]:
                if not r["config"].endswith("_concat") or r.get("mean_difference") is None:
                    continue
                k = re.fullmatch(r"(?:degradation, )?k=(\d+)", r["compared_on"])
                if k and int(k[1]) <= 4:  # configs/length/*_concat.yaml join 2-4 pairs in training
                    marked += 1
                    assert r["finding"].startswith("inside the joined training range (k <= 4): not extrapolation"), (
                        path.name,
                        r["config"],
                        r["compared_on"],
                    )
                    assert r.get("outcome") not in ("direction", "both") or not r.get("declared"), r["compared_on"]
    assert marked, "the length study has joined-pair rows at k <= 4"


def test_the_length_page_prints_how_nll_alone_and_degradation_go_together():
    page = (ROOT / "results" / "length" / "README.md").read_text(encoding="utf-8")
    assert "simply better at" not in page
    summary = (ROOT / "results" / "length" / "summary.md").read_text(encoding="utf-8")
    said = r"a run's NLL alone \(k = 1, the same tokens\) and its degradation pooled over k correlate r = "
    degradation = (ROOT / "results" / "length" / "summary_degradation.png").exists()
    if not degradation:  # no run with per-pair sums yet (the planned runs missing): nothing to correlate
        assert "Interim: 0 of 12 planned seeds" in page and not re.search(said, summary)
        return
    assert re.search(r"Within configurations trained on single sentences .*" + said, summary)
    assert summary in page or summary.strip() in page  # the page shows the generated table and its sentence


NUMBER_WORDS = (
    "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty"
).split()
SEED_COUNT = re.compile(r"\b(\d+|" + "|".join(NUMBER_WORDS) + r")[ -]seeds?\b", re.IGNORECASE)
DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")


def is_gpu(device: str) -> bool:
    """A device of the provenance table that is a GPU: named (NVIDIA ...) or, backfilled, a kind."""
    return device.startswith(("NVIDIA", "cuda"))


def provenance_facts(page: str) -> dict:
    """From the provenance table a study page shows: each configuration's seed count, every device
    name and every training date."""
    from tools.readme_results import blocks

    table = next(body for file, body in blocks(page) if file.endswith("_provenance.md"))
    seeds: dict[str, set] = {}
    devices, dates = set(), set()
    for line in table.splitlines()[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) < 6 or not cells[1].isdigit():
            continue
        seeds.setdefault(cells[0], set()).add(cells[1])
        devices.add(cells[2])
        dates.update(DATE.findall(cells[5]))
    return {"counts": {len(s) for s in seeds.values()}, "devices": devices, "dates": dates}


def stated_sentences(name: str, text: str) -> list[str]:
    """The hand-written sentences of a page (outside generated blocks, code and tables) about the
    archived runs: a sentence about runs that left the archive (git history) is history, not skipped
    silently but not checked against this table."""
    from tools.readme_results import result_lines

    prose = " ".join(line for _, line in result_lines(name, text))
    return [s for s in re.split(r"(?<=[.;])\s+", prose) if "git history" not in s and "left the archive" not in s]


def mismatches(name: str, text: str) -> tuple[list[str], int]:
    """(what a page states of its runs that its provenance table contradicts, how many statements
    were checked)."""
    facts = provenance_facts(text)
    on_gpu = any(is_gpu(d) for d in facts["devices"])
    on_cpu = any(not is_gpu(d) for d in facts["devices"])
    out, checked = [], 0
    for sentence in stated_sentences(name, text):
        for m in SEED_COUNT.finditer(sentence):
            word = m[1].lower()
            count = int(word) if word.isdigit() else NUMBER_WORDS.index(word) + 1
            checked += 1
            if count not in facts["counts"]:
                out.append(f"{name}: '{m[0]}' but its table has {sorted(facts['counts'])} seeds: {sentence}")
        for date in DATE.findall(sentence):
            checked += 1
            if date not in facts["dates"]:
                out.append(f"{name}: {date} is no training date of its table: {sentence}")
        for kind, held in (("GPU|H100|H200|A100", on_gpu), ("CPU", on_cpu)):
            if re.search(rf"\b({kind})\b", sentence):
                checked += 1
                if not held:
                    out.append(f"{name}: says {kind.split('|')[0]}, but its table has no such run: {sentence}")
    return out, checked


def test_what_a_study_page_states_of_its_runs_matches_its_provenance_table():
    """Seed counts, dates and device kinds a study page states outside its generated blocks are those
    of its provenance table (issue 66: a page said 'five seeds ... on one NVIDIA H200 on 2026-11-27'
    of runs its table showed as twelve CPU seeds of 2026-11-28)."""
    from tools.readme_results import PAGES

    total = 0
    for name in PAGES:
        found, checked = mismatches(name, (ROOT / name).read_text(encoding="utf-8"))
        assert found == [], found
        total += checked
    assert total >= 10


def test_the_page_check_catches_a_stale_count_and_date():
    """The check can fail: the length page's stale sentence of issue 66, put back, is caught."""
    name = "results/length/README.md"
    text = (ROOT / name).read_text(encoding="utf-8")
    stale = "\n\nThe headline set is five seeds each, trained on one NVIDIA H200 on 2026-11-27.\n"
    found, _ = mismatches(name, text.replace("\n## What made the runs", stale + "\n## What made the runs", 1))
    assert any("'five seeds'" in f for f in found) and any("2026-11-27" in f for f in found), found
    demo = "results/demo/README.md"  # the demo's runs are all CPU runs: a GPU claim is caught too
    text = (ROOT / demo).read_text(encoding="utf-8")
    found, _ = mismatches(
        demo, text.replace("\n## What made the runs", "\n\nEach seed ran on one GPU.\n\n## What made the runs", 1)
    )
    assert any("says GPU" in f for f in found), found

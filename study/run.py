"""A study judged in one call (compare.py's recipe), at the top of study/'s layers: read the whole study
once (study/read/study.py), judge it (the findings, then their p copied into the configurations), then
its pages; in this order only: the findings exist before their p is copied, the pages are made of the
judged records."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional, Sequence

from study.judge.report import add_significance, compute_findings
from study.pages.comparison_plots import PLOT_SUFFIXES as CONFIGURATION_PLOTS
from study.pages.comparison_plots import save_figure, write_plots
from study.pages.degradation_table import degradation_table
from study.pages.findings_markdown import findings_markdown
from study.pages.headline import headline_markdown
from study.pages.length_report import concat_tables
from study.pages.serialize import findings_json, summary_csv, summary_json
from study.pages.set_plots import SETS_SUFFIX, sets_figure
from study.pages.summary_tables import bucket_table, markdown_table, sets_table, teacher_forced_tables
from study.read.run_groups import baseline_of
from study.read.run_records import CompareError
from study.read.seed_provenance import MIXABLE, provenance_markdown
from study.read.set_runs import SetStudy
from study.read.study import read_study
from study.records import Configuration, Findings, frozen_map

PLOT_SUFFIXES = (*CONFIGURATION_PLOTS, SETS_SUFFIX)  # every plot compare.py may write
__all__ = ["MIXABLE", "PLOT_SUFFIXES", "CompareError", "StudyResult", "judge_study"]  # what compare.py asks


@dataclass(frozen=True)
class StudyResult:
    """A judged study (findings None without significance tests), its pages on request."""

    groups: tuple[Configuration, ...]
    baseline: Configuration
    findings: Optional[Findings]
    bootstrap_samples: int
    sets: tuple[SetStudy, ...] = ()  # each declared file pair's side (none without significance tests)
    own_set: str = ""  # the family's name for the configurations' own split

    def summary(self) -> str:
        """summary.md: the degradation table first (the length study's headline measure)."""
        groups, baseline, samples = self.groups, self.baseline, self.bootstrap_samples
        tables = [
            degradation_table(groups),
            markdown_table(groups, baseline, samples),
            sets_table(groups, self.sets, self.own_set),
            bucket_table(groups),
            concat_tables(groups, baseline, samples),
            teacher_forced_tables(groups),
        ]
        return "\n\n".join(t for t in tables if t)

    def findings_text(self) -> Optional[str]:
        return None if self.findings is None else findings_markdown(self.findings)

    def pages(self) -> Mapping[str, str]:
        """{suffix of the output prefix: its text}, in the order they are written."""
        found, groups = self.findings, self.groups
        pages = [(".md", self.summary() + "\n"), (".json", summary_json(groups, self.baseline, self.bootstrap_samples))]
        pages.append((".csv", summary_csv(groups)))
        if found is not None:
            pages.append(("_findings.md", findings_markdown(found) + "\n"))
            pages.append(("_findings.json", findings_json(found)))
            pages.append(("_headline.md", headline_markdown(found) + "\n"))
        return frozen_map([*pages, ("_provenance.md", provenance_markdown(groups) + "\n")])

    def write_plots(self, prefix: Path) -> list[Path]:
        written = write_plots(self.groups, prefix)
        across = sets_figure(self.findings) if self.findings is not None else None
        return [*written, save_figure(across, prefix.with_name(prefix.name + SETS_SUFFIX))] if across else written


def judge_study(
    runs: Sequence[str],
    family: Optional[str] = None,
    baseline: Optional[str] = None,
    bootstrap_samples: int = 10000,
    significance: bool = True,
    mixed: Sequence[str] = (),
) -> StudyResult:
    """The study of the run folders `runs` (paths or glob patterns) under `family`, read once and judged.
    Every expected failure: a one-line CompareError (or the family's ConfigError)."""
    study = read_study(runs, family, baseline, mixed, significance)
    groups, findings = list(study.groups), None
    if significance:
        try:
            findings = compute_findings(study, bootstrap_samples)
            groups = add_significance(groups, study.baseline, findings)
        except ValueError as e:  # runs scored on different references or teacher-forced test sets
            raise CompareError(str(e)) from None
    own = next((s.name for s in study.family.test_sets or () if s.own), "")
    return StudyResult(tuple(groups), baseline_of(groups), findings, bootstrap_samples, study.sets, own)

"""Summarise run folders into one results table: one row per configuration, mean ± std over its
seeds, paired bootstrap significance against a baseline, scores per source length, and plots.

Examples:
  python compare.py runs/demo/sinusoidal runs/demo/learnable runs/demo/rope
  python compare.py "runs/demo/*" --output runs/demo/summary     # summary.md/.csv/.json + summary_*.png
  python compare.py "runs/seeds/*/*" --baseline rope --output runs/seeds/summary
  python compare.py "results/length/*" --family configs/length/findings/headline.yaml   # the declared headline family

Runs whose resolved config.yaml files are equal except for `seed`, `name`, `run_dir` and runtime
settings (where and how they ran: training.device, num_threads, data.cache_dir, ...) are one
configuration (the seeds of one experiment): one row, labelled by the run name without a seed suffix
(`_seed2`, `-s2`, `/seed2`), numbers as `mean ± std` (sample std) with the number of seeds.
`p vs baseline` is the seed-level test of test sacreBLEU (study/stats/seed_test.py): Student's t over
the per-seed differences with the test set's joint-bootstrap variance added, two-sided, over the
seeds both configurations were run with (none with one seed). `seeds above baseline` counts the
seeds where this configuration is above the baseline by more than the tie margin. The findings
(`<prefix>_findings.md/.json`) word every comparison by one rule: only those declared in `--family`
(the study's configs/<study>/findings/headline.yaml) can say ahead/behind, Holm-corrected over that family;
each table states the smallest effect its seeds can see.
Runs scored with test.py's teacher-forced diagnostic add a column (`TF NLL beyond training`), a table
of NLL by target position, one of p(EOS) at the sentence boundaries per k and `<prefix>_teacher_forced.png`;
runs without it (older ones) are tabulated exactly as before.

Seeds trained on different device kinds (CPU / CUDA) or at different precisions are refused as one
row unless `--mixed device` / `--mixed precision` allows it; a row whose seeds span code versions or
devices is marked ‡ and said under the table, and `<prefix>_provenance.md` lists each seed's device,
precision, code version and dates (from <run>/provenance.json: utils/provenance.py).

Numbers come from each run's own files: metrics.jsonl (training/validation log), provenance.json and
test/scores.json, test/hypotheses.txt, test/references.txt (written by test.py), as written or as
archived in results/ (compressed, references stored once: utils/stored_files.py).
"""

from __future__ import annotations

import argparse
import contextlib
from pathlib import Path
from typing import Optional, Sequence

from commands.cli import command_parser, parse_command
from study.run import MIXABLE, PLOT_SUFFIXES, CompareError, StudyResult, judge_study
from utils.files import (
    WRITTEN_RECORD,
    WriteError,
    atomic_write_text,
    check_file_name,
    check_target,
    is_unchanged_output,
    record_written,
    remove_own_temporaries,
)
from utils.publish import OutputSet, SetLock, finish_publishing
from utils.run_log import log

REPORT_SUFFIXES = (".md", ".json", ".csv", "_findings.md", "_findings.json", "_headline.md", "_provenance.md")
WRITER = "compare.py"  # the name its files are recorded under: --overwrite replaces only those


def build_parser() -> argparse.ArgumentParser:
    parser = command_parser(
        __doc__,
        output="path prefix: writes <prefix>.md, .csv, .json, <prefix>_findings.md/.json, "
        "<prefix>_headline.md (the result sentences), <prefix>_provenance.md (what made each seed) and "
        "<prefix>_*.png plots",
        overwrite="the summary files and plots at --output",
    )
    parser.add_argument("runs", nargs="+", help="run folders or glob patterns (quote them)")
    parser.add_argument(
        "--baseline",
        metavar="NAME_OR_ENCODING",
        help="configuration the others are tested against: a config label or an encoding "
        "(default: the sinusoidal configuration if present, else the first)",
    )
    parser.add_argument(
        "--family",
        metavar="YAML",
        help="the study's declared headline comparisons (e.g. configs/length/findings/headline.yaml): "
        "only these can be worded ahead/behind, with Holm's correction over them; also its "
        "baseline and tie margins (default: none declared, every finding descriptive)",
    )
    parser.add_argument(
        "--bootstrap_samples",
        type=int,
        default=10000,
        help="paired bootstrap resamples (10,000: a p-value's standard error is at most 0.005)",
    )
    parser.add_argument(
        "--mixed",
        nargs="+",
        choices=MIXABLE,
        default=[],
        metavar="WHAT",
        help="pool seeds of one configuration made on different device kinds (device: CPU and CUDA) or at "
        "different precisions (precision) into one row; refused by default",
    )
    parser.add_argument(
        "--no_significance", action="store_true", help="skip the paired bootstrap test (and the same-references check)"
    )
    return parser


def main(argv: Optional[list[str]] = None) -> int:
    return compare(**vars(parse_command(build_parser(), argv)))


def compare(
    runs: Sequence[str],
    output: Optional[str] = None,
    overwrite: bool = False,
    baseline: Optional[str] = None,
    family: Optional[str] = None,
    bootstrap_samples: int = 10000,
    no_significance: bool = False,
    mixed: Sequence[str] = (),
) -> int:
    """Summarise the run folders `runs` (paths or glob patterns), as compare.py does: print the
    tables and findings, and write them (and the plots) under the prefix `output`."""
    if bootstrap_samples < 1:
        raise CompareError(f"--bootstrap_samples must be at least 1, got {bootstrap_samples}")
    out = output_prefix(output) if output else None
    # one writer per output set: a second compare.py into it refuses in one line
    with SetLock(out, "compare.py") if out is not None else contextlib.nullcontext():
        if out is not None:
            if finish_publishing(out, record_as_written, "compare.py"):
                print(f"completed {out}.*, which a compare.py stopped while publishing them had left half published")
            check_outputs(out, overwrite)  # refused before minutes of bootstrap, not after
        result = judge_study(runs, family, baseline, bootstrap_samples, not no_significance, mixed)
        print(result.summary())
        if result.findings is not None:
            print("\n" + result.findings_text())
        if out is not None:
            written = write_reports(out, result, overwrite)
            if written:
                print("\nwrote " + ", ".join(map(str, written)))
    return 0


def write_reports(out: Path, result: StudyResult, overwrite: bool) -> list[Path]:
    """Write <out>.md/.json/.csv, the findings and headline files, and the plots; returns the paths.
    Every file of the prefix passes the write guard first, plots included: with --overwrite only
    what compare.py recorded writing (and nobody edited since) is replaced; an earlier output of
    its own that this summary no longer has (a plot without data now) is removed, not left stale."""
    texts = {named(out, suffix): text for suffix, text in result.pages().items()}
    targets = check_outputs(out, overwrite)
    names = list(targets)
    with OutputSet(out, "compare.py", on_published=record_as_written) as outputs:  # a kill: the earlier set or this one
        staged = outputs.staging / out.name
        for path, text in texts.items():
            atomic_write_text(named(staged, path.name[len(out.name) :]), text)
        plots = result.write_plots(staged)
        written = list(texts) + [named(out, p.name[len(out.name) :]) for p in plots]
        stale = [targets[p] for p in names if p not in written and targets[p].is_file()]
        stale = [p for p in stale if is_unchanged_output(p, WRITER)]  # (a user's file is never removed)
        if not overwrite and any(t.exists() for t in targets.values()):  # the same call again (after a kill)
            if stale or any(not same_bytes(outputs.staging / p.name, targets[p]) for p in written):
                raise WriteError(
                    f"--output {out}: compare.py's earlier outputs there differ from this call's; pass "
                    f"--overwrite to replace them, or choose another --output"
                )
            print(f"\n{out}.* already hold this comparison: unchanged")
            return []
        outputs.publish(drops=stale, targets={outputs.staging / p.name: targets[p] for p in names})
    for path in stale:
        print(f"removed {path}: an earlier compare.py output that this summary does not have")
    return written


def record_as_written(published: list[Path], removed: list[Path]) -> None:
    """What a --overwrite may replace later: compare.py's record, updated as the set is published."""
    record_written(published, WRITER, forget=removed)


def check_outputs(out: Path, overwrite: bool) -> dict[Path, Path]:
    """{each file compare.py may write under the prefix `out`: where it is written} after the write
    guard (resolved through links: a link is written through, never replaced by a file)."""
    names = [named(out, suffix) for suffix in (*REPORT_SUFFIXES, *PLOT_SUFFIXES)]
    record = out.parent / WRITTEN_RECORD  # (and its record of them, killed while rewritten)
    for stale in remove_own_temporaries([*names, record]):  # a killed compare.py's half-written files
        log(f"removed {stale}, left by a compare.py that was stopped while writing")
    # compare.py's own earlier outputs, unedited, pass without --overwrite: written again only when
    # this call's are the same (the same command again: nothing to replace), else refused then
    again = all(not path.exists() or is_unchanged_output(path, WRITER) for path in names)
    return {path: check_target(path, "--output", overwrite=overwrite or again, written_by=WRITER) for path in names}


def same_bytes(a: Path, b: Path) -> bool:
    return b.is_file() and a.read_bytes() == b.read_bytes()


def output_prefix(text: str) -> Path:
    """--output as a prefix: `runs/x/summary` (a `.md`/`.csv`/`.json` ending is dropped); a dot in
    the name (`v1.2`) stays part of it. Never a folder (`runs/x/`, or an existing one)."""
    check_file_name(text, "--output")
    out = Path(text)
    return out.with_suffix("") if out.suffix in (".md", ".csv", ".json") else out


def named(prefix: Path, suffix: str) -> Path:
    return prefix.with_name(prefix.name + suffix)

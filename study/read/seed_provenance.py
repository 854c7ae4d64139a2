"""What made each seed of a row: runs trained on different device kinds or precisions are not seeds of
one configuration unless `--mixed` names that difference; a row whose seeds span code versions or
device names is marked (‡) and said under the table; `<prefix>_provenance.md` lists each seed's, the
runs whose training was resumed and the commit each test was scored at (or that it was not recorded)."""

from __future__ import annotations

from typing import Sequence

from study.records import Configuration
from utils.errors import HarnessError
from utils.markdown import table_head, table_row

MIXABLE = ("device", "precision")  # what --mixed may allow inside one row
MARK = "‡"
TREE = {False: "", True: " with uncommitted changes"}  # a test's recorded tree state, as its note says it


class MixedSeedsError(HarnessError):
    """Seeds of one row made on different device kinds or precisions."""


def _values(group: Configuration, key: str) -> list[str]:
    return sorted({v for r in group.runs for v in r.provenance.values(key) if v != "unknown"})


def check_mixed(groups: Sequence[Configuration], mixed: Sequence[str]) -> None:
    """Refuse a row whose seeds ran on different device kinds or precisions, unless `mixed` allows it."""
    for g in groups:
        for what, key in (("device", "device_kind"), ("precision", "precision")):
            found = _values(g, key)
            if len(found) > 1 and what not in mixed:
                by = ", ".join(f"{r.run} ({'/'.join(r.provenance.values(key))})" for r in g.runs)
                raise MixedSeedsError(
                    f"the seeds of {g.label} ran on different {what}s ({by}): their spread would mix "
                    f"the {what} into the encoding's; compare them apart, or pass --mixed {what} to pool them"
                )


def spans(group: Configuration) -> list[str]:
    """What the seeds of a row span: empty for a homogeneous row."""
    devices = len(_values(group, "device")) > 1 or len(_values(group, "precision")) > 1
    return ["code versions"] * (len(_values(group, "code")) > 1) + ["devices or precisions"] * devices


def mark_label(group: Configuration) -> str:
    return group.label + (f" {MARK}" if spans(group) else "")


def spans_note(groups: Sequence[Configuration]) -> list[str]:
    """The lines under the main table naming each marked row and what its seeds span."""
    seeds = lambda g: "; ".join(
        f"{r.seed}: {'/'.join(r.provenance.device)}, code {'/'.join(r.provenance.code)}" for r in g.runs
    )
    return [f"{MARK} `{g.label}`: its seeds span {' and '.join(spans(g))} ({seeds(g)})." for g in groups if spans(g)]


def provenance_markdown(groups: Sequence[Configuration]) -> str:
    """Per configuration: each seed's device, precision, code version, training dates and what was inferred."""
    lines = table_head(["configuration", "seed", "device", "precision", "code", "trained", "inferred"])
    for g in groups:
        if g.variant:
            continue  # the same trained runs as their base row
        for r in g.runs:
            p = r.provenance
            dates = p.dates
            trained = " to ".join(dates[:: max(1, len(dates) - 1)]) or "unknown"
            cells = ["/".join(p.device), "/".join(p.precision), "/".join(p.code), trained, ", ".join(p.inferred) or "-"]
            lines.append(table_row([g.label, r.seed, *cells]))
    lines += ["", *session_notes(groups)]
    lines += [
        "code: the first 12 hex digits of the code fingerprint (a hash of the project's files outside "
        "results/ and runs/), or, for a run archived before provenance.json, a label of its outputs' "
        "schema; inferred: fields read from the run's logs and outputs, not recorded when it ran "
        "(tools/backfill_provenance.py)."
    ]
    return "\n".join(lines)


def session_notes(groups: Sequence[Configuration]) -> list[str]:
    """The lines on what the table leaves out: the runs whose training stopped and resumed (a session
    each in provenance.json), and the commits the tests were scored at (scores.json's `tested_at`)."""
    trained = [(g, r) for g in groups if not g.variant for r in g.runs]
    resumed = [
        f"`{g.label}` seed {r.seed}" + "".join(f" at step {step}" for step in r.provenance.resumed if step is not None)
        for g, r in trained
        if r.provenance.resumed
    ]
    tests = [(g, r) for g in groups for r in g.runs]
    missing = [f"`{g.label}` seed {r.seed}" for g, r in tests if r.tested_at is None]
    at: dict[str, int] = {}
    for _, r in tests:
        if r.tested_at is not None:
            key = (r.tested_at.commit or "unknown")[:12] + TREE.get(r.tested_at.uncommitted_changes, " (tree unknown)")
            at[key] = at.get(key, 0) + 1
    lines = [f"resumed (training stopped, then continued from a checkpoint): {'; '.join(resumed)}."] * bool(resumed)
    if at:
        lines.append("tested at: " + "; ".join(f"{key} ({n} test{'s' * (n > 1)})" for key, n in at.items()) + ".")
    if missing:
        who = "every run" if len(missing) == len(tests) else ", ".join(missing)
        lines.append(f"test commit not recorded: {who} (scored before test.py recorded it in scores.json).")
    return [line for note in lines for line in (note, "")]

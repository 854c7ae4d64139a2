#!/usr/bin/env python
"""Whether tools/study_runs.sh may train a study from a commit and commit its summary from this
checkout: it asks before it trains anything, and again before each summary it computes and commits.

  python tools/study_ready.py demo_confirm fe14428    # nothing printed, exit 0: ready

One line and exit 2 when the commit holds no family of the study, when the family here reads
otherwise than in that commit (compared parsed, as study/read/declared.py compares it: a run trained
from the commit would prove another declaration, and every row of the summary would be withheld),
or when this checkout's code has uncommitted changes (tracked files outside results/ and runs/, as
utils/provenance.py counts code, and the study's page): the summary is computed and its pages
rendered with this checkout's code, and the runner records its commit in the commit message, so
that commit must be what computed it. The generated blocks of README.md and of the study's page
(tools/readme_results.py render: what the runner itself writes there) do not count."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from utils.errors import HarnessError  # noqa: E402


def family_path(study: str) -> str:
    return f"configs/{study}/findings/headline.yaml"


def hand_written(text: str) -> str:
    """A document with the body of each generated block left out: what a render does not write."""
    from tools.readme_results import BLOCK, _block

    return BLOCK.sub(lambda m: _block(m["file"], ""), text)


def uncommitted_code(study: str) -> list[str]:
    """The files whose uncommitted changes would go into what the runner computes or commits: code
    (utils/provenance.py's sense) and the study's page, less the generated blocks of the documents."""
    from utils.provenance import OUTSIDE_CODE, git_output

    page = f"results/{study}/README.md"
    code = git_output("diff", "--name-only", "HEAD", "--", ".", *(f":(exclude){p}" for p in OUTSIDE_CODE))
    pages = git_output("diff", "--name-only", "HEAD", "--", page)
    if code is None or pages is None:
        raise HarnessError(f"study_runs.sh: git cannot compare {ROOT} with its HEAD: run the runner in a git checkout")
    changed = []
    for name in (code + pages).decode("utf-8", "replace").splitlines():
        if name in ("README.md", page):
            committed = git_output("show", f"HEAD:{name}")
            path = ROOT / name
            if committed is not None and path.is_file():
                now = path.read_text(encoding="utf-8")
                if hand_written(now) == hand_written(committed.decode("utf-8", "replace")):
                    continue  # only its generated blocks differ: a render's (the runner's own) work
        changed.append(name)
    return changed


def family_refusal(study: str, commit: str) -> Optional[str]:
    """Why the study's family here does not stand in `commit` (None: it does)."""
    from study.read.declared import _declaration_at, stood_in

    family = family_path(study)
    if not (ROOT / family).is_file():
        return f"{family}: no such family; give a study with one (configs/<study>/findings/headline.yaml)"
    if _declaration_at(commit, family) is None:
        return (
            f"commit {commit[:12]} holds no {family}: give the commit the study's runs are trained from "
            f"(git log --format=%H -- {family} names the commits that hold it)"
        )
    if not stood_in(commit, str(ROOT / family)):
        return (
            f"{family} reads otherwise than in commit {commit[:12]} (git diff {commit[:12]} -- {family}): runs "
            f"trained from that commit would not count as declared by it and every row would be withheld; restore "
            f"it as it stands there, or give the commit that holds this family"
        )
    return None


def refusal(study: str, commit: str) -> Optional[str]:
    """Why the runner may not train the study from `commit` and commit its summary here (None: it may)."""
    why = family_refusal(study, commit)
    if why is not None:
        return why
    changed = uncommitted_code(study)
    if changed:
        named = ", ".join(changed[:4]) + (f" and {len(changed) - 4} more" if len(changed) > 4 else "")
        return (
            f"uncommitted changes in {named}: the runner computes and commits the study's summary with this "
            f"checkout's code and records its commit; commit or stash them, then run the same command again"
        )
    return None


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("study", help="the study under configs/ (e.g. demo_confirm, report/trio)")
    parser.add_argument("commit", help="the full commit its runs are trained from")
    args = parser.parse_args(argv)
    why = refusal(args.study, args.commit)
    if why is not None:
        raise HarnessError(f"study_runs.sh: {why}")
    return 0


if __name__ == "__main__":
    from commands.cli import main_guard

    raise SystemExit(main_guard(main))

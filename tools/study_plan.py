#!/usr/bin/env python
"""Which runs of a declared study to train now (tools/study_runs.sh asks it before each pass): one
line `CONFIG SEED RUN` per run, none when the study needs no more.

  python tools/study_plan.py demo_confirm fe14428    # the runs to train from commit fe14428
  python tools/study_plan.py report/trio <commit> --at_most 6   # whole seeds, at most 6 runs (a GPU wave)

The study is configs/<study>/: its configurations (every *.yaml there, the family's baseline first)
and its family (findings/headline.yaml). A run is done when results/<study>/<run>/provenance.json
records the commit. A fixed-seed family: every planned seed of every configuration not yet done. A
sequential family (`looks`, study/judge/sequential_findings.py): the seeds of the next look only — the first
n_k of the declared list, in that order — for the baseline and the configurations of the declared
comparisons still open, as results/<study>/summary_findings.json (compare.py, recomputed by the
runner after each run) says; none once the plan stopped. Before any summary: the first look, every
configuration. Exit 2 with one line for a study without a family or configurations."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from commands.cli import main_guard  # noqa: E402


def configurations(study: str, family) -> list[str]:
    """The study's configurations (file stems), the baseline's first: the baseline and those the
    family's headline entries name, or, where no entry names any, every config of configs/<study>/
    that no other there takes as its `base:`."""
    import yaml

    folder = ROOT / "configs" / study
    named = {c.removeprefix(f"{study}/") for h in family.headline for c in h.configs or ()}
    if named:
        baseline = {family.baseline.removeprefix(f"{study}/")} if family.baseline else set()  # (none: compare.py's)
        stems = sorted(named | baseline)
    else:
        files = sorted(folder.glob("*.yaml"))
        raw = [yaml.safe_load(f.read_text(encoding="utf-8")) or {} for f in files]
        bases = {(folder / str(config.get("base"))).resolve() for config in raw}
        stems = [f.stem for f in files if f.resolve() not in bases]
    return sorted(stems, key=lambda s: s != family.baseline and f"{study}/{s}" != family.baseline)


RECOMPUTE = (
    "compute it again (python compare.py 'results/{study}/*' --family configs/{study}/findings/headline.yaml "
    "--output results/{study}/summary --overwrite; tools/study_runs.sh does so when it starts)"
)


def run_name(config: str, seed: int, own: int) -> str:
    """A sweep's run folder name: the config's own seed has no suffix."""
    return config if seed == own else f"{config}_seed{seed}"


def done(results: Path, run: str, commit: str) -> bool:
    from utils.run_files import PROVENANCE

    try:
        return commit in (results / run / PROVENANCE).read_text(encoding="utf-8")
    except OSError:
        return False


def still_needed(summary: Path, study: str, configs: list[str], looks: tuple[int, ...]) -> tuple[Optional[int], set]:
    """(the seeds of the look to train towards, the configurations it needs) of a sequential study by
    its summary (None seeds: stopped); no summary yet: the first look, every configuration. A summary
    of another plan (other looks) or one that is not compare.py's is a HarnessError naming it."""
    from utils.errors import HarnessError

    try:
        findings = json.loads(summary.read_text(encoding="utf-8"))
    except OSError:
        return looks[0], set(configs)
    except ValueError as e:
        raise HarnessError(f"study_plan.py: {summary} is not JSON ({e}): {RECOMPUTE.format(study=study)}") from None
    try:
        plan = findings.get("sequential")
        if plan is None:
            return looks[0], set(configs)
        if tuple(plan["looks"]) != tuple(looks):
            raise HarnessError(
                f"study_plan.py: {summary} was computed for the looks {list(plan['looks'])}, the family declares "
                f"{list(looks)}: {RECOMPUTE.format(study=study)}"
            )
        if plan["stopped"]:
            return None, set()
        rows = [r for t in findings["tables"] for r in t["rows"] if r.get("look")]
        open_ = {r["config"].removeprefix(f"{study}/") for r in rows if not r["look"]["decided"]}
        baseline = findings["baseline"].removeprefix(f"{study}/")
        return looks[plan["reached"]], ({baseline} | open_) if rows else set(configs)
    except (KeyError, TypeError, AttributeError, IndexError) as e:
        raise HarnessError(
            f"study_plan.py: {summary} does not say where a sequential plan stands ({type(e).__name__}: {e}): "
            f"{RECOMPUTE.format(study=study)}"
        ) from None


def plan_runs(study: str, commit: str, results: Path) -> list[tuple[str, int, str]]:
    """(config, seed, run folder name) of each run to train now, seed-major in the declared order."""
    from settings.config import load_config
    from study.read.family import load_family

    family = load_family(str(ROOT / "configs" / study / "findings" / "headline.yaml"))
    configs = configurations(study, family)
    if not configs or not family.seeds:
        raise ValueError(f"configs/{study}: no configurations, or a family without planned seeds")
    own = load_config(ROOT / "configs" / study / f"{configs[0]}.yaml").seed
    seeds, needed = list(family.seeds), set(configs)
    if family.looks:
        upto, needed = still_needed(results / "summary_findings.json", study, configs, family.looks)
        seeds = seeds[:upto] if upto is not None else []
    units = [
        (c, s, run_name(c, s, own))
        for s in seeds
        for c in configs
        if c in needed and not done(results, run_name(c, s, own), commit)
    ]
    if family.looks and seeds and not units:  # every run of the look is in, yet the look was not reached
        raise ValueError(
            f"every run of the look at {len(seeds)} seeds is archived, but results/{study}/summary_findings.json "
            f"does not reach it (a declared comparison without a tested row keeps a look from being reached, and "
            f"a missing summary reads as no look yet): {RECOMPUTE.format(study=study)}"
        )
    return units


def whole_seeds(units: list[tuple[str, int, str]], at_most: int) -> list[tuple[str, int, str]]:
    """The first units, whole seeds only, at most `at_most` of them (the first seed whole in any case)."""
    seeds = list(dict.fromkeys(seed for _, seed, _ in units))
    chosen: list[int] = []
    for seed in seeds:
        if chosen and sum(s in (*chosen, seed) for _, s, _ in units) > at_most:
            break
        chosen = [*chosen, seed]
    return [u for u in units if u[1] in chosen]


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("study", help="the study under configs/ (e.g. demo_confirm, report/trio)")
    parser.add_argument("commit", help="the full commit its runs are trained from")
    parser.add_argument("--results", default=None, help="its archive (default results/<study>)")
    parser.add_argument(
        "--at_most", type=int, default=None, help="the first whole seeds only, at most this many runs (a GPU's wave)"
    )
    args = parser.parse_args(argv)
    from settings.config import ConfigError

    try:
        units = plan_runs(args.study, args.commit, Path(args.results or ROOT / "results" / args.study))
    except ValueError as e:  # (a family file's error is a ConfigError: main_guard's one line)
        raise ConfigError(f"study_plan.py: {e}") from None
    for config, seed, run in units if args.at_most is None else whole_seeds(units, args.at_most):
        print(config, seed, run)
    return 0


if __name__ == "__main__":
    raise SystemExit(main_guard(main))

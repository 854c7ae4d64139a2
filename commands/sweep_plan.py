"""What a sweep runs, typed once: each run's overrides parsed (`settings.config.Override`: the sweep's
--set, then its seed and run folder) and its config validated (`RunPlan.cfg`), each --variant's
overrides parsed and its test config planned for the run (`Variant.tested`). A job carries its
`RunPlan` (commands/sweep_job.py: `SweepJob`, pickled to its process or SLURM job): nothing on
the way reads the YAML file again, parses an override again or validates the config again.
One validation per run (its seeds and run folders are typed updates: `settings.config.with_set`)
and one per variant; test.py still validates the config it tests, the checkpoint's own."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

from settings.config import ConfigError, ExperimentConfig, Override, load_config, parse_override, to_dict, with_set
from study.read.test_sets import SET_FOLDER
from utils.user_paths import check_home_expanded


@dataclass(frozen=True)
class Variant:
    """A --variant: its name (the folder <run>/test_<name>/) and its test-time overrides, parsed once.
    Planned for a run (`planned_for`): `tested`, the run's config tested with them (validated once),
    or `why_not`, why the run's encoding does not take one of its keys (not tested there)."""

    name: str
    overrides: tuple[Override, ...]
    tested: Optional[ExperimentConfig] = None
    why_not: str = ""

    @property
    def planned(self) -> bool:
        return self.tested is not None or bool(self.why_not)

    def planned_for(self, cfg: ExperimentConfig, config: str) -> Variant:
        """This variant for the run of `config` trained as `cfg`; one that would change the model or the
        data is refused now, by the rule test.py applies, not after hours of training."""
        from artifacts.checkpoint import CheckpointError
        from artifacts.test_time import refuse_trained_keys

        trained = to_dict(cfg)
        try:
            tested = load_config(raw=trained, overrides=self.overrides)
        except ConfigError as e:  # a key this run's encoding does not take: not tested there (sweep_job)
            return dataclasses.replace(self, why_not=str(e))
        try:
            refuse_trained_keys(trained, self.overrides, config)
        except CheckpointError as e:
            raise ConfigError(f"--variant {self.name}: {e}") from None
        return dataclasses.replace(self, tested=tested)

    def __str__(self) -> str:
        return " ".join(o.text for o in self.overrides)


@dataclass(frozen=True)
class FileSet:
    """A file pair a study's family declares (study/read/test_sets.py): every run of the sweep is also
    tested on it, into <run>/test_set_<name>/ (single sentences: no joined inputs); paths absolute,
    so that a job finds them wherever it runs, and the sha256 of each side as the family declares it."""

    name: str
    src: str
    ref: str
    sha256: tuple[str, str]

    @property
    def folder(self) -> str:
        return SET_FOLDER.format(self.name)


def declared_file_sets(family: str) -> tuple[FileSet, ...]:
    """The file pairs the family in `family` declares (its own test split is every run's test/); the
    family read as compare.py reads it, so a changed or missing file is refused in one line now."""
    from study.read.family import CONFIGS, load_family

    sets = load_family(family).test_sets or ()
    root = CONFIGS.parent
    return tuple(
        FileSet(s.name, str((root / s.src).resolve()), str((root / s.ref).resolve()), (s.sha256.src, s.sha256.ref))
        for s in sets
        if not s.own
    )


@dataclass(frozen=True)
class RunPlan:
    """One run of a sweep: its config file, its overrides (typed), its config validated once, and its
    variants planned for it."""

    config: str
    overrides: tuple[Override, ...]
    cfg: ExperimentConfig
    variants: tuple[Variant, ...] = ()
    test_sets: tuple[FileSet, ...] = ()  # the file pairs its study's family declares (sweep.py --family)

    @property
    def run_dir(self) -> Path:
        return self.cfg.resolved_run_dir

    def placed(self, run_dir: Path | str) -> RunPlan:
        """This run in the folder `run_dir`, set as its last override (typed: `with_set`)."""
        override = Override.of("run_dir", str(run_dir))
        return dataclasses.replace(self, overrides=(*self.overrides, override), cfg=with_set(self.cfg, [override]))

    def absolute(self) -> RunPlan:
        """Its config file and run folder as absolute paths, so that a job finds them wherever it runs."""
        return dataclasses.replace(self.placed(self.run_dir.resolve()), config=str(Path(self.config).resolve()))


def expand_runs(
    configs: list[str], overrides: Sequence[str | Override], seeds: Optional[list[int]], runs_root: Optional[str]
) -> list[RunPlan]:
    """One RunPlan per config, or one per config and seed with its own run folder."""
    check_given_once(configs, seeds)
    overrides = tuple(parse_override(o) for o in overrides)
    runs = []
    for config in configs:
        plan = RunPlan(config, overrides, load_config(config, overrides))
        cfg = plan.cfg
        base = Path(cfg.run_dir) if cfg.run_dir else Path(runs_root or "runs") / cfg.name
        if not seeds:
            runs.append(plan if cfg.run_dir or not runs_root else plan.placed(base))
            continue
        for seed in seeds:
            seeded = Override.of("seed", seed)
            with_seed = dataclasses.replace(plan, overrides=(*overrides, seeded), cfg=with_set(cfg, [seeded]))
            runs.append(with_seed.placed(f"{base}_seed{seed}"))
    folders: dict[Path, str] = {}
    for run in runs:
        check_home_expanded(str(run.run_dir), f"{run.config}: run_dir")  # two runs in one folder: one run trained twice
        folder = run.run_dir.resolve()
        if folder in folders:
            raise ConfigError(
                f"{run.config} and {folders[folder]} would both run in {folder}: give each config its own "
                f"name or run_dir, or use --runs_root"
            )
        folders[folder] = run.config
    return runs


def check_given_once(configs: list[str], seeds: Optional[list[int]]) -> None:
    """A config or seed named twice would be one run trained twice (said as what the user typed,
    not as a folder clash); a pattern the shell left unexpanded matched no config."""
    for config in configs:
        if not Path(config).exists() and any(c in config for c in "*?["):
            raise ConfigError(
                f"{config} matches no config file; check the pattern (the shell passes one that "
                f"matches nothing as it is)"
            )
    repeated = sorted({s for s in seeds or [] if list(seeds).count(s) > 1})
    if repeated:
        raise ConfigError(f"--seeds names seed {repeated[0]} more than once; give each seed once")
    seen: dict[Path, str] = {}
    for config in configs:
        key = Path(config).resolve()
        if key in seen:
            also = "" if seen[key] == config else f" (also as {seen[key]})"
            raise ConfigError(f"{config} is given twice{also}; give each config once (use --seeds for repeats)")
        seen[key] = config


def check_variants(given: list[list[str]]) -> list[Variant]:
    """--variant NAME KEY=VALUE ... as Variants; the name becomes a folder name."""
    variants: list[Variant] = []
    for name, *overrides in given:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", name) or "=" in name:
            raise ConfigError(
                f"--variant {name}: give a name first (letters, digits, _ . -), then KEY=VALUE "
                f"overrides, e.g. --variant yarn4 model.positional.scaling=yarn"
            )
        if f"test_{name}".startswith(SET_FOLDER.format("")):
            raise ConfigError(
                f"--variant {name}: names starting with set_ are kept for a family's declared test sets "
                f"(<run>/{SET_FOLDER.format('<name>')}/); give the variant another name"
            )
        if not overrides:
            raise ConfigError(f"--variant {name}: give the test-time overrides after the name (KEY=VALUE ...)")
        parsed = tuple(parse_override(o) for o in overrides)  # one line naming a malformed KEY=VALUE
        if any(name == seen.name for seen in variants):
            raise ConfigError(
                f"--variant {name} given twice: each variant is a folder of its own (<run>/test_{name}/); "
                f"give each a name of its own"
            )
        variants.append(Variant(name, parsed))
    return variants


def plan_variants(runs: list[RunPlan], variants: Sequence[Variant]) -> list[RunPlan]:
    """Each run with every variant planned for it (`Variant.planned_for`)."""
    return [dataclasses.replace(r, variants=tuple(v.planned_for(r.cfg, r.config) for v in variants)) for r in runs]

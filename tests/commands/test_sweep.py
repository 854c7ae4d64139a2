"""sweep.py (commands/sweep.py): it calls the commands' functions, never another script's main(), and
its --help prints its examples intact. (Sweeps run for real: tests/commands/test_compare.py,
test_launchers.py, test_slurm.py and tests/guarantees/test_slurm_sweeps.py.)"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from helpers import ROOT, tiny_overrides, validations_by_command
from in_process import run_in_process


def outside_function(tree: ast.AST, name: str) -> list[ast.AST]:
    """The nodes of `tree` that are not inside the function `name`."""
    inside = {
        id(node)
        for function in ast.walk(tree)
        if isinstance(function, ast.FunctionDef) and function.name == name
        for node in ast.walk(function)
    }
    return [node for node in ast.walk(tree) if id(node) not in inside]


def test_sweep_calls_functions_not_scripts() -> None:
    """No command loads a script through importlib, and none passes argument lists to a main(). The one
    exception is the doors' own `cli.lazy_main` (that function only), which imports a command module
    inside main_guard (so a Ctrl-C while torch loads is one line) and is called by the entry scripts
    alone (tests/test_layers.py)."""
    for path in (ROOT / "commands").glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        nodes = outside_function(tree, "lazy_main") if path.name == "cli.py" else list(ast.walk(tree))
        imported = {a.name for n in nodes if isinstance(n, ast.Import) for a in n.names}
        imported |= {n.module for n in nodes if isinstance(n, ast.ImportFrom) and n.module}
        assert not any(name.startswith("importlib") for name in imported), path
        calls = [n for n in nodes if isinstance(n, ast.Call) and getattr(n.func, "attr", None) == "main"]
        assert not calls, path


def test_sweep_help_prints_its_examples_intact() -> None:
    proc = run_in_process(["sweep.py", "--help"])
    assert proc.returncode == 0
    assert "configs/demo/learnable.yaml configs/demo/rope.yaml \\\n      --output runs/demo/summary" in proc.stdout


@pytest.mark.slow
def test_a_sweep_validates_each_config_and_variant_once(tmp_path: Path, monkeypatch) -> None:
    """Issue 76: a one-config sweep validated its config 5 times (and 5 more per --variant), its
    overrides passed on as text and parsed again by each step. The sweep now validates each config
    once (its seeds and run folders typed updates) and each variant once per run, and hands them
    typed to training and to the variants' checks (commands/sweep_plan.py); test.py validates the
    config it tests (the checkpoint's own), compare.py each run folder's config.yaml it summarises
    (and its variant's);
    run again, the sweep reads each run folder's config.yaml once."""
    from commands.sweep import sweep

    sets = tiny_overrides(tmp_path / "unused", tmp_path / "cache", steps=2)[1::2]
    sets = [s for s in sets if not s.startswith("run_dir=")]
    asked = dict(
        configs=["configs/demo/rope.yaml"],
        overrides=sets,
        seeds=[1, 2],
        variant=[["greedy", "decoding.beam_size=1"]],
        runs_root=str(tmp_path / "runs"),
        output=str(tmp_path / "summary"),
    )
    counted = validations_by_command(monkeypatch)
    assert sweep(**asked) == 0
    assert [p.parent.parent.name for p in sorted((tmp_path / "runs").rglob("test_greedy/scores.json"))] == [
        "rope_seed1",
        "rope_seed2",
    ]
    # the sweep: the config, then the variant for each run; test.py: each run and its variant; compare.py:
    # each run's config.yaml and its variant (study/run_records.py)
    assert counted == {"sweep": 1 + 2, "test.py": 2 * 2, "compare.py": 2 * 2}
    counted.clear()
    assert sweep(**asked) == 0  # every run and variant scored: skipped
    assert counted == {"sweep": 1 + 2, "run folder": 2, "compare.py": 2 * 2}


@pytest.mark.slow
def test_a_sweep_with_a_family_tests_each_run_on_its_declared_test_sets(tmp_path: Path, monkeypatch, capsys) -> None:
    """Issue 78: sweep.py --family tests every run on each file pair the family declares, into
    <run>/test_set_<name>/ (the file's bytes recorded, so a changed file is no declared one), once: a
    second sweep skips it. A folder of that name holding another test is refused in one line, never
    overwritten, that run left alone and the others scored; a --variant named set_... (the declared
    sets' folders) is refused."""
    import hashlib
    import json

    import study.read.family
    from commands.sweep import sweep
    from settings.config import ConfigError

    (tmp_path / "configs").mkdir()
    pair = {lang: tmp_path / "data" / f"desc.{lang}" for lang in ("fr", "en")}
    pair["fr"].parent.mkdir()
    pair["fr"].write_text("Un chien court .\nLa maison est grande .\n", encoding="utf-8")
    pair["en"].write_text("A dog runs .\nThe house is big .\n", encoding="utf-8")
    sha = {side: hashlib.sha256(pair[lang].read_bytes()).hexdigest() for side, lang in (("src", "fr"), ("ref", "en"))}
    family = tmp_path / "configs" / "headline.yaml"
    family.write_text(
        "baseline: sinusoidal\nrule: beyond_tie_exact\nheadline:\n  - {table: test, compared_on: test set}\n"
        "test_sets:\n  - {name: own}\n"
        f"  - {{name: desc, src: data/desc.fr, ref: data/desc.en, sha256: {{src: {sha['src']}, ref: {sha['ref']}}}}}\n",
        encoding="utf-8",
    )
    monkeypatch.setattr(study.read.family, "CONFIGS", tmp_path / "configs")  # the family's project
    sets = [s for s in tiny_overrides(tmp_path / "unused", tmp_path / "cache", steps=2)[1::2] if "run_dir=" not in s]
    asked = dict(configs=["configs/demo/rope.yaml"], overrides=sets, seeds=[1], runs_root=str(tmp_path / "runs"))
    assert sweep(**asked, family=str(family)) == 0
    scores = tmp_path / "runs" / "demo" / "rope_seed1" / "test_set_desc" / "scores.json"
    held = json.loads(scores.read_text(encoding="utf-8"))
    assert held["test_set"]["sha256"] == sha and held["num_sentences"] == 2
    assert (scores.parent.parent / "test" / "scores.json").is_file()  # its own split as before
    written = scores.stat().st_mtime_ns
    assert sweep(**asked, family=str(family)) == 0
    assert scores.stat().st_mtime_ns == written  # scored: skipped
    held["test_set"] = {"src": "other.fr", "ref": "other.en", "sha256": {"src": "0" * 64, "ref": "0" * 64}}
    scores.write_text(json.dumps(held), encoding="utf-8")  # a test of another file in its folder
    clash = r"test_set_desc holds a test of other files \(its src other\.fr has sha256 000000000000…, the declared "
    capsys.readouterr()
    assert sweep(**{**asked, "seeds": [1, 2]}, family=str(family)) == 2  # that run left alone, the other scored
    assert re.search(f"sweep: left alone: .*{clash}", capsys.readouterr().out)
    assert json.loads(scores.read_text(encoding="utf-8"))["test_set"]["src"] == "other.fr"  # left as it was
    other = tmp_path / "runs" / "demo" / "rope_seed2" / "test_set_desc" / "scores.json"
    assert json.loads(other.read_text(encoding="utf-8"))["test_set"]["sha256"] == sha
    with pytest.raises(ConfigError, match="names starting with set_ are kept for a family's declared test sets"):
        sweep(**asked, variant=[["set_desc", "decoding.beam_size=1"]])

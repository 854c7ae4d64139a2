"""Config values and empty data, through the loader: a value out of its declared bounds is one line
naming where it was given (all violations in one error), a model too large to train is refused
before anything is allocated, the YAML loader refuses what it cannot read safely (a base that is not
a path, a file that is not UTF-8, an alias bomb) and supports merge keys, the search behind
validation BLEU is a training setting of its own, and a split the filters leave empty is one line.
(The declarations themselves: tests/settings/test_schema.py.)"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Annotated

import pydantic
import pytest
from helpers import ROOT, TINY_CORPUS, one_error_line, tiny_overrides, with_sets
from in_process import run_in_process as run

from models.positional_options import ENCODING_OPTIONS
from settings.checks import estimated_parameters
from settings.config import load_config
from settings.key_roles import role_of
from settings.schema import TRAINING
from training.handlers import validation_search

CONFIG = ROOT / "configs" / "demo" / "rope.yaml"


def refused(tmp_path: Path, *sets: str, config: Path = CONFIG) -> tuple[str, str]:
    """train.py on `config` with `--set`s: (its one error line, its stderr); nothing was created."""
    run_dir = tmp_path / "never"
    flags = [x for s in (f"run_dir={run_dir}", *sets) for x in ("--set", s)]
    proc = run(["train.py", "--config", str(config), *flags])
    line = one_error_line(proc)
    assert not run_dir.exists()
    return line, proc.stderr


@pytest.mark.parametrize(
    "override, line",
    [
        ("tokenizer.vocab_size=-5", "tokenizer.vocab_size must be at least 16, got -5"),
        ("training.betas=[0.9, 1.0]", "each of training.betas must be below 1, got [0.9, 1.0]"),
        ("training.eps=-1e-8", "training.eps must be above 0, got -1e-08"),
        ("training.weight_decay=-0.1", "training.weight_decay must be at least 0, got -0.1"),
        ("training.num_threads=0", "training.num_threads must be at least 1 (or null: torch's default), got 0"),
        ("model.d_model=1000000", "model.d_model must be at most 65536, got 1000000"),
        ("decoding.max_tokens=0", "decoding.max_tokens must be at least 1, got 0"),
    ],
)
def test_a_value_out_of_bounds_is_one_line_naming_where_it_was_given(tmp_path: Path, override: str, line: str) -> None:
    """Given by --set: the line names that --set (settings.config.error_source); written in the file: the file."""
    message, _ = refused(tmp_path, override)
    assert message == f"error: --set {override}: {line}", message
    key, value = override.split("=", 1)
    section, name = key.rsplit(".", 1)
    config = tmp_path / "mine.yaml"
    config.write_text(
        f"base: {Path(CONFIG).resolve()}\n"
        + "".join(f"{'  ' * i}{part}:\n" for i, part in enumerate(section.split(".")))
        + f"{'  ' * len(section.split('.'))}{name}: {value}\n"
    )
    message, _ = refused(tmp_path, config=config)
    assert message == f"error: {config}: {line}", message


def test_every_violation_is_reported_at_once_one_line_each(tmp_path: Path) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text(f"base: {CONFIG}\nmodel:\n  d_model: 0\n  dropout: 1.5\ntraining:\n  num_threads: -2\n")
    message, stderr = refused(tmp_path, "training.eps=-1", config=config)
    assert message == f"error: {config} with its --set values: 4 config values are out of bounds:", message
    for line in (
        "  model.d_model must be at least 1, got 0",
        "  model.dropout must be below 1, got 1.5",
        "  training.eps must be above 0, got -1.0",
        "  training.num_threads must be at least 1 (or null: torch's default), got -2",
    ):
        assert line in stderr.splitlines(), stderr


def test_an_encodings_options_are_checked_by_the_bounds_they_declare(tmp_path: Path, monkeypatch) -> None:
    @dataclasses.dataclass
    class BoundedOptions(ENCODING_OPTIONS["rope"]):  # a bound declared as the schema's are (pydantic's Field)
        theta: Annotated[float, pydantic.Field(gt=1.0)] = 10000.0

    monkeypatch.setitem(ENCODING_OPTIONS, "rope", BoundedOptions)
    message, _ = refused(tmp_path, "model.positional.theta=0.5")
    assert message == "error: --set model.positional.theta=0.5: model.positional.theta must be above 1, got 0.5", (
        message
    )


def test_a_model_too_large_to_train_is_refused_before_it_is_built(tmp_path: Path) -> None:
    message, _ = refused(tmp_path, "model.d_model=40000")
    assert "would have about 39 billion parameters" in message and "model.d_model (40000)" in message, message


def test_the_size_estimate_is_the_built_models_size(trained_run: Path) -> None:
    ends = [json.loads(line) for line in (trained_run / "metrics.jsonl").read_text().splitlines()]
    params = next(r["params"] for r in reversed(ends) if r["event"] == "end")
    estimate = estimated_parameters(load_config(trained_run / "config.yaml"))
    assert abs(estimate - params) <= 0.05 * params, (estimate, params)


@pytest.mark.parametrize("base", ["3", "{a: 1}", "[../x.yaml, 4]"])
def test_a_base_that_is_not_a_path_is_named(tmp_path: Path, base: str) -> None:
    config = tmp_path / "child.yaml"
    config.write_text(f"base: {base}\n")
    message, _ = refused(tmp_path, config=config)
    assert message.startswith(f"error: {config}: base takes a path or a list of paths"), message


def test_a_config_that_is_not_utf8_is_named(tmp_path: Path) -> None:
    config = tmp_path / "latin1.yaml"
    config.write_bytes(f"base: {CONFIG}\nname: caf\xe9\n".encode("latin-1"))
    message, _ = refused(tmp_path, config=config)
    assert message.startswith(f"error: {config} is not UTF-8 text"), message


@pytest.mark.parametrize("recursive", [False, True])
def test_aliases_that_expand_without_limit_are_refused(tmp_path: Path, recursive: bool) -> None:
    config = tmp_path / "bomb.yaml"
    if recursive:
        config.write_text(f"base: {CONFIG}\nname: &x [*x]\n")
    else:
        levels = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
        levels += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)]
        config.write_text("\n".join(levels) + "\n")
    message, _ = refused(tmp_path, config=config)
    assert message.startswith(f"error: {config}: invalid YAML:"), message
    assert ("refers to a node that contains it" if recursive else "more than the 100,000") in message, message


def test_merge_keys_merge_and_a_mappings_own_keys_win(tmp_path: Path) -> None:
    config = tmp_path / "merge.yaml"
    # a mapping merged into model (YAML merge key), one of its keys overridden by the mapping itself
    config.write_text(f"base: {CONFIG}\nmodel:\n  <<: &small {{ffn_dim: 0, d_model: 0}}\n  d_model: 32\n")
    message, _ = refused(tmp_path, config=config)
    assert message == f"error: {config}: model.ffn_dim must be at least 1, got 0", message  # d_model: 32 won
    config.write_text(f"base: {CONFIG}\nmodel:\n  <<: {{ffn_dim: 64}}\n  d_model: 32\n  d_model: 64\n")
    message, _ = refused(tmp_path, config=config)
    assert "duplicate key 'd_model'" in message, message


@pytest.mark.parametrize(
    "override, why",
    [
        ("model.d_model=[1", "expected ',' or ']'"),
        ("model={d_model: 32, d_model: 64, num_heads: 0}", "duplicate key 'd_model'"),
    ],
)
def test_a_set_value_that_is_not_yaml_is_one_line_naming_it(tmp_path: Path, override: str, why: str) -> None:
    message, _ = refused(tmp_path, override)
    assert message.startswith(f"error: override {override!r}: invalid YAML value") and why in message, message


def test_validation_bleus_search_is_a_training_setting_not_decodings(tmp_path: Path) -> None:
    plain = load_config(CONFIG)
    test_time = load_config(
        CONFIG,
        [
            "decoding.max_len_a=0.5",
            "decoding.max_len_b=1",
            "decoding.min_len=4",
            "decoding.no_repeat_ngram=2",
            "decoding.precision=bf16",
            "decoding.strategy=greedy",
        ],
    )
    assert validation_search(test_time) == validation_search(plain)  # what training keeps is unchanged
    own = validation_search(load_config(CONFIG, ["training.bleu_max_len_a=0.5", "training.bleu_max_len_b=1"]))
    assert (own.max_len_a, own.max_len_b, own.strategy) == (0.5, 1, "greedy")
    assert role_of("training.bleu_max_len_a", "rope") == TRAINING and role_of("decoding.max_len_a", "rope") != TRAINING


def test_keeping_checkpoints_by_a_validation_bleu_that_is_switched_off_is_refused(tmp_path: Path) -> None:
    message, _ = refused(tmp_path, "training.checkpoint_metric=valid_bleu", "training.bleu_sentences=0")
    assert "training.checkpoint_metric valid_bleu needs validation BLEU" in message, message


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cache")  # one tokenizer for the tiny corpus, shared


def train_tiny(run_dir: Path, cache: Path, *sets: str, config: Path = CONFIG):
    return run(["train.py", "--config", str(config), *with_sets(tiny_overrides(run_dir, cache), *sets)])


def test_length_filters_that_leave_no_training_pair_are_named(tmp_path: Path, cache: Path) -> None:
    message = one_error_line(train_tiny(tmp_path / "r", cache, "data.max_len=2"))
    assert "0 of 400 training pairs left after the length filters: 400 longer than data.max_len=2" in message
    assert "data.max_train_pairs kept 400" in message and str(TINY_CORPUS) in message, message
    message = one_error_line(train_tiny(tmp_path / "r2", cache, "data.train_max_src_len=1"))
    assert "sources longer than data.train_max_src_len=1" in message and "Raise data.max_len / " in message


def test_a_max_len_that_leaves_no_valid_pair_for_the_loss_is_named(tmp_path: Path, cache: Path) -> None:
    proc = train_tiny(tmp_path / "r", cache, "data.max_len=4")
    message = one_error_line(proc)
    assert "0 of the 12 valid pairs are non-empty and within data.max_len=4" in message, message
    assert "raise data.max_len to at least" in message and not list((tmp_path / "r").glob("checkpoints/*.pt"))


def write_tsv(path: Path, pairs: list[tuple[str, str]]) -> dict:
    path.write_text("".join(f"{s}\t{t}\n" for s, t in pairs), encoding="utf-8")
    return {"tsv": str(path)}


def test_an_overlap_drop_that_leaves_no_training_pair_names_its_file(tmp_path: Path, cache: Path) -> None:
    pairs = [(f"Bonjour numéro {i} .", f"Hello number {i} .") for i in range(20)]
    train = write_tsv(tmp_path / "train.tsv", pairs)  # every source is also a valid or test source
    valid, test = write_tsv(tmp_path / "valid.tsv", pairs[:10]), write_tsv(tmp_path / "test.tsv", pairs[10:])
    sets = ["data.source=parallel_text", f"data.train={json.dumps(train)}", f"data.valid={json.dumps(valid)}"]
    sets += [f"data.test={json.dumps(test)}", "data.drop_train_overlap=true", "tokenizer.vocab_size=100"]
    message = one_error_line(train_tiny(tmp_path / "r", cache, *sets))
    assert "0 training pairs left after data.drop_train_overlap removed all 20" in message, message
    assert str(tmp_path / "train.tsv") in message and "data.drop_train_overlap: false" in message

"""A family's declared test sets (study/read/test_sets.py, issue 78): read with the family, the own split
by a name alone, a file pair with the sha256 of both sides; a bad value, a missing file or a file that
changed since the family was declared is one line naming it."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from settings.config import ConfigError
from study.read.family import load_family

HEAD = "baseline: sinusoidal\nheadline:\n  - {table: test, compared_on: test set}\n"


def project(tmp_path: Path) -> tuple[Path, str]:
    """A project folder with configs/ and a file pair under data/; (its configs folder, the pair's YAML)."""
    (tmp_path / "configs").mkdir()
    data = tmp_path / "data" / "testsets"
    data.mkdir(parents=True)
    (data / "desc.fr").write_text("Un chien court .\n", encoding="utf-8")
    (data / "desc.en").write_text("A dog runs .\n", encoding="utf-8")
    digest = {
        side: hashlib.sha256((data / f"desc.{lang}").read_bytes()).hexdigest()
        for side, lang in (("src", "fr"), ("ref", "en"))
    }
    pair = (
        "  - {name: desc, src: data/testsets/desc.fr, ref: data/testsets/desc.en, "
        f"sha256: {{src: {digest['src']}, ref: {digest['ref']}}}, max_source_tokens: 40}}\n"
    )
    return tmp_path / "configs", pair


def read(configs: Path, text: str):
    path = configs / "family.yaml"
    path.write_text(text, encoding="utf-8")
    return load_family(str(path), configs)


def test_declared_sets_are_read_and_a_family_without_them_is_its_own_split(tmp_path):
    configs, pair = project(tmp_path)
    family = read(configs, HEAD + "test_sets:\n  - {name: own}\n" + pair)
    own, desc = family.test_sets
    assert own.own and own.name == "own" and not desc.own and desc.max_source_tokens == 40
    assert family.headline[0].claim == "across"
    per_set = read(configs, HEAD.replace("test set}", "test set, claim: per_set}") + "test_sets:\n" + pair)
    assert per_set.headline[0].claim == "per_set"
    assert read(configs, HEAD).test_sets is None


@pytest.mark.parametrize(
    "extra, says",
    [
        ("test_sets: []\n", "test_sets must be a non-empty list of test sets"),
        ("test_sets: {name: own}\n", "test_sets must be a non-empty list of test sets"),
        ("test_sets:\n  - {name: Own}\n", "test_sets[0].name must be lowercase letters, digits and _"),
        ("test_sets:\n  - {name: '..'}\n", "test_sets[0].name must be lowercase letters, digits and _"),
        ("test_sets:\n  - {name: a/b}\n", "test_sets[0].name must be lowercase letters, digits and _"),
        ("test_sets:\n  - {name: own, path: x}\n", "test_sets[0] must be {name: ..., src: ..., ref: ..., sha256"),
        ("test_sets:\n  - {name: desc, src: a.fr}\n", "test set 'desc' gives src but not ref, sha256"),
        ("test_sets:\n  - {name: own}\n  - {name: own}\n", "test_sets names own twice"),
        ("test_sets:\n  - {name: a}\n  - {name: b}\n", "test_sets names the own test split twice"),
        (
            "test_sets:\n  - {name: d, src: a, ref: b, sha256: {src: xyz, ref: xyz}}\n",
            "test_sets[0].sha256 must be {src: ..., ref: ...}, each the 64 lowercase hex digits",
        ),
        (
            f"test_sets:\n  - {{name: d, src: no.fr, ref: no.en, sha256: {{src: {'a' * 64}, ref: {'a' * 64}}}}}\n",
            "test set 'd': its src file no.fr does not exist (paths are relative to the project)",
        ),
    ],
)
def test_a_bad_declaration_is_one_line(tmp_path, extra, says):
    """Each refusal names the key at fault (test_sets[i].<key>) where one key is bad."""
    configs, _ = project(tmp_path)
    with pytest.raises(ConfigError, match=re.escape(says)) as e:
        read(configs, HEAD + extra)
    assert "\n" not in str(e.value) and "family.yaml" in str(e.value)


def test_a_claim_without_declared_sets_is_refused(tmp_path):
    configs, _ = project(tmp_path)
    with pytest.raises(ConfigError, match=r"headline\[0\]\.claim is about the declared test sets: give test_sets too"):
        read(configs, HEAD.replace("test set}", "test set, claim: per_set}"))
    with pytest.raises(ConfigError, match=r"headline\[0\]\.claim must be across or per_set"):
        read(configs, HEAD.replace("test set}", "test set, claim: both}"))
    one = HEAD.replace("test set}", "test set, claim: across}") + "test_sets:\n  - {name: own}\n"
    with pytest.raises(ConfigError, match=r"headline\[0\]\.claim: across needs two or more test_sets to span"):
        read(configs, one)  # (a claim across one set is no claim across sets)


def test_a_file_changed_since_the_declaration_is_refused(tmp_path):
    configs, pair = project(tmp_path)
    read(configs, HEAD + "test_sets:\n" + pair)  # as declared
    (tmp_path / "data" / "testsets" / "desc.en").write_text("A dog is running .\n", encoding="utf-8")
    with pytest.raises(ConfigError) as e:
        read(configs, HEAD + "test_sets:\n" + pair)
    said = str(e.value)
    assert "test set 'desc': data/testsets/desc.en has sha256" in said and "the file changed since" in said
    assert "\n" not in said


@pytest.mark.parametrize("value", ["0", "-3", "'40'", "4.5", "true"])
def test_a_length_rule_that_is_no_count_of_tokens_is_refused_naming_it(tmp_path, value):
    configs, pair = project(tmp_path)
    with pytest.raises(ConfigError) as e:
        read(configs, HEAD + "test_sets:\n" + pair.replace("max_source_tokens: 40", f"max_source_tokens: {value}"))
    said = str(e.value)
    assert "family.yaml: test_sets[0].max_source_tokens must be a whole number of subword tokens, at least 1" in said
    assert "\n" not in said

"""The test sets of other domains shipped in data/test_sets/<name>/ (docs/DATA.md, issue 78): each
holds a French source and an English reference, line-aligned, no empty line, with its licence and a
README; each file's sha256 is the one its README and docs/DATA.md's `test_sets:` example give, so a
changed file fails here (as it is refused where a family declares it: study/read/test_sets.py), and
the project's reader (what `test.py --src/--ref` reads) gives every pair."""

from __future__ import annotations

import gzip
import hashlib
import re
import shutil
from pathlib import Path

import pytest
import yaml

from evaluation.test_set import read_file_pair
from study.read.test_sets import TestSet, file_changes

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "data" / "test_sets"
DATA_MD = ROOT / "docs" / "DATA.md"
README_ROW = re.compile(r"^\| `([^`]+\.gz)` \| ([\d,]+) \| `([0-9a-f]{64})` \|$", re.M)


def documented_sets() -> tuple[TestSet, ...]:
    """The file pairs of docs/DATA.md's `test_sets:` examples, read by the family's own model."""
    blocks = re.findall(r"```yaml\n(test_sets:\n.*?)```", DATA_MD.read_text(encoding="utf-8"), re.S)
    assert blocks, "docs/DATA.md shows no `test_sets:` example"
    entries = [entry for block in blocks for entry in yaml.safe_load(block)["test_sets"]]
    return tuple(TestSet.model_validate(entry) for entry in entries if "src" in entry)


def problems(folder: Path, documented: dict[str, str]) -> list[str]:
    """What is wrong with a shipped set's folder: its files, their lines, and each file's sha256
    against its README's table and `documented` (file name -> sha256, from docs/DATA.md)."""
    found: list[str] = []
    sides = [sorted(folder.glob(f"*.{lang}.gz")) for lang in ("fr", "en")]
    if [len(s) for s in sides] != [1, 1]:
        return [f"{folder.name}: wants one *.fr.gz and one *.en.gz, has {[p.name for s in sides for p in s]}"]
    readme = folder / "README.md"
    if not readme.is_file() or not list(folder.glob("LICENSE*")):
        found.append(f"{folder.name}: a README.md and a LICENSE file go beside the data")
    rows = README_ROW.findall(readme.read_text(encoding="utf-8") if readme.is_file() else "")
    table = {name: (int(lines.replace(",", "")), digest) for name, lines, digest in rows}
    counts = []
    for path in (sides[0][0], sides[1][0]):
        text = gzip.decompress(path.read_bytes()).decode("utf-8")
        lines = text.split("\n")
        if lines[-1] != "":
            found.append(f"{path.name}: the last line has no line end")
        lines = lines[:-1]
        counts.append(len(lines))
        bad = [i for i, line in enumerate(lines, 1) if not line.strip() or "\t" in line or "\r" in line]
        if bad:
            found.append(f"{path.name}: line {bad[0]} is empty or holds a tab or CR ({len(bad)} such lines)")
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        if table.get(path.name) != (len(lines), digest):
            found.append(f"{path.name}: {len(lines)} lines, sha256 {digest}; README.md says {table.get(path.name)}")
        if documented.get(path.name) != digest:
            found.append(f"{path.name}: sha256 {digest}; docs/DATA.md says {documented.get(path.name)}")
    if counts[0] != counts[1]:
        found.append(f"{folder.name}: {counts[0]} French lines but {counts[1]} English ones")
    return found


def documented_digests() -> dict[str, str]:
    """File name -> sha256 of every file pair docs/DATA.md declares."""
    out = {}
    for s in documented_sets():
        out[Path(s.src).name], out[Path(s.ref).name] = s.sha256.src, s.sha256.ref
    return out


def folders() -> list[Path]:
    return sorted(p for p in SHIPPED.iterdir() if p.is_dir())


def test_at_least_one_set_ships_and_docs_declare_each_as_a_family_would():
    assert [p.name for p in folders()] == ["ntrex_news"]
    sets = documented_sets()
    assert {Path(s.src).parent for s in sets} == {p.relative_to(ROOT) for p in folders()}
    assert {s.name for s in sets} == {p.name for p in folders()}  # the declared name is the folder's
    assert file_changes(sets, ROOT) is None  # the check a family's test_sets get (study/read/family.py)


@pytest.mark.parametrize("folder", folders(), ids=lambda p: p.name)
def test_each_shipped_set_is_aligned_licensed_and_its_documented_hash(folder: Path):
    assert problems(folder, documented_digests()) == []


@pytest.mark.parametrize("folder", folders(), ids=lambda p: p.name)
def test_the_project_reader_gives_every_pair(folder: Path):
    """What `test.py --src X.fr.gz --ref X.en.gz` reads: every pair, neither side empty."""
    src, ref = next(folder.glob("*.fr.gz")), next(folder.glob("*.en.gz"))
    pairs, documents = read_file_pair({"src": str(src), "tgt": str(ref)}, "fr", "en")
    assert len(pairs) == len(gzip.decompress(src.read_bytes()).splitlines()) and documents is None
    assert all(s and r for s, r in pairs)


def rewrite(path: Path, change) -> None:
    lines = gzip.decompress(path.read_bytes()).decode("utf-8").split("\n")[:-1]
    path.write_bytes(gzip.compress(("\n".join(change(lines)) + "\n").encode("utf-8"), mtime=0))


@pytest.mark.parametrize(
    "side, change, says",
    [
        ("fr", lambda lines: [lines[0].replace("e", "é", 1), *lines[1:]], "sha256"),  # one character
        ("en", lambda lines: lines[:-1], "988 French lines but 987 English ones"),
        ("fr", lambda lines: [lines[0], "  ", *lines[2:]], "line 2 is empty"),
        ("en", lambda lines: [lines[0] + "\tx", *lines[1:]], "line 1 is empty or holds a tab"),
    ],
)
def test_a_changed_copy_fails(tmp_path: Path, side, change, says):
    """Mutation check: a copy of a shipped set passes until one of its files changes."""
    copy = tmp_path / "ntrex_news"
    shutil.copytree(SHIPPED / "ntrex_news", copy)
    documented = documented_digests()
    assert problems(copy, documented) == []
    rewrite(next(copy.glob(f"*.{side}.gz")), change)
    found = problems(copy, documented)
    assert any(says in line for line in found), found
    assert any("sha256" in line for line in found)  # every change also breaks the documented hash

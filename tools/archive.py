#!/usr/bin/env python
"""The archive (results/): each tested run without checkpoints, tokenizers or TensorBoard events, in
the stored forms of utils/stored_files.py, so that the whole repository travels (a GPU machine takes
a 64 MiB checkout) and every figure still re-derives exactly.

  python tools/archive.py pack runs/demo runs/length runs/report/length   # make archive: runs -> results/
  python tools/archive.py pack --in-place results/demo                    # re-store an archived study
  python tools/archive.py cat results/demo/rope/test/hypotheses.txt       # any stored file's text
  python tools/archive.py unpack results/demo/rope /tmp/rope               # a run as plain files again

What a run keeps: config.yaml, metrics.jsonl, training_lengths.json and provenance.json as they
are, data_report.json (the same for every run of a study) by content; each scored test folder
(test/, test_<variant>/ with their concat/k<K>/): the references and sources once per study by
content (`references.txt.sha256` naming <study>/test_sets/<sha256>.txt.xz), the hypotheses of the
folder and its concat/k<K>/ in one `hypotheses.txt.tar.xz` (`tar -xOf` reads one), the numeric
tables by column (`*.tsv.cols.xz`, `source_lengths.txt.cols.xz`), everything else xz-compressed
(`scores.json.xz`: `xzcat` reads it). A file whose stored form already decodes to the same text is
left as it is, so archiving again changes nothing in git.

Under the commands' rules: each archived run is published through the same journal as test.py's and
compare.py's sets (utils/publish.py: a kill leaves the earlier archived run or the new one, and the
same command finishes it); the run read from and the archived run are held by their run locks
while it is packed; a test set of the source that a stopped test.py left half published is finished
first (the readers' rule), or refused in one line; an input that is no folder of runs is one line,
exit 2. Every reader of an archived run (unpack, cat, compare.py) finishes a pack's journal the same
way, or names the command that does. pack checks each file it stores against the run's own records
(tools/archive_inputs.py) before it writes anything; unpack refuses a source that is no run.
"""

from __future__ import annotations

import argparse
import contextlib
import lzma
import shutil
import sys
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from commands.cli import main_guard  # noqa: E402
from tools.archive_inputs import RUN_FILES, is_run, logical_files, runs_to_pack, stored_run_files, tested_folders  # noqa: E402
from utils import run_files  # noqa: E402
from utils.errors import HarnessError  # noqa: E402
from utils.files import atomic_output  # noqa: E402
from utils.publish import ARCHIVE_PACK, OutputSet, settle_run  # noqa: E402
from utils.run_folder import RunLock  # noqa: E402
from utils.stored_files import (  # noqa: E402
    BUNDLE,
    BY_CONTENT,
    COLUMNS,
    FORMS,
    STORE,
    STORED_TEXT,
    XZ,
    bundle_members,
    content_name,
    encode_columns,
    make_bundle,
    pointer_digest,
    read_stored_text,
    read_text,
    store_entry,
    stored_exists,
    stored_form,
)

# the same in every run of a study (the test set's texts, the corpus report): stored once by content
SHARED = (run_files.REFERENCES, run_files.SOURCES, run_files.DATA_REPORT)
TABLES = (".tsv", run_files.SOURCE_LENGTHS)  # numbers by column where they decode exactly
BUNDLED = (run_files.HYPOTHESES,)  # of a test folder and its concat/k<K>/: one tar.xz (pack_bundle)
DROPPED = ("checkpoints", "tokenizer.json", "tb", "ctranslate2")  # what the archive leaves out
XZ_PRESET = 9 | lzma.PRESET_EXTREME
# The budget (tests/tools/test_archive_budget.py): the tracked tree a GPU machine is sent (64 MiB at
# most, with what a job carries) and each archived run's own files (a variant test counts apart).
# 56 MiB: the twelve-seed length study alone holds about 26 MB (a RoPE run with its three scaled
# tests about 840 KB); the across-set demo (configs/demo_across, issue 78) up to 60 runs of about
# 120 KB each, tested on two sets (about 7 MB at its last look, 28 KB a run for the second set), on a
# tree of 44.5 MiB before it; 8 MiB stay free for what a GPU job carries (tools/gpu_study.sh sends
# runs, not checkpoints). Denser forms were measured (demo_across/rope_seed202) and not worth a second
# stored form: its hypotheses under zstd with the set's references as dictionary 9% smaller (30.6 ->
# 27.7 KB), the concat/k1 copy 240 bytes of its bundle, teacher_forced_pairs with nll_no_eos stored
# as its difference from nll_sum 6% smaller (45.0 -> 42.1 KB; larger on the length study's runs).
TREE_BUDGET = 56 * 2**20
RUN_BUDGET = 400_000


def archived_form(name: str, text: str) -> tuple[str, Optional[bytes]]:
    """(suffix, uncompressed payload) of a file's archived form: a shared text by content (no
    payload here), a table by column when exact, else the text under xz."""
    if name in SHARED:
        return BY_CONTENT, None
    columns = encode_columns(text) if name.endswith(TABLES) else None
    return (COLUMNS, columns) if columns is not None else (XZ, text.encode("utf-8"))


def write_bytes(path: Path, data: bytes) -> None:
    with atomic_output(path, "wb", encoding=None) as f:
        f.write(data)


def store_shared(store: Path, text: str) -> str:
    """Put a shared text into the study's store (once); its sha256."""
    digest = content_name(text)
    target = store_entry(store, digest)
    if not target.is_file() or read_stored_text(target) != text:  # absent, or damaged: written again
        write_bytes(target, lzma.compress(text.encode("utf-8"), preset=XZ_PRESET))
    return digest


def pack_file(source: Path, target: Path, store: Path, old: Path) -> None:
    """Logical file `source` into the archive as `target`'s stored form; `old` (the same file in the
    run's previous archive) is kept when it is in that form and holds the same text."""
    text = read_text(source)
    suffix, payload = archived_form(source.name, text)
    stored = target.with_name(target.name + suffix)
    stored.parent.mkdir(parents=True, exist_ok=True)
    previous = stored_form(old) if old.parent.is_dir() else None
    if previous is not None and previous.name == stored.name and read_text(old) == text:
        shutil.copy2(previous, stored)
        if suffix == BY_CONTENT:
            store_shared(store, text)
    elif suffix == BY_CONTENT:
        write_bytes(stored, (store_shared(store, text) + "\n").encode())
    else:
        write_bytes(stored, lzma.compress(payload, preset=XZ_PRESET))


def _k_order(member: str) -> tuple:
    """The test folder's own file first, then concat/k<K>/ by K."""
    parts = member.split("/")
    return (len(parts), int(parts[1][1:]) if len(parts) == 3 and parts[1][1:].isdigit() else 0, member)


def pack_bundle(folder: Path, paths: list[Path], build: Path, old: Path) -> None:
    """The files of one name in a test folder and its concat/k<K>/ into one `<name>.tar.xz` (they
    translate the same sentences: compressed together, 40% smaller); the previous archive's bundle
    is kept when it holds the same texts."""
    members = {
        p.relative_to(folder).as_posix(): read_text(p)
        for p in sorted(paths, key=lambda p: _k_order(p.relative_to(folder).as_posix()))
    }
    name = paths[0].name + BUNDLE
    previous = old / name
    build.mkdir(parents=True, exist_ok=True)
    if previous.is_file() and {m: t.decode("utf-8") for m, t in bundle_members(previous).items()} == members:
        shutil.copy2(previous, build / name)
    else:
        write_bytes(build / name, lzma.compress(make_bundle(members), preset=XZ_PRESET))


def pack_run(source: Path, target: Path) -> int:
    """Archive run `source` as `target` (the same folder with --in-place), built in a staging folder
    and published through the journal (utils/publish.py), both runs locked meanwhile; the archived
    run's size in bytes (its shared texts not counted)."""
    if source.resolve() == target.resolve() and any((source / name).exists() for name in DROPPED):
        raise HarnessError(
            f"{source} holds {', '.join(n for n in DROPPED if (source / n).exists())}: packing it in place "
            f"would delete them; --in-place is for runs already archived (results/), `pack` copies a run"
        )
    command = ARCHIVE_PACK
    with contextlib.ExitStack() as locks:
        for run in dict.fromkeys([source.resolve(), target.resolve()]):  # (one lock when in place)
            locks.enter_context(RunLock(run, command))
        settle_run(source, command)  # a test set a stopped test.py left half published: finished first
        with OutputSet(target, command) as out:  # a pack stopped while publishing this run: finished first
            build = out.staged_folder()
            stage_run(source, target, build)
            staged = {p.relative_to(build) for p in build.rglob("*") if p.is_file()}
            out.publish(drops=[p for p in own_files(target) if p.relative_to(target) not in staged])
    return _tree_size(target)


def own_files(run: Path) -> list[Path]:
    """The archived run's files (its lock files and any hidden leftover aside)."""
    if not run.is_dir():
        return []
    return [
        p for p in run.rglob("*") if p.is_file() and not any(part.startswith(".") for part in p.relative_to(run).parts)
    ]


def stage_run(source: Path, target: Path, build: Path) -> None:
    """Write the archived form of run `source` into `build` (laid out as the run), reusing what the
    earlier archive `target` holds in the same form."""
    store = target.parent / STORE
    for name in RUN_FILES:
        if name in SHARED and stored_exists(source / name):
            pack_file(source / name, build / name, store, target / name)
        elif (source / name).is_file():
            shutil.copy2(source / name, build / name)
        elif target.is_dir() and (target / name).is_file():  # only in the archive (a backfilled provenance.json)
            shutil.copy2(target / name, build / name)
    for folder in tested_folders(source):
        files = logical_files(folder)
        bundled = [p for p in files if p.name in BUNDLED]
        bundled = bundled if len(bundled) > 1 else []  # one file alone: its own .xz
        if bundled:
            pack_bundle(folder, bundled, build / folder.relative_to(source), target / folder.relative_to(source))
        for path in (p for p in files if p not in bundled):
            relative = path.relative_to(source)
            pack_file(path, build / relative, store, target / relative)


def building(target: Path, step: str) -> Path:
    """An empty folder beside `target` to build it in (what a cut-short build left is dropped)."""
    build = target.with_name(f".{target.name}.{step}")
    shutil.rmtree(build, ignore_errors=True)
    build.mkdir(parents=True)
    return build


def publish(build: Path, target: Path) -> None:
    """Put the built folder in `target`'s place whole (an earlier one is retired only then)."""
    if target.exists():
        retired = target.with_name(f".{target.name}.retired")
        shutil.rmtree(retired, ignore_errors=True)
        target.rename(retired)
        build.rename(target)
        shutil.rmtree(retired)
    else:
        build.rename(target)


def unpack_run(source: Path, target: Path) -> None:
    """An archived run back as the plain run folder test.py wrote (its outputs as plain files), built
    beside `target` and put in place whole: a stopped unpack leaves no `target`, so it runs again."""
    if target.exists():
        raise HarnessError(f"{target} exists: unpack into a new folder")
    settle_run(source, "tools/archive.py unpack")  # a pack (or test.py) stopped while publishing it: finished first
    if not is_run(source):
        raise HarnessError(
            f"{source} is {'no run folder (no config.yaml)' if source.is_dir() else 'not a folder'}: "
            f"give an archived run, e.g. results/demo/rope; nothing unpacked"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    build = building(target, "unpacking")
    for path in stored_run_files(source):
        out = build / path.relative_to(source)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(read_text(path), encoding="utf-8", newline="")
    publish(build, target)


def cat(file: Path) -> str:
    """A stored file's text, its run settled first (the readers' rule: a stopped pack or test.py finished)."""
    run = next((p for p in file.parents if is_run(p)), None)
    if run is not None:
        with contextlib.redirect_stdout(sys.stderr):  # (what it says: not part of the text printed)
            settle_run(run, "tools/archive.py cat")
    text = read_text(file)
    if text is None:
        raise HarnessError(f"{file}: no such file in any stored form ({', '.join(FORMS[1:])})")
    return text


def prune_store(study: Path) -> list[Path]:
    """Remove the shared texts no run of the study names any more (the archive's own files)."""
    store = study / STORE
    if not store.is_dir():
        return []
    named = {pointer_digest(p) for p in study.rglob(f"*{BY_CONTENT}")}
    unused = [p for p in store.glob(f"*{STORED_TEXT}") if p.name[: -len(STORED_TEXT)] not in named]
    for p in unused:
        p.unlink()
    return unused


def pack(sources: list[Path], results: Path, runs_root: Optional[Path]) -> None:
    """Archive every tested run under `sources` (folders of runs, or runs) from `runs_root` into the
    same place under `results` (None: re-store archived runs in place) and say what was added."""
    total_before = _tree_size(results)
    studies = set()
    for folder in sources if runs_root is not None else ():  # the archive written into the runs it reads
        if folder.resolve() in (results.resolve(), *results.resolve().parents):
            raise HarnessError(
                f"--results {results} is inside {folder}, which this pack reads: give a --results outside the "
                f"runs (default: results)"
            )
    runs = [run for folder in sources for run in runs_to_pack(folder)]  # all checked before any is written
    for run in runs:
        target = run if runs_root is None else results / _under(run, runs_root)
        before = _tree_size(target)
        size = pack_run(run, target)
        studies.add(target.parent)
        print(f"archived {run} -> {target} ({size / 1e3:.0f} KB, {(size - before) / 1e3:+.0f} KB)")
    for study in sorted(studies):
        for p in prune_store(study):
            print(f"removed {p} (no archived run names it)")
    after = _tree_size(results)
    print(f"{results}/: {after / 2**20:.2f} MiB ({(after - total_before) / 2**20:+.2f} MiB)")
    for line in over_budget(results):
        print(f"over budget: {line}: make test fails (tests/tools/test_archive_budget.py)")


def budget_units(results: Path) -> dict[Path, int]:
    """{each archived run (without its variant tests), and each variant test folder: its bytes}."""
    units = {}
    for config in sorted(results.rglob(run_files.CONFIG)):
        run = config.parent
        variants = [d for d in run.glob("test_*") if d.is_dir()]
        units[run] = sum(
            p.stat().st_size for p in run.rglob("*") if p.is_file() and not any(v in p.parents for v in variants)
        )
        for v in variants:
            units[v] = _tree_size(v)
    return units


def over_budget(results: Path, limit: int = RUN_BUDGET) -> list[str]:
    return [
        f"{unit} holds {size / 1e3:.0f} KB (budget {limit / 1e3:.0f} KB)"
        for unit, size in budget_units(results).items()
        if size > limit
    ]


def tracked_size(root: Path) -> int:
    """Bytes of the files git tracks in `root` as they are on disk (what a clone and a device copy hold)."""
    import subprocess

    listed = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True).stdout
    files = [root / name for name in listed.decode().split("\0") if name]
    return sum(p.stat().st_size for p in files if p.is_file())


def _under(run: Path, root: Path) -> Path:
    try:
        return run.resolve().relative_to(root.resolve())
    except ValueError:
        raise HarnessError(f"{run} is not under {root}/: archive runs from there (or give --runs)") from None


def _tree_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.is_dir() else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("pack", help="archive the tested runs of these folders into results/")
    p.add_argument("folders", nargs="+", type=Path, help="folders of runs (runs/demo) or single runs")
    p.add_argument("--results", type=Path, default=Path("results"), help="the archive (default: results)")
    p.add_argument("--runs", type=Path, default=Path("runs"), help="where the runs are (default: runs)")
    p.add_argument("--in-place", action="store_true", help="re-store archived runs where they are")
    u = sub.add_parser("unpack", help="write an archived run back as plain files into a new folder")
    u.add_argument("run", type=Path, help="the archived run folder")
    u.add_argument("target", type=Path, help="the new folder")
    c = sub.add_parser("cat", help="print a stored file's text (any form)")
    c.add_argument("file", type=Path, help="the file by its plain name, e.g. <run>/test/hypotheses.txt")
    args = parser.parse_args(argv)
    try:
        if args.command == "unpack":
            unpack_run(args.run, args.target)
        elif args.command == "cat":
            sys.stdout.write(cat(args.file))
        else:
            missing = [f for f in args.folders if not f.is_dir()]
            if missing:
                raise HarnessError(
                    f"{missing[0]} is not a folder: give folders of runs (runs/demo) or run folders to pack"
                )
            pack(args.folders, args.results, None if args.in_place else args.runs)
    except HarnessError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main_guard(main))  # (a stop, an OSError: one line, as the commands say it)

"""Translate a test set and score it whole: sacreBLEU (with signature), chrF, nltk BLEU-4 on word
tokens, the hypothesis/reference length ratio, scores per source length, and optionally the
length-extrapolation protocol (--concat); and a teacher-forced length diagnostic that does not depend
on when the model stops: the references' NLL and accuracy per target position, per k, beyond and
within the training length, and p(EOS) at the sentence boundaries of joined inputs
(evaluation/teacher_forced.py; `--set evaluation.teacher_forced=false` skips it).

Examples:
  python test.py --run runs/demo/rope                       # the run's best checkpoint, its test split
  python test.py --run runs/demo/rope --src tst2017.fr.xml --ref tst2017.en.xml --output runs/demo/rope/tst2017
  python test.py --run runs/length/rope --concat 1 2 4 8    # inputs of k consecutive test pairs joined
  python test.py --config configs/demo/rope.yaml --model_path runs/demo/rope/checkpoints/best_....pt
  python test.py --model_path ckpt.pt --set decoding.beam_size=1 --output /tmp/greedy --overwrite

Writes into <run>/test/ (or --output): hypotheses.txt (exactly one detokenized line per test
pair, in test order), references.txt, sources.txt, source_lengths.txt (subword tokens per source,
for compare.py's findings per length bucket) and scores.json; with --concat (or the config's
evaluation.concat) also concat/k<K>/ for each K. Every pair is scored: an empty source gets an
empty hypothesis, a source longer than the model can represent is truncated and counted.
--src/--ref take plain text (.gz allowed), raw WIT3 train.tags files or WIT3 XML (aligned by
document and segment id; documents keep --concat inputs within one talk).
The scores of a run's own test split also go to its TensorBoard events (test/*), where the
HParams dashboard shows them beside the run's settings. A checkpoint other than the run's best
(--model_path <run>/checkpoints/last_*.pt) is scored into <run>/test_<checkpoint>/.
The folder is published whole (utils/publish.py): a kill leaves the earlier test or this one,
never a mix, and the same command again finishes it or says the test is already there.

The work (what sweep.py's jobs call too): `run_test` checks that keep a score honest (only
test-time keys overridden, the output folder the run's own or the user's, never a file replaced
unasked, one writer per run folder), decodes and scores the set whole, runs the teacher-forced
diagnostic and writes scores.json (with the commit, tree state and code fingerprint it was scored at,
`tested_at`: utils/provenance.code_state), the run's TensorBoard test scalars and a summary.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import tempfile
from pathlib import Path
from typing import Iterator, Optional, Sequence

from artifacts.checkpoint import checkpoint_step
from artifacts.loading import load_for_decoding
from artifacts.lookup import ModelSource, find_model, run_dir_of_checkpoint
from commands.cli import (
    RUN_HELP,
    TEST_TIME_SETS,
    UsageError,
    command_parser,
    overridden_keys,
    parse_command,
    refuse_together,
)
from commands.test_folder import (
    OUTPUT_FILES,
    check_outputs,
    earlier_outputs,
    file_records,
    output_folder,
    output_folders,
    same_test_done,
    test_time_settings,
)
from commands.test_request import TestRequest
from evaluation.teacher_forced import BEYOND_FILE, PAIRS_FILE, check_position_buckets, teacher_forced_scores
from evaluation.test_set import check_writable, evaluate, overlap_with_training, read_config_split, read_file_pair
from settings.config import ConfigError, to_dict
from training.tensorboard_log import log_test_scores
from utils import run_files
from utils.errors import HarnessError
from utils.files import atomic_write_text, file_sha256, remove_own_temporaries
from utils.metrics import HEADLINE, metric_line, pool_nll
from utils.provenance import code_state
from utils.publish import OutputSet, clear_leftovers, finish_publishing, journal_file
from utils.run_folder import RunLock, is_run_folder
from utils.run_log import log
from utils.runtime import device_at_test_time


def build_parser() -> argparse.ArgumentParser:
    parser = command_parser(
        __doc__,
        config=True,
        run=RUN_HELP,
        sets=TEST_TIME_SETS,
        model_path=True,
        device=True,
        device_of_run=True,
        output="where to write the outputs (default: <run>/<split>/, or <run>/test_<src file name>/ with --src)",
        overwrite="the outputs of an earlier test.py in the output folder",
    )
    parser.add_argument("--split", choices=["test", "valid"], help="which split of the config (default: test)")
    parser.add_argument("--src", metavar="FILE", help="score this source file instead of a split (needs --ref)")
    parser.add_argument("--ref", metavar="FILE", help="the reference translations of --src, line by line")
    parser.add_argument(
        "--concat",
        type=int,
        nargs="+",
        metavar="K",
        help="also score inputs of K consecutive pairs joined, for each K (e.g. 1 2 4 8); "
        "default: the config's evaluation.concat",
    )
    return parser


def main(argv: Optional[list[str]] = None) -> int:
    return run_test(TestRequest(**vars(parse_command(build_parser(), argv))))


def run_test(args: TestRequest) -> int:
    """Score a trained model on a test set, as `test.py` does (sweep.py's jobs call this): the run's
    best checkpoint (or --model_path) on its test split (or --src/--ref) into <run>/<split>/ (or
    --output), on --device or else the run's training.device."""
    check_request(args)
    # One writer at a time, locked before the checkpoint is read (a train.py started meanwhile could
    # rotate it away): the run the request reads from, and the folder it writes into
    with contextlib.ExitStack() as locks:
        named = run_read_from(args)
        if named is not None:
            named = lock_run_read(named, args, locks)
        source = find_model(args.model_path, args.run, args.config, args.overrides)
        out_dir, run = output_folder(args, source.path)

        def lock_output() -> None:  # the output folder's own lock, where it is not the run read from
            if (run or out_dir).resolve() != (named.resolve() if named else None):
                locks.enter_context(RunLock(run if run is not None else out_dir, "test.py"))

        return test_checkpoint(args, source, out_dir, run, lock_output)


def lock_run_read(run: Path, args: TestRequest, locks: contextlib.ExitStack) -> Optional[Path]:
    """Hold the lock of the run read from (None returned: it could not be locked and is only read). A
    run this user may read but not write (a read-only mount, a colleague's run) cannot hold our lock:
    with --output outside it, it is read without it (said once); otherwise the error names the real
    obstacle, the run folder test.py would write into."""
    try:
        locks.enter_context(RunLock(run, "test.py"))
        return run
    except ConfigError as e:
        inside = args.output is None or Path(args.output).resolve().is_relative_to(run.resolve())
        if inside:
            raise ConfigError(
                f"{e}; test.py writes its scores into {run}/test unless --output names a folder elsewhere"
            ) from None
        log(f"note: {run} cannot be written here, so test.py reads it without its lock (--output {args.output})")
        return None


def run_read_from(args: TestRequest) -> Optional[Path]:
    """The run folder whose checkpoint the request reads (--run, a --model_path inside a run's
    checkpoints/), if it is one: locked before the checkpoint is chosen and read."""
    if args.run:
        folder = Path(args.run)
    elif args.model_path and Path(args.model_path).parent.name == "checkpoints":
        folder = Path(args.model_path).parent.parent
    else:
        return None
    return folder if is_run_folder(folder) else None


def test_checkpoint(args: TestRequest, source: ModelSource, out_dir: Path, run: Optional[Path], lock_output) -> int:
    """Load, check, decode and score `source` into `out_dir` (the run read from is locked; `lock_output`
    locks the output folder once nothing can be refused any more, so a refusal writes nothing): the
    same test again is done; an earlier one of another request needs --overwrite."""
    if not journal_file(out_dir).exists() and not (out_dir / run_files.SCORES).exists():
        check_outputs(args, out_dir, run)  # a user's files refused before loading
    loaded = load_for_decoding(source, args.overrides, args.config)
    cfg, tokenizer, decoder, ckpt = loaded.config, loaded.tokenizer, loaded.decoder, loaded.path
    device = device_at_test_time(args.device, cfg, ckpt)
    decoder.to(device)
    if cfg.evaluation.teacher_forced:  # before hours of decoding, not after
        check_position_buckets(cfg.evaluation.position_buckets)
    pairs, documents, test_set = read_test_set(args, cfg, ckpt)
    check_concat_fits(args, cfg, len(pairs))
    check_writable(out_dir)
    lock_output()
    if finish_publishing(out_dir, writer="test.py"):  # a test.py killed while publishing: its set is whole now
        log(f"completed {out_dir}, which a test.py stopped while publishing it had left half published")
    done = None if args.overwrite else same_test_done(args, cfg, ckpt, test_set, out_dir)
    if done is not None:  # the same command again (after a kill, or a sweep's rerun): nothing to redo
        clear_leftovers(out_dir)
        log(f"{out_dir} already holds this test (same checkpoint, test set and settings); --overwrite redoes it")
        print_summary(done, out_dir)
        return 0
    check_outputs(args, out_dir, run)  # (before minutes of decoding, after the seconds of loading)
    return score_and_write(args, ckpt, cfg, decoder, tokenizer, device, pairs, documents, test_set, out_dir)


def read_test_set(args: TestRequest, cfg, ckpt: Path) -> tuple[list, Optional[list], dict]:
    """(pairs, their documents, what test set it is): the --src/--ref files or the config's split."""
    if args.src:
        with rereadable(args.src, args.ref) as (src, ref):
            pairs, documents = read_file_pair({"src": src, "tgt": ref}, cfg.data.src_lang, cfg.data.tgt_lang)
            # the bytes read: a family's declared test set is known by them (study/read/test_sets.py)
            sha256 = {"src": file_sha256(Path(src)), "ref": file_sha256(Path(ref))}
        test_set = {"src": str(args.src), "ref": str(args.ref), "sha256": sha256}
    else:
        pairs, documents = read_config_split(cfg.data, args.split)
        test_set = {"split": args.split}
    if not pairs:
        where = f"--src {args.src} / --ref {args.ref}" if args.src else f"the {args.split} split of {ckpt}'s config"
        raise ConfigError(f"no pairs to score in {where}: give a non-empty test set")
    return pairs, documents, test_set


@contextlib.contextmanager
def rereadable(*paths: str) -> Iterator[list[str]]:
    """The paths, each pipe among them (a shell's `<(...)`, a FIFO, /dev/fd/N) copied first into a
    temporary file of the same name: the readers look at a file's head to tell its format, then read
    it whole, and a pipe streams once. A missing path is passed on: the reader names it. An error
    the readers raise names the user's path, not the copy's."""
    with tempfile.TemporaryDirectory(prefix="test-inputs-") as spool:
        copies = []
        for number, path in enumerate(paths):
            p = Path(path)
            if p.exists() and not (p.is_file() or p.is_dir()):
                copy = Path(spool) / str(number) / p.name
                copy.parent.mkdir()
                with open(p, "rb") as stream:
                    copy.write_bytes(stream.read())
                path = str(copy)
            copies.append(path)
        try:
            yield copies
        except HarnessError as error:
            error.args = (named_as_given(str(error), copies, paths),)
            raise


def named_as_given(message: str, copies: Sequence[str], paths: Sequence[str]) -> str:
    """`message` with each copy's path replaced by the path the user gave."""
    for copy, path in zip(copies, paths):
        if copy != path:
            message = message.replace(copy, str(path))
    return message


def check_request(args: TestRequest) -> None:
    """The flags that go together, and the split's default."""
    refuse_together(args, "the model (--run: its best checkpoint)", "--run", "--model_path")
    refuse_together(args, "the config (--run: the run folder's own)", "--run", "--config")
    if args.concat is not None and "evaluation.concat" in overridden_keys(args.overrides):
        raise UsageError("--concat and --set evaluation.concat=... both set evaluation.concat: give one of them")
    if (args.src is None) != (args.ref is None):
        raise ConfigError("give both --src FILE and --ref FILE (source and reference translations), or neither")
    if args.src and Path(args.src).resolve() == Path(args.ref).resolve():
        raise ConfigError(
            f"--src and --ref name the same file ({args.ref}): the references are the source's translations"
        )
    if args.src and args.split:
        raise ConfigError("--split picks a split of the config; with --src/--ref the files are the test set: drop one")
    args.split = args.split or "test"
    if args.concat is not None and any(k < 1 for k in args.concat):
        raise ConfigError(f"--concat: every K is a number of pairs per input (at least 1), got {args.concat}")


def check_concat_fits(args: TestRequest, cfg, pairs: int) -> None:
    """An input of K pairs where the test set has fewer is the one input of all of them: it would be
    scored again under another k (and twice for two such K). Given with --concat: refused before
    anything is decoded; from the config's evaluation.concat (a small file tested with the run's
    settings): not scored, said, and listed in scores.json (`concat_not_scored`)."""
    concat = args.concat if args.concat is not None else cfg.evaluation.concat
    too_many = sorted(k for k in set(concat) if k > pairs)
    if too_many and args.concat is not None:
        where = args.src if args.src else f"the {args.split} split"
        raise ConfigError(
            f"--concat: {where} has {pairs} pairs, so an input of {too_many[0]} pairs would be the input of all "
            f"{pairs} again: give K of at most {pairs}"
        )
    if too_many:
        log(f"k = {', '.join(map(str, too_many))} (evaluation.concat) not scored: the test set has {pairs} pairs")
        args.concat = [k for k in concat if k <= pairs]
        args.concat_not_scored = too_many


def score_and_write(
    args: TestRequest, ckpt, cfg, decoder, tokenizer, device, pairs, documents, test_set, out_dir
) -> int:
    """Decode and score into a staging folder, then publish the whole set at once (utils/publish.py):
    a kill leaves the earlier test or this one, never a mix; files of the earlier test that this one
    does not write (its concat/k8/, its teacher-forced files, archived forms) go at the same moment."""
    for stale in remove_own_temporaries(folder / name for folder in output_folders(out_dir) for name in OUTPUT_FILES):
        log(f"removed {stale}, left by a test.py that was stopped while writing")
    concat = args.concat if args.concat is not None else cfg.evaluation.concat
    tested_at = code_state()  # the code that scores: its commit, tree state and fingerprint, as train.py records
    log(
        f"scoring {len(pairs):,} pairs of {test_set} with {ckpt} on {device}"
        + (f" ({len(set(documents))} documents)" if documents else "")
    )
    with OutputSet(out_dir, "test.py") as outputs:
        staged = outputs.staged_folder()
        scores = evaluate(decoder, tokenizer, pairs, documents, cfg, device, staged, concat)
        if cfg.evaluation.teacher_forced:  # the references' likelihood per target position, whatever the search does
            log("teacher forcing the references (k = 1" + "".join(f", {k}" for k in sorted(set(concat) - {1})) + ")")
            scores["teacher_forced"], beyond, per_pair = teacher_forced_scores(
                decoder, tokenizer, pairs, documents, cfg, device, concat
            )
            for name, text in ((BEYOND_FILE, beyond), (PAIRS_FILE, per_pair)):
                if text is not None:  # per input (compare.py's test of the NLL), per pair and k (its degradation)
                    atomic_write_text(staged / name, text)
        if args.src:  # a file from outside the run: is it in the training data? (splits: see data_report.json)
            scores["overlap_with_train"] = overlap_with_training(cfg.data, pairs)
        scores.update(
            test_set=test_set,
            split=test_set.get("split"),
            checkpoint=str(ckpt),
            positional=cfg.model.positional.name,
            model=to_dict(cfg.model),  # what was trained (and tested): readers hold config.yaml against it
            decoding=to_dict(cfg.decoding),
            test_time_overrides=test_time_settings(args.overrides),
            tested_at=tested_at,
        )
        if args.concat_not_scored:
            scores["concat_not_scored"] = list(args.concat_not_scored)
        scores["files"] = file_records(staged)  # each per-sentence file's rows and sha256: checked on reading
        atomic_write_text(staged / run_files.SCORES, json.dumps(scores, indent=2) + "\n")
        outputs.publish(drops=earlier_outputs(out_dir))
    run_dir = run_dir_of_checkpoint(ckpt)
    if out_dir.resolve() == (run_dir / "test").resolve():  # the run's own test set: into its TensorBoard/HParams
        log_test_scores(run_dir, scores, checkpoint_step(ckpt))
    print_summary(scores, out_dir)
    return 0


def print_summary(scores: dict, out_dir: Path) -> None:
    print(
        f"{metric_line(scores)} ({scores['nltk_tokenization']})  length ratio {scores['length_ratio']:.3f}  on "
        f"{scores['num_sentences']} sentences ({scores['truncated_sources']} truncated)"
    )
    print(f"signature: {scores['sacrebleu_signature']}")
    print(
        "by source length (subword tokens): "
        + "  ".join(
            f"{b['bucket']}: {b[HEADLINE] if b[HEADLINE] is not None else '-'} (n={b['num_sentences']})"
            for b in scores["by_source_length"]
        )
    )
    if "longer_than_training" in scores:
        lt = scores["longer_than_training"]
        print(
            f"longer than training (> {lt['train_max_src_len']} tokens): sacreBLEU {lt[HEADLINE]} "
            f"chrF {lt['chrf']} (n={lt['num_sentences']})"
        )
    for row in scores.get("concat", []):
        print(f"k={row['k']}: {metric_line(row)}  length ratio {row['length_ratio']:.3f}  ({row['num_inputs']} inputs)")
    teacher_forced = scores.get("teacher_forced") or {}
    for k, entry in teacher_forced.get("k", {}).items():
        print(teacher_forced_line(k, entry, plain="unavailable" in teacher_forced))
    print(f"outputs: {out_dir}")


def teacher_forced_line(k: str, entry: dict, plain: bool = False) -> str:
    """One k of the teacher-forced diagnostic: NLL (EOS renormalised out; `plain`: not, where the
    backend gives no distribution) beyond and within the decoder's training length, and p(EOS) at
    the sentence boundaries of joined inputs."""
    field, count = ("nll", "tokens") if plain else ("nll_no_eos", "tokens_no_eos")

    def nll(part: Optional[dict]) -> str:
        if not part or part[field] is None:
            return "–"
        return f"{part[field]:.3f} (n={part[count]})"

    label = f"k={k} teacher-forced NLL, " + (
        "plain (no EOS renormalising in CTranslate2)" if plain else "EOS renormalised out"
    )
    if entry["beyond_training"] is None:
        tokens = sum(b[count] for b in entry["buckets"] if b[field] is not None)
        pooled = {count: tokens, field: pool_nll(entry["buckets"], field, count)}
        text = f"{label}: {nll(pooled)} (training length not recorded)"
    else:
        text = f"{label}: beyond training {nll(entry['beyond_training'])}, within {nll(entry['within_training'])}"
    boundary = entry.get("boundary")
    if boundary:
        p = "–" if boundary["p_eos"] is None else f"{boundary['p_eos']:.3f}"
        text += f"; boundary p(EOS) {p} (n={boundary['tokens']})"
    return text

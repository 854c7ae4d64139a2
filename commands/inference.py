"""Translate French sentences with a trained model (greedy or beam search, n-best).

Examples:
  python inference.py --run runs/demo/rope --src_text "Je t'aime." "Où est la gare ?"
  python inference.py --run runs/demo/rope --src sentences.fr --output out.en --lenpen 1.0
  python inference.py --run runs/demo/rope            # at a terminal: each line translated as you type it
  cat sentences.fr | python inference.py --model_path runs/demo/rope/checkpoints/best_....pt --max_tokens 8000
  python inference.py --model_path exported/rope --src_text "Bonjour !" --nbest 3   # an export.py folder

Output: one line per input line, the best translation. With --nbest N (beam search), N lines per
input, best first: "<input index, from 0>\\t<score>\\t<translation>", the score being the
hypothesis' log-probability after the length penalty (higher is better).

Input: --src_text, --src FILE ('-' for stdin), or stdin. Piped stdin is read to the end and translated in
length-sorted batches (fast); a terminal on stdin, or --interactive, translates each line as soon
as it is entered. Decoding flags override the model's `decoding` config (as --set decoding.*=...).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path
from typing import Iterator, Optional, Sequence, TextIO

from artifacts.loading import load_for_decoding
from artifacts.lookup import find_model
from commands.cli import (
    RUN_HELP,
    TEST_TIME_SETS,
    UsageError,
    add_setting_flags,
    command_parser,
    deprecated_flag,
    overridden_keys,
    parse_command,
    refuse_together,
    setting_flag_overrides,
)
from data.parallel_text import decode_utf8, read_text, split_lines
from evaluation.translate import Translation, translate
from settings.config import Override, parse_override
from utils.errors import HarnessError, WriteError
from utils.files import atomic_output, check_target, remove_own_temporaries, special_kind
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
        output="write the translations to this file instead of stdout",
        overwrite="the --output file",
    )
    io = parser.add_argument_group("input")
    io.add_argument("--src_text", nargs="+", action="extend", help="sentence(s) to translate")
    io.add_argument("--src", metavar="FILE", help="a file with one sentence per line ('-' for stdin)")
    deprecated_flag(io, "--input", "--src FILE", "src", metavar="FILE")
    io.add_argument(
        "--interactive",
        action="store_true",
        help="translate stdin line by line as it arrives (the default when stdin is a terminal)",
    )
    add_setting_flags(parser.add_argument_group("decoding (default: the model's decoding config)"))
    return parser


def decoding_overrides(args: argparse.Namespace) -> list[Override]:
    """--set overrides and the decoding flags, parsed once (a flag's value as argparse typed it); a key
    set both ways is refused (one of the two values would be dropped without a word), and --nbest asks
    for a beam search of at least its size unless the strategy or beam size is given."""
    from settings.key_roles import flag_settings

    flags = {key: "/".join(info["flags"]) for key, info, _ in flag_settings()}
    given = [parse_override(text) for text in args.overrides]
    set_keys = overridden_keys(given)
    flagged = setting_flag_overrides(args)
    for key in (override.key for override in flagged):
        if key in set_keys:
            raise UsageError(f"{flags[key]} and --set {key}=... both set {key}: give one of them")
    overrides = given + flagged
    if args.nbest and args.nbest > 1:
        if not args.strategy and "decoding.strategy" not in set_keys:
            overrides.append(Override.of("decoding.strategy", "beam"))
        if not args.beam_size and "decoding.beam_size" not in set_keys:
            size = max(args.nbest, 5)
            overrides.append(Override.of("decoding.beam_size", size))
    return overrides


def input_lines(text: str) -> list[str]:
    """One sentence per line (newline or CRLF endings); other line-break characters stay in the sentence."""
    return [line.rstrip("\r") for line in split_lines(text)]


def streamed_lines(stream, prompt: bool) -> Iterator[list[str]]:
    """stdin one line at a time, as it arrives (interactive use)."""
    if prompt:
        print("Type a sentence and press Enter; Ctrl-D ends.", file=sys.stderr)
    for number, raw in enumerate(iter(stream.readline, b""), start=1):
        text = decode_utf8(raw, "stdin", first_line=number)
        yield input_lines(text) or [""]


class Printer:
    """Writes translations (and n-best lists) to stdout or an --output file, numbering inputs."""

    def __init__(self, out: TextIO, nbest: bool, max_positions: Optional[int]) -> None:
        self.out, self.nbest, self.max_positions, self.count = out, nbest, max_positions, 0

    def write(self, translations: list[Translation]) -> None:
        for out in translations:
            if out.truncated_from is not None:
                print(
                    f"warning: line {self.count + 1}: the input has {out.truncated_from} tokens; this model takes "
                    f"at most {self.max_positions} (model.positional.max_positions, or a CTranslate2 model's "
                    "position table), so it was truncated",
                    file=sys.stderr,
                )
            if self.nbest:
                for text, score in out.hypotheses:
                    self.out.write(f"{self.count}\t{score:.4f}\t{text}\n")
            else:
                self.out.write(out.text + "\n")
            self.count += 1
        self.out.flush()


def open_output(path: Optional[str], overwrite: bool, inputs: list[Optional[str]]):
    """stdout (no --output, or `-`), or the --output file written atomically (whole or not at all),
    after the write guard: never an input of this command, never an existing file without --overwrite.
    Translations stream by design, so a device or pipe (/dev/stdout, a FIFO) is written into, not replaced."""
    if path in (None, "-"):
        return contextlib.nullcontext(sys.stdout)
    target = check_target(
        path, "--output", inputs=[i for i in inputs if i not in (None, "-")], overwrite=overwrite, stream=True
    )
    if special_kind(target):
        return streamed(target)
    for stale in remove_own_temporaries([Path(path)]):  # a killed inference.py's partial translations
        log(f"removed {stale}, left by an inference.py that was stopped while writing")
    return atomic_output(path, replace=overwrite)  # (without --overwrite: never over a file that appeared meanwhile)


@contextlib.contextmanager
def streamed(target: Path):
    """A device or pipe opened for writing; a failed write (/dev/full: no space) names it."""
    try:
        with open(target, "w", encoding="utf-8") as f:
            yield f
    except OSError as e:
        raise WriteError(f"cannot write --output {target}: {e.strerror or e}") from None


def main(argv: Optional[list[str]] = None) -> int:
    args = parse_command(build_parser(), argv)
    refuse_together(args, "the sentences to translate", "--src_text", "--src")
    return run_inference(
        run=args.run,
        config=args.config,
        model_path=args.model_path,
        overrides=decoding_overrides(args),
        src_text=args.src_text,
        src=args.src,
        interactive=args.interactive,
        output=args.output,
        overwrite=args.overwrite,
        device=args.device,
    )


def read_sentences(src: str) -> str:
    """The text of --src: a file, or a pipe (a shell's `<(...)`, a FIFO, /dev/fd/N) read once as it
    streams; only a path that is not there says "not found"."""
    path = Path(src)
    if not path.exists():  # (until this release an abbreviation of --src_text could read as --src)
        raise HarnessError(f"--src {src}: file not found (--src takes a file of sentences; a sentence: --src_text)")
    if path.is_file() or path.is_dir():  # a folder: one line from the reader
        return read_text(src, allow_blank=True)
    with open(path, "rb") as stream:
        return decode_utf8(stream.read(), src)


def input_batches(src_text: Optional[Sequence[str]], src: Optional[str], interactive: bool) -> Iterator[list[str]]:
    """The sentences to translate, batch by batch: --src_text, the --src file, or stdin (read to the
    end, or line by line as it arrives when interactive or at a terminal)."""
    from_stdin = not src_text and src in (None, "-")
    if from_stdin and sys.stdin is None:  # started with stdin closed (`<&-`)
        raise HarnessError("--src -: standard input is closed; pipe the sentences in, or give --src FILE or --src_text")
    stdin_is_terminal = from_stdin and sys.stdin.isatty()
    if interactive and not from_stdin:
        raise HarnessError("--interactive translates standard input line by line: drop --src_text / --src FILE")
    if src_text:
        return iter([list(src_text)])
    if src and src != "-":  # missing, not UTF-8: one line naming the file and line
        return iter([input_lines(read_sentences(src))])
    if interactive or stdin_is_terminal:
        return streamed_lines(sys.stdin.buffer, prompt=stdin_is_terminal)
    return iter([input_lines(decode_utf8(sys.stdin.buffer.read(), "stdin"))])


def run_inference(
    run: Optional[str] = None,
    config: Optional[str] = None,
    model_path: Optional[str] = None,
    overrides: Sequence[str | Override] = (),
    src_text: Optional[Sequence[str]] = None,
    src: Optional[str] = None,
    interactive: bool = False,
    output: Optional[str] = None,
    overwrite: bool = False,
    device: Optional[str] = None,
) -> int:
    """Translate sentences with a trained model, as inference.py does: to stdout or the --output file,
    on `device` or else the run's training.device."""
    named = argparse.Namespace(run=run, model_path=model_path, config=config)
    refuse_together(named, "the model (--run: its best checkpoint)", "--run", "--model_path")
    refuse_together(named, "the config (--run: the run folder's own)", "--run", "--config")
    batches = input_batches(src_text, src, interactive)
    overrides = [parse_override(o) for o in overrides]  # parsed once, here
    loaded = load_for_decoding(find_model(model_path, run, config, overrides), overrides, config)
    cfg, tokenizer, decoder = loaded.config, loaded.tokenizer, loaded.decoder
    where = device_at_test_time(device, cfg, loaded.path)
    decoder.to(where)
    settings = cfg.decoding
    with open_output(output, overwrite, [src, config, model_path]) as out:
        printer = Printer(out, settings.nbest > 1 and settings.strategy == "beam", decoder.max_positions)
        for sentences in batches:
            printer.write(translate(decoder, tokenizer, sentences, settings, where))
    return 0

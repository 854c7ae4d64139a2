"""What every command shares: one parser factory (`command_parser`: --config, --run, --set,
--model_path, --device, --overwrite, --output, each spelled and meaning the same everywhere), the
schema's setting flags, the deprecated spellings of flags (accepted for one release with a one-line
note, not shown in --help), and `main_guard`, which turns expected errors into one line and exit code 2."""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import threading
from typing import Literal, Optional, Union, get_args, get_origin

from utils.errors import EXIT_BROKEN_PIPE, EXIT_DIVERGED, EXIT_ERROR, EXIT_INTERRUPTED, RERUN_HINT, HarnessError  # noqa: F401 (re-exported)

DEVICES = ("auto", "cpu", "cuda", "mps")


def command_parser(doc: str, **flags) -> argparse.ArgumentParser:
    """The parser of an entry script, with the shared flags it takes (`add_command_flags`)."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_command_flags(parser, **flags)
    return parser


class UsageError(HarnessError):
    """Flags that cannot go together (exit 2, one line naming both)."""


class Deprecated(argparse.Action):
    """An old spelling of a flag: sets what the new one sets, says once on stderr that it is
    deprecated, and is left out of --help (README "Migrations")."""

    def __init__(self, option_strings, dest, new: str, **kwargs) -> None:
        self.new = new
        kwargs.setdefault("help", argparse.SUPPRESS)
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        print(
            f"note: {option_string} is deprecated and will be removed in the next release: use {self.new}",
            file=sys.stderr,
        )
        value = True if self.nargs == 0 else values
        if getattr(namespace, self.dest, None) not in (None, parser.get_default(self.dest), value):
            raise UsageError(f"{self.new.split()[0]} and {option_string} both set {self.new.split()[0]}: give it once")
        setattr(namespace, self.dest, value)
        # parse_command checks that no later spelling replaced it (`--output_dir A --output B`)
        seen = {**getattr(namespace, DEPRECATED_SEEN, {}), self.dest: (option_string, self.new.split()[0], value)}
        setattr(namespace, DEPRECATED_SEEN, seen)


def deprecated_flag(parser, old: str, new: str, dest: str, **kwargs) -> None:
    """Accept `old` as an alias of the flag `new` (dest `dest`) for one release."""
    parser.add_argument(old, dest=dest, action=Deprecated, new=new, default=argparse.SUPPRESS, **kwargs)


OVERWRITE_HELP = "replace what this command wrote before at the same place"


def add_command_flags(
    parser,
    *,
    config: bool = False,
    run: Optional[str] = None,
    sets: Optional[str] = None,
    model_path: bool = False,
    device: bool = False,
    overwrite: Optional[str] = None,
    output: Optional[str] = None,
    output_required: bool = False,
    output_default: Optional[str] = None,
) -> None:
    """The flags every command spells the same way: --config, --run, --set, --model_path, --device,
    --overwrite ("replace what this command wrote before", the help text saying what that is) and
    one output flag, --output (its earlier names --output_dir and --out deprecated). Each help text
    given (not None) adds that flag with it."""
    if config:
        parser.add_argument("--config", help="YAML experiment config (e.g. configs/demo/sinusoidal.yaml)")
    if run is not None:
        parser.add_argument("--run", help=run)
    if sets is not None:
        parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help=sets)
    if model_path:
        parser.add_argument(
            "--model_path",
            help="a checkpoint file (.pt) or a folder written by export.py; self-contained, no config needed",
        )
    if device:
        parser.add_argument("--device", default="auto", choices=DEVICES, help="where the model runs (default: auto)")
    if output is not None:
        parser.add_argument("--output", dest="output", default=output_default, metavar="PATH", help=output)
        for old in ("--output_dir", "--out"):
            deprecated_flag(parser, old, "--output", "output", metavar="PATH")
        if output_required:
            parser.set_defaults(_required_output=True)
    if overwrite is not None:
        parser.add_argument("--overwrite", action="store_true", help=f"{OVERWRITE_HELP}: {overwrite}")


DEPRECATED_SEEN = "_deprecated_spellings"  # {dest: (old spelling, new spelling, value)} of a parse


def parse_command(parser: argparse.ArgumentParser, argv: Optional[list[str]]) -> argparse.Namespace:
    """Parse `argv`; a required --output given by an old spelling counts as given; an old and a new
    spelling of one flag with different values are refused (one would be ignored without a word)."""
    args = parser.parse_args(argv)
    for dest, (old, new, value) in vars(args).pop(DEPRECATED_SEEN, {}).items():
        if getattr(args, dest) != value:
            raise UsageError(f"{new} and {old} both set {new}: give it once")
    if getattr(args, "_required_output", False):
        if args.output is None:
            parser.error("the following arguments are required: --output")
        del args._required_output
    return args


RUN_HELP = "a run folder (runs/<name>): use its config and its best checkpoint"
TEST_TIME_SETS = (
    "override how the trained model is decoded or scored, e.g. --set decoding.beam_size=2 "
    "(repeatable); a key that would change the trained model is refused"
)


def _flag_type(tp) -> dict:
    """argparse type/choices of a schema key's type (Optional[...] unwrapped, Literal as choices)."""
    if get_origin(tp) is Union:
        tp = next(a for a in get_args(tp) if a is not type(None))
    if get_origin(tp) is Literal:
        return {"choices": list(get_args(tp))}
    return {"type": tp}


def _flag_dest(field) -> str:
    """A schema flag's argparse destination: its first name (--lenpen and --alpha -> lenpen)."""
    return field.metadata["flags"][0].lstrip("-")


def add_setting_flags(group) -> None:
    """The flags the config schema declares (`setting(flags=...)`), e.g. inference.py's --beam_size,
    --lenpen: each sets its key."""
    from utils.key_roles import flag_settings

    for _key, field, tp in flag_settings():
        group.add_argument(
            *field.metadata["flags"], dest=_flag_dest(field), help=field.metadata["help"], **_flag_type(tp)
        )


def setting_flag_overrides(args: argparse.Namespace) -> list[str]:
    """The schema flags given on the command line, as `key=value` overrides."""
    from utils.key_roles import flag_settings

    out = []
    for key, field, _ in flag_settings():
        value = getattr(args, _flag_dest(field), None)
        if value is not None:
            out.append(f"{key}={value}")
    return out


def lazy_main(module: str):
    """The `main` of command module `module`, imported when first called: an entry script imports
    only this light module before `main_guard` is in place, so a Ctrl-C while torch loads is caught."""

    def main(argv: Optional[list[str]] = None) -> int:
        return importlib.import_module(module).main(argv)

    main.__qualname__ = f"{module}.main"
    return main


def refuse_together(args: argparse.Namespace, what: str, *flags: str) -> None:
    """UsageError when more than one of `flags` (spelled as on the command line) was given: each names
    `what` (the config, the model, the input), and silently using one of them would ignore the other."""
    given = [f for f in flags if getattr(args, f.lstrip("-").replace("-", "_"), None) not in (None, False, [], "")]
    if len(given) > 1:
        raise UsageError(
            f"{' and '.join(given)} both name {what}: give one of them (the other would be ignored without a word)"
        )


def _stdout_closed() -> int:
    """A reader of our output went away (`| head`): end quietly as Unix tools do (status 141 =
    128 + SIGPIPE, as a shell reports such a tool), without Python's flush error at exit."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return EXIT_BROKEN_PIPE


def _stopped(signum, frame) -> None:
    raise KeyboardInterrupt  # unwinds like a Ctrl-C: locks released, temporaries removed, one line


def stop_on_sigterm() -> None:
    """A SIGTERM (`kill`, a scheduler) stops a command as a Ctrl-C does, instead of killing it without
    a word (status 143) with its run lock and temporaries left behind. train.py installs its own
    handlers later (a checkpoint first); a handler someone else installed is kept."""
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _stopped)


def main_guard(main, argv: Optional[list[str]] = None) -> int:
    """Run `main`; turn the project's expected errors into one clear line and exit code 2, a Ctrl-C
    into one line and EXIT_INTERRUPTED, a closed output pipe into silence and EXIT_BROKEN_PIPE."""
    stop_on_sigterm()
    try:
        status = main(argv) or 0
        sys.stdout.flush()  # a reader gone before the last block is flushed is caught here, not at exit
        return status
    except KeyboardInterrupt:
        print(f"interrupted: stopped before finishing; {RERUN_HINT}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return _stdout_closed()
    except (HarnessError, FileExistsError) as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_ERROR
    except MemoryError:
        print(
            "error: out of memory: the model, the batch or an input is larger than this machine can hold; "
            "use smaller model.* sizes, a smaller training.max_tokens / decoding.max_tokens, or shorter inputs",
            file=sys.stderr,
        )
        return EXIT_ERROR
    except OSError as e:  # a full disk, a read-only folder, a missing file: one line, naming it
        where = f"{e.filename}: " if getattr(e, "filename", None) else ""
        print(f"error: {where}{e.strerror or e}", file=sys.stderr)
        return EXIT_ERROR
    except RuntimeError as e:
        if type(e).__name__ != "OutOfMemoryError":  # torch's (CUDA) out of memory, named without importing torch
            raise
        print(
            f"error: out of memory on the device ({str(e).splitlines()[0][:200]}): use a smaller "
            f"training.max_tokens / decoding.max_tokens or smaller model.* sizes",
            file=sys.stderr,
        )
        return EXIT_ERROR
    except FloatingPointError as e:
        print(
            f"error: training diverged ({e}). The checkpoints written before are kept; try a lower "
            f"training.lr, training.clip_grad_norm, or more warmup, and resume or restart.",
            file=sys.stderr,
        )
        return EXIT_DIVERGED

"""What every command shares: one parser factory (`command_parser`: --config, --run, --set,
--model_path, --device, --overwrite, --output, each spelled and meaning the same everywhere), the
schema's setting flags, the deprecated spellings of flags (accepted for one release with a one-line
note, not shown in --help), and `main_guard`, which turns expected errors into one line and exit code 2."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from typing import TYPE_CHECKING, Literal, Optional, Sequence, Union, get_args, get_origin

from utils.errors import EXIT_BROKEN_PIPE, EXIT_DIVERGED, EXIT_ERROR, EXIT_INTERRUPTED, RERUN_HINT, HarnessError  # noqa: F401 (re-exported)

if TYPE_CHECKING:  # this module loads before main_guard is in place: the config code only when used
    from settings.config import Override

DEVICES = ("auto", "cpu", "cuda", "mps")


ONCE_SEEN = "_flags_given"  # {dest: (option string, value)} of a parse: a flag takes one value


class StoreOnce(argparse._StoreAction):
    """argparse's `store`, refusing a flag given twice with different values (`--seeds 1 --seeds 2`
    would keep the last without a word); list flags take their values once (`--seeds 1 2`)."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        seen = getattr(namespace, ONCE_SEEN, {})
        if self.dest in seen and seen[self.dest][1] != values:
            first, value = seen[self.dest]
            raise UsageError(
                f"{first} given twice ({_shown(value)}, then {option_string} {_shown(values)}): give it once"
                + (
                    f" with all its values ({first} {_shown(value)} {_shown(values)})"
                    if self.nargs in ("+", "*")
                    else ""
                )
            )
        setattr(namespace, ONCE_SEEN, {**seen, self.dest: (option_string, values)})
        super().__call__(parser, namespace, values, option_string)


def _shown(value) -> str:
    return " ".join(map(str, value)) if isinstance(value, list) else str(value)


def command_parser(doc: str, **flags) -> argparse.ArgumentParser:
    """The parser of an entry script, with the shared flags it takes (`add_command_flags`); every
    flag it stores takes one value (`one_value_per_flag`)."""
    parser = one_value_per_flag(
        argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    )
    add_command_flags(parser, **flags)
    return parser


def one_value_per_flag(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Make the flags added to `parser` from now on (and to its subparsers) StoreOnce."""
    parser.register("action", None, StoreOnce)
    parser.register("action", "store", StoreOnce)
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


RUN_DEVICE_HELP = (
    "where the model runs (default: the run's training.device; auto: CUDA when visible, else MPS, else the CPU)"
)
OVERWRITE_HELP = "replace what this command wrote before at the same place"


def add_command_flags(
    parser,
    *,
    config: bool = False,
    run: Optional[str] = None,
    sets: Optional[str] = None,
    model_path: bool = False,
    device: bool = False,
    device_of_run: bool = False,
    overwrite: Optional[str] = None,
    output: Optional[str] = None,
    output_required: bool = False,
    output_default: Optional[str] = None,
) -> None:
    """The flags every command spells the same way: --config, --run, --set, --model_path, --device,
    --overwrite ("replace what this command wrote before", the help text saying what that is) and
    one output flag, --output (its earlier names --output_dir and --out deprecated). Each help text
    given (not None) adds that flag with it. `device_of_run`: --device defaults to the run's own
    training.device (None; `utils.runtime.device_at_test_time`) instead of auto."""
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
        parser.add_argument(
            "--device",
            default=None if device_of_run else "auto",
            choices=DEVICES,
            help=RUN_DEVICE_HELP if device_of_run else "where the model runs (default: auto)",
        )
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
    vars(args).pop(ONCE_SEEN, None)
    for dest, (old, new, value) in vars(args).pop(DEPRECATED_SEEN, {}).items():
        if getattr(args, dest) != value:
            raise UsageError(f"{new} and {old} both set {new}: give it once")
    check_one_value_per_key(getattr(args, "overrides", None) or [])
    if getattr(args, "_required_output", False):
        if args.output is None:
            parser.error("the following arguments are required: --output")
        del args._required_output
    return args


def check_one_value_per_key(overrides: list[str]) -> None:
    """`--set KEY=A ... --set KEY=B` is refused in one line (the last would win without a word); the
    same value twice is one setting."""
    seen: dict[str, str] = {}
    for item in overrides:
        key, _, value = item.partition("=")
        key = ".".join(k for k in key.strip().split(".") if k)
        if key in seen and seen[key] != value.strip():
            raise UsageError(f"--set {key} given twice ({key}={seen[key]}, then {key}={value.strip()}): give it once")
        seen[key] = value.strip()


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


def _flag_dest(info: dict) -> str:
    """A schema flag's argparse destination: its first name (--lenpen and --alpha -> lenpen)."""
    return info["flags"][0].lstrip("-")


def add_setting_flags(group) -> None:
    """The flags the config schema declares (`setting(flags=...)`), e.g. inference.py's --beam_size,
    --lenpen: each sets its key."""
    from settings.key_roles import flag_settings

    for _key, info, tp in flag_settings():
        group.add_argument(*info["flags"], dest=_flag_dest(info), help=info["help"], **_flag_type(tp))


def setting_flag_overrides(args: argparse.Namespace) -> list[Override]:
    """The schema flags given on the command line, as overrides holding the value argparse typed
    (never turned back into text to be read again as YAML)."""
    from settings.config import Override
    from settings.key_roles import flag_settings

    out = []
    for key, info, _ in flag_settings():
        value = getattr(args, _flag_dest(info), None)
        if value is not None:
            out.append(Override.of(key, value))
    return out


def lazy_main(module: str):
    """The `main` of command module `module`, imported when first called: an entry script imports
    only this light module before `main_guard` is in place, so a Ctrl-C while torch loads is caught."""

    def main(argv: Optional[list[str]] = None) -> int:
        import importlib  # the one place a command is loaded by name (tests/commands/test_cli.py)

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


def overridden_keys(overrides: Sequence[str | Override]) -> set[str]:
    """Every dotted key the --set overrides set, a section given whole included (`evaluation={concat:
    [4]}` sets evaluation.concat): what a flag setting the same key must be checked against."""
    from settings.config import parse_override

    return {key for override in map(parse_override, overrides) for key in (override.key, *override.leaves())}


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


def describe_failure(error: BaseException) -> Optional[tuple[int, str]]:
    """(exit status, the one line that says it) for a failure the user can cause or meet: a Ctrl-C, the
    project's expected errors, an exhausted memory (the machine's or the device's), a failed file
    operation, a diverged training; None for anything else (a bug: its traceback stays). main_guard
    prints the line; a sweep job (commands/sweep_job.guarded) logs it."""
    if isinstance(error, KeyboardInterrupt):
        return EXIT_INTERRUPTED, f"interrupted: stopped before finishing; {RERUN_HINT}"
    if isinstance(error, (HarnessError, FileExistsError)):
        return EXIT_ERROR, f"error: {error}"
    if isinstance(error, MemoryError):
        return EXIT_ERROR, (
            "error: out of memory: the model, the batch or an input is larger than this machine can hold; "
            "use smaller model.* sizes, a smaller training.max_tokens / decoding.max_tokens, or shorter inputs"
        )
    if isinstance(error, OSError):  # a full disk, a read-only folder, a missing file: one line, naming it
        where = f"{error.filename}: " if getattr(error, "filename", None) else ""
        return EXIT_ERROR, f"error: {where}{error.strerror or error}"
    if isinstance(error, RuntimeError) and "DefaultCPUAllocator: can't allocate memory" in str(error):
        tried = str(error).split("you tried to allocate", 1)[-1].split(".", 1)[0].strip()  # torch's CPU allocator
        return EXIT_ERROR, (
            f"error: out of memory: one tensor needed {tried} (more than this machine can give); use a smaller "
            "training.max_tokens / training.pack_length / decoding.max_tokens, smaller model.* sizes, or shorter inputs"
        )
    if isinstance(error, RuntimeError) and type(error).__name__ == "OutOfMemoryError":  # torch's, unimported
        first = (str(error).splitlines() or [""])[0][:200]  # torch's message may be empty
        return EXIT_ERROR, (
            f"error: out of memory on the device ({first or 'no details'}): use a smaller "
            "training.max_tokens / decoding.max_tokens or smaller model.* sizes"
        )
    if isinstance(error, FloatingPointError):
        return EXIT_DIVERGED, (
            f"error: training diverged ({error}). The checkpoints written before are kept; try a lower "
            "training.lr, training.clip_grad_norm, or more warmup, and resume or restart."
        )
    return None


def main_guard(main, argv: Optional[list[str]] = None) -> int:
    """Run `main`; turn the project's expected errors into one clear line and exit code 2, a Ctrl-C
    into one line and EXIT_INTERRUPTED, a closed output pipe into silence and EXIT_BROKEN_PIPE
    (`describe_failure`: which failures, and their lines)."""
    stop_on_sigterm()
    try:
        status = main(argv) or 0
        sys.stdout.flush()  # a reader gone before the last block is flushed is caught here, not at exit
        return status
    except BrokenPipeError:
        return _stdout_closed()
    except BaseException as error:  # noqa: BLE001 - what describe_failure does not know is raised again
        failure = describe_failure(error)
        if failure is None:
            raise
        status, line = failure
        print(line, file=sys.stderr)
        return status

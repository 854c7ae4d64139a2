"""Shared command-line plumbing: the `--config`/`--run`/`--set`/`--model_path` arguments and
`main_guard`, which turns expected errors into one line and exit code 2."""

from __future__ import annotations

import argparse
import sys
from typing import Literal, Optional, Union, get_args, get_origin

from utils.errors import HarnessError

# Exit statuses: 0 done, 2 a usage or input error (one line), 3 training diverged, 4 training was
# stopped by a signal (Ctrl-C, SIGTERM, a preemption) after saving a checkpoint: resumable, not finished.
EXIT_INTERRUPTED = 4


def add_config_args(parser: argparse.ArgumentParser, model_path: bool = False) -> None:
    parser.add_argument("--config", help="YAML experiment config (e.g. configs/demo/sinusoidal.yaml)")
    parser.add_argument("--run", help="a run folder (runs/<name>): use its config and its best checkpoint")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override how the trained model is decoded or scored, e.g. --set decoding.beam_size=2 "
                             "(repeatable); a key that would change the trained model is refused" if model_path else
                        "override a config value, e.g. --set model.positional.name=rope (repeatable)")
    if model_path:
        parser.add_argument("--model_path", help="a checkpoint file (.pt) or a folder written by export.py; "
                                                 "self-contained, no config needed")


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

    for key, field, tp in flag_settings():
        group.add_argument(*field.metadata["flags"], dest=_flag_dest(field), help=field.metadata["help"],
                           **_flag_type(tp))


def setting_flag_overrides(args: argparse.Namespace) -> list[str]:
    """The schema flags given on the command line, as `key=value` overrides."""
    from utils.key_roles import flag_settings

    out = []
    for key, field, _ in flag_settings():
        value = getattr(args, _flag_dest(field), None)
        if value is not None:
            out.append(f"{key}={value}")
    return out


def main_guard(main, argv: Optional[list[str]] = None) -> int:
    """Run `main`; turn the project's expected errors into one clear line and exit code 2."""
    try:
        return main(argv) or 0
    except (HarnessError, FileExistsError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # a full disk, a read-only folder, a missing file: one line, naming it
        where = f"{e.filename}: " if getattr(e, "filename", None) else ""
        print(f"error: {where}{e.strerror or e}", file=sys.stderr)
        return 2
    except FloatingPointError as e:
        print(f"error: training diverged ({e}). The checkpoints written before are kept; try a lower "
              f"training.lr, training.clip_grad_norm, or more warmup, and resume or restart.", file=sys.stderr)
        return 3

"""The base of every error the harness expects and explains in one line (exit code 2).

Each package raises its own subclass (CorpusError, TokenizerError, CheckpointError; the config's
ConfigError is defined here, beside its base);
the entry scripts' `commands.cli.main_guard` catches this base, so the ground layer needs to know
nothing of the packages above it.
"""

# Exit statuses of every command (README "Exit codes"): 0 done; 2 a usage or input error (one line);
# 3 training diverged; 4 stopped before finishing (Ctrl-C, SIGTERM, a preemption): run the same
# command again (train.py saved a checkpoint first and continues from it with --resume); 141 the
# reader of the output went away (`| head`), quietly, as 128 + SIGPIPE is for other Unix tools.
EXIT_ERROR, EXIT_DIVERGED, EXIT_INTERRUPTED, EXIT_BROKEN_PIPE = 2, 3, 4, 141
RERUN_HINT = "nothing it was writing was left partial: run the same command again"


class HarnessError(Exception):
    """An expected failure whose message names the file, key or line and the fix."""


class ConfigError(HarnessError, ValueError):
    """A config key or value is invalid; the message names the key and the fix."""


class WriteError(HarnessError):
    """A file cannot or may not be written; the message names it and the fix."""

"""The command layer: one module per entry script (commands/<script>.py), holding the command's flags
(`build_parser`, through the shared helpers of `cli.py`), the function that does its work with typed
arguments (`train`, `run_test`, `run_inference`, `visualize`, `compare`, `sweep`, `average`,
`export`: what any other code calls) and `main(argv)`, which the thin script runs under
`cli.main_guard`. Beside them: one run of a sweep (`sweep_job`) and the launchers that run a
sweep's runs as submitit jobs (`launchers`).

Importing this package registers the positional encodings (utils/encoding_registry.py), which
config validation reads."""

import models.positional_encodings  # noqa: F401 (registers every encoding before a config is read)

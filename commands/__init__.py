"""The command layer: one module per entry script (commands/<script>.py), holding the command's flags
(`build_parser`, through the shared helpers of `cli.py`), the function that does its work with typed
arguments (`train`, `run_test`, `run_inference`, `visualize`, `compare`, `sweep`, `average`,
`export`: what any other code calls) and `main(argv)`, which the thin script runs under
`cli.main_guard`. Beside them: a sweep's runs, typed and validated once (`sweep_plan`), one run
of a sweep (`sweep_job`) and the launchers that run a sweep's runs as submitit jobs (`launchers`).

This package and `cli.py` import nothing heavy, so an entry script can start its guard before
torch loads."""

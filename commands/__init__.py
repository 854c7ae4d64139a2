"""The entry scripts' work as functions, at their level (they may import every package): scoring a
test set (`scoring.run_test`, what test.py runs), one run of a sweep (`sweep_job`: train, then test,
with the sweep's guards) and the launchers that run a sweep's runs as submitit jobs (`launchers`).
sweep.py calls these (and train.py's `train_run`), never another script's `main()`."""

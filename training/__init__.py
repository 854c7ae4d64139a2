"""Training: the Ignite engine and its step, LR schedules, checkpoints, run folders."""

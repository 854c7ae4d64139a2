"""Configuration, LR schedules, metrics, checkpoints and small runtime helpers (one concern per module)."""

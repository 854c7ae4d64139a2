"""Small helpers every layer may use, one concern per module: the errors (errors), metrics (metrics),
files written whole and published as a set (files, journal, publish, write_points), a run folder's
files and what they hold (run_files, run_folder, stored_files, user_paths), provenance, Markdown
tables and runtime helpers. The config is settings/, LR schedules training/schedules.py, checkpoints
artifacts/."""

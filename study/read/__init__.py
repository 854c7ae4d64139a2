"""Reading a study: every file, stored output and git fact a comparison uses, read into the records
of study/records.py (the only layer of study/ that opens a file, reads a stored output or runs git;
tests/test_layers.py holds it). run_stats (a run's folders and statistics over runs), degradation (the
length study's per-pair sums, read and pooled per run), run_outputs (a run's test outputs, read
once), seed_provenance (what made each seed of a row), run_records (run folders read into records),
run_groups (records grouped into configurations, with their statistics over seeds), family (the
declared family file), declared (the family stood in each run's commit: git) and study (all of it, read
in one call: `read_study`)."""

"""Judging a study (compare.py): from run folders, each scored by evaluation/ (one model), to the
tables, findings and plots of a comparison over configurations and seeds. Above evaluation/ (it reads
its metrics and its teacher-forced files); training/ and evaluation/ never import it (tests/test_layers.py).

What passes between its stages are frozen records (records: RunRecord, Configuration, the findings'
rows), each stage returning new ones: read (run_records) -> group (run_groups) -> test (findings) ->
word (verdicts) -> render (the pages; serialize writes the JSON and CSV files).

Its modules in reading order:
- the runs: records (the typed records), run_stats (a run's folders and statistics over runs),
  degradation (the length study's headline measure), run_outputs (a run's test outputs, read once),
  seed_provenance (what made each seed of a row), run_records (run folders read into records),
  run_groups (records grouped into configurations);
- the tests over seeds: significance (sacreBLEU's paired bootstrap, over seeds; Holm), seed_test (the
  seed-level test and its variance model), equivalence (TOST);
- the family and its rule: rules (the decision rules, by name), family (the declared family file),
  declared (the family stood in each run's commit), calibration (the rules simulated), sequential
  (group-sequential boundaries) and sequential_family (a family decided look by look);
- the words: wording, verdicts (the family's rule over the rows), findings (the rows),
  headline, findings_markdown;
- the pages: summary_tables, length_report, comparison_plots, serialize (the JSON and CSV files)."""

"""Judging a study (compare.py): from run folders, each scored by evaluation/ (one model), to the
tables, findings and plots of a comparison over configurations and seeds. Above evaluation/ (it reads
its metrics and its teacher-forced files); training/ and evaluation/ never import it (tests/test_layers.py).

What passes between its layers are frozen records (records.py, at its root: RunRecord, Configuration,
the findings' rows), each stage returning new ones. Its layers, each a package, in import order (a
layer imports only those before it; tests/test_layers.py holds it):
- stats: the statistics, pure functions of numbers (significance, seed_test, equivalence, rules,
  sequential, sequential_family);
- records.py: the typed records;
- read: every file, stored output and git fact read into records, and the records grouped into
  configurations (run_stats, degradation, run_outputs, seed_provenance, run_records, run_groups,
  family, declared; study: the whole study read in one call);
- judge: the rows tested over seeds and worded by the family's rule (findings, sequential_findings,
  wording, verdicts); beside it, simulate: the rules simulated (calibration, sequential_calibration);
- pages: the text and plots of a study (headline, findings_markdown, summary_tables, length_report,
  comparison_plots, serialize: the JSON and CSV files);
- run.py: the recipe on top (compare.py's one call): read -> judge -> pages, in that order."""

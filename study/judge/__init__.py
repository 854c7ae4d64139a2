"""Judging a study from its records: findings (each configuration against the baseline, tested over
seeds: the rows, not yet worded), sequential_findings (a sequential family's rows look by look),
wording (the words of an outcome) and verdicts (the family's rule over the rows: Holm, equivalence,
power). Imports statistics, records and read; no module here opens a file (tests/test_layers.py)."""

"""The pages of a study, from judged records to text: headline (the result sentences),
findings_markdown, summary_tables and length_report (the tables), serialize (the
one JSON and CSV serializer) and comparison_plots (the plots: the only module of study/ that writes a
file, the PNGs it draws, each published whole by utils/files.atomic_output; every other page is text
that compare.py writes). No page reads a file, a stored output or git (tests/test_layers.py)."""

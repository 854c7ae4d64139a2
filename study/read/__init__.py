"""Reading a study: every file, stored output and git fact a comparison uses, read into the records of
study/records.py (the only layer of study/ that opens a file, reads a stored output or runs git:
tests/test_layers.py holds it), in one call: study.read_study."""

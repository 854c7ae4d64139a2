"""The pages of a study, from judged records to text: the headline, findings, tables, the one JSON and CSV
serializer, and the plots (the only module of study/ that writes a file, each PNG published whole by
utils/files.atomic_output). No page reads a file, a stored output or git (tests/test_layers.py)."""

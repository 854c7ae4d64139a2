"""Evaluation: translation of test sets, metrics, the length protocol, comparison tables and plots."""

"""Scoring one model: translating a test set (translate), its metrics (metrics), test-set scoring and
the length protocol (test_set), teacher-forced measures (teacher_forced), figures of a model (figures).
Judging a study over many runs is study/'s."""
